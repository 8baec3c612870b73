"""repair.formats.flink.value_encoders and row_codecs: encode(decode(b)) == b for every raw column of
every row real Flink wrote in the fixtures (keys, namespaces, map keys, values, list elements, map
values, TTL values, timers), the decoded Parquet columns give the same values as the raw bytes, and
decode(encode(x)) == x for generated values."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from repair.formats.flink.arrow import json_text
from repair.formats.flink.handles import IncrementalKeyedHandle, KeyGroupsHandle
from repair.formats.flink.row_codecs import row_columns, same_value
from repair.formats.flink.serializers import SerializerSnapshot
from repair.formats.flink.value_encoders import EncodeError, encode_string_value, encoder_for
from repair.formats.flink.values import decoder_for
from repair.io import storage as storage_module
from repair.io.layout import discover
from repair.io.snapshot import load_snapshot
from repair.ops.export.job import export
from repair.readers.full_snapshot import read_key_groups_meta
from repair.readers.rocksdb import read_handle_meta
from tests import damage
from tests.conftest import FIXTURES

_B = "org.apache.flink.api.common.typeutils.base."


def _snapshot(kind: str) -> SerializerSnapshot:
    return SerializerSnapshot(_B + f"{kind}Serializer${kind}SerializerSnapshot", 1)


def _metas(checkpoint: Path) -> dict:
    """Decoded keyed meta data of every keyed operator of ``checkpoint``'s newest snapshot."""
    storage = storage_module.default_storage()
    layout = discover(str(checkpoint), storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    metas = {}
    for op in snapshot.metadata.operators:
        handle = next((s.managed_keyed_state for s in op.subtasks if s.managed_keyed_state is not None), None)
        if isinstance(handle, IncrementalKeyedHandle):
            metas[op.operator_id] = read_handle_meta(snapshot, storage, handle)
        elif isinstance(handle, KeyGroupsHandle):
            metas[op.operator_id] = read_key_groups_meta(snapshot, storage, handle)
    return metas


@pytest.mark.parametrize("name", ["flink-1.20-default", "flink-2.1-p3-external-xxh3-zstd", "flink-1.20-heap"])
def test_every_raw_column_flink_wrote_encodes_back_to_its_bytes(name, tmp_path):
    checked, covered = round_trip_raw_columns(name, tmp_path)
    assert checked > 1000
    assert {"StringSerializer", "LongSerializer", "IntSerializer", "ShortSerializer", "ByteSerializer", "BooleanSerializer",
            "DoubleSerializer", "FloatSerializer", "CharSerializer", "BytePrimitiveArraySerializer", "TtlStateFactory",
            "TimerSerializerSnapshot", "TimeWindow"} <= covered


def round_trip_raw_columns(name: str, tmp_path: Path) -> tuple[int, set[str]]:
    """Export the fixture ``name``'s newest checkpoint and hold ``encode(decode(b)) == b`` for every raw
    column with an encoder; returns how many values were checked and the serializer classes (short
    names) of the states that have encoders."""
    root = damage.checkpoint_root(FIXTURES / name)
    export(str(root), str(tmp_path / "export"))
    metas = _metas(root)
    manifest = json.loads((tmp_path / "export" / "_export.json").read_text())
    covered: set[str] = set()
    checked = 0
    for op in manifest["operators"]:
        meta = metas.get(op["operator_id"])
        for state in op["states"]:
            if meta is None or meta.state(state["state"]) is None:
                continue
            info = meta.state(state["state"])
            columns = row_columns(info, meta.key_serializer)
            for row in pq.read_table(tmp_path / "export" / state["path"]).to_pylist():
                for decoded_name, column in columns.items():
                    raw = row[column.raw]
                    if column.encode is None or raw is None:
                        continue
                    value = column.decode(raw)
                    assert column.encode(value) == raw, (state["state"], decoded_name, raw.hex())
                    assert same_value(column.decode(column.encode(value)), value)
                    wanted = column.compose(row)
                    if state["columns"][decoded_name]["type"] == "json":  # JSON text of the same value
                        assert wanted == json_text(value), (state["state"], decoded_name, wanted, value)
                    elif wanted is not None:  # the Parquet column holds the same value as the bytes
                        assert same_value(wanted, value), (state["state"], decoded_name, wanted, value)
                    checked += 1
            for key in ("KEY_SERIALIZER", "NAMESPACE_SERIALIZER", "VALUE_SERIALIZER"):
                snapshot = info.serializer(key) or (meta.key_serializer if key == "KEY_SERIALIZER" else None)
                stack = [snapshot] if snapshot else []
                while stack:
                    s = stack.pop()
                    if encoder_for(s) is not None:
                        covered.add(s.class_name.rpartition(".")[2].partition("$")[0])
                    stack.extend(s.nested)
    return checked, covered


@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=()), max_size=50))
def test_strings_round_trip(text):
    decoder = decoder_for(_snapshot("String"))
    assert decoder.decode_all(encode_string_value(text)) == text


@pytest.mark.parametrize("kind, strategy", [
    ("Long", st.integers(-(2**63), 2**63 - 1)), ("Int", st.integers(-(2**31), 2**31 - 1)),
    ("Short", st.integers(-(2**15), 2**15 - 1)), ("Byte", st.integers(-128, 127)), ("Boolean", st.booleans()),
    ("Double", st.floats(allow_nan=True)), ("Float", st.floats(width=32, allow_nan=True)),
    ("Char", st.characters(max_codepoint=0xFFFF, blacklist_categories=())),
])
def test_simple_values_round_trip(kind, strategy):
    encode, decoder = encoder_for(_snapshot(kind)), decoder_for(_snapshot(kind))

    @given(strategy)
    def check(value):
        assert same_value(decoder.decode_all(encode(value)), value)

    check()


@pytest.mark.parametrize("kind, value", [
    ("Long", 2**63), ("Int", 2**31), ("Short", 40000), ("Byte", 128), ("Long", "1"), ("Int", True), ("Long", None),
    ("Float", 1e39), ("Float", 0.1), ("Char", "ab"), ("Boolean", 1),
])
def test_values_the_serializer_cannot_write_are_refused(kind, value):
    with pytest.raises(EncodeError):
        encoder_for(_snapshot(kind))(value)


def test_null_strings_and_special_floats():
    assert encode_string_value(None) == b"\x00"
    assert decoder_for(_snapshot("String")).decode_all(b"\x00") is None
    nan = encoder_for(_snapshot("Double"))(float("nan"))
    assert math.isnan(struct.unpack(">d", nan)[0])
    assert encoder_for(_snapshot("Float"))(float("-inf")) == struct.pack(">f", float("-inf"))
