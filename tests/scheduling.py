"""How the suite is shared between pytest-xdist's workers (scripts/test.sh: ``-n 2 --dist loadgroup``).

Every test is put in an ``xdist_group``: one worker runs a group's tests in their order, one after the
other, so what a module shares (a module fixture: an export, a Spark session; a compiled class
directory; a moto server's buckets) is built once per group, as in a run without workers, and never
by two workers racing. A group is a test module, or, for the few modules that alone would take a
large part of a worker's time (:data:`SPLIT_MODULES`), one of a fixed number of parts of it (the
module's tests dealt out in turn, so that each part gets its share of the slow ones; each part builds
the module's fixtures once).

The groups are then ordered longest first by a rough cost (:func:`cost`), so that the long groups
start at once and the short ones fill the workers' ends (xdist, with ``--no-loadscope-reorder``, hands
out groups in this order as workers free up). The order inside a group is the module's own.

Without xdist (a plain ``pytest`` run) the marks do nothing and the order is pytest's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

#: Modules run in this many groups, each of its tests in the group ``<module>#<i>`` (i: its index
#: among the module's tests modulo the count). Chosen from their measured time (docs/testing.md).
SPLIT_MODULES: dict[str, int] = {
    "test_write_faults.py": 4,
    "test_write_savepoint.py": 3,
    "test_damage_matrix.py": 2,
}

#: The rough cost of a test, in seconds, for the order of the groups only (never for a verdict): a slow
#: test starts a JVM (a Flink mini-cluster, a Spark session or an oracle), a quick one does not.
SLOW_TEST_SECONDS = 10.0
QUICK_TEST_SECONDS = 0.3


def group_of(item: pytest.Item, index_in_module: int) -> str:
    """The xdist group of ``item``, the ``index_in_module``-th test of its module."""
    module = Path(str(item.path)).name
    parts = SPLIT_MODULES.get(module)
    return f"{module}#{index_in_module % parts}" if parts else module


def cost(item: pytest.Item) -> float:
    return SLOW_TEST_SECONDS if item.get_closest_marker("slow") else QUICK_TEST_SECONDS


def assign_groups(items: list[pytest.Item]) -> None:
    """Mark every item with its group and reorder ``items`` in place: groups by falling total cost,
    each group's items together and in their collected order."""
    seen_in_module: dict[Path, int] = {}
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        index = seen_in_module.get(item.path, 0)
        seen_in_module[item.path] = index + 1
        group = group_of(item, index)
        item.add_marker(pytest.mark.xdist_group(group))
        groups.setdefault(group, []).append(item)
    ordered = sorted(groups.values(), key=lambda members: -sum(map(cost, members)))  # stable: ties as collected
    items[:] = [item for members in ordered for item in members]
