"""Export from an object store fetches the next RocksDB instance's files while it exports one
(repair/ops/export/prefetch.py): in this process and in a pool's lanes, one instance ahead at most,
the same Parquet bytes as from local disk, and an interrupt during a fetch ahead publishes nothing and
leaves no scratch directory.

The order of events is what is tested, never a duration: a task waits for an event of the fetch ahead
(with a generous guard, which only a broken fetch-ahead reaches).
"""

from __future__ import annotations

import tempfile
import threading

import pytest

from repair.ops.export import job as export_job
from repair.ops.export import prefetch
from repair.ops.export.job import export
from repair.readers import rocksdb_instance
from tests import s3_server
from tests.conftest import FIXTURES, fixture_info

#: Three subtasks with RocksDB instances of several external SSTs each.
FIXTURE = "flink-2.1-p3-external-xxh3-zstd"
ROOT = FIXTURES / FIXTURE / "checkpoints" / fixture_info(FIXTURES / FIXTURE)["job_id"]
NEWEST = max(ROOT.glob("chk-*"), key=lambda p: int(p.name[4:]))
#: How long a task waits for an event of the fetch ahead: reached only when there is no fetch ahead.
GUARD_SECONDS = 20


@pytest.fixture(scope="module")
def s3_checkpoint():
    """The fixture's newest checkpoint in a bucket of a loopback S3 server: ``(server, s3://.../chk-N)``."""
    for server, bucket in s3_server.serving_tree(ROOT):
        yield server, f"s3://{bucket}/job/{NEWEST.name}"


@pytest.fixture(scope="module")
def local_parts(tmp_path_factory):
    """The Parquet parts of the same export from local disk, by relative path."""
    out = tmp_path_factory.mktemp("local") / "out"
    export(str(NEWEST), str(out), workers=1)
    return _parts(out)


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """The temporary directory scratch space is made in, for this test alone."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def _parts(out) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.parquet"))}


class _Events:
    """Instance copies and part writes as they happen, in order; copies counted by the thread making them."""

    def __init__(self, monkeypatch):
        self.log: list[str] = []
        self.copies_started = 0
        self.second_copy = threading.Event()
        self.scratch_seen: list[int] = []
        real_copy = rocksdb_instance.copy_files

        def copy_files(storage, copies, **kwargs):
            if any(target.endswith(".sst") for _, target in copies):  # an instance's files (not a lone small file)
                self.copies_started += 1
                self.log.append(f"copy {self.copies_started} in {threading.current_thread().name}")
                if self.copies_started == 2:
                    self.second_copy.set()
                    self.during_second_copy(kwargs.get("stop"))
            return real_copy(storage, copies, **kwargs)

        monkeypatch.setattr(rocksdb_instance, "copy_files", copy_files)

    def during_second_copy(self, stop: threading.Event | None) -> None:
        pass


def test_the_next_instances_files_are_copied_while_the_current_one_is_exported(s3_checkpoint, local_parts, scratch, tmp_path, monkeypatch):
    server, checkpoint = s3_checkpoint
    events = _Events(monkeypatch)
    real_write = export_job.write_state_part
    writes = []

    def write_state_part(*args, **kwargs):
        if not writes:  # the first instance's first part: the second instance is being copied meanwhile
            events.second_copy.wait(GUARD_SECONDS)
            events.log.append("first part written")
        writes.append(1)
        events.scratch_seen.append(len(list(scratch.glob("repair-rocksdb-*"))))
        return real_write(*args, **kwargs)

    monkeypatch.setattr(export_job, "write_state_part", write_state_part)
    storage = s3_server.storage_for(server.endpoint)
    result = export(checkpoint, str(tmp_path / "remote"), storage=storage, workers=1)
    log = list(events.log)
    assert result.rows and _parts(tmp_path / "remote") == local_parts
    assert log.index("copy 2 in repair-fetch-ahead") < log.index("first part written"), log
    instances = sum(len(op.engines) for op in result.operators)
    assert instances > 2 and len(log) == instances + 1 and all("fetch-ahead" in entry for entry in log if "copy" in entry), log
    assert max(events.scratch_seen) == 2  # the instance being exported and the next one, never more
    assert not list(scratch.glob("repair-*"))


def test_an_interrupt_during_a_fetch_ahead_stops_it_publishes_nothing_and_leaves_no_scratch(s3_checkpoint, scratch, tmp_path, monkeypatch):
    server, checkpoint = s3_checkpoint
    stopped = threading.Event()

    class Interrupting(_Events):
        def during_second_copy(self, stop):  # the copies ahead go on until the run gives them up
            if stop is not None and stop.wait(GUARD_SECONDS):
                stopped.set()

    events = Interrupting(monkeypatch)

    def write_state_part(*args, **kwargs):
        events.second_copy.wait(GUARD_SECONDS)
        raise KeyboardInterrupt  # what the CLI's SIGINT and SIGTERM handlers raise in the main thread

    monkeypatch.setattr(export_job, "write_state_part", write_state_part)
    out = tmp_path / "parent" / "out"
    out.parent.mkdir()
    with pytest.raises(KeyboardInterrupt):
        export(checkpoint, str(out), storage=s3_server.storage_for(server.endpoint), workers=1)
    assert events.second_copy.is_set() and stopped.is_set()  # interrupted while the fetch ahead ran, which stopped
    assert list(out.parent.iterdir()) == []  # nothing published, no staging left
    assert not list(scratch.glob("repair-*"))
    assert not [t for t in threading.enumerate() if t.name.startswith(("repair-fetch-ahead", "repair-copy"))]


def test_an_instance_larger_than_the_bound_is_not_fetched_ahead(s3_checkpoint, scratch, tmp_path, monkeypatch):
    server, checkpoint = s3_checkpoint
    monkeypatch.setattr(prefetch, "AHEAD_MAX_BYTES", 1)
    events = _Events(monkeypatch)
    result = export(checkpoint, str(tmp_path / "remote"), storage=s3_server.storage_for(server.endpoint), workers=1)
    instances = sum(len(op.engines) for op in result.operators)
    assert events.copies_started == instances and all("fetch-ahead" not in entry for entry in events.log), events.log
    assert not list(scratch.glob("repair-*"))


def test_a_pool_exports_in_lanes_and_writes_the_local_bytes_reporting_every_task(s3_checkpoint, local_parts, tmp_path):
    server, checkpoint = s3_checkpoint
    done = []
    result = export(checkpoint, str(tmp_path / "remote"), storage=s3_server.storage_for(server.endpoint), workers=2,
                    on_progress=lambda n, total: done.append((n, total)))
    assert _parts(tmp_path / "remote") == local_parts and result.rows
    assert done[-1][0] == done[-1][1] == len(done)  # every task reported once


def test_ahead_fetches_only_the_next_task():
    """While task i runs, the fetch of task i + 1 has started and that of i + 2 not yet."""
    started: list[int] = []
    next_started = threading.Event()
    seen = []

    def fetch(task, directory, stop):
        started.append(task)
        if task > 0:
            next_started.set()
        return None

    def run(task, materialised):
        if task < 3:
            assert next_started.wait(GUARD_SECONDS)
        seen.append((task, list(started)))
        next_started.clear()
        return task * 10

    tasks = [0, 1, 2, 3]
    with prefetch.Ahead(tasks, run, fetch) as ahead:
        assert [ahead(task) for task in tasks] == [0, 10, 20, 30]
    assert seen == [(0, [0, 1]), (1, [0, 1, 2]), (2, [0, 1, 2, 3]), (3, [0, 1, 2, 3])]


def test_lanes_hold_about_equal_costs_each_in_the_tasks_order():
    costs = [5, 1, 1, 4, 2, 3]
    dealt = prefetch.lanes(costs, 2, float)
    assert sorted(i for lane in dealt for i in lane) == list(range(6))
    assert all(lane == sorted(lane) for lane in dealt)
    assert sorted(sum(costs[i] for i in lane) for lane in dealt) == [8, 8]
    assert prefetch.lanes(costs, 10, float) == [[0], [3], [5], [4], [1], [2]]


def test_a_pool_takes_short_lanes_so_progress_and_balance_follow_the_work(monkeypatch):
    """Many tasks in a pool: lanes of about TASKS_PER_LANE tasks (more lanes than workers, taken as
    workers free up), not one lane per worker that would report progress only at its end."""
    given = []

    def fake_run_tasks(function, items, *, workers, on_done=None, **_):
        given.extend(items)
        return [[None] * len(item) for item in items]

    monkeypatch.setattr(export_job, "run_tasks", fake_run_tasks)
    tasks = list(range(40))
    export_job._run_fetching_ahead(tasks, 2, None, lambda task: 1.0)
    assert sorted(task for lane in given for task in lane) == tasks
    assert len(given) == 40 // export_job.TASKS_PER_LANE
    assert all(len(lane) == export_job.TASKS_PER_LANE for lane in given)
