"""Export's tasks from an object store, the next task's RocksDB files fetched while one is exported.

From an object store, a RocksDB instance's files are copied to local scratch space before RocksDB
opens them (:func:`~repair.readers.rocksdb_instance.open_rocksdb_instance`), and a task waited for its
own copies: every instance's copy time was added to the export's. :class:`Ahead` runs the tasks of one
process in order and, while one is exported, copies the next one's instance
(:func:`~repair.readers.rocksdb_instance.materialise_instance`) in a background thread:

* **Bounded**: one instance ahead at most, and only one of at most :data:`AHEAD_MAX_BYTES` remote bytes:
  the scratch space holds the instance being exported and at most the next one;
* **The same copies**: retries, size checks, and errors kept for the task, which raises them when it
  opens the instance as if it had copied it itself (a file that stays unreadable: the error naming it);
* **Our own scratch space**: a fetch's directory is made and removed by the thread running the tasks,
  when the task ends; when the run ends early (an error, SIGINT or SIGTERM) the fetch ahead is stopped
  (its copies end at their next chunk, waited for :data:`STOP_WAIT_SECONDS` at most) and its directory
  removed: a copy that has not stopped by then finds no directory to write into.

In a process pool the tasks are dealt into lanes of a few tasks each (:func:`lanes`, about equal bytes
per lane), which the workers take as they free up, each lane with an :class:`Ahead` of its own
(:class:`Lane`; progress is reported as lanes end); on Spark tasks run as
before, each copying its own files.
Only tasks of a source whose handle is one RocksDB instance
(:attr:`~repair.ops.export.sources.StateSource.instance_ahead`) with remote files are fetched ahead.
"""

from __future__ import annotations

import os
import shutil
import threading
from contextlib import ExitStack
from typing import Callable, Generic, Sequence, TypeVar

from repair.io.resolved import IN_FLIGHT, is_remote, scratch_directory
from repair.io.snapshot import load_snapshot_shared
from repair.ops.export.sources import SOURCES
from repair.ops.runner import _signals_for_the_main_thread
from repair.readers.rocksdb_instance import MaterialisedInstance, materialise_instance

T = TypeVar("T")
R = TypeVar("R")

#: An instance is fetched ahead only if its remote files hold at most this many bytes (scratch space
#: then holds at most this much more than without fetching ahead); ``REPAIR_AHEAD_MAX_BYTES`` sets another.
AHEAD_MAX_BYTES = int(os.environ.get("REPAIR_AHEAD_MAX_BYTES") or 4 << 30)
#: How long an interrupted run waits for the fetch ahead to stop (its copies stop at their next chunk).
STOP_WAIT_SECONDS = 0.5


def fetch_instance(task, directory: str, stop: threading.Event, *, max_bytes: int | None = None) -> MaterialisedInstance | None:
    """The RocksDB instance ``task`` (an :class:`~repair.ops.export.job.ExportTask`) reads, placed in
    ``directory``; None when there is nothing to fetch ahead (not one instance, the Python engine, no
    remote file, more than ``max_bytes``, :data:`AHEAD_MAX_BYTES` by default)."""
    source = SOURCES[task.source]
    if not source.instance_ahead or task.engine == "python":
        return None
    snapshot = load_snapshot_shared(task.ref, task.root, task.storage, task.metadata_digest)
    op = snapshot.metadata.operator(task.operator_id)
    sub = next((s for s in op.subtasks if s.index == task.subtask), None) if op is not None else None
    handle = getattr(sub, source.slot, None)
    if handle is None or not source.applies(handle):
        return None  # the task says what is wrong
    files = [snapshot.resolver.resolve(entry.handle) for entry in [*handle.shared, *handle.private]]
    remote = sum(f.size for f in files if f is not None and is_remote(f))
    if not remote or remote > (AHEAD_MAX_BYTES if max_bytes is None else max_bytes):
        return None
    # one copy fewer than the bound: the task being exported meanwhile reads a file at a time
    return materialise_instance(snapshot, task.storage, handle, directory, stop=stop, in_flight=max(1, IN_FLIGHT - 1))


#: ``fetch(task, directory, stop)``: the task's instance placed in ``directory`` (None: nothing fetched).
Fetch = Callable[[T, str, threading.Event], "MaterialisedInstance | None"]


class _Fetch:
    """``fetch(task, directory, stop)`` running in a thread of its own, into a scratch directory made
    (and removed) by the thread that starts it; :meth:`result` waits for it, :meth:`cancel` gives it up."""

    def __init__(self, fetch: Fetch, task: T):
        self.task = task
        self._stop = threading.Event()
        self._owner = ExitStack()
        self._directory = directory = self._owner.enter_context(scratch_directory("rocksdb"))
        self._materialised: MaterialisedInstance | None = None

        def run() -> None:
            try:
                self._materialised = fetch(task, directory, self._stop)
            except Exception:  # noqa: BLE001 - stopped (CopyStopped); else the task fetches its own files and meets the error
                pass

        with _signals_for_the_main_thread():  # SIGINT and SIGTERM stay the main thread's
            self._thread = threading.Thread(target=run, name="repair-fetch-ahead", daemon=True)
            self._thread.start()

    def result(self) -> MaterialisedInstance | None:
        """The fetched instance, once the fetch has ended (None: the task fetches its own files)."""
        self._thread.join()
        return self._materialised

    def close(self) -> None:
        """Stop the fetch if it still runs (its copies end at their next chunk) and remove its directory:
        a copy that has not stopped by then finds no directory to write into."""
        self._stop.set()
        self._thread.join(STOP_WAIT_SECONDS)
        try:
            self._owner.close()
        except OSError:  # a file created while the directory was removed: once more
            shutil.rmtree(self._directory, ignore_errors=True)


class Ahead(Generic[T, R]):
    """``run(task, materialised)`` for ``tasks``, called with them in order (``run_tasks`` in this process, or
    a :class:`Lane`): while one task runs, the next one's instance is fetched (``fetch``, in a thread).
    Use it in a ``with`` block: leaving it gives up the fetch ahead."""

    def __init__(self, tasks: Sequence[T], run: Callable[[T, MaterialisedInstance | None], R], fetch: Fetch = fetch_instance):
        self._tasks = list(tasks)
        self._next = {id(task): index + 1 for index, task in enumerate(self._tasks)}
        self._run, self._fetch = run, fetch
        self._ahead: _Fetch | None = None

    def __enter__(self) -> "Ahead[T, R]":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __call__(self, task: T) -> R:
        if self._ahead is None or self._ahead.task is not task:  # the first task (or one out of order)
            self.close()
            self._ahead = _Fetch(self._fetch, task)
        current, self._ahead = self._ahead, None
        try:
            materialised = current.result()
            following = self._next.get(id(task), len(self._tasks))
            self._ahead = _Fetch(self._fetch, self._tasks[following]) if following < len(self._tasks) else None
            return self._run(task, materialised)
        finally:
            current.close()

    def close(self) -> None:
        """Give up the fetch ahead, if any."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.close()


def lanes(tasks: Sequence[T], count: int, cost: Callable[[T], float]) -> list[list[int]]:
    """The indices of ``tasks`` dealt into at most ``count`` lanes of about equal cost (the costliest
    first, each to the lane with the least so far), each lane in the tasks' order."""
    loads = [0.0] * max(1, count)
    members: list[list[int]] = [[] for _ in loads]
    for index in sorted(range(len(tasks)), key=lambda i: -cost(tasks[i])):
        lane = min(range(len(loads)), key=loads.__getitem__)
        members[lane].append(index)
        loads[lane] += cost(tasks[index])
    return [sorted(member) for member in members if member]


class Lane(Generic[T, R]):
    """``run(task, materialised)`` over a lane of tasks in a pool's worker, with an :class:`Ahead`
    (picklable when ``run`` is)."""

    def __init__(self, run: Callable[[T, MaterialisedInstance | None], R]):
        self.run = run

    def __call__(self, tasks: list[T]) -> list[R]:
        with Ahead(tasks, self.run) as ahead:
            return [ahead(task) for task in tasks]
