"""Rows of Flink keyed state from the records of a heap-backend snapshot.

The heap state backend (``HashMapStateBackend``; ``FsStateBackend`` and ``MemoryStateBackend`` before
it) writes, per key group and state, a count and then that many records, each made of serializer bytes
only (``CopyOnWriteStateMapSnapshot.writeState``, ``KeyGroupPartitioner``'s key-group writer):

* key/value states: ``namespace, key, state``, where the state is what the state's serializer writes for
  the whole value: the value itself (value, reducing and aggregating state), a whole ``List``
  (``ListSerializer``: ``int size`` + the elements) or a whole ``Map`` (``MapSerializer``: ``int size``
  + per entry ``key, bool isNull, value``); TTL wraps the value, each list element or each map value;
* priority-queue states (timers): one element (``TimerSerializer``: flipped timestamp, key, namespace).

:class:`HeapStateDecoder` turns one record into rows of the shape of
:mod:`repair.formats.flink.in_rocksdb.keyed_rows` (one row per list element and per map entry), with the raw bytes
RocksDB would hold for the same state: a map entry's ``value_raw`` is ``bool isNull`` + the value, a
timer's ``key_raw`` the whole element. So a heap snapshot exports like a RocksDB one.

Records carry no lengths, so the end of a record is known only by decoding it: a serializer this
toolkit cannot decode raises :class:`~repair.formats.flink.values.UnsupportedSerializerError`, and the
caller cannot go past that record (see :mod:`repair.formats.flink.full_snapshot.heap`).
"""

from __future__ import annotations

from typing import Any

from repair.formats.bytes.binary import ByteReader
from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.in_rocksdb.keyed_rows import row_template, split_ttl
from repair.formats.flink.values import Decoder, Timer, decoder_for


class HeapStateDecoder:
    """Reads the records of one state of a heap snapshot: :meth:`rows` decodes one, :meth:`skip` steps
    over one (both leave the reader after the record)."""

    def __init__(self, state: StateMetaInfo, key_serializer):
        self.state = state
        self.kind = state.kind
        self._template = row_template(state)
        value = state.serializer("VALUE_SERIALIZER")
        if self.kind == "priority-queue":
            self.timer = decoder_for(value)
            self._parts: tuple[Decoder, ...] = (self.timer,)
            return
        self.key = decoder_for(key_serializer)
        self.namespace = decoder_for(state.serializer("NAMESPACE_SERIALIZER"))
        nested = value.nested if value is not None else []
        if self.kind == "list":
            self.element = decoder_for(nested[0] if len(nested) == 1 else None)
        elif self.kind == "map":
            self.user_key = decoder_for(nested[0] if len(nested) == 2 else None)
            self.user_value = decoder_for(nested[1] if len(nested) == 2 else None)
        #: The state's whole value (a List or Map serializer for list and map state).
        self.value = decoder_for(value)
        self._parts = (self.namespace, self.key, self.value)

    @property
    def min_record_size(self) -> int:
        """A lower bound of a record's size in bytes (for bounding counts read from the data)."""
        return 8 if self.kind == "priority-queue" else 1

    def skip(self, r: ByteReader) -> None:
        """Step over one record."""
        for part in self._parts:
            part.read(r)

    def rows(self, r: ByteReader, key_group: int) -> list[dict[str, Any]]:
        """The rows of the next record (a list or map record: one per element or entry; none if empty)."""
        row = self._template.copy()
        row["key_group"] = key_group
        if self.kind == "priority-queue":
            start = r.pos
            timer: Timer = self.timer.read(r)
            row.update(key=timer.key, namespace=timer.namespace, timestamp=timer.timestamp,
                       key_raw=bytes(r.data[start : r.pos]), value_raw=b"")
            return [row]
        row["namespace"], row["namespace_raw"] = _read_raw(self.namespace, r)
        row["key"], row["key_raw"] = _read_raw(self.key, r)
        if self.kind == "list":
            return self._list_rows(row, r)
        if self.kind == "map":
            return self._map_rows(row, r)
        value, row["value_raw"] = _read_raw(self.value, r)
        row["value"], row["ttl_timestamp"] = split_ttl(value)
        return [row]

    def _list_rows(self, row: dict[str, Any], r: ByteReader) -> list[dict[str, Any]]:
        rows = []
        for index in range(r.count("list size")):
            element, raw = _read_raw(self.element, r)
            item = row.copy()
            item["value"], item["ttl_timestamp"] = split_ttl(element)
            item["list_index"], item["value_raw"] = index, raw
            rows.append(item)
        return rows

    def _map_rows(self, row: dict[str, Any], r: ByteReader) -> list[dict[str, Any]]:
        rows = []
        for _ in range(r.count("map size", item_size=2)):
            item = row.copy()
            item["user_key"], item["user_key_raw"] = _read_raw(self.user_key, r)
            start = r.pos
            if not r.bool("map value is null"):
                item["value"], item["ttl_timestamp"] = split_ttl(self.user_value.read(r))
            item["value_raw"] = bytes(r.data[start : r.pos])
            rows.append(item)
        return rows


def _read_raw(decoder: Decoder, r: ByteReader) -> tuple[Any, bytes]:
    """The next value and its bytes."""
    start = r.pos
    value = decoder.read(r)
    return value, bytes(r.data[start : r.pos])
