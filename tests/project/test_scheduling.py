"""tests/scheduling.py: how scripts/test.sh's two pytest-xdist workers share the suite."""

from __future__ import annotations

import pytest

from tests import scheduling
from tests.conftest import TESTS


class _Item:
    """What order_modules reads of a pytest item: its id and its marks."""

    def __init__(self, nodeid: str, slow: bool = False):
        self.nodeid = nodeid
        self.slow = slow

    def get_closest_marker(self, name):
        return pytest.mark.slow.mark if name == "slow" and self.slow else None


def test_a_test_is_in_its_module_group_or_dealt_into_a_part_of_a_split_module(monkeypatch):
    monkeypatch.setattr(scheduling, "SPLIT_MODULES", {"test_big.py": 2})
    ids = ["tests/test_a.py::t1", "tests/test_big.py::b1[x]", "tests/test_big.py::b2[x]", "tests/test_a.py::t2",
           "tests/test_big.py::b1[y]", "tests/test_c.py::C::t"]
    assert scheduling.groups_of(ids) == {
        "tests/test_a.py::t1": "tests/test_a.py", "tests/test_a.py::t2": "tests/test_a.py",
        "tests/test_big.py::b1[x]": "tests/test_big.py#0", "tests/test_big.py::b2[x]": "tests/test_big.py#1",
        "tests/test_big.py::b1[y]": "tests/test_big.py#0",
        "tests/test_c.py::C::t": "tests/test_c.py",  # a class's tests are their module's
    }


def test_the_modules_longest_first_each_in_its_own_order():
    items = [_Item("tests/test_a.py::a1"), _Item("tests/test_b.py::b1", slow=True), _Item("tests/test_b.py::b2"),
             _Item("tests/test_c.py::c1", slow=True), _Item("tests/test_c.py::c2", slow=True), _Item("tests/test_a.py::a2")]
    scheduling.order_modules(items)
    assert [item.nodeid for item in items] == ["tests/test_c.py::c1", "tests/test_c.py::c2", "tests/test_b.py::b1",
                                               "tests/test_b.py::b2", "tests/test_a.py::a1", "tests/test_a.py::a2"]


def test_a_module_known_to_be_long_comes_before_its_number_of_tests_says(monkeypatch):
    monkeypatch.setattr(scheduling, "MODULE_SECONDS", {"test_full_disk.py": 100.0})
    items = [_Item("tests/test_b.py::b1", slow=True), _Item("tests/test_full_disk.py::d1")]
    scheduling.order_modules(items)
    assert [item.nodeid for item in items] == ["tests/test_full_disk.py::d1", "tests/test_b.py::b1"]


def test_the_modules_named_exist():
    """The tables name test files by their file name alone (they may sit in any layer's directory)."""
    names = {path.name for path in TESTS.rglob("test_*.py")}
    assert set(scheduling.SPLIT_MODULES) | set(scheduling.MODULE_SECONDS) <= names
