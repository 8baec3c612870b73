"""What every command reports: problems found in bytes, files, configurations or logs.

:class:`Problem` is one problem a decoder or a file check found in one piece of bytes: what kind, a
message, and where (the byte offset, what was expected and what was found). The operations add the
context only they know (which checkpoint, operator, subtask and path reference the bytes; which
configuration key) as subclasses: ``BlockProblem`` (SST verification: the block), verify's
``CheckpointFinding`` (snapshot, operator, subtask, path), doctor's ``ConfigFinding`` (key, value, fix).
Every finding is built from a typed error by one constructor (:meth:`Problem.from_error`) and
serialized by one method (:meth:`Problem.to_json`), the common finding shape of docs/json-contracts.md.

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
from typing import Any, ClassVar


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

    #: Whether ``offset``, ``expected`` and ``found`` are in the JSON document when unset (as null):
    #: verify's findings always have them; the others only when set.
    ALWAYS_COMPARED: ClassVar[bool] = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", Severity(self.severity))

    @classmethod
    def from_error(cls, kind: str, error: Any, *, message: str | None = None, **fields: Any) -> Any:
        """The finding of a typed error (a :class:`~repair.errors.RepairError`): its text (``str(error)``,
        which names the file, unless ``message`` is given) and what it says of where and what
        (``offset``, ``expected``, ``found``: None for an error that does not know). ``fields`` are the
        other fields of ``cls`` (severity, a subclass's where) and override what the error says."""
        compared = {"offset": error.offset, "expected": error.expected, "found": error.found}
        return cls(kind=kind, message=str(error) if message is None else message, **{**compared, **fields})

    def describe(self) -> str:
        """The finding in one line, as ``message`` in its JSON document."""
        return self.message

    def context(self) -> tuple[tuple[str, Any], ...]:
        """What a subclass adds to the common shape (where the bytes are, what to do), as name-value pairs in order."""
        return ()

    def to_json(self) -> dict[str, Any]:
        """The common finding shape of every ``--json`` document: ``kind``, ``severity`` and ``message``
        always, then ``offset``, ``expected`` and ``found`` (when set, or always with
        :attr:`ALWAYS_COMPARED`; bytes as hex, other values not JSON's own as text), the details inline,
        then a subclass's :meth:`context`."""
        document = {"kind": self.kind, "severity": self.severity.value, "message": self.describe()}
        for name in ("offset", "expected", "found"):
            value = getattr(self, name)
            if value is not None or self.ALWAYS_COMPARED:
                document[name] = plain(value)
        document.update(self.details)
        document.update(self.context())
        return document


def plain(value: Any) -> Any:
    """``value`` as JSON has it: numbers, strings, booleans and None as they are, bytes as hex, others as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return str(value)


def kind_of(identifier: str) -> str:
    """The finding ``kind`` of a kebab-case identifier (a diagnose cause id, a doctor check):
    ``bad-sst`` -> ``bad_sst``. Kinds are snake_case in every command; the identifiers keep their
    names, as runbook file names do."""
    return identifier.replace("-", "_")
