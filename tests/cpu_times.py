"""Where a test run's time goes: each test's wall and CPU seconds, per worker (docs/testing.md).

A pytest plugin (tests/conftest.py loads it), on only when asked: ``REPAIR_TEST_TIMES`` set to a
directory, e.g. ``REPAIR_TEST_TIMES=/tmp/times bash .ci/run``. Each process running tests (each pytest-xdist worker, or the one process of ``-n 0``)
appends one line per test to ``<dir>/<worker>.tsv``: start and end (epoch seconds), the CPU seconds of the
process itself and of the children it waited for during the test (set-up and tear-down included: a
module fixture's cost is in its first test). CPU seconds are what a loaded machine distorts least; the
children are the CLI processes, JVMs and pool workers a test waited for (a JVM still running at the
test's end, such as a long-lived restore server's or Spark's, is counted when it ends).

``python -m tests.cpu_times DIR`` prints each worker's busy time and the costliest modules.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

DIRECTORY_VARIABLE = "REPAIR_TEST_TIMES"


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    directory = os.environ.get(DIRECTORY_VARIABLE)
    if not directory:
        yield
        return
    started, (own, children) = time.time(), _cpu()
    yield
    ended, (own_after, children_after) = time.time(), _cpu()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(directory).mkdir(parents=True, exist_ok=True)
    with open(Path(directory) / f"{worker}.tsv", "a", encoding="utf-8") as out:
        out.write(f"{started:.3f}\t{ended:.3f}\t{own_after - own:.3f}\t{children_after - children:.3f}\t{item.nodeid}\n")


@dataclass(frozen=True)
class TimedTest:
    worker: str
    started: float
    ended: float
    own_cpu: float
    children_cpu: float
    nodeid: str

    @property
    def module(self) -> str:
        """The module's file name (robust to the test files moving between directories)."""
        return PurePosixPath(self.nodeid.split("::", 1)[0]).name


def read_times(directory: Path) -> list[TimedTest]:
    times = []
    for path in sorted(directory.glob("*.tsv")):
        for line in path.read_text(encoding="utf-8").splitlines():
            started, ended, own, children, nodeid = line.split("\t", 4)
            times.append(TimedTest(path.stem, float(started), float(ended), float(own), float(children), nodeid))
    return times


def summary(times: list[TimedTest], top: int = 30) -> list[str]:
    """Per worker: tests, busy wall seconds, span from its first start to its last end, CPU seconds;
    then the ``top`` modules by CPU (wall, own and children's CPU)."""
    lines = []
    workers: dict[str, list[TimedTest]] = defaultdict(list)
    for test in times:
        workers[test.worker].append(test)
    end = max((t.ended for t in times), default=0.0)
    for worker, own in sorted(workers.items()):
        busy = sum(t.ended - t.started for t in own)
        span = max(t.ended for t in own) - min(t.started for t in own)
        cpu = sum(t.own_cpu + t.children_cpu for t in own)
        idle_at_end = end - max(t.ended for t in own)
        lines.append(f"{worker}: {len(own)} tests, busy {busy:.0f} s of a {span:.0f} s span, {cpu:.0f} CPU s, "
                     f"idle {idle_at_end:.0f} s at the end")
    modules: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for test in times:
        row = modules[test.module]
        row[0] += 1
        row[1] += test.ended - test.started
        row[2] += test.own_cpu
        row[3] += test.children_cpu
    lines.append(f"{'module':45} {'tests':>5} {'wall s':>8} {'own CPU':>8} {'children':>8}")
    for module, (count, wall, own_cpu, children_cpu) in sorted(modules.items(), key=lambda kv: -(kv[1][2] + kv[1][3]))[:top]:
        lines.append(f"{module:45} {count:5.0f} {wall:8.1f} {own_cpu:8.1f} {children_cpu:8.1f}")
    return lines


if __name__ == "__main__":
    print("\n".join(summary(read_times(Path(sys.argv[1])))))
