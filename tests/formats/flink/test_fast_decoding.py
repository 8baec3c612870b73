"""The decoders' fast paths (``Decoder.fast``, ``KeyedStateDecoder``'s fast rows) against the exact
readers: the same rows for every live entry of every fixture, and for bytes they do not take
(non-ASCII strings, corrupt or truncated bytes) the exact reader's result or error, never another."""

from __future__ import annotations

import os

import pytest

from repair.errors import FormatError
from repair.formats.flink.handles import IncrementalKeyedHandle
from repair.formats.flink.in_rocksdb.keyed_rows import KeyedStateDecoder
from repair.formats.flink.serializers import SerializerSnapshot
from repair.formats.flink.values import FAST_MISSES, decoder_for
from repair.formats.rocksdb.lsm import LsmStats, iter_column_family, tables_by_column_family
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.resolved import open_resolved
from repair.io.snapshot import load_snapshot
from repair.readers.rocksdb import _open_tables, read_handle_meta
from tests.conftest import FIXTURES, ROCKSDB_FIXTURE_NAMES
from tests.flink_bytes import nullable, row, string_value

_B = "org.apache.flink.api.common.typeutils.base."
STRING = SerializerSnapshot(_B + "StringSerializer$StringSerializerSnapshot", 1)


def _exact_rows(decoder: KeyedStateDecoder, key: bytes, value: bytes):
    fast, decoder._fast = decoder._fast, None
    try:
        return decoder.rows(key, value)
    except FormatError as error:
        return ("error", str(error))
    finally:
        decoder._fast = fast


def _entries(name: str):
    """``(decoder, key, value)`` of every live entry of every keyed RocksDB handle of fixture ``name``."""
    storage = st.default_storage()
    root = FIXTURES / name / "checkpoints"
    layout = discover(str(root / next(iter(os.listdir(root)))), storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    for op in snapshot.metadata.operators:
        for sub in op.subtasks:
            handle = sub.managed_keyed_state
            if not isinstance(handle, IncrementalKeyedHandle):
                continue
            meta = read_handle_meta(snapshot, storage, handle)
            sources = [(e.local_path, open_resolved(storage, snapshot.resolver.resolve(e.handle)))
                       for e in handle.sst_files]
            for cf, tables in tables_by_column_family(_open_tables(sources)).items():
                state = meta.state(cf)
                decoder = KeyedStateDecoder(state, meta.key_serializer, op.max_parallelism)
                for key, value in iter_column_family(cf, tables, LsmStats()):
                    yield decoder, key, value


@pytest.mark.parametrize("name", ROCKSDB_FIXTURE_NAMES)
def test_fast_rows_equal_the_exact_rows_for_every_fixture_entry(name):
    taken = 0
    for decoder, key, value in _entries(name):
        assert decoder._fast is not None, decoder.state.name  # every fixture serializer has a fast path
        assert decoder.rows(key, value) == _exact_rows(decoder, key, value)
        try:
            decoder._fast(key, value, decoder.key_group(key))
            taken += 1
        except FAST_MISSES:
            pass  # e.g. non-ASCII strings: the exact reader decoded them above
    assert taken > 0


@pytest.mark.parametrize("name", ROCKSDB_FIXTURE_NAMES[:2])
def test_damaged_entries_give_the_exact_readers_result(name):
    """Every entry truncated, extended and with one byte flipped: ``rows()`` (fast path first) gives
    what the exact reader gives, rows or the same FormatError."""
    checked = 0
    for decoder, key, value in _entries(name):
        prefix = decoder.prefix_bytes
        variants = [(key[:-1], value), (key, value[:-1]), (key + b"\x00", value), (key, value + b"\x2c")]
        for i in range(prefix, len(key), max(1, len(key) // 4)):
            variants.append((key[:i] + bytes([key[i] ^ 0x81]) + key[i + 1:], value))
        for i in range(0, len(value), max(1, len(value) // 4)):
            variants.append((key, value[:i] + bytes([value[i] ^ 0x81]) + value[i + 1:]))
        for k, v in variants:
            if len(k) < prefix:
                continue
            try:
                got = decoder.rows(k, v)
            except FormatError as error:
                got = ("error", str(error))
            assert got == _exact_rows(decoder, k, v), (decoder.state.name, k.hex(), v.hex())
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("text", ["", "a", "x" * 127, "y" * 128, "z" * 20000, "é", "😀", None])
def test_fast_string_equals_exact_string(text):
    decoder = decoder_for(STRING)
    if text is None:
        data = b"\x00"
    else:
        units = text.encode("utf-16-be", errors="surrogatepass")
        body = bytearray()
        for i in range(0, len(units), 2):
            unit = int.from_bytes(units[i:i + 2], "big")
            while unit >= 0x80:
                body.append((unit & 0x7F) | 0x80)
                unit >>= 7
            body.append(unit)
        length, head = len(units) // 2 + 1, bytearray()
        while length >= 0x80:
            head.append((length & 0x7F) | 0x80)
            length >>= 7
        head.append(length)
        data = bytes(head + body)
    assert decoder.decode(data) == (text, len(data))
    try:
        assert decoder.fast(data, 0) == (text, len(data))
    except FAST_MISSES:
        assert text is not None and not text.isascii()  # only non-ASCII text is left to the exact reader


_R = "org.apache.flink.api.java.typeutils.runtime."
LONG = SerializerSnapshot(_B + "LongSerializer$LongSerializerSnapshot", 3)


def _row(*fields: SerializerSnapshot, kinds: bool = True) -> SerializerSnapshot:
    return SerializerSnapshot(_R + "RowSerializer$RowSerializerSnapshot", 3, nested=list(fields), attributes={"supports_row_kind": kinds})


def _nullable(inner: SerializerSnapshot, padding: int) -> SerializerSnapshot:
    return SerializerSnapshot(_R + "NullableSerializer$NullableSerializerSnapshot", 3, nested=[inner],
                              attributes={"null_padding_length": padding})


_SET = SerializerSnapshot(_B + "SetSerializerSnapshot", 3, nested=[STRING])
_COMPOSITES = [
    (_row(LONG, STRING, LONG), row("-U", [(7).to_bytes(8, "big"), None, (9).to_bytes(8, "big")])),
    (_row(LONG, STRING, LONG), row("+U", [None, string_value("héllo"), None])),  # non-ASCII: the exact reader's
    (_row(*[LONG] * 9), row("-D", [None if i % 4 else i.to_bytes(8, "big") for i in range(9)])),
    (_row(STRING, _row(LONG, kinds=False), kinds=False), row(None, [string_value("x"), row(None, [(1).to_bytes(8, "big")])])),
    (_nullable(LONG, 8), nullable((5).to_bytes(8, "big"), 8)),
    (_nullable(LONG, 8), nullable(None, 8)),
    (_row(_nullable(STRING, 0), _SET), row("+I", [nullable(None), (2).to_bytes(4, "big") + b"\x00" + string_value("a") + b"\x01"])),
]


@pytest.mark.parametrize(("snapshot", "data"), _COMPOSITES, ids=[f"{i}-{s.describe()}" for i, (s, _) in enumerate(_COMPOSITES)])
def test_fast_rows_nullables_and_sets_equal_the_exact_reader(snapshot, data):
    """Well-formed, truncated and with one byte changed (three ways): the fast path gives the exact
    reader's value and end, or leaves the bytes to it; never another value, never a value where the
    exact reader raises."""
    decoder = decoder_for(snapshot)
    assert decoder.fast is not None
    variants = [data] + [data[:n] for n in range(len(data))]
    variants += [data[:i] + bytes([data[i] ^ x]) + data[i + 1:] for i in range(len(data)) for x in (0x01, 0x80, 0xFF)]
    taken = 0
    for variant in variants:
        try:
            exact = decoder.decode(variant)
        except FormatError:
            exact = None
        try:
            fast = decoder.fast(variant, 0)
        except FAST_MISSES:
            continue
        assert fast == exact, variant.hex()
        taken += 1
    assert taken > 0
    decoder.decode_all(data)  # the well-formed bytes are one whole value
