"""The committed fixtures, their generator, and the damage helpers.

The slow tests run real Flink: they regenerate a fixture into a temp dir, compare it with the
committed one, and restore the fresh checkpoint in real Flink to prove that expected.json (computed
independently in Python) is exactly the state Flink holds.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from fixtures import flink_harness, state_model
from fixtures.generate import MATRIX, SPECS, generate
from fixtures.restore import restore_state
from tests import damage
from tests.conftest import (
    AVRO_FIXTURE_NAMES,
    FIXTURE_NAMES,
    FIXTURES,
    GROWTH_FIXTURE_NAMES,
    KRYO_FIXTURE_NAMES,
    POJO_FIXTURE_NAMES,
    SCALA_FIXTURE_NAMES,
    SQL_FIXTURE_NAMES,
    UPGRADE_FIXTURE_NAMES,
    fixture_info,
    tree_digest,
)


def test_every_matrix_entry_is_committed():
    assert sorted(FIXTURE_NAMES + SQL_FIXTURE_NAMES + KRYO_FIXTURE_NAMES + SCALA_FIXTURE_NAMES + AVRO_FIXTURE_NAMES
                  + POJO_FIXTURE_NAMES + GROWTH_FIXTURE_NAMES
                  + UPGRADE_FIXTURE_NAMES) == sorted(spec.name for spec in MATRIX)


def test_matrix_covers_the_required_variants():
    versions = {spec.flink_version.split(".")[0] + "." + spec.flink_version.split(".")[1] for spec in MATRIX}
    assert {"1.20", "2.1", "2.3"} <= versions  # 2.3: the newest release (its jars a wheel, no longer an sdist)
    assert any(spec.parallelism >= 3 and spec.effective_max_parallelism > 128 for spec in MATRIX)
    assert any(spec.inline_threshold == "0b" for spec in MATRIX)
    assert any(spec.inline_threshold is None for spec in MATRIX)
    assert any(spec.checksum and spec.compression for spec in MATRIX)
    assert any({"CANONICAL", "NATIVE"} <= set(spec.savepoint_formats) for spec in MATRIX)
    heap = [spec for spec in MATRIX if spec.state_backend == "hashmap"]
    assert {spec.snapshot_compression for spec in heap} == {True, False}  # both heap layouts
    assert any(spec.state_backend == "rocksdb" and not spec.incremental for spec in MATRIX)  # full RocksDB checkpoints
    # RocksDB with heap timers: checkpoints keep them in raw keyed state
    assert any(spec.extra.get("state.backend.rocksdb.timer-service.factory") == "HEAP" for spec in MATRIX)
    assert any(spec.state_backend == "forst" for spec in MATRIX)  # Flink 2.x's ForSt
    # the changelog state backend over RocksDB and over the heap backend
    assert {spec.state_backend for spec in MATRIX if spec.changelog} == {"rocksdb", "hashmap"}


@pytest.mark.parametrize("packaging", ["sdist", "wheel"])
def test_flink_jars_come_from_an_sdist_or_a_wheel(tmp_path, packaging):
    """apache-flink-libraries ships an sdist (jars in ``deps/lib/``) up to Flink 2.1, a wheel
    (``pyflink/lib/``) from 2.2 on: the runtime and log4j jars are taken from either, nothing else."""
    lib = "apache-flink-libraries-9.9.9/deps/lib/" if packaging == "sdist" else "pyflink/lib/"
    members = {lib + "flink-dist-9.9.9.jar": b"dist", lib + "log4j-api-2.jar": b"log4j",
               lib + "flink-python-9.9.9.jar": b"not wanted", "pyflink/opt/flink-dist-9.9.9.jar": b"wrong folder",
               lib + "flink-dist-notes.txt": b"not a jar"}
    if packaging == "sdist":
        archive = tmp_path / "apache-flink-libraries-9.9.9.tar.gz"
        with tarfile.open(archive, "w:gz") as out:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                out.addfile(info, io.BytesIO(data))
    else:
        archive = tmp_path / "apache_flink_libraries-9.9.9-py2.py3-none-any.whl"
        with zipfile.ZipFile(archive, "w") as out:
            for name, data in members.items():
                out.writestr(name, data)
    jars = {}
    for name, source in flink_harness._library_jars(archive):
        with source:
            jars[name] = source.read()
    assert jars == {"flink-dist-9.9.9.jar": b"dist", "log4j-api-2.jar": b"log4j"}
    assert flink_harness._downloaded(tmp_path) == [archive]


def test_classes_another_process_compiles_while_one_waits_are_used_not_compiled_again(tmp_path):
    """The cache is shared by processes (scripts/test.sh's two pytest-xdist workers): one finding the
    job's classes missing waits while another compiles them, then uses them. Compiling again would
    replace the directory the other's JVM is loading classes from."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "Job.java").write_text("class Job {}")
    runs = tmp_path / "runs"
    javac = tmp_path / "javac"  # a stand-in: "-d DIR" first; writes DIR/fixturejob/Job.class, counts its runs
    javac.write_text(f'#!/bin/sh\nmkdir -p "$2/fixturejob" && touch "$2/fixturejob/Job.class" && echo run >> "{runs}"\n')
    javac.chmod(0o755)

    def compile_job():
        return flink_harness._compile(tmp_path / "src", "Job", [], tmp_path / "out", "stand-in javac", compiler=[str(javac)])

    classes = compile_job()
    shutil.rmtree(classes)
    found = []
    with flink_harness._making(classes):  # this test is the process compiling them
        waiting = threading.Thread(target=lambda: found.append(compile_job()))
        waiting.start()
        _wait_until_blocked_on(classes.parent / f".{classes.name}.lock")
        (classes / "fixturejob").mkdir(parents=True)
        (classes / "fixturejob" / "Job.class").write_text("compiled by the other process")
    waiting.join(timeout=60)
    assert found == [classes]
    assert (classes / "fixturejob" / "Job.class").read_text() == "compiled by the other process"
    assert runs.read_text() == "run\n", "compiled a second time"


def _wait_until_blocked_on(lock: Path) -> None:
    """Until a process waits for the ``flock`` of ``lock`` (a ``->`` line of /proc/locks on its inode)."""
    inode = f":{os.stat(lock).st_ino} "
    deadline = time.monotonic() + 60
    while not any("->" in line and inode in line for line in Path("/proc/locks").read_text().splitlines()):
        assert time.monotonic() < deadline, "nothing waited for the lock"
        time.sleep(0.01)


def test_committed_fixtures_stay_small():
    total = sum(p.stat().st_size for name in FIXTURE_NAMES for p in (FIXTURES / name).rglob("*") if p.is_file())
    # sixteen fixtures, five keyed operators (per-type holds one state per built-in serializer; two window
    # operators): ~46 MiB. Each keyed operator is one RocksDB instance per subtask and retained checkpoint,
    # with an OPTIONS file of 15-60 KB of its own, so the two window operators (a few hundred entries
    # of state) added ~7 MB, most of it OPTIONS files; the changelog fixtures added 1.8 MB (RocksDB) and
    # 0.8 MB (heap); Flink 2.3's default and heap changelog fixtures 4.8 and 0.8 MB; flink-1.20-rescaled (two
    # waves, the range-deletion SSTs) 1.0 MB, which brought the total to 49.8 MiB.
    assert total < 50 * 1024 * 1024


def test_fixture_layout_and_expected_state(fixture_dir: Path):
    info = fixture_info(fixture_dir)
    expected = json.loads((fixture_dir / "expected.json").read_text())
    root = fixture_dir / "checkpoints" / info["job_id"]
    retained = sorted(int(p.name[4:]) for p in root.glob("chk-*"))
    assert retained == info["retained_checkpoints"]
    assert all((root / f"chk-{c}" / "_metadata").is_file() for c in retained)
    assert expected["checkpoint_id"] == retained[-1]
    for rel in info["savepoints"].values():
        assert (fixture_dir / rel / "_metadata").is_file()
    # expected.json is the state after the records the newest checkpoint contains, recomputed here.
    records = state_model.read_records(fixture_dir / "records.tsv")
    assert expected["records"] == len(records), "the newest checkpoint must contain every record"
    recomputed = state_model.expected_state(records[: expected["records"]])
    assert expected["keyed"] == recomputed["keyed"]
    assert expected["operator"] == recomputed["operator"]
    # Older retained checkpoints hold fewer records: fallback tests rely on differing states.
    per_checkpoint = [info["records_per_checkpoint"][str(c)] for c in retained]
    assert per_checkpoint == sorted(per_checkpoint) and per_checkpoint[0] < per_checkpoint[-1]


def test_state_model_follows_the_job_semantics():
    R = state_model.Record
    records = [
        R(0, "add", "u", 5, 10, "a", 1000),
        R(0, "add", "u", 5, 3, "b", 2000),
        R(1, "untag", "u", 6, 1, "a", 3000),
        R(1, "add", "v", 6, -4, "", 4000),
        R(2, "clear", "v", 6, 2, "x", 5000),
    ]
    state = state_model.expected_state(records)
    user = state["keyed"]["per-user"]["u"]
    assert user["count"] == 2 and user["tags"] == ["a", "b"] and user["total"] == 13
    assert user["amount-by-tag"] == {"b": 3}  # "a" removed by untag
    assert user["timers"] == [1000 + 3_600_000, 2000 + 3_600_000]
    # clear drops every state of v but not its timer
    assert state["keyed"]["per-user"]["v"] == {"timers": [4000 + 3_600_000]}
    account = state["keyed"]["per-account"]["6"]
    assert account["balance"] == 1 - 4 + 2 and account["amounts"] == [1, -4, 2]
    assert account["stats"] == [3, -1] and account["user-by-wave"] == {"1": "v", "2": "v"}
    assert account["profile"] == {"owner": "v", "updates": 3}
    assert state["operator"]["records-seen"]["records-seen"] == [5]


def test_restore_lines_assemble_like_expected_state():
    lines = [
        json.dumps({"operator": "per-user", "key": "u", "state": "count", "value": 2}),
        json.dumps({"operator": "per-user", "key": "u", "timer": 9}),
        json.dumps({"operator": "per-user", "key": "u", "timer": 3}),
        json.dumps({"operator": "per-account", "key": 7, "state": "balance", "value": 1}),
        json.dumps({"operator": "records-seen", "state": "records-seen", "value": [4]}),
    ]
    state = state_model.state_from_restore_lines(lines)
    assert state["keyed"]["per-user"] == {"u": {"count": 2, "timers": [3, 9]}}
    assert state["keyed"]["per-account"] == {"7": {"balance": 1}}
    assert state["operator"] == {"records-seen": {"records-seen": [4]}}


def test_window_state_model_follows_the_window_operators():
    """Tumbling windows of WINDOW_SIZE_MS by the record's ts (timer at end - 1), every record counted;
    countWindow(COUNT_WINDOW_SIZE) keeps the records since the last firing, and purges on the Nth."""
    R, size, n = state_model.Record, state_model.WINDOW_SIZE_MS, state_model.COUNT_WINDOW_SIZE
    base = 1_767_225_600_000  # a multiple of the window size
    records = [R(0, "add", "u", 5, 10, "a", base + 1), R(0, "clear", "u", 5, 3, "b", base + size - 1),
               R(0, "add", "u", 5, -4, "", base + size)] + [R(1, "add", "v", 6, i, "t", base + 10 * i) for i in range(n + 1)]
    state = state_model.expected_state(records)
    first, second = ({"start": base + k * size, "end": base + (k + 1) * size} for k in range(2))
    assert state_model.window_key(first) == f"TimeWindow{{start={base}, end={base + size}}}"
    assert state["keyed"]["per-account-window"]["5"] == {
        "window-contents": {state_model.window_key(first): [2, 13, "u"], state_model.window_key(second): [1, -4, "u"]},
        "timers": {state_model.window_key(first): [base + size - 1], state_model.window_key(second): [base + 2 * size - 1]},
    }
    # u: 3 records, still open; v: n + 1 records, the window fired and purged after the nth
    assert state["keyed"]["per-user-count-window"]["u"]["count"] == 3
    assert [r["amount"] for r in state["keyed"]["per-user-count-window"]["u"]["window-contents"]] == [10, 3, -4]
    assert state["keyed"]["per-user-count-window"]["v"] == {"window-contents": [
        {"wave": 1, "op": "add", "user": "v", "account": 6, "amount": n, "tag": "t", "ts": base + 10 * n}], "count": 1}
    # restore lines of fired windows assemble into the same shape
    lines = [json.dumps({"operator": "per-account-window", "key": 5, "window": first, "state": "window-contents", "value": [2, 13, "u"]}),
             json.dumps({"operator": "per-account-window", "key": 5, "window": first, "timer": base + size - 1}),
             json.dumps({"operator": "per-user-count-window", "key": "u", "state": "count", "value": 3})]
    restored = state_model.state_from_restore_lines(lines)["keyed"]
    assert restored["per-account-window"] == {"5": {"window-contents": {state_model.window_key(first): [2, 13, "u"]},
                                                    "timers": {state_model.window_key(first): [base + size - 1]}}}
    assert restored["per-user-count-window"] == {"u": {"count": 3}}


@pytest.mark.parametrize("kind", sorted(damage.DAMAGES))
def test_damage_helpers_change_only_the_copy(tmp_path, kind):
    name = "flink-1.20-p3-external-xxhash-lz4"
    if kind.startswith("inline_"):  # files inline in _metadata: the default threshold
        name = "flink-1.20-default"
    original = tree_digest(FIXTURES / name)
    result = damage.damaged_copy(name, tmp_path, kind)
    assert tree_digest(FIXTURES / name) == original
    copy = tmp_path / name
    changed = {k for k, v in tree_digest(copy).items() if original.get(k) != v} | (original.keys() - tree_digest(copy).keys())
    assert changed == {str(result.file.relative_to(copy))}
    assert result.checkpoints, "the damaged file must belong to at least one checkpoint"


def test_foreign_checkpoint_comes_from_another_job(tmp_path):
    copy = damage.copy_fixture("flink-1.20-default", tmp_path)
    result = damage.add_foreign_checkpoint(copy, "flink-2.1-default")
    root = damage.checkpoint_root(copy)
    newest = damage.checkpoint_ids(root)[-1]
    assert result.checkpoints == [newest]
    donor = fixture_info(FIXTURES / "flink-2.1-default")
    assert donor["job_id"].encode() in (root / f"chk-{newest}" / "_metadata").read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["flink-1.20-default", "flink-2.1-p3-external-xxh3-zstd", "flink-2.1-heap-p3-snappy",
                                  "flink-1.20-rocksdb-heap-timers", "flink-2.1-forst", "flink-1.20-changelog",
                                  "flink-2.1-heap-changelog", "flink-2.3-default"])
def test_regenerated_fixture_matches_and_restores_in_real_flink(tmp_path, name):
    spec = SPECS[name]
    fresh = generate(spec, tmp_path, staging=tmp_path / "staging")
    committed = FIXTURES / name
    fresh_info, committed_info = fixture_info(fresh), fixture_info(committed)
    for key in ("job_id", "parallelism", "max_parallelism", "uids", "keyed_operators", "operator_states"):
        assert fresh_info[key] == committed_info[key], key
    fresh_expected = json.loads((fresh / "expected.json").read_text())
    committed_expected = json.loads((committed / "expected.json").read_text())
    assert {k: v for k, v in fresh_expected.items() if k != "checkpoint_id"} == {
        k: v for k, v in committed_expected.items() if k != "checkpoint_id"
    }

    # Real Flink restores the fresh newest checkpoint (where Flink wrote it) with exactly that state.
    newest = fresh_expected["checkpoint_id"]
    location = tmp_path / "staging" / "checkpoints" / name / fresh_info["job_id"] / f"chk-{newest}"
    records = state_model.read_records(fresh / "records.tsv")
    restored = restore_state(spec.flink_version, location, records, parallelism=spec.parallelism,
                             max_parallelism=spec.max_parallelism, state_backend=spec.state_backend, extra_conf=spec.extra)
    assert restored["keyed"] == fresh_expected["keyed"]
    assert restored["operator"] == fresh_expected["operator"]
    shutil.rmtree(tmp_path / "staging")


def test_the_rescaled_fixture_holds_range_deletions_only_after_its_restore():
    """flink-1.20-rescaled: the first run's checkpoint (parallelism 1) has no range deletion; the second
    run restored it at parallelism 2, Flink clipped each RocksDB instance with deleteRange, and the newest
    checkpoint's SSTs carry the range tombstones (the damage matrix's sst-range-del cells need them)."""
    from repair.formats.bytes.random_access import BytesSource
    from repair.formats.flink.metadata import decode_metadata
    from repair.formats.rocksdb.table.sst import open_table

    fixture = FIXTURES / "flink-1.20-rescaled"
    info = fixture_info(fixture)
    job_dir = fixture / "checkpoints" / info["job_id"]
    first, newest = info["retained_checkpoints"]
    assert info["rescaled"] == {"from_parallelism": 1, "restored_checkpoint": first}

    def range_deletions(checkpoint: int) -> tuple[set[int], list[int]]:
        metadata = decode_metadata((job_dir / f"chk-{checkpoint}" / "_metadata").read_bytes())
        parallelisms, counts = set(), []
        for op in metadata.operators:
            for sub in op.subtasks:
                handle = sub.managed_keyed_state
                if handle is None:
                    continue
                parallelisms.add(op.parallelism)
                for entry in handle.shared + handle.private:
                    if entry.local_path.endswith(".sst"):
                        data = (job_dir / "shared" / entry.handle.path.rsplit("/", 1)[-1]).read_bytes()
                        counts.append(open_table(BytesSource(data)).properties.num_range_deletions or 0)
        return parallelisms, counts

    parallelisms, counts = range_deletions(first)
    assert parallelisms == {1} and counts and not any(counts)
    parallelisms, counts = range_deletions(newest)
    assert parallelisms == {2} and sum(1 for c in counts if c) >= 10
