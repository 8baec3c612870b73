"""Let RocksDB itself resolve the LSM tree of one keyed subtask (an incremental RocksDB handle).

:func:`open_rocksdb_instance` materialises the handle's files in a fresh scratch directory and opens
it read-only with rocksdict; :meth:`RocksDbInstance.entry_batches` then gives the live ``(key, value)``
pairs of a column family in key order, as RocksDB's own iterator resolves them (newest version,
tombstones applied, list-state merge operands joined by Flink's merge operator), in batches of Arrow
binary arrays. It is the fast engine
of the LSM resolution; :func:`repair.formats.rocksdb.lsm.iter_column_family` (the Python k-way merge)
is the reference and the fallback.

Materialising: every file of ``handle.shared`` and ``handle.private`` is placed under its local name
(``resolve_within``: names read from the checkpoint never leave the scratch directory). An SST that is
a whole local file is a symbolic link to the input (no copy; RocksDB opens SSTs read-only); inline
bytes, file-merging segments, files on remote stores, and the MANIFEST, CURRENT and OPTIONS files
(RocksDB may touch those) are copied. The inputs are never written.

When RocksDB cannot serve the instance as the checkpoint describes it, :class:`InstanceUnavailable`
says why, before any entry is served, and the caller falls back to the Python merge: no OPTIONS,
CURRENT or MANIFEST; an OPTIONS file whose merge operator or comparator differs from Flink's (RocksDB
would merge or order otherwise than the Python reference); column families of the MANIFEST that
OPTIONS does not describe (a read-only open would silently leave them out) or the reverse; SSTs of
``_metadata`` that the MANIFEST does not list (RocksDB would ignore them) or the reverse; RocksDB
refusing to open it. Corrupt data found while iterating (a block checksum mismatch, an unmergeable key)
raises a :class:`~repair.errors.FormatError`: an iteration never ends early silently.
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from itertools import islice
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from repair.errors import FormatError, RepairError, StorageError
from repair.formats.flink.handles import IncrementalKeyedHandle
from repair.formats.rocksdb.files import FileKind, decode_current, parse_file_name, parse_options
from repair.io import storage as st
from repair.io.layout import ResolvedFile
from repair.io.resolved import IN_FLIGHT, MAX_SMALL_FILE_BYTES, copy_files, is_remote, scratch_directory
from repair.io.snapshot import LoadedSnapshot

#: Flink's merge operator on every column family (RocksDB knows it by this name) and its delimiter,
#: which :data:`repair.formats.rocksdb.lsm.MERGE_DELIMITER` mirrors.
FLINK_MERGE_OPERATOR = "StringAppendTESTOperator"
FLINK_MERGE_DELIMITER = ","
#: The only comparator Flink uses: keys in byte order, as the Python merge orders them.
BYTEWISE_COMPARATOR = "leveldb.BytewiseComparator"
#: At most this many entries are read between two checks of a batch's byte budget.
BUDGET_CHECK_ENTRIES = 1024
#: The most a batch's buffer of keys (or of values) reserves at once (beyond, it doubles as it fills).
MAX_CAPACITY = 64 << 20

_SST_NAME = re.compile(r"[^\s/]+\.sst")
_OFFSET = re.compile(r"\boffset (\d+)")


class InstanceUnavailable(RepairError):
    """RocksDB cannot serve this instance as the checkpoint describes it (the caller falls back to the Python LSM merge)."""

    def __init__(self, reason: str, *, source: str | None = None):
        super().__init__(f"RocksDB cannot serve this instance: {reason}", source=source)
        #: What is missing or inconsistent, in one sentence.
        self.reason = reason


@dataclass(frozen=True)
class _Source:
    """Where the bytes of one file of the scratch directory come from, for messages."""

    #: The input's URI (None for inline bytes) and where the file starts in it (file-merging segments).
    uri: str | None
    start: int
    description: str


@dataclass
class MaterialisedInstance:
    """An instance's files placed in a directory ahead of opening it (:func:`materialise_instance`), e.g.
    while another instance is read: what :func:`open_rocksdb_instance` would otherwise place itself."""

    #: The directory holding the files; its owner (who made it) removes it, not the instance.
    directory: str
    #: The source of each file, by local name (None when materialising failed).
    sources: dict[str, _Source] | None
    #: What materialising raised, raised again by :func:`open_rocksdb_instance` as if it happened there.
    error: RepairError | None = None


def materialise_instance(snapshot: LoadedSnapshot, storage: st.Storage, handle: IncrementalKeyedHandle, directory: str, *,
                         stop: threading.Event | None = None, in_flight: int | None = None) -> MaterialisedInstance:
    """Place the files of ``handle`` in ``directory`` (an empty directory of the caller's) as
    :func:`open_rocksdb_instance` would, copying ``in_flight`` files at once (default
    :data:`~repair.io.resolved.IN_FLIGHT`); its errors are kept for the open. ``stop``: give the copies
    up (:class:`~repair.io.resolved.CopyStopped` is raised)."""
    try:
        return MaterialisedInstance(directory, _materialise(snapshot, storage, handle, directory, stop=stop, in_flight=in_flight))
    except RepairError as error:
        return MaterialisedInstance(directory, None, error)


@contextmanager
def open_rocksdb_instance(snapshot: LoadedSnapshot, storage: st.Storage, handle: IncrementalKeyedHandle, *,
                          materialised: MaterialisedInstance | None = None) -> Iterator["RocksDbInstance"]:
    """The instance of ``handle`` opened read-only by RocksDB in a scratch directory; the database is
    closed and the directory removed when the context exits, also on errors. ``materialised``: its
    files already placed (:func:`materialise_instance`), in a directory its owner removes.

    Raises :class:`InstanceUnavailable` when RocksDB cannot serve it as the checkpoint describes it,
    :class:`~repair.errors.StorageError` when an SST cannot be read or a local name would leave the
    directory, :class:`~repair.errors.FormatError` for a null SST handle.
    """
    with scratch_directory("rocksdb") if materialised is None else nullcontext(materialised.directory) as directory:
        try:
            if materialised is None:
                sources = _materialise(snapshot, storage, handle, directory)
            elif materialised.error is not None:
                raise materialised.error
            else:
                sources = materialised.sources
            _check_instance_files(directory, sources)
            instance = RocksDbInstance(directory, sources)
        except RepairError as error:  # errors of SST reads name the SST already
            raise error.in_source(snapshot.ref.metadata_uri) from None
        try:
            yield instance
        finally:
            instance.close()


# -- materialising ---------------------------------------------------------------------------------


def _materialise(snapshot: LoadedSnapshot, storage: st.Storage, handle: IncrementalKeyedHandle, directory: str, *,
                 stop: threading.Event | None = None, in_flight: int | None = None) -> dict[str, _Source]:
    """Place every file of ``handle`` in ``directory``; returns the source of each, by local name."""
    sources: dict[str, _Source] = {}
    copies: list[tuple[ResolvedFile, str]] = []
    for entry in [*handle.shared, *handle.private]:
        name = entry.local_path
        try:
            target = st.resolve_within(directory, name)
        except StorageError as error:  # a name that would leave the directory: never written
            raise StorageError(f"{error.message} (a local file of a RocksDB instance)", source=snapshot.ref.metadata_uri) from None
        if "/" in name:
            raise InstanceUnavailable(f"local path {name!r} is no file name of the instance directory")
        if name in sources:
            raise InstanceUnavailable(f"two files of the handle are named {name!r}")
        parsed = parse_file_name(name)
        if parsed is not None and parsed.kind == FileKind.WAL:
            raise InstanceUnavailable(f"the handle holds the WAL file {name!r}, which RocksDB would replay (a Flink checkpoint's data is its SSTs)")
        table = name.endswith(".sst")
        resolved = snapshot.resolver.resolve(entry.handle)
        if resolved is None:
            if table:
                raise FormatError("shared file handle", handle.offset, "a handle", f"null for {name}")
            raise InstanceUnavailable(f"the handle of {name} is null")
        sources[name] = _describe(resolved, name, snapshot.ref.metadata_uri)
        if not (table and _link_whole_local_file(resolved, target)):
            copies.append((resolved, target))
    # copied several at once: on an object store each file's requests wait for the network
    for (resolved, target), error in zip(copies, copy_files(storage, copies, stop=stop, in_flight=in_flight or IN_FLIGHT)):
        if error is not None:
            if target.endswith(".sst"):  # the data itself is unreadable: no engine can serve it
                raise error
            raise InstanceUnavailable(f"{os.path.basename(target)} cannot be read ({error})") from None
    return sources


def _describe(resolved: ResolvedFile, name: str, metadata_uri: str) -> _Source:
    if resolved.inline is not None:
        return _Source(None, 0, f"{name} inline in {metadata_uri}")
    if resolved.start:
        return _Source(resolved.uri, resolved.start, f"{resolved.uri} (bytes {resolved.start} to {resolved.start + resolved.size})")
    return _Source(resolved.uri, 0, resolved.uri)


def _link_whole_local_file(resolved: ResolvedFile, target: str) -> bool:
    """Make ``target`` a symbolic link to the input when it is a whole local file; False when it is
    not one or linking fails (the caller copies then)."""
    if resolved.inline is not None or resolved.start != 0 or is_remote(resolved):
        return False
    path = st.parse_location(resolved.uri).fs_path
    try:
        if os.stat(path).st_size != resolved.size:
            return False
        os.symlink(path, target)
    except OSError:
        return False
    return True


# -- checks before RocksDB opens it ------------------------------------------------------------------


def _check_instance_files(directory: str, sources: dict[str, _Source]) -> None:
    """OPTIONS, CURRENT and the MANIFEST it names are there; OPTIONS gives every column family Flink's
    merge operator and comparator."""
    options = sorted((parsed.number, name) for name in sources
                     if (parsed := parse_file_name(name)) is not None and parsed.kind == FileKind.OPTIONS)
    if not options:
        raise InstanceUnavailable("the handle holds no OPTIONS file (RocksDB needs it for the column families and Flink's merge operator)")
    if "CURRENT" not in sources:
        raise InstanceUnavailable("the handle holds no CURRENT file")
    try:
        manifest = decode_current(_read_small(directory, "CURRENT"))
    except FormatError as error:
        raise InstanceUnavailable(f"CURRENT: {error}") from None
    if manifest not in sources:
        raise InstanceUnavailable(f"CURRENT names {manifest}, which the handle does not hold")
    latest = options[-1][1]  # the one RocksDB loads
    _check_options(latest, _read_small(directory, latest))


def _read_small(directory: str, name: str) -> bytes:
    """The file (a scratch copy of ours), bounded by its size first: a read of the bound itself would
    allocate the whole bound (256 MB) for a file of a few bytes."""
    with open(os.path.join(directory, name), "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > MAX_SMALL_FILE_BYTES:
            raise InstanceUnavailable(f"{name} is larger than {MAX_SMALL_FILE_BYTES} bytes")
        return file.read(size)


def _check_options(name: str, data: bytes) -> None:
    try:
        options = parse_options(data)
    except FormatError as error:
        raise InstanceUnavailable(f"{name}: {error}") from None
    for family, values in options.cf_options.items():
        operator = values.get("merge_operator", "nullptr")
        if _merge_operator(operator) != (FLINK_MERGE_OPERATOR, FLINK_MERGE_DELIMITER):
            raise InstanceUnavailable(
                f"{name} gives column family {family!r} the merge operator {operator!r}, not Flink's "
                f"{FLINK_MERGE_OPERATOR} joining with {FLINK_MERGE_DELIMITER!r}"
            )
        comparator = values.get("comparator", BYTEWISE_COMPARATOR)
        if comparator != BYTEWISE_COMPARATOR:
            raise InstanceUnavailable(f"{name} gives column family {family!r} the comparator {comparator!r}, not {BYTEWISE_COMPARATOR}")


def _merge_operator(value: str) -> tuple[str, str | None]:
    """``(id, delimiter)`` of an OPTIONS ``merge_operator`` value: ``StringAppendTESTOperator`` (RocksDB
    6: the default delimiter ``,``) or ``{id=StringAppendTESTOperator;delimiter=,;}`` (RocksDB 7+)."""
    if not (value.startswith("{") and value.endswith("}")):
        return value, FLINK_MERGE_DELIMITER
    fields = dict(part.partition("=")[::2] for part in value[1:-1].split(";") if part)
    return fields.get("id", ""), fields.get("delimiter", FLINK_MERGE_DELIMITER)


# -- the open instance ---------------------------------------------------------------------------------


class RocksDbInstance:
    """One RocksDB instance opened read-only in its scratch directory (see :func:`open_rocksdb_instance`)."""

    def __init__(self, directory: str, sources: dict[str, _Source]):
        #: The scratch directory holding the instance (ours; deleted when the context exits).
        self.directory = directory
        self._sources = sources
        self._db = None
        self._batches_open: weakref.WeakSet = weakref.WeakSet()
        self._db, families = _open_db(directory)
        try:
            _check_live_files(self._db, {name for name in sources if name.endswith(".sst")})
            _check_raw_mode(self._db, families)
        except BaseException:
            self.close()
            raise
        #: Every column family of the database (the MANIFEST's, ``default`` included), sorted.
        self.column_families: list[str] = sorted(families)

    def entry_batches(self, name: str, *, max_rows: int, max_bytes: int) -> Iterator[tuple[pa.BinaryArray, pa.BinaryArray]]:
        """Every live (key, value) of column family ``name`` in key order, in batches of at most
        ``max_rows`` entries and about ``max_bytes`` of key and value bytes: a batch ends with the entry
        that brings it to ``max_bytes`` (as a check per entry would cut it; the budget is checked only
        every so many entries, at most :data:`BUDGET_CHECK_ENTRIES`, sized from the largest entry seen,
        and the entries read beyond the cut open the next batch). A batch is its keys and its values,
        each an Arrow binary array.

        Raises :class:`~repair.errors.FormatError` naming the column family, the entries read and
        RocksDB's message (with the SST and the offset it names) when RocksDB reports an error: the
        iteration never ends early silently.
        """
        if max_rows < 1 or max_bytes < 1:
            raise ValueError(f"max_rows and max_bytes must be positive, not {max_rows} and {max_bytes}")
        if self._db is None:
            raise ValueError(f"the RocksDB instance in {self.directory} is closed")
        if name not in self.column_families:
            raise KeyError(f"no column family {name!r} in the instance (it has {', '.join(self.column_families)})")
        batches = self._batches(name, max_rows, max_bytes)
        self._batches_open.add(batches)
        return batches

    def _batches(self, name: str, max_rows: int, max_bytes: int) -> Iterator[tuple[pa.BinaryArray, pa.BinaryArray]]:
        family = self._db.get_column_family(name)
        # items() reads a (key, value) pair in one call (a raw iterator takes four); like any RocksDB
        # iterator it also ends on errors, silently: _check_complete tells an end from an error.
        entries = family.items(read_opt=_scan_options())
        # The entries are read in chunks (at most BUDGET_CHECK_ENTRIES) and each chunk's bytes join the
        # batch's buffers at once: its bytes objects are freed before the next chunk is read, so that
        # RocksDB copies every entry into memory just freed (in the CPU's caches), not into a batch's
        # worth of fresh memory.
        keys_held, values_held = _BinaryParts(), _BinaryParts()  # of the batch being filled
        rows = size = 0  # entries and bytes of keys and values held
        served = largest = 0
        last: bytes | None = None  # the last key read
        step = 1  # entries read before the next check of the budget: about what the batch lacks
        while True:
            keys: list[bytes] = []
            values: list[bytes] = []
            add_key, add_value = keys.append, values.append
            for key, value in islice(entries, step):
                add_key(key)
                add_value(value)
            if not keys:
                break
            if last is None:
                _check_bytes(keys[0], values[0])
            last = keys[-1]
            key_lengths, value_lengths = list(map(len, keys)), list(map(len, values))
            largest = max(largest, max(key_lengths) + max(value_lengths), 1)
            begin = 0
            while begin < len(keys):
                if not rows:  # a new batch: its buffers sized for its budget, shared as in these entries
                    keys_held, values_held = _batch_buffers(key_lengths, value_lengths, begin, max_bytes, largest)
                end, taken = _cut(key_lengths, value_lengths, begin, max_rows - rows, max_bytes - size)
                keys_held.add(keys, key_lengths, begin, end)
                values_held.add(values, value_lengths, begin, end)
                rows, size, begin = rows + end - begin, size + taken, end
                if rows >= max_rows or size >= max_bytes:  # cut where a check per entry would have; the rest waits
                    yield keys_held.array(name), values_held.array(name)
                    served += rows
                    rows = size = 0
            step = max(1, min(BUDGET_CHECK_ENTRIES, max_rows - rows, (max_bytes - size) // largest))
        self._check_complete(family, name, last, served + rows)
        if rows:
            yield keys_held.array(name), values_held.array(name)

    def _check_complete(self, family, name: str, last: bytes | None, entries: int) -> None:
        """Raise unless the column family ends after ``last`` (None: it is empty), as a fresh iterator
        sees it: one that ended on an error (a corrupt block, a key it cannot merge) meets the same error
        there, which only its status() tells."""
        iterator = family.iter(_scan_options())
        if last is None:
            iterator.seek_to_first()
        else:
            iterator.seek(last)
            if iterator.valid() and iterator.key() == last:
                iterator.next()
        more = iterator.valid()
        try:
            iterator.status()
        except Exception as error:  # rocksdict raises a bare Exception with RocksDB's status message
            raise self._read_error(name, entries, error) from None
        if more:
            raise FormatError(
                f"RocksDB entries of column family {name!r}", 0, "an iteration that ends at the last key",
                f"more entries after the {entries} read", detail="RocksDB's iterator ended early without an error status",
            )

    def _read_error(self, name: str, entries: int, error: Exception) -> FormatError:
        """RocksDB's message as a FormatError naming the column family, the entries read, and the SST
        RocksDB names, with the input it is (the scratch directory means nothing to the user)."""
        message = str(error).replace(self.directory + os.sep, "")
        named = [n for n in dict.fromkeys(_SST_NAME.findall(message)) if n in self._sources]
        source = self._sources[named[0]] if len(named) == 1 else None
        detail = f"RocksDB's iterator stopped after {entries} entries"
        if source is None and named:
            detail += "; " + "; ".join(f"{n} is {self._sources[n].description}" for n in named)
        elif source is not None and source.uri is not None and source.start:
            detail += f"; {named[0]} is {source.description}"
        offset = _OFFSET.search(message)
        at = int(offset[1]) + (source.start if source is not None else 0) if offset else 0
        return FormatError(
            f"RocksDB entries of column family {name!r}", at, "entries RocksDB can read", message,
            detail=detail, source=(source.uri or source.description) if source is not None else None,
        )

    def close(self) -> None:
        """Close the open batch iterators and the database (idempotent)."""
        for batches in list(self._batches_open):
            batches.close()
        if self._db is not None:
            self._db.close()
            self._db = None


def _open_db(directory: str):
    """rocksdict's read-only database in ``directory`` with the options of its OPTIONS file, and the
    column families of its MANIFEST."""
    try:
        from rocksdict import AccessType, Options, Rdict
    except ImportError as error:  # e.g. a Spark executor without it: the Python merge needs none
        raise InstanceUnavailable(f"rocksdict is not importable here ({error})") from None

    def unavailable(what: str, error: Exception) -> InstanceUnavailable:
        return InstanceUnavailable(f"{what}: {str(error).replace(directory + os.sep, '')}")

    try:
        options, families = Options.load_latest(directory, ignore_unknown_options=True)
    except Exception as error:
        raise unavailable("RocksDB cannot load the OPTIONS file", error) from None
    # OPTIONS names the TaskManager's local directories: a WAL there would be replayed, a log written.
    options.set_wal_dir(directory)
    options.set_db_log_dir(directory)
    try:
        listed = set(Rdict.list_cf(directory, options))
    except Exception as error:
        raise unavailable("RocksDB cannot read the column families of the MANIFEST", error) from None
    described = set(families)
    if listed - described:
        raise InstanceUnavailable(f"the MANIFEST has column families the OPTIONS file does not describe: {', '.join(sorted(listed - described))}")
    if described - listed:
        raise InstanceUnavailable(f"the OPTIONS file describes column families the MANIFEST does not have: {', '.join(sorted(described - listed))}")
    try:
        db = Rdict(directory, options, column_families=families, access_type=AccessType.read_only(False))
    except Exception as error:
        raise unavailable("RocksDB cannot open the instance", error) from None
    return db, listed


def _check_live_files(db, expected: set[str]) -> None:
    """The SSTs RocksDB uses are exactly those of ``_metadata``."""
    live = {os.path.basename(file["name"]) for file in db.live_files()}
    if expected - live:
        raise InstanceUnavailable(f"the MANIFEST does not list SSTs that _metadata references: {', '.join(sorted(expected - live))}")
    if live - expected:
        raise InstanceUnavailable(f"the MANIFEST lists SSTs that _metadata does not reference: {', '.join(sorted(live - expected))}")


def _cut(key_lengths: list[int], value_lengths: list[int], begin: int, rows_left: int, bytes_left: int) -> tuple[int, int]:
    """``(end, bytes)``: the entries from ``begin`` on (given by the lengths of their keys and values)
    that go into a batch lacking ``rows_left`` entries and ``bytes_left`` bytes end before ``end`` (at
    the latest the entry that fills either), and hold ``bytes`` of keys and values."""
    end = min(len(key_lengths), begin + rows_left)
    taken = sum(islice(key_lengths, begin, end)) + sum(islice(value_lengths, begin, end))
    if taken < bytes_left:
        return end, taken
    total = 0
    for index in range(begin, end):
        total += key_lengths[index] + value_lengths[index]
        if total >= bytes_left:
            return index + 1, total
    raise AssertionError("unreachable: the entries hold at least bytes_left")


def _batch_buffers(key_lengths: list[int], value_lengths: list[int], begin: int, max_bytes: int,
                   largest: int) -> tuple["_BinaryParts", "_BinaryParts"]:
    """The buffers of a new batch starting at entry ``begin`` of a chunk: the batch's byte budget (at
    most :data:`MAX_CAPACITY`) shared between keys and values as in the chunk's entries from ``begin``
    on, each plus the largest entry (the batch's last entry may pass the budget)."""
    keys, values = sum(islice(key_lengths, begin, None)), sum(islice(value_lengths, begin, None))
    budget = min(max_bytes, MAX_CAPACITY)
    share = budget * keys // max(keys + values, 1)
    return _BinaryParts(share + largest), _BinaryParts(budget - share + largest)


class _BinaryParts:
    """The keys (or the values) of the batch being filled, chunk by chunk: each chunk's bytes joined and
    copied into one buffer at once (while RocksDB's bytes objects, and then the joined chunk, are still
    in the CPU's caches), and their lengths; :meth:`array` makes one Arrow binary array of them, on
    that buffer (no copy), the offsets summed from the lengths. ``pa.array`` of each chunk's bytes
    objects and ``concat_arrays`` of the chunks cost about 0.3-0.5 µs more per 1 KB entry: ``pa.array``
    converts and checks every element in turn, and ``concat_arrays`` copies the batch once more, from
    memory no longer in the caches (docs/benchmarks/export.md).

    The buffer is allocated at the first chunk for ``capacity`` bytes (uninitialised; the batch's share
    of its byte budget, :func:`_batch_buffers`), and doubled if it must grow: a ``bytearray`` grown
    chunk by chunk was copied again whenever ``realloc`` could not grow it in place (CPython grows it
    by an eighth at a time)."""

    def __init__(self, capacity: int = 0):
        self.capacity = capacity
        self.size = 0
        self._buffer = pa.py_buffer(b"")
        self._view = memoryview(bytearray())
        self.lengths: list[int] = [0]  # a 0, then the length of every element: the offsets are their running sums

    def add(self, items: list[bytes], lengths: list[int], begin: int, end: int) -> None:
        """Hold ``items[begin:end]``, whose lengths are ``lengths[begin:end]``."""
        if begin == 0 and end == len(items):
            joined = b"".join(items)
            self.lengths += lengths
        else:
            joined = b"".join(islice(items, begin, end))
            self.lengths += islice(lengths, begin, end)
        stop = self.size + len(joined)
        if stop > len(self._view):
            self._grow(stop)
        self._view[self.size:stop] = joined
        self.size = stop

    def _grow(self, needed: int) -> None:
        """A buffer of at least ``needed`` bytes (the capacity, or twice the size) holding what is held."""
        grown = pa.allocate_buffer(max(needed, self.capacity, 2 * len(self._view)))
        view = memoryview(grown).cast("B")
        view[:self.size] = self._view[:self.size]
        self._buffer, self._view = grown, view

    def array(self, family: str) -> pa.BinaryArray:
        try:
            offsets = pc.cumulative_sum_checked(pa.array(self.lengths, pa.int32()))
        except (pa.ArrowInvalid, OverflowError):
            raise FormatError(f"RocksDB entries of column family {family!r}", 0, "at most 2 GiB of keys, and of values, per batch",
                              "more (an entry that large)") from None
        data = self._buffer.slice(0, self.size)
        return pa.BinaryArray.from_buffers(pa.binary(), len(self.lengths) - 1, [None, offsets.buffers()[1], data])


def _scan_options():
    """Read options of a full scan: no block cache fill (every block is read once), total order
    (whatever prefix extractor OPTIONS names); block checksums are verified (the default)."""
    from rocksdict import ReadOptions

    read = ReadOptions()
    read.fill_cache(False)
    read.set_total_order_seek(True)
    return read


def _check_raw_mode(db, families) -> None:
    """rocksdict gives keys and values as bytes (raw mode), checked on the first entry found."""
    for name in sorted(families):
        iterator = db.get_column_family(name).iter(_scan_options())
        iterator.seek_to_first()
        if iterator.valid():
            _check_bytes(iterator.key(), iterator.value())
            return


def _check_bytes(key, value) -> None:
    if type(key) is not bytes or type(value) is not bytes:
        raise InstanceUnavailable(f"rocksdict gives {type(key).__name__} keys and {type(value).__name__} values, not bytes (raw mode)")
