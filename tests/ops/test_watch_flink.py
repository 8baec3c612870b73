"""``repair watch`` next to a real running Flink job (Flink 1.20 MiniCluster in one JVM, RocksDB
incremental checkpoints every second, 3 retained, so Flink subsumes and deletes checkpoints while the
watch reads them): the watch judges the checkpoints good as they complete, with no false alarm; then a
byte flipped in a newly completed checkpoint's MANIFEST (a file in shared/ only that checkpoint has) is
flagged by the next pass, last-good stays on the older checkpoint, and the metrics scraped over HTTP
(read with prometheus_client's parser) say so.

One JVM run, about 25 s on an idle machine: the fixture job pauses 8 s before its late wave, taking a checkpoint every
second meanwhile.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from pathlib import Path

import pytest

from repair.ops.watch import Watcher
from repair.ops.watch.metrics import WatchMetrics
from tests import damage
from tests.watch_testlib import metrics_of

JOB_ID = "5ec0ffee5ec0ffee5ec0ffee5ec0ffee"
#: How long a wait for Flink may take before the test fails (the JVM's start on a loaded machine included).
PATIENCE_SECONDS = 90


def _completed(root: Path) -> list[int]:
    return damage.checkpoint_ids(root) if root.is_dir() else []


def _wait_for(condition, what: str, job: threading.Thread):
    deadline = time.monotonic() + PATIENCE_SECONDS
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        assert job.is_alive() or condition(), f"the Flink job ended before {what}"
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {PATIENCE_SECONDS} s")


@pytest.mark.slow
def test_watch_flags_damage_in_a_checkpoint_of_a_running_job(tmp_path):
    from fixtures import state_model
    from fixtures.flink_harness import JobSettings, ensure_flink, run_fixture_job

    records = tmp_path / "records.tsv"
    state_model.write_records(state_model.make_records(waves=3, per_wave=40), records)
    settings = JobSettings(parallelism=1, checkpoint_dir=tmp_path / "checkpoints", num_retained=3, interval_ms=1000, job_id=JOB_ID,
                           inline_threshold="0b", rocksdb_local_dir=tmp_path / "rocksdb",
                           extra_conf={"fixture.late-wave-pause-ms": "8000"})
    failure: list[BaseException] = []

    def run() -> None:
        try:
            run_fixture_job(ensure_flink("1.20.3"), "generate", settings, {"--records": str(records), "--log": str(tmp_path / "run.json")},
                            timeout_s=180)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            failure.append(error)

    job = threading.Thread(target=run, name="flink-job")
    job.start()
    root = tmp_path / "checkpoints" / JOB_ID
    try:
        _wait_for(lambda: _completed(root), "completed checkpoint", job)
        metrics = WatchMetrics()
        watcher = Watcher(str(root), state_dir=str(tmp_path / "state"), workers=1, relist_after=0.5, metrics=metrics)
        port = metrics.serve(0, "127.0.0.1")
        seen: dict[str, str] = {}

        def judged_good() -> int:
            for checkpoint in watcher.run_pass().checkpoints:
                seen[checkpoint["name"]] = checkpoint["verdict"]
            return sum(v == "good" for v in seen.values()) >= 3

        _wait_for(judged_good, "three checkpoints judged good", job)
        assert set(seen.values()) <= {"good", "deleted", "unfinished"}, seen  # no false alarm while Flink subsumes
        newest_good = max(int(name[4:]) for name, verdict in seen.items() if verdict == "good")

        # the next checkpoint to complete gets a byte flipped in its MANIFEST before the watch's next pass
        target = _wait_for(lambda: [n for n in _completed(root) if n > newest_good and f"chk-{n}" not in seen], "new checkpoint", job)[0]
        manifest = damage.referenced_files(root, target, damage.is_manifest)[0]  # each checkpoint uploads its own MANIFESTs
        assert damage.referencing_checkpoints(root, manifest) == [target]
        data = bytearray(manifest.read_bytes())
        data[len(data) // 2] ^= 0xFF
        manifest.write_bytes(bytes(data))
        passes = 0
        while seen.get(f"chk-{target}") in (None, "unfinished") and passes < 3:  # unfinished: _metadata seen mid-write
            for checkpoint in watcher.run_pass().checkpoints:
                seen[checkpoint["name"]] = checkpoint["verdict"]
            passes += 1
        last_good = watcher.state.last("good")
        watcher.close()
        scraped = metrics_of(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode())
    finally:
        job.join(timeout=180)
    assert not failure, failure
    assert seen[f"chk-{target}"] == "bad" and passes <= 2, seen  # flagged by the first pass that saw it complete
    assert last_good["checkpoint"] < target
    assert scraped[("repair_watch_last_good_checkpoint_id",)] == last_good["checkpoint"]
    assert scraped[("repair_watch_last_bad_checkpoint_id",)] == target
    assert scraped[("repair_watch_checkpoints_total", ("verdict", "bad"))] == 1
    assert sum(v for k, v in scraped.items() if k[0] == "repair_watch_problems_total") >= 1
    assert scraped[("repair_watch_last_good_age_seconds",)] >= 0
