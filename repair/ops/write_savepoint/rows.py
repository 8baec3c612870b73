"""The rows of an export's Parquet parts as pieces of key/value entries, spilled per new subtask.

:func:`part_rows` reads one part (its schema checked); :class:`RowPieces` turns one state's rows into
:class:`Piece` s (key group checked or recomputed from the key, the full RocksDB key, the value bytes,
encoded from the decoded columns where the raw ones are null or stale); :class:`Spill` keeps them in a
local scratch file per new subtask (read back by :func:`iter_records` and :func:`read_pieces`);
:func:`subtask_entries` makes sorted entries of them (a list's elements joined, duplicates refused
naming both rows).
"""

from __future__ import annotations

import json
import os
import struct
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from repair.errors import FormatError, RepairError, UsageError
from repair.formats.flink.arrow import json_text
from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.full_snapshot.canonical_writer import (
    Entry,
    composite_key,
    key_group_prefix,
    list_value,
)
from repair.formats.flink.key_hash import key_group_of, key_hasher
from repair.formats.flink.keygroups import (
    key_group_prefix_bytes,
    operator_index_for_key_group,
)
from repair.formats.flink.kryo_upgrade import KryoColumn
from repair.formats.flink.row_codecs import RowColumn, row_columns, same_value
from repair.formats.flink.value_encoders import EncodeError
from repair.formats.flink.values import Timer, TtlValue, decoder_for
from repair.io import storage as st

#: The Parquet columns read, with the Arrow types an export writes them with.
RAW_COLUMNS = {"key_group": pa.int32(), "list_index": pa.int32(), "key_raw": pa.binary(),
               "namespace_raw": pa.binary(), "user_key_raw": pa.binary(), "value_raw": pa.binary()}
#: The decoded columns read where a part has them (raw bytes are encoded from them where absent or stale).
DECODED_COLUMNS = ("key", "namespace", "user_key", "value", "ttl_timestamp", "timestamp")
#: Rows read from a part at a time (as Python objects, the largest use of a task's memory: pyarrow's
#: default of 65,536 rows of 1 KB keys held 1.1 GB, 1,024 rows 0.28 GB, and ran faster).
ROWS_PER_BATCH = 1024
#: Prefix of a decoded column exported as JSON text in a row (``json:value``): no value is encoded from it.
JSON_TEXT = "json:"



def part_rows(storage: st.Storage, uri: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of one Parquet part (``where``: file and row number for errors), its schema checked.
    Decoded columns the part lacks, or holds as JSON text, are None in the rows."""
    location = st.parse_location(uri)
    try:
        parquet = pq.ParquetFile(location.fs_path, filesystem=storage.filesystem(location))
    except (OSError, pa.ArrowException) as error:
        raise FormatError("Parquet part", 0, "a Parquet file", "unreadable", detail=str(error)).in_source(uri) from None
    schema = parquet.schema_arrow
    for name, arrow in RAW_COLUMNS.items():
        index = schema.get_field_index(name)
        if index < 0 or schema.field(index).type != arrow:
            found = "no such column" if index < 0 else str(schema.field(index).type)
            raise FormatError(f"column {name!r}", 0, f"{arrow} (the export's schema)", found).in_source(uri)
    present = [name for name in DECODED_COLUMNS if schema.get_field_index(name) >= 0]
    json_text_columns = [name for name in present if (schema.field(name).metadata or {}).get(b"repair.encoding") == b"json"]
    number = 0
    for batch in parquet.iter_batches(batch_size=ROWS_PER_BATCH, columns=[*RAW_COLUMNS, *present]):
        for row in batch.to_pylist():
            for name in json_text_columns:  # not read back: kept aside, to tell an edit (refused) from the export's text
                row[JSON_TEXT + name] = row.pop(name)
            yield f"{uri}, row {number}", row
            number += 1


def kryo5_row(row: dict[str, Any], columns: list[KryoColumn], where: str) -> dict[str, Any]:
    """Upgrading to Flink 2.x: ``row`` with its Kryo ``columns`` as Flink 2.x reads them the same
    (:func:`~repair.formats.flink.kryo_upgrade.kryo5_bytes`) and their decoded columns cleared (the
    export's reading of the Kryo 2.24 bytes, e.g. a Pattern without flags, is not an edit: the raw bytes
    are written)."""
    if not columns:
        return row
    row = dict(row)
    for column in columns:
        if row.get(column.raw) is None:
            continue
        try:
            row[column.raw] = column.kryo5(row[column.raw])
        except RepairError as error:
            raise error.in_source(where) from None
        decoded = column.raw.removesuffix("_raw")
        row[decoded] = None
        row.pop(JSON_TEXT + decoded, None)
    return row


class RowPieces:
    """One state's rows as pieces of entries: key group, full RocksDB key, list index (None but for list
    state) and value bytes, the key group checked or recomputed.

    Each raw column is taken as it is unless its decoded column says otherwise: where the raw bytes are
    null, or decode to another value than the decoded column holds (changed by the user), the decoded
    value is encoded (:mod:`repair.formats.flink.value_encoders`). A null decoded column means "not
    given": the raw bytes are kept."""

    def __init__(self, info: StateMetaInfo, key_serializer, old_max: int, new_max: int):
        self.info, self.kind = info, info.kind
        self.old_max, self.new_max = old_max, new_max
        self.prefix_bytes = key_group_prefix_bytes(new_max)
        self.hasher = key_hasher(key_serializer)
        self.columns = row_columns(info, key_serializer)
        self.suffixes = self.kind != "priority-queue" and decoder_for(key_serializer).is_variable_length and decoder_for(
            info.serializer("NAMESPACE_SERIALIZER")).is_variable_length
        if self.hasher is None and old_max != new_max:
            raise UsageError(f"state {info.name!r}: the key type ({key_serializer.class_name if key_serializer else 'unknown'}) has "
                             f"a hashCode this tool cannot compute, so its key groups for max parallelism {new_max} are unknown")
        #: Raw columns written from their decoded column, per column.
        self.encoded: dict[str, int] = {}

    def _bytes(self, row: dict, name: str, where: str) -> tuple[bytes, Any, bool]:
        """The bytes of raw column ``name`` of ``row``, the value they hold (None when not decoded), and
        whether they were encoded from the decoded column."""
        column: RowColumn = self.columns[name]
        raw = row[column.raw]
        wanted = column.compose(row)
        text = row.get(JSON_TEXT + name)
        if column.encode_like is not None and wanted is None and text is not None and (raw is None or self._edited(row, name, raw)):
            return self._encode_json_text(row, name, text, raw, where)
        if raw is not None:
            if wanted is None:
                self._refuse_edited_json_text(row, name, raw, where)
                return raw, None, False
            try:
                current = column.decode(raw)
            except RepairError:
                current = _UNDECODABLE
            if same_value(current, wanted):
                return raw, current, False
            if column.encode is None:  # changed, but nothing here writes this serializer: never drop the change silently
                raise FormatError(name, 0, f"the value {column.raw} holds (no encoder for this serializer: a changed "
                                  f"{name} cannot be written; change or remove the row instead)", repr(wanted)).in_source(where)
        elif column.encode is None:
            raise FormatError(column.raw, 0, "the raw bytes of the row", "null (no encoder for its serializer)").in_source(where)
        elif wanted is None and (name == "key" or (name == "value" and self.kind != "map")):
            what = "a key" if name == "key" else "a value (remove the row to clear the state)"
            raise FormatError(name, 0, what, f"null, and {column.raw} is null too").in_source(where)
        try:
            data = column.encode(wanted)  # null: a void namespace, or a map entry's null value
        except EncodeError as error:
            raise FormatError(name, 0, "a value the state's serializer writes", repr(wanted), detail=str(error)).in_source(where) from None
        self.encoded[column.raw] = self.encoded.get(column.raw, 0) + 1
        return data, wanted, True

    def _encode_json_text(self, row: dict, name: str, text: str, raw: bytes | None, where: str) -> tuple[bytes, Any, bool]:
        """A value given as JSON text (a Kryo column), written in the Java classes of the raw bytes it
        replaces (:mod:`repair.formats.flink.kryo_encoder`)."""
        column: RowColumn = self.columns[name]
        try:
            value = json.loads(text)
        except ValueError as error:
            raise FormatError(name, 0, "JSON text", text[:80], detail=str(error)).in_source(where) from None
        try:
            data = column.encode_like(value, raw, row)  # type: ignore[misc]
        except EncodeError as error:
            raise FormatError(name, 0, "a value the state's Kryo serializer writes", text[:200], detail=str(error)).in_source(where) from None
        self.encoded[column.raw] = self.encoded.get(column.raw, 0) + 1
        return data, value, True

    def _edited(self, row: dict, name: str, raw: bytes) -> bool:
        """Whether the JSON text of column ``name`` is no longer what export wrote for ``raw`` (text of
        bytes export could not decode either is not theirs: not an edit)."""
        text = row.get(JSON_TEXT + name)
        if text is None:
            return False
        try:
            value = self.columns[name].decode(raw)
        except RepairError:
            return False
        if isinstance(value, TtlValue):  # the column holds the user value; ttl_timestamp its own column
            value = value.value
        elif isinstance(value, Timer):  # a timer's raw key holds timestamp, key and namespace: the column its key
            value = value.key
        return json_text(value) != text

    def _refuse_edited_json_text(self, row: dict, name: str, raw: bytes, where: str) -> None:
        """A column exported as JSON text is not read back (nothing here encodes from it): its raw bytes
        are written. Text that is no longer what export wrote for them is an edit that would be lost."""
        if self._edited(row, name, raw):
            raise FormatError(name, 0, f"the JSON text export wrote for {self.columns[name].raw} (JSON columns are not read "
                              f"back: change {self.columns[name].raw} itself, or remove the row)",
                              row[JSON_TEXT + name]).in_source(where)

    def _key_group(self, row: dict, key: Any, key_raw: bytes, changed: bool, where: str) -> int:
        """The row's key group for the new max parallelism: computed from the key when its hash is known
        (and, for an unchanged key and max parallelism, checked against the row's), else the row's."""
        recorded = row["key_group"]
        if self.hasher is None:
            return self._recorded_key_group(recorded, changed, where)
        if key is None:
            try:
                key = self.columns["key"].decode(key_raw)
            except RepairError as error:
                raise error.in_source(where) from None
        if isinstance(key, Timer):
            key = key.key
        try:
            raw_key = key_raw[8:] if self.kind == "priority-queue" else key_raw  # a timer's raw key starts with its timestamp
            group = key_group_of(self.hasher, key, self.new_max, raw_key)
        except (ValueError, RepairError) as error:  # a Kryo key of a class whose hashCode is user code
            if changed or self.old_max != self.new_max:
                raise FormatError("key", 0, "a key whose hashCode is known (to compute its key group)", repr(key),
                                  detail=str(error)).in_source(where) from None
            return self._recorded_key_group(recorded, changed, where)
        if self.old_max == self.new_max and not changed and recorded != group:
            raise FormatError("key_group", 0, f"{group} (the key group of key {key!r})", recorded).in_source(where)
        return group

    def _recorded_key_group(self, recorded: int | None, changed: bool, where: str) -> int:
        """The row's own key group, for a key whose hashCode is unknown: only while the key is unchanged."""
        if changed:
            raise FormatError("key", 0, "an unchanged key (its hashCode, so its key group, is unknown)", "a changed key").in_source(where)
        if recorded is None or not 0 <= recorded < self.new_max:
            raise FormatError("key_group", 0, f"a key group in 0..{self.new_max - 1}", recorded).in_source(where)
        return recorded

    def piece(self, row: dict, where: str) -> "Piece":
        key_raw, key, changed = self._bytes(row, "key", where)
        group = self._key_group(row, key, key_raw, changed, where)
        prefix = key_group_prefix(group, self.prefix_bytes)
        if self.kind == "priority-queue":
            return Piece(group, prefix + key_raw, None, b"", where)
        namespace_raw = self._bytes(row, "namespace", where)[0]
        user_key = self._bytes(row, "user_key", where)[0] if self.kind == "map" else None
        key = composite_key(prefix, key_raw, namespace_raw, user_key, suffixes=self.suffixes)
        value = self._bytes(row, "value", where)[0]
        index = row["list_index"] if self.kind == "list" else None
        if self.kind == "list" and index is None:
            raise FormatError("list_index", 0, "the element's index in its list", "null").in_source(where)
        return Piece(group, key, index, value, where)


@dataclass(frozen=True)
class Piece:
    """A row's part of an entry: a value, a timer, a map entry, or one element of a list."""

    key_group: int
    key: bytes
    list_index: int | None
    value: bytes
    where: str


def subtask_entries(pieces: Iterator[tuple[int, Piece]], states: list) -> list[Entry]:
    """The entries of the pieces given (``(state id, piece)``: a stream task gives one key group's, or a
    few key groups', of one new subtask), sorted; a list's
    elements joined in index order; a repeated key or list index is an error naming both rows.
    ``states`` (by state id) have ``state``, ``kind`` and an ``entries`` count, incremented here."""
    values: dict[tuple[int, bytes], Piece] = {}
    lists: dict[tuple[int, bytes], dict[int, Piece]] = defaultdict(dict)
    for state_id, piece in pieces:
        slot = (state_id, piece.key)
        if piece.list_index is None:
            if slot in values:
                what = "timer" if states[state_id].kind == "priority-queue" else "key"
                raise FormatError(f"{what} of state {states[state_id].state!r}", 0, f"one row per {what}",
                                  f"a duplicate of {values[slot].where}").in_source(piece.where)
            values[slot] = piece
            continue
        elements = lists[slot]
        if piece.list_index in elements:
            raise FormatError("list_index", 0, "one element per index of a list",
                              f"index {piece.list_index} again (first at {elements[piece.list_index].where})").in_source(piece.where)
        elements[piece.list_index] = piece
    entries = [Entry(p.key_group, state_id, key, p.value) for (state_id, key), p in values.items()]
    for (state_id, key), elements in lists.items():
        first = next(iter(elements.values()))
        entries.append(Entry(first.key_group, state_id, key, list_value(elements[i].value for i in sorted(elements))))
    for entry in entries:
        states[entry.state_id].entries += 1
    entries.sort()
    return entries


class Spill:
    """Pieces written to one local file per new subtask (in ``directory``), in the record format
    :func:`iter_records` and :func:`read_pieces` read back."""

    _HEAD = struct.Struct(">iHiIII")  # key group, state id, list index (-1: none), lengths of key, value, where

    def __init__(self, directory: str, max_parallelism: int, parallelism: int):
        self.max_parallelism, self.parallelism = max_parallelism, parallelism
        self.paths = [os.path.join(directory, f"subtask-{i}") for i in range(parallelism)]
        self._files = [open(path, "wb", buffering=SPILL_BUFFER) for path in self.paths]  # noqa: SIM115 - closed in __exit__
        #: Pieces written per new subtask.
        self.counts = [0] * parallelism

    def add(self, state_id: int, piece: Piece) -> None:
        index = operator_index_for_key_group(self.max_parallelism, self.parallelism, piece.key_group)
        self._files[index].write(encode_record(state_id, piece))
        self.counts[index] += 1

    def close(self) -> None:
        for file in self._files:
            file.close()

    def __enter__(self) -> "Spill":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


#: Bytes of a spilled piece's fixed head: key group, state id, list index (-1: none), lengths of key, value, where.
RECORD_HEAD = Spill._HEAD
#: Buffer of each spill and bucket file written.
SPILL_BUFFER = 1 << 16


def encode_record(state_id: int, piece: Piece) -> bytes:
    where = piece.where.encode()
    return RECORD_HEAD.pack(piece.key_group, state_id, -1 if piece.list_index is None else piece.list_index,
                            len(piece.key), len(piece.value), len(where)) + piece.key + piece.value + where


def iter_records(chunks: Iterable[bytes], source: str) -> Iterator[tuple[int, bytes]]:
    """The records of a spill file given as chunks of its bytes: ``(key group, the record's bytes)``."""
    head = RECORD_HEAD
    buffer, position = b"", 0
    for chunk in chunks:
        buffer = buffer[position:] + chunk
        position = 0
        while len(buffer) - position >= head.size:
            group, _, _, key_size, value_size, where_size = head.unpack_from(buffer, position)
            end = position + head.size + key_size + value_size + where_size
            if end > len(buffer):
                break
            yield group, buffer[position:end]
            position = end
    if position != len(buffer):
        raise FormatError("spilled piece", position, "a whole record", f"{len(buffer) - position} bytes").in_source(source)


def read_pieces(path: str) -> Iterator[tuple[int, Piece]]:
    """The pieces of a local spill file, in the order they were written: ``(state id, piece)``."""
    head = RECORD_HEAD
    with open(path, "rb", buffering=SPILL_BUFFER) as file:
        while True:
            fixed = file.read(head.size)
            if not fixed:
                break
            group, state_id, list_index, key_size, value_size, where_size = head.unpack(fixed)
            key, value, where = file.read(key_size), file.read(value_size), file.read(where_size).decode()
            yield state_id, Piece(group, key, None if list_index < 0 else list_index, value, where)


#: What raw bytes that do not decode are compared as (equal to no value).
_UNDECODABLE = object()
