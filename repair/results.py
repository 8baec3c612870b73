"""What every command returns: one contract for the results of ``repair.inspect``, ``repair.verify``...

A command's result says whether the command found what it was asked for (``ok``), the exit code the
``repair`` command ends with (``exit_code``: 0 healthy, 1 problems found, 2 unusable input or a
verdict that could not be reached), what it read (``source``: the absolute path or the URI, ``-`` for
standard input), what it judged (``findings``, every one with ``kind``, ``severity`` and ``message``;
empty for commands that only write) and its ``--json`` document (``to_json()``). The library's
``to_json()`` *is* the ``--json`` document, envelope included: the CLI prints it unchanged.

A result class derives from :class:`CommandResult`, defines ``ok`` and ``document()`` (its own fields,
``source`` first) and has ``source`` and ``findings`` (fields or properties). A result whose verdict
can stay open (verify, fallback, triage) has ``unknown``: exit code 2 when it is set.
"""

from __future__ import annotations

from typing import Any

#: Version of the ``--json`` documents' envelope (docs/json-contracts.md): fields are only ever added.
SCHEMA_VERSION = 1


class CommandResult:
    """The base of every command's result (see the module doc). Not a dataclass: its subclasses are,
    and declare ``source`` and ``findings`` as fields where they hold them."""

    #: What the command read: an absolute local path or a URI (see :func:`repair.io.uris.absolute`).
    source: str
    #: What the command found, each with ``to_json()`` in the common finding shape.
    findings: list

    @property
    def ok(self) -> bool:
        raise NotImplementedError

    @property
    def exit_code(self) -> int:
        """2 when a verdict could not be reached (a result's ``unknown``, where it has one, is true or not
        empty: a file stayed unreadable), else 0 when ``ok`` and 1 when problems were found."""
        if getattr(self, "unknown", False):
            return 2
        return 0 if self.ok else 1

    def document(self) -> dict[str, Any]:
        """The command's own fields of its ``--json`` document, after ``schema_version`` and ``ok``."""
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document: ``schema_version``, ``ok``, then :meth:`document`."""
        return {"schema_version": SCHEMA_VERSION, "ok": self.ok, **self.document()}
