"""Write one state of one subtask as a Parquet part, streaming, where the task runs.

:func:`write_state_part` consumes a :class:`~repair.readers.rocksdb.StateStream` (an iterator of row
dicts) in record batches of at most :data:`BATCH_ROWS` rows or about :data:`BATCH_BYTES` bytes of raw
state, converts each batch to the Arrow schema decided from the serializer snapshots
(:func:`part_schema`) and writes it as one Parquet row group; the file is uploaded (or written and
renamed) as it grows, through :meth:`repair.io.storage.Storage.write_atomic`. Memory is bounded by one
batch, whatever the size of the state. Only counts come back (:class:`PartStats`).

A value the column's type cannot hold exactly (see :func:`repair.formats.flink.arrow.to_arrow`) is
written as null, with the reason in the row's ``error`` and its bytes in the ``*_raw`` column.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from repair.errors import FormatError
from repair.formats.flink.arrow import DECODED_COLUMNS, StateColumns, column_converter, to_arrow
from repair.formats.flink.in_rocksdb.keyed_columns import FIXED_COLUMN_TYPES, ColumnarMiss, ColumnarStateDecoder
from repair.formats.flink.row_codecs import RAW_OF
from repair.formats.flink.value_encoders import writes_serializer
from repair.formats.rocksdb.lsm import LsmStats
from repair.io import storage as st
from repair.readers.rocksdb import StateStream, decode_batch_rows

#: The columns of every part, in this order.
COLUMNS = (
    "key_group", "key", "namespace", "user_key", "value", "list_index", "ttl_timestamp", "timestamp",
    "key_raw", "namespace_raw", "user_key_raw", "value_raw", "error",
)
#: The columns whose type no serializer decides.
FIXED_TYPES = FIXED_COLUMN_TYPES
_FIXED = [name for name in COLUMNS if name in FIXED_TYPES and name != "error"]
#: Rows per record batch (and Parquet row group).
BATCH_ROWS = 65536
#: Raw bytes per record batch, so that large values keep the batch small.
BATCH_BYTES = 64 << 20
#: Parquet compression codecs ``--compression`` offers, and the default: Snappy, Spark's default, is
#: about twice as fast as zstd here and makes files about a quarter larger (docs/benchmarks/export.md).
COMPRESSIONS = ("snappy", "zstd", "lz4", "none")
COMPRESSION = "snappy"
#: What ``--columns`` keeps: ``both`` (decoded columns beside their raw bytes, the default), ``decoded``
#: (a raw cell only where its decoded cell is null: decoding failed, the value is not representable; and
#: whole raw columns that write-savepoint could not encode back: JSON text, serializers without an
#: encoder) or ``raw`` (the decoded columns all null: nothing decoded is written).
COLUMN_CHOICES = ("both", "decoded", "raw")
COLUMNS_KEPT = "both"
#: Columns worth a Parquet dictionary: few distinct values in a row group. Dictionaries for the others
#: (mostly unique keys and values) cost about 0.2 µs per row and save little.
DICTIONARY_COLUMNS = ["key_group", "list_index", "error"]
#: Columns with min/max statistics (for predicate pushdown): not the raw bytes.
STATISTICS_COLUMNS = [name for name in COLUMNS if not name.endswith("_raw")]
#: Parquet data page size. Pages of 128 KiB instead of pyarrow's 1 MiB keep the codec's working set in
#: the CPU cache: encoding and compressing took 3-8% less time per row for entries of 200 bytes and more
#: (the same for tiny ones), for files under 1% larger (docs/benchmarks/parquet-pages.md).
DATA_PAGE_SIZE = 128 << 10
#: One getter per column of the row dicts (a column of a batch is ``list(map(getter, rows))``).
_GET = {name: operator.itemgetter(name) for name in COLUMNS}
_ERROR = _GET["error"]


def part_schema(columns: StateColumns) -> pa.Schema:
    """The Arrow schema of a state's parts; decoded columns carry their serializer in field metadata."""
    fields = []
    for name in COLUMNS:
        if name in DECODED_COLUMNS:
            decision = columns.columns[name]
            meta = {"flink.type": decision.describes, "flink.serializer": decision.serializer or "",
                    "repair.encoding": "json" if decision.is_json else "typed"}
            fields.append(pa.field(name, decision.storage_type, metadata=meta))
        else:
            fields.append(pa.field(name, FIXED_TYPES[name]))
    return pa.schema(fields)


@dataclass(kw_only=True)
class StateCounts:
    """What was written of a state: the counts of one part (:class:`PartStats`), and of a whole state
    (:class:`~repair.ops.export.job.ExportedState`), which adds up its parts' with :meth:`add_counts`."""

    #: Rows whose ``error`` is set (undecodable serializer, or a value not representable exactly).
    rows_with_errors: int = 0
    #: Decoded columns left null in some row while its raw bytes are there (see ``error``).
    raw_fallback: list[str] = field(default_factory=list)
    #: Decoded values the column's Arrow type cannot hold exactly, per column (written as null).
    not_representable: dict[str, int] = field(default_factory=dict)
    #: Live keys dropped because they are outside their subtask's key-group range (rescaling leftovers).
    outside_key_groups: int = 0
    #: How the state's RocksDB entries were accounted for (None for sources that are no LSM tree;
    #: counts the engine does not tell are None).
    lsm: dict[str, int | None] | None = None
    #: Read from changelog subtasks: the logged changes applied (``changes``, the ``scopes`` they
    #: touched, and ``outside_key_groups``: changes of other subtasks' key groups, not applied); None
    #: for every other source.
    changelog: dict[str, int] | None = None
    bytes: int = 0
    #: Batches of RocksDB entries decoded column-wise / row by row (see :mod:`repair.formats.flink.in_rocksdb.keyed_columns`).
    columnar_batches: int = 0
    row_batches: int = 0

    def add_counts(self, part: StateCounts) -> None:
        self.rows_with_errors += part.rows_with_errors
        self.raw_fallback = sorted(set(self.raw_fallback) | set(part.raw_fallback))
        for name, count in part.not_representable.items():
            self.not_representable[name] = self.not_representable.get(name, 0) + count
        self.outside_key_groups += part.outside_key_groups
        if part.lsm is not None:
            self.lsm = _add_lsm_counts(self.lsm, part.lsm)
        if part.changelog is not None:
            self.changelog = {name: (self.changelog or {}).get(name, 0) + count for name, count in part.changelog.items()}
        self.bytes += part.bytes
        self.columnar_batches += part.columnar_batches
        self.row_batches += part.row_batches


def _add_lsm_counts(total: dict[str, int | None] | None, part: dict[str, int | None]) -> dict[str, int | None]:
    """Counts summed key by key; a count one side does not know (None) is unknown in the sum."""
    if total is None:
        return dict(part)
    return {name: None if total.get(name) is None or part.get(name) is None else total[name] + part[name]
            for name in LsmStats.__dataclass_fields__}


@dataclass
class PartStats(StateCounts):
    """What one task wrote for one state: its file, its rows, and the counts."""

    file: str
    rows: int = 0


class _BatchWriter:
    """Converts batches of row dicts to record batches of one state's schema, and counts."""

    def __init__(self, columns: StateColumns, stats: PartStats, kept: str = COLUMNS_KEPT):
        self.schema = part_schema(columns)
        self.stats = stats
        self.kept = kept
        #: ``decoded``: the raw columns written only where their decoded cell is null; the others keep
        #: every raw cell, as write-savepoint could not make the bytes again from a JSON column or a
        #: serializer it cannot write (a timer's key_raw is the whole timer: its namespace too).
        encodable = {name: not decision.is_json and writes_serializer(decision.serializer) for name, decision in columns.columns.items()}
        encodable["key"] = encodable["key"] and (encodable["namespace"] or columns.columns["namespace"].serializer is None)
        self._thinned = [(name, RAW_OF[name]) for name in DECODED_COLUMNS if encodable[name]]
        self._decoded = [(name, columns.columns[name].storage_type, column_converter(columns.columns[name].arrow))
                         for name in DECODED_COLUMNS]
        self._fallback_candidates = [name for name in DECODED_COLUMNS if not pa.types.is_null(columns.columns[name].storage_type)]
        self._fallback: set[str] = set()

    def record_batch(self, rows: list[dict[str, Any]]) -> pa.RecordBatch:
        errors = list(map(_ERROR, rows))
        arrays: dict[str, pa.Array] = {}
        converted: dict[str, tuple[list, dict[int, str]]] = {}  # per decoded column: values, unrepresentable
        for name, arrow, convert in self._decoded:
            values = list(map(_GET[name], rows))
            array, bad = to_arrow(values, arrow, convert)
            for i, reason in sorted(bad.items()):
                text = f"{name}: {reason}"
                errors[i] = f"{errors[i]}; {text}" if errors[i] else text
            if bad:
                self.stats.not_representable[name] = self.stats.not_representable.get(name, 0) + len(bad)
            arrays[name] = array
            converted[name] = values, bad
        for name in _FIXED:
            arrays[name] = pa.array(list(map(_GET[name], rows)), type=FIXED_TYPES[name])
        arrays["error"] = pa.array(errors, type=pa.string())
        with_errors = [i for i, e in enumerate(errors) if e is not None] if errors.count(None) != len(errors) else []
        self.stats.rows_with_errors += len(with_errors)
        for name in self._fallback_candidates:  # null in the output although its bytes are there
            values, bad = converted[name]
            if name not in self._fallback and any((values[i] is None or i in bad) and rows[i][name + "_raw"] for i in with_errors):
                self._fallback.add(name)
        self.stats.rows += len(rows)
        return self._batch(arrays)

    def columnar_batch(self, columns: dict[str, pa.Array]) -> pa.RecordBatch:
        """A record batch of columns decoded column-wise (no errors: those batches go row by row)."""
        batch = self._batch(columns)
        self.stats.rows += batch.num_rows
        return batch

    def _batch(self, arrays: dict[str, pa.Array]) -> pa.RecordBatch:
        """The record batch of the columns kept (``--columns``)."""
        if self.kept == "raw":
            arrays = dict(arrays)
            for name in DECODED_COLUMNS:
                arrays[name] = pa.nulls(len(arrays["key_raw"]), self.schema.field(name).type)
        elif self.kept == "decoded":
            arrays = dict(arrays)
            for name, raw in self._thinned:
                decoded = arrays[name]
                if decoded.null_count == 0:
                    arrays[raw] = pa.nulls(len(decoded), pa.binary())
                elif decoded.null_count < len(decoded):
                    arrays[raw] = pc.if_else(pc.is_null(decoded), arrays[raw], pa.scalar(None, pa.binary()))
        return pa.record_batch([arrays[name] for name in COLUMNS], schema=self.schema)

    def finish(self) -> None:
        self.stats.raw_fallback = sorted(self._fallback)


def _batches(rows: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    size = 0
    for row in rows:
        batch.append(row)
        # every raw column counts: keys can be as large as values (1 KB user names are not rare), and the
        # decoded copies roughly double it
        size += (len(row["key_raw"] or b"") + len(row["namespace_raw"] or b"") + len(row["user_key_raw"] or b"")
                 + len(row["value_raw"] or b""))
        if len(batch) >= BATCH_ROWS or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _record_batches(writer: _BatchWriter, stream: StateStream | None, columns: StateColumns) -> Iterator[pa.RecordBatch]:
    if stream is None:
        return
    if stream.entries is None:
        for rows in _batches(stream.rows):
            yield writer.record_batch(rows)
        return
    entries = stream.entries
    try:
        columnar: ColumnarStateDecoder | None = ColumnarStateDecoder(stream.meta, entries.key_serializer, entries.max_parallelism, columns)
    except ColumnarMiss:
        columnar = None
    for keys, values in entries.batches:
        if columnar is not None:
            try:
                decoded, outside = columnar.decode(keys, values, entries.key_groups.start, entries.key_groups.end)
            except ColumnarMiss:
                pass
            else:
                stream.outside_key_groups += outside
                writer.stats.columnar_batches += 1
                yield writer.columnar_batch(decoded)
                continue
        writer.stats.row_batches += 1
        for rows in _batches(decode_batch_rows(stream, keys, values)):
            yield writer.record_batch(rows)


def parquet_writer_options(compression: str, *, data_page_size: int = DATA_PAGE_SIZE) -> dict[str, Any]:
    """The ``pyarrow.parquet.ParquetWriter`` options of every part (the benchmarks vary the page size)."""
    return {"compression": compression, "use_dictionary": DICTIONARY_COLUMNS, "write_statistics": STATISTICS_COLUMNS,
            "data_page_size": data_page_size}


def _parquet_writing(writer: _BatchWriter, batches: Iterable[pa.RecordBatch], compression: str) -> Callable[[pa.NativeFile], None]:
    """A function writing ``batches`` as Parquet into the output stream it is given (pyarrow writes the
    pages straight into it: on local disks a native file, with no copy of every page through Python)."""
    def write(sink: pa.NativeFile) -> None:
        with pq.ParquetWriter(sink, writer.schema, **parquet_writer_options(compression)) as parquet:
            for batch in batches:
                parquet.write_batch(batch)
        writer.finish()

    return write


def write_state_part(storage: st.Storage, staging_uri: str, file: str, columns: StateColumns,
                     stream: StateStream | None, *, compression: str = COMPRESSION, kept: str = COLUMNS_KEPT) -> PartStats:
    """Write ``stream``'s rows (None: no rows) as ``staging_uri/file``, with the columns ``kept``
    (:data:`COLUMN_CHOICES`); replaces a file a failed attempt of the same task left there."""
    stats = PartStats(file)
    writer = _BatchWriter(columns, stats, kept)
    write = _parquet_writing(writer, _record_batches(writer, stream, columns), compression)
    stats.bytes = storage.write_atomic(st.resolve_within(staging_uri, file), write, overwrite=True, inside=staging_uri)
    if stream is not None:
        stats.outside_key_groups = stream.outside_key_groups
        stats.lsm = stream.lsm_json()
        stats.changelog = stream.changelog
    return stats


def check_kind(stream: StateStream, kind: str) -> None:
    """A stream whose kind is not the planned one (its subtask registered the state differently)."""
    if stream.kind != kind:
        raise FormatError(f"state {stream.name!r}", 0, f"a {kind} state as in the other subtasks", f"a {stream.kind} state")
