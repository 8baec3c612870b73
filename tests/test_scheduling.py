"""tests/scheduling.py: how scripts/test.sh's two pytest-xdist workers share the suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import scheduling

TESTS = Path(__file__).resolve().parent


class _Item:
    """What assign_groups reads of a pytest item: its module's path and its marks."""

    def __init__(self, module: str, name: str, slow: bool = False):
        self.path = TESTS / module
        self.name = name
        self.marks = [pytest.mark.slow.mark] if slow else []

    def get_closest_marker(self, name):
        return next((mark for mark in self.marks if mark.name == name), None)

    def add_marker(self, marker):
        self.marks.append(marker.mark)

    def group(self) -> str:
        (group,) = [mark.args[0] for mark in self.marks if mark.name == "xdist_group"]
        return group


def test_every_test_is_in_its_module_group_and_the_longest_groups_come_first(monkeypatch):
    monkeypatch.setattr(scheduling, "SPLIT_MODULES", {"test_big.py": 2})
    items = [_Item("test_a.py", "a1"),
             _Item("test_big.py", "b1", slow=True), _Item("test_big.py", "b2"), _Item("test_big.py", "b3", slow=True),
             _Item("test_big.py", "b4"), _Item("test_c.py", "c1", slow=True), _Item("test_c.py", "c2", slow=True),
             _Item("test_c.py", "c3", slow=True)]
    scheduling.assign_groups(items)
    assert [(item.name, item.group()) for item in items] == [
        ("c1", "test_c.py"), ("c2", "test_c.py"), ("c3", "test_c.py"),  # 3 slow tests
        ("b1", "test_big.py#0"), ("b3", "test_big.py#0"),  # 2 slow tests: a module split in two, dealt out in turn
        ("b2", "test_big.py#1"), ("b4", "test_big.py#1"),
        ("a1", "test_a.py"),  # one quick test
    ]


def test_the_split_modules_exist():
    assert all((TESTS / module).is_file() for module in scheduling.SPLIT_MODULES)

