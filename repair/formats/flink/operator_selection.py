"""Which operators of a snapshot a user means: one rule for every command that takes operator selectors.

A selector names an operator by its uid (the recorded one of ``_metadata`` version 5+, or any uid hashed
as Flink hashes it, :func:`~repair.formats.flink.keygroups.operator_id_for_uid`, which finds operators of
older versions that record only ids), its operator id (32 hex digits, any case) or its name.

What a command does with the matches is its own rule, named here so each picks one explicitly:

- :func:`select_operators` gives every operator each selector names: ``repair export`` exports them all and
  ``repair inspect`` shows them all (two operators may share a name);
- :func:`find_operator` wants exactly one: ``repair edit`` and ``write-savepoint``'s ``drop_states`` change
  the operator named, and an ambiguous name must not change two (:func:`find_operator_state` splits
  ``--drop-state``'s ``OPERATOR/STATE``, whose state may hold slashes).

A selector that names nothing is the caller's to report: a usage error in export, edit and write-savepoint,
a line of inspect's result (the CLI exits 2).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from repair.errors import UsageError
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.metadata import OperatorState

_OPERATOR_ID = re.compile(r"^[0-9a-f]{32}$")


def selects(selector: str, operator: OperatorState) -> bool:
    """Whether ``selector`` names ``operator`` (uid, recorded or hashed; operator id; name)."""
    ids = {operator_id_for_uid(selector)}
    if _OPERATOR_ID.match(selector.lower()):
        ids.add(selector.lower())
    return operator.operator_id in ids or selector in (operator.operator_uid, operator.operator_name)


def select_operators(operators: Iterable[OperatorState], selectors: Iterable[str]) -> dict[str, list[OperatorState]]:
    """Every selector with all the operators it names, in snapshot order (an empty list: none)."""
    operators = list(operators)
    return {selector: [op for op in operators if selects(selector, op)] for selector in selectors}


def find_operator(operators: Iterable[OperatorState], selector: str) -> OperatorState:
    """The one operator ``selector`` names; :class:`UsageError` when it names none or several."""
    operators = list(operators)
    found = select_operators(operators, [selector])[selector]
    if len(found) != 1:
        held = ", ".join(op.operator_uid or op.operator_id for op in operators)
        what = "no operator" if not found else f"{len(found)} operators"
        raise UsageError(f"{what} with uid, name or id {selector!r} in the snapshot (it holds {held})")
    return found[0]


def find_operator_state(operators: Iterable[OperatorState], value: str) -> tuple[OperatorState, str]:
    """The operator and state name of ``OPERATOR/STATE`` (``--drop-state``), cut at the last slash after
    which the rest names one operator: a state's name may hold slashes too (a timer state,
    ``by-who/_timer_state/event_user-timers``). :class:`UsageError` when no cut names one."""
    operators = list(operators)
    cuts = [i for i, char in enumerate(value) if char == "/" and 0 < i < len(value) - 1]
    if not cuts:
        raise UsageError(f"a state to drop is OPERATOR/STATE (uid, name or operator id, then the state's name), not {value!r}")
    for cut in reversed(cuts):
        if len(select_operators(operators, [value[:cut]])[value[:cut]]) == 1:
            return find_operator(operators, value[:cut]), value[cut + 1:]
    return find_operator(operators, value[: cuts[-1]]), value[cuts[-1] + 1:]  # its error names the operators held
