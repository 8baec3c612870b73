"""How the suite is shared between pytest-xdist's workers (scripts/test.sh: ``-n 3 --dist loadgroup``).

Every test is in a group, and one worker runs a group's tests in their order, one after the other: what
a module shares (a module fixture: an export, a Spark session; a moto server's buckets) is then built
once per group, as in a run without workers, and never by two workers racing. A group is a test
module, or, for the few modules that alone would take a large part of a worker's time
(:data:`SPLIT_MODULES`), one of a fixed number of parts of it (the module's tests dealt out in turn,
so that each part gets its share of the slow ones; each part builds the module's fixtures once).

The modules are ordered longest first by a rough cost (:func:`order_modules`, in each worker's
collection), so that the long groups start at once and the short ones fill the workers' ends; the
controller hands out the groups in that order as workers free up (:class:`ModuleScheduling`).

xdist's own ``xdist_group`` marks are not used: pytest-xdist 3.8 moves a marked test into its group
by appending ``@group`` to ``item._nodeid``, which pytest 9 no longer reads (a test's id is
``item._id``), so the marks group nothing. The groups here are computed from the test ids alone, by
the controller.

Without ``--dist loadgroup`` (a plain ``pytest`` run) nothing here is used.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

#: Modules run in this many groups, ``<module>#<i>``: i is a test's index among the module's tests
#: modulo the count. Chosen from their measured time (docs/testing.md).
SPLIT_MODULES: dict[str, int] = {
    "test_write_faults.py": 4,
    "test_write_savepoint.py": 3,
    "test_damage_matrix.py": 2,
}

#: The rough cost of a test, in seconds, for the order of the modules only (never for a verdict): a
#: slow test starts a JVM (a Flink mini-cluster, a Spark session or an oracle), a quick one does not.
SLOW_TEST_SECONDS = 10.0
QUICK_TEST_SECONDS = 0.3
#: Modules of quick tests that take far longer than their number says (measured on 2026-11-28 under
#: load: real full disks, RocksDB instances written by rocksdict; the S3 tests' requests to moto; the
#: fuzz run, 5 s per target), so that they do not start last.
MODULE_SECONDS: dict[str, float] = {"test_disk_full.py": 100.0, "test_manifest_builder.py": 110.0, "test_remote_reads.py": 70.0,
                                    "test_s3_write_faults.py": 70.0, "test_fuzz_regressions.py": 45.0}


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def groups_of(nodeids: list[str]) -> dict[str, str]:
    """The group of each test id, from the ids in their collected order."""
    seen_in_module: dict[str, int] = {}
    groups = {}
    for nodeid in nodeids:
        module = module_of(nodeid)
        index = seen_in_module.get(module, 0)
        seen_in_module[module] = index + 1
        parts = SPLIT_MODULES.get(PurePosixPath(module).name)
        groups[nodeid] = f"{module}#{index % parts}" if parts else module
    return groups


def cost(item: pytest.Item) -> float:
    return SLOW_TEST_SECONDS if item.get_closest_marker("slow") else QUICK_TEST_SECONDS


def order_modules(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: modules by falling cost (their tests' costs, or
    :data:`MODULE_SECONDS`), each module's items together and in their order (ties: as collected)."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(module_of(item.nodeid), []).append(item)

    def module_cost(module: str) -> float:
        return max(sum(map(cost, modules[module])), MODULE_SECONDS.get(PurePosixPath(module).name, 0.0))

    ordered = sorted(modules, key=lambda module: -module_cost(module))
    items[:] = [item for module in ordered for item in modules[module]]


def module_scheduling(config, log):
    """xdist's scheduler for ``--dist loadgroup`` replaced by :class:`ModuleScheduling` (built here:
    xdist is imported only in a run with workers)."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        """xdist's scope scheduling (a group at a time to a worker with less than two tests left, in
        the collected order) with :func:`groups_of` as the scopes."""

        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                self._groups = groups_of(self.collection or next(iter(self.registered_collections.values())))
            return self._groups[nodeid]

    return ModuleScheduling(config, log)
