"""A subtask's state changelog replayed onto the rows of its materialized state, as Flink restores it.

On restore, Flink loads the materialized snapshot and then applies every logged change, in order, to
the restored states (``StateChangeApplier``). :class:`StateReplay` computes the same result for one
state without a state backend:

1. :meth:`StateReplay.apply` takes the state's data changes in log order and keeps, per *scope* (a key
   and namespace; a timer: the whole element), its net effect: a value set or cleared, a list built
   from literal elements and references to materialized lists (``MERGE_NS`` appends other namespaces'
   lists), a map's entries put and removed on top of the materialized entries or of an empty map, a
   timer added or removed. Memory holds the changes, never the materialized state.
2. :meth:`StateReplay.rows` streams the materialized rows: rows of scopes the log never touched pass
   through unchanged; rows of touched scopes are held back, and once the materialized rows end, every
   touched scope's final rows follow, in the order the log first touched them.

Final rows are decoded by :class:`~repair.formats.flink.full_snapshot.heap_rows.HeapStateDecoder` from the scope's
bytes laid out as one heap-snapshot record, so they have exactly the columns and raw bytes of rows read
from RocksDB (a map value's ``value_raw`` starts with its ``isNull`` flag; a timer's ``key_raw`` is the
element). ``MERGE_NS`` on reducing or aggregating state needs the job's own function; it raises
:class:`NotReplayable`, as does a serializer this toolkit cannot decode.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from repair.errors import FormatError, UnsupportedSerializerError
from repair.formats.bytes.binary import ByteReader
from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.changelog.dstl import ChangeReader, DataChange, ScopedChange
from repair.formats.flink.full_snapshot.heap_rows import HeapStateDecoder

#: A scope: ``(key bytes, namespace bytes)``; a timer's: ``(element bytes, b"")``.
Scope = tuple[bytes, bytes]
_NOT_NULL = b"\x00"  # MapSerializer's isNull flag of a present value
_INT = struct.Struct(">i")


class NotReplayable(FormatError):
    """A change this toolkit cannot apply without the job's code, or cannot decode."""


@dataclass(frozen=True)
class _Materialized:
    """In a list's elements: the materialized list of a scope (as it was before any change)."""

    scope: Scope


@dataclass
class _Touched:
    """The net effect of the changes of one scope."""

    key_group: int
    #: value-like states: the final value's bytes, or None (cleared); lists: elements (bytes) and
    #: :class:`_Materialized` lists; maps: entries put (``isNull`` flag + value) or removed (None);
    #: timers: True if present.
    value: Any
    #: maps: whether the materialized entries are still there (no CLEAR since).
    keeps_materialized: bool = True


@dataclass
class StateReplay:
    """The net effect of one state's changes (:meth:`apply`), then its final rows (:meth:`rows`)."""

    state: StateMetaInfo
    key_serializer: Any
    #: Data changes applied.
    changes: int = 0
    _touched: dict[Scope, _Touched] = field(default_factory=dict)

    def __post_init__(self):
        self.kind = self.state.kind
        try:
            self._reader = ChangeReader(self.state, self.key_serializer)
            self._decoder = HeapStateDecoder(self.state, self.key_serializer)
        except UnsupportedSerializerError as error:
            raise self._not_replayable(error) from None

    @property
    def touched(self) -> int:
        """Scopes the changes touched."""
        return len(self._touched)

    # -- the changes -------------------------------------------------------------------------------
    def apply(self, change: DataChange) -> None:
        """Apply the next data change of this state (log order)."""
        try:
            scoped = self._reader.read(change)
        except UnsupportedSerializerError as error:
            raise self._not_replayable(error) from None
        self.changes += 1
        if self.kind == "priority-queue":
            for element in scoped.parts:
                self._scope((element, b""), scoped, None).value = scoped.operation == "ADD_ELEMENT"
        elif self.kind == "list":
            self._list(scoped, change)
        elif self.kind == "map":
            self._map(scoped)
        else:
            self._value(scoped, change)

    def _not_replayable(self, error: UnsupportedSerializerError) -> NotReplayable:
        return NotReplayable(f"changes of state {self.state.name!r}", error.offset, "serializers this toolkit decodes", error.class_name)

    def _scope(self, scope: Scope, scoped: ScopedChange, initial: Any) -> _Touched:
        touched = self._touched.get(scope)
        if touched is None:
            touched = self._touched[scope] = _Touched(scoped.key_group, initial)
        return touched

    def _value(self, scoped: ScopedChange, change: DataChange) -> None:
        if scoped.operation == "MERGE_NS":
            raise NotReplayable(f"MERGE_NS change of {self.kind} state {self.state.name!r}", change.offset, "a change this toolkit can apply",
                                "namespaces merged with the job's own function (merging windows)")
        touched = self._scope((scoped.key_raw, scoped.namespace_raw), scoped, None)
        touched.value = None if scoped.operation == "CLEAR" else scoped.parts[0]

    def _list(self, scoped: ScopedChange, change: DataChange) -> None:
        op = scoped.operation
        scope = (scoped.key_raw, scoped.namespace_raw)
        touched = self._scope(scope, scoped, [_Materialized(scope)])
        if op == "CLEAR":
            touched.value = []
        elif op in ("SET", "SET_INTERNAL"):
            touched.value = self._list_elements(scoped.parts[0], change)
        elif op == "ADD":
            touched.value.extend(self._list_elements(scoped.parts[0], change))
        elif op == "ADD_ELEMENT":
            touched.value.append(scoped.parts[0])
        else:  # MERGE_NS: the sources' lists appended to the target's, the sources cleared (RocksDBListState)
            target, *sources = scoped.parts
            merged: list = []
            for source in sources:
                source_scope = self._scope((scoped.key_raw, source), scoped, [_Materialized((scoped.key_raw, source))])
                merged.extend(source_scope.value)
                source_scope.value = []
            self._scope((scoped.key_raw, target), scoped, [_Materialized((scoped.key_raw, target))]).value.extend(merged)

    def _map(self, scoped: ScopedChange) -> None:
        op = scoped.operation
        touched = self._scope((scoped.key_raw, scoped.namespace_raw), scoped, {})
        if op == "CLEAR":
            touched.value, touched.keeps_materialized = {}, False
        elif op == "ADD":
            touched.value.update(self._map_entries(scoped.parts[0]))
        elif op == "REMOVE_ELEMENT":
            touched.value[scoped.parts[0]] = None
        else:  # ADD_ELEMENT, ADD_OR_UPDATE_ELEMENT: the value without MapSerializer's isNull flag
            touched.value[scoped.parts[0]] = _NOT_NULL + scoped.parts[1]

    def _list_elements(self, raw: bytes, change: DataChange) -> list[bytes]:
        """The elements of a whole list (``ListSerializer``: int size, then the elements)."""
        r = ByteReader(raw, base=change.offset)
        element = self._decoder.element
        elements = []
        for _ in range(r.count("list size", item_size=1)):
            start = r.pos
            element.read(r)
            elements.append(bytes(raw[start : r.pos]))
        return elements

    def _map_entries(self, raw: bytes) -> dict[bytes, bytes]:
        """The entries of a whole map (``MapSerializer``: int size, then per entry key, isNull, value)."""
        r = ByteReader(raw)
        entries = {}
        for _ in range(r.count("map size", item_size=2)):
            start = r.pos
            self._decoder.user_key.read(r)
            key = bytes(raw[start : r.pos])
            start = r.pos
            if not r.bool("map value is null"):
                self._decoder.user_value.read(r)
            entries[key] = bytes(raw[start : r.pos])
        return entries

    # -- the rows ----------------------------------------------------------------------------------
    def rows(self, materialized: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The state's rows after the changes: ``materialized`` (its rows in the materialized snapshot,
        consumed once) with the touched scopes' rows replaced by their final rows, which come last."""
        held: dict[Scope, list[dict[str, Any]]] = {}
        timers = self.kind == "priority-queue"
        touched = self._touched
        for row in materialized:
            scope = (row["key_raw"], b"") if timers else (row["key_raw"], row["namespace_raw"])
            if scope in touched:
                held.setdefault(scope, []).append(row)
            else:
                yield row
        for scope, change in touched.items():
            record = self._record(scope, change, held)
            if record is not None:
                yield from self._decoder.rows(ByteReader(record), change.key_group)

    def _record(self, scope: Scope, touched: _Touched, held: dict[Scope, list[dict[str, Any]]]) -> bytes | None:
        """The scope's final state as one heap-snapshot record (None: the scope holds nothing)."""
        key, namespace = scope
        if self.kind == "priority-queue":
            return key if touched.value else None
        if self.kind == "list":
            elements = []
            for part in touched.value:
                if isinstance(part, _Materialized):
                    rows = sorted(held.get(part.scope, ()), key=lambda row: row["list_index"])
                    elements.extend(row["value_raw"] for row in rows)
                else:
                    elements.append(part)
            return namespace + key + _INT.pack(len(elements)) + b"".join(elements) if elements else None
        if self.kind == "map":
            entries = {row["user_key_raw"]: row["value_raw"] for row in held.get(scope, ())} if touched.keeps_materialized else {}
            for user_key, value in touched.value.items():
                if value is None:
                    entries.pop(user_key, None)
                else:
                    entries[user_key] = value
            if not entries:
                return None
            return namespace + key + _INT.pack(len(entries)) + b"".join(k + v for k, v in entries.items())
        return None if touched.value is None else namespace + key + touched.value
