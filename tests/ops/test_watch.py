"""``repair watch`` (repair/ops/watch/): each checkpoint judged once as it completes, shared SSTs read
once, damage in a new checkpoint flagged while last-good stays on the older one, a checkpoint Flink
deletes while it is checked no alarm, storage faults no alarm, the state kept across restarts.

The job roots are copies of a real Flink 1.20 fixture (three subtasks, external SSTs shared between
its five checkpoints) into which checkpoints are "completed" one by one, as Flink writes them: the
files first, ``chk-N/_metadata`` last. The real running job is in tests/ops/test_watch_flink.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from repair.cli.app import main
from repair.errors import UsageError
from repair.io.storage import Storage
from repair.ops.watch import Watcher, watch
from repair.ops.watch.metrics import WatchMetrics
from tests.conftest import REPO
from tests.json_schemas import schema_problems
from tests.watch_testlib import IDS, SOURCE, complete, flip_new_sst, live_root, metrics_of, new_sst, sst_names


class CountingStorage(Storage):
    """Counts the files opened for reading, by URI; ``before_open(uri)`` runs first when set."""

    def __init__(self):
        super().__init__()
        self.opened: Counter[str] = Counter()
        self.before_open = None

    def open_input(self, uri, **options):
        if self.before_open is not None:
            self.before_open(uri)
        self.opened[uri] += 1
        return super().open_input(uri, **options)








def ssts_of(root: Path, ids: list[int]) -> set[str]:
    """The SSTs of checkpoints ``ids`` in the copy ``root``, as the paths the watch opens."""
    return {str(root / "shared" / name) for n in ids for name in sst_names(n)}




def verdicts(result) -> dict[str, str]:
    return {c["name"]: c["verdict"] for c in result.checkpoints}




# -- passes, cache, restart ----------------------------------------------------------------------


def test_new_checkpoints_are_judged_once_and_a_shared_sst_is_read_once(tmp_path):
    root = live_root(tmp_path, [1, 2, 3])
    storage = CountingStorage()
    watcher = Watcher(str(root), state_dir=str(tmp_path / "state"), storage=storage, workers=1, relist_after=0)
    first = watcher.run_pass()
    assert verdicts(first) == {"chk-1": "good", "chk-2": "good", "chk-3": "good"} and first.ok
    read_first = set(storage.opened)
    complete(root, 4)
    complete(root, 5)
    second = watcher.run_pass()
    assert verdicts(second) == {"chk-4": "good", "chk-5": "good"}  # 1-3 are not judged again
    assert verdicts(watcher.run_pass()) == {}
    watcher.close()

    assert max(storage.opened.values()) == 1  # every file read once, over all passes
    read_second = set(storage.opened) - read_first
    added = ssts_of(root, [4, 5]) - ssts_of(root, [1, 2, 3])
    assert {u for u in read_second if u in ssts_of(root, IDS)} == added  # the SSTs 4 and 5 added, no other
    assert second.files_reused == len(ssts_of(root, [4, 5]) & ssts_of(root, [1, 2, 3])) > 0
    assert second.bytes_read < first.bytes_read
    assert second.last_good["name"] == "chk-5"
    state = json.loads((tmp_path / "state" / "last-good.json").read_text())
    assert state["last_good"]["name"] == "chk-5"
    history = json.loads((tmp_path / "state" / "history.json").read_text())["verdicts"]
    assert sorted(v["name"] for v in history) == [f"chk-{n}" for n in IDS]


def test_a_restarted_watch_continues_from_its_state_dir(tmp_path):
    root = live_root(tmp_path, [1, 2, 3, 4])
    watch(str(root), state_dir=str(tmp_path / "state"), workers=1)
    complete(root, 5)
    storage = CountingStorage()
    metrics = WatchMetrics()
    again = Watcher(str(root), state_dir=str(tmp_path / "state"), storage=storage, workers=1, metrics=metrics)
    assert metrics_of(metrics.text().decode())[("repair_watch_last_good_checkpoint_id",)] == 4  # before any pass
    result = again.run_pass()
    again.close()
    assert verdicts(result) == {"chk-5": "good"}
    opened_ssts = {u for u in storage.opened if u in ssts_of(root, IDS)}
    assert opened_ssts == ssts_of(root, [5]) - ssts_of(root, [1, 2, 3, 4])  # what the first run read is not read again


def test_the_state_dir_is_never_inside_the_root(tmp_path):
    root = live_root(tmp_path, [1])
    with pytest.raises(UsageError, match="inside the input"):
        Watcher(str(root), state_dir=str(root / "watch-state"))
    assert not (root / "watch-state").exists()
    with pytest.raises(UsageError, match="local directory"):
        Watcher(str(root), state_dir="s3://bucket/watch-state")


# -- damage in a new checkpoint ------------------------------------------------------------------


def _delete_new_sst(root: Path) -> str:
    (root / "shared" / new_sst(5)).unlink()
    return "missing_file"




def _truncate_metadata(root: Path) -> str:
    path = root / "chk-5" / "_metadata"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return "metadata_undecodable"


@pytest.mark.parametrize("damage_new", [_delete_new_sst, flip_new_sst, _truncate_metadata])
def test_damage_in_a_new_checkpoint_is_flagged_and_last_good_stays_on_the_older(tmp_path, damage_new):
    root = live_root(tmp_path, [1, 2, 3, 4])
    received = tmp_path / "on-bad.json"
    on_bad = f"{sys.executable} -c 'import sys; open(sys.argv[1], \"w\").write(sys.stdin.read())' {received}"
    metrics = WatchMetrics()
    watcher = Watcher(str(root), state_dir=str(tmp_path / "state"), workers=1, relist_after=0, on_bad=on_bad, metrics=metrics)
    assert set(verdicts(watcher.run_pass()).values()) == {"good"}
    complete(root, 5)
    kind = damage_new(root)
    result = watcher.run_pass()
    if kind == "metadata_undecodable":  # perhaps still being written: judged when a later pass finds it unchanged
        assert verdicts(result) == {"chk-5": "unfinished"} and result.ok and not received.exists()
        result = watcher.run_pass()
    watcher.close()

    assert verdicts(result) == {"chk-5": "bad"} and not result.ok and result.exit_code == 1
    assert kind in result.checkpoints[0]["problems"]
    assert result.last_good["name"] == "chk-4"
    assert json.loads((tmp_path / "state" / "last-good.json").read_text())["last_good"]["name"] == "chk-4"
    alert = json.loads(received.read_text())
    assert alert["name"] == "chk-5" and alert["verdict"] == "bad" and kind in alert["problems"]
    assert result.checkpoints[0]["on_bad"]["exit_code"] == 0
    scraped = metrics_of(metrics.text().decode())
    assert scraped[("repair_watch_last_good_checkpoint_id",)] == 4
    assert scraped[("repair_watch_last_bad_checkpoint_id",)] == 5
    assert scraped[("repair_watch_problems_total", ("kind", kind))] >= 1
    assert scraped[("repair_watch_checkpoints_total", ("verdict", "bad"))] == 1


def test_a_checkpoint_flink_deletes_while_it_is_checked_is_no_damage(tmp_path):
    """Flink subsumes chk-1 while the watch reads it: its ``_metadata`` goes, then the files only it
    references. The watch lists the root again before judging the missing file: no alarm."""
    root = live_root(tmp_path, IDS)
    only_first = sorted(root / "shared" / name for name in sst_names(1) - set().union(*(sst_names(n) for n in IDS[1:])))
    storage = CountingStorage()

    def subsume_chk_1(uri: str) -> None:
        if uri == str(only_first[0]) and (root / "chk-1").exists():
            shutil.rmtree(root / "chk-1")
            for path in only_first:
                path.unlink()

    storage.before_open = subsume_chk_1
    result = watch(str(root), state_dir=str(tmp_path / "state"), storage=storage, workers=1, on_bad="false")
    assert verdicts(result) == {"chk-1": "deleted", "chk-2": "good", "chk-3": "good", "chk-4": "good", "chk-5": "good"}
    assert result.ok and result.findings == []


def test_a_missing_file_of_a_checkpoint_still_listed_is_damage(tmp_path):
    """The control of the test above: the same files gone, chk-1 still there."""
    root = live_root(tmp_path, IDS)
    for name in sst_names(1) - set().union(*(sst_names(n) for n in IDS[1:])):
        (root / "shared" / name).unlink()
    watcher = Watcher(str(root), workers=1, relist_after=0)
    result = watcher.run_pass()
    assert verdicts(result)["chk-1"] == "bad" and {f.kind for f in result.findings} == {"missing_file"}


# -- the command ---------------------------------------------------------------------------------


def test_watch_once_json_follows_its_schema_and_exit_codes(tmp_path, capsys):
    root = live_root(tmp_path, IDS)
    flip_new_sst(root)
    state = tmp_path / "state"
    assert main(["watch", str(root), "--once", "--state-dir", str(state), "--json", "--workers", "1"]) == 1
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert schema_problems(document, "watch") == []
    assert [c["verdict"] for c in document["checkpoints"]] == ["good", "good", "good", "good", "bad"]
    log = [json.loads(line) for line in err.splitlines() if line.startswith("{")]  # one JSON line per checkpoint
    assert [line["name"] for line in log] == [f"chk-{n}" for n in IDS]
    assert main(["watch", str(root), "--once", "--state-dir", str(state), "--json"]) == 0  # nothing new
    assert json.loads(capsys.readouterr().out)["last_good"]["name"] == "chk-4"
    assert main(["watch", str(root), "--once", "--state-dir", str(root / "state"), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["type"] == "UsageError"


def test_textfile_and_http_metrics_are_what_the_passes_found(tmp_path):
    root = live_root(tmp_path, [1, 2])
    metrics = WatchMetrics()
    watcher = Watcher(str(root), workers=1, metrics=metrics)
    port = metrics.serve(0, "127.0.0.1")
    watcher.run_pass()
    textfile = tmp_path / "textfile" / "repair_watch.prom"
    textfile.parent.mkdir()
    metrics.write_textfile(str(textfile), watcher.storage)
    watcher.close()
    scraped = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for text in (scraped, textfile.read_text()):
        values = metrics_of(text)
        assert values[("repair_watch_last_good_checkpoint_id",)] == 2
        assert values[("repair_watch_checkpoints_total", ("verdict", "good"))] == 2
        assert values[("repair_watch_files_verified_total",)] > 0 and values[("repair_watch_bytes_verified_total",)] > 0
    assert [p.name for p in textfile.parent.iterdir()] == ["repair_watch.prom"]  # no temporary left


@pytest.mark.parametrize("signum, exit_code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_the_watch_with_one_line_and_its_state_whole(tmp_path, signum, exit_code):
    root = live_root(tmp_path, [1, 2, 3])
    state = tmp_path / "state"
    process = subprocess.Popen([sys.executable, "-m", "repair.cli", "watch", str(root), "--interval", "0.2", "--state-dir", str(state),
                                "--workers", "1"], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        lines = [process.stderr.readline() for _ in range(3)]  # the three verdicts: the first pass is done
        complete(root, 4)  # the next pass may be under way when the signal comes
        process.send_signal(signum)
        _, err = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == exit_code, err
    said = [line for line in err.splitlines() if not line.startswith("{")]  # the verdicts of a pass under way are JSON lines
    assert said == [f"error: stopped by {signal.Signals(signum).name}; an output not yet complete was not published"], err
    assert [json.loads(line)["verdict"] for line in lines] == ["good"] * 3
    assert json.loads((state / "last-good.json").read_text())["last_good"]["name"] in ("chk-3", "chk-4")
    assert sorted(p.name for p in state.iterdir() if not p.name.startswith("watch.sqlite3")) == ["history.json", "last-good.json"]


# -- fallback and triage --state-dir ---------------------------------------------------------------


def test_fallback_and_triage_with_the_state_dir_read_only_what_changed_since(tmp_path):
    from repair.ops.fallback import fallback
    from repair.ops.triage import triage

    root = live_root(tmp_path, [1, 2, 3, 4])
    state = str(tmp_path / "state")
    watch(str(root), state_dir=state, workers=1)
    complete(root, 5)
    added = ssts_of(root, [5]) - ssts_of(root, [1, 2, 3, 4])
    for run in (lambda s: fallback(str(root), storage=s, workers=1, state_dir=state),
                lambda s: triage(str(root), storage=s, workers=1, state_dir=state)):
        storage = CountingStorage()
        assert run(storage).ok
        assert {u for u in storage.opened if u in ssts_of(root, IDS)} == added  # only what chk-5 added

    # a file the watch verified, changed since (a new size or time): read again, its damage found
    changed = root / "shared" / sorted(sst_names(5) & sst_names(4))[0]
    data = bytearray(changed.read_bytes())
    data[7] ^= 0xFF
    changed.write_bytes(bytes(data))
    os.utime(changed, (time.time() + 5, time.time() + 5))  # as a rewrite later than the watch's read
    storage = CountingStorage()
    choice = fallback(str(root), storage=storage, workers=1, state_dir=state)
    assert storage.opened[str(changed)] == 1
    assert {f.reference.snapshot for f in choice.findings if f.path == str(changed)} >= {"chk-4", "chk-5"}
    assert choice.chosen is None or choice.chosen.checkpoint_id < 4


def test_fallback_with_a_directory_holding_no_watch_state_is_a_usage_error(tmp_path, capsys):
    root = live_root(tmp_path, [1])
    (tmp_path / "empty").mkdir()
    assert main(["fallback", str(root), "--state-dir", str(tmp_path / "empty"), "--json"]) == 2
    assert "holds no repair watch state" in json.loads(capsys.readouterr().out)["error"]["message"]


# -- on an object store (moto behind the fault proxy the remote-read tests use) -------------------


def test_on_s3_transient_faults_raise_no_alarm_and_damage_is_flagged(tmp_path):
    from tests import s3_server
    from tests.fault_proxy import FaultProxy, Faults

    server = s3_server.start_s3_server_or_skip()
    try:
        local = live_root(tmp_path, [1, 2, 3, 4])
        bucket = server.new_bucket(s3_server.tree(local, "job"))
        root = f"s3://{bucket}/job"
        state = str(tmp_path / "state")
        with FaultProxy(server.endpoint, Faults(error_rate=0.2, reset_rate=0.1, seed=7)) as proxy:
            result = watch(root, state_dir=state, storage=s3_server.storage_for(proxy.endpoint), workers=1)
            injected = sum(proxy.injected.values())
        assert verdicts(result) == {f"chk-{n}": "good" for n in [1, 2, 3, 4]} and injected > 0  # retried: no alarm

        client = server.client()
        client.put_object(Bucket=bucket, Key="job/chk-5/_metadata", Body=(SOURCE / "chk-5" / "_metadata").read_bytes())
        unreadable = new_sst(5)
        with FaultProxy(server.endpoint, Faults(always_fail=(unreadable,))) as proxy:  # a fault that stays
            result = watch(root, state_dir=state, storage=s3_server.storage_for(proxy.endpoint, retry_budget=0.5), workers=1)
        assert verdicts(result) == {"chk-5": "unknown"} and result.ok and result.exit_code == 2  # not bad, judged again later

        client.delete_object(Bucket=bucket, Key=f"job/shared/{unreadable}")
        result = watch(root, state_dir=state, storage=s3_server.storage_for(server.endpoint), workers=1, relist_after=0)
        assert verdicts(result) == {"chk-5": "bad"} and "missing_file" in result.checkpoints[0]["problems"]
        assert result.last_good["name"] == "chk-4"
    finally:
        server.stop()
