"""One rule for what an operator selector names (uid recorded or hashed, operator id, name), and the two
ways commands use it: every match (export, inspect) or exactly one (edit, write-savepoint's drops)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from repair.errors import UsageError
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.metadata import OperatorState
from repair.formats.flink.operator_selection import find_operator, select_operators


def _operator(uid: str | None, name: str | None, *, recorded_uid: bool = True) -> OperatorState:
    return OperatorState(operator_id_for_uid(uid or name), 1, 128, None, [], name=name, uid=uid if recorded_uid else None)


OPERATORS = [
    _operator("per-user", "Keyed Reduce"),
    _operator("window", "Window", recorded_uid=False),  # a _metadata before version 5 records ids only
    _operator(None, "Map"),
    replace(_operator(None, "Map"), operator_id="0" * 31 + "1"),  # two operators of the same name, no uid
]


@pytest.mark.parametrize("selector, expected", [
    ("per-user", [0]),  # recorded uid
    ("window", [1]),  # uid hashed as Flink hashes it
    (OPERATORS[2].operator_id.upper(), [2]),  # operator id, any case
    ("Keyed Reduce", [0]),  # name
    ("Map", [2, 3]),  # a shared name names both
    ("nothing", []),
])
def test_a_selector_names_operators_by_uid_hash_id_or_name(selector, expected):
    assert select_operators(OPERATORS, [selector]) == {selector: [OPERATORS[i] for i in expected]}


def test_find_operator_wants_exactly_one():
    assert find_operator(OPERATORS, "window") is OPERATORS[1]
    with pytest.raises(UsageError, match="2 operators with uid, name or id 'Map'"):
        find_operator(OPERATORS, "Map")
    with pytest.raises(UsageError, match="no operator with uid, name or id 'nothing'"):
        find_operator(OPERATORS, "nothing")


def test_an_operator_is_labelled_by_its_uid_else_its_name_else_its_id():
    assert [op.label for op in OPERATORS[:3]] == ["per-user", "Window", "Map"]
    assert OperatorState("ab" * 16, 1, 1, None, []).label == "ab" * 16
