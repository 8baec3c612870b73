"""What every command reports: problems found in bytes, files, configurations or logs.

:class:`Problem` is one problem a decoder or a file check found in one piece of bytes: what kind, a
message, and where (the byte offset, what was expected and what was found). The operations add the
context only they know (which checkpoint, operator, subtask and path reference the bytes; which
configuration key) in their own result types, whose ``to_json()`` is the documented ``--json`` shape.

:class:`Severity` is the closed set every finding of every command uses. Its members are strings, so
``finding.severity == "error"`` and JSON output are unchanged from plain strings. What a severity
means for a checkpoint is what real Flink does with it (docs/verify-verdicts.md): ``error``, Flink
refuses the restore or restores state that differs; ``unknown``, it could not be judged, because a
file stayed unreadable (storage faults are never taken for damage); ``warning``, Flink restores
exact state but something is off; ``info``, worth knowing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class Severity(str, Enum):
    ERROR = "error"
    #: Could not be judged: a file that stayed unreadable (a storage fault, not damage).
    UNKNOWN = "unknown"
    WARNING = "warning"
    INFO = "info"

    # plain strings when printed or formatted, as before the enum (Python 3.10/3.11 would show the name)
    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, format_spec: str) -> str:
        return str.__format__(self, format_spec)

    @property
    def rank(self) -> int:
        """0 for errors, then unknown, warnings and info: sort by it to show the worst first."""
        return _RANKS[self]


_RANKS = {Severity.ERROR: 0, Severity.UNKNOWN: 1, Severity.WARNING: 2, Severity.INFO: 3}


@dataclass(frozen=True)
class Problem:
    """One problem in one piece of bytes (a file, a block, a record), at ``offset`` within it.

    ``kind`` is a stable snake_case name (documented in docs/json-contracts.md); ``message`` says it in
    words an on-call engineer can act on; ``expected``/``found`` hold the values compared, when a
    comparison failed. ``details`` carries what only some formats know (the SST block kind and size,
    the bytes a lenient log reader dropped).
    """

    kind: str
    message: str
    offset: int | None = None
    expected: Any = None
    found: Any = None
    severity: Severity = Severity.ERROR
    details: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", Severity(self.severity))

    def to_json(self) -> dict[str, Any]:
        """The common finding shape of every ``--json`` document: ``kind``, ``severity`` and ``message``
        always, then the fields that are set, details inline."""
        document = {"kind": self.kind, "severity": self.severity.value, "message": self.message}
        for name in ("offset", "expected", "found"):
            value = getattr(self, name)
            if value is not None:
                document[name] = value
        document.update(self.details)
        return document


def kind_of(identifier: str) -> str:
    """The finding ``kind`` of a kebab-case identifier (a diagnose cause id, a doctor check):
    ``bad-sst`` -> ``bad_sst``. Kinds are snake_case in every command; the identifiers keep their
    names, as runbook file names do."""
    return identifier.replace("-", "_")
