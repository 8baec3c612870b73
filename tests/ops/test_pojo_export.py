"""Export of a POJO whose fields use Flink's primitive array serializers and Kryo-serialized collections
equals the state computed independently from the input.

``fixtures/flink-1.20-pojo`` and ``flink-2.1-pojo`` were written by real Flink running
``fixtures/extra_jobs/src/fixturejob/PojoJob.java``: ``holder``, a ValueState of a POJO with a field of
each primitive array (``boolean[]``, ``byte[]``, ``char[]``, ``short[]``, ``int[]``, ``long[]``,
``float[]``, ``double[]``: Flink's ``<Kind>PrimitiveArraySerializer``), ``ArrayList`` and ``HashMap`` fields
(a ``KryoSerializer`` of that class, which registers it first: Kryo writes it under registration id 85, in
Kryo 2.24 and Kryo 5 alike) and ``List`` and ``Map`` fields (Kryo on Flink 1.x, ListSerializer and
MapSerializer on 2.x); ``amounts``, a ValueState of ``long[]``. ``expected.json`` is
``fixtures/pojo_state_model.py``'s. Before the primitive arrays and the registered collections were read,
every value of both states stayed raw bytes.
"""

from __future__ import annotations

import json

import pytest

from repair.errors import FormatError, UnsupportedSerializerError
from repair.formats.bytes.binary import ByteReader
from repair.formats.flink import kryo, registry
from repair.formats.flink.kryo_encoder import write_node
from repair.formats.flink.serializers import SerializerSnapshot
from repair.formats.flink.value_encoders import encoder_for
from repair.formats.flink.values import decoder_for
from tests.conftest import POJO_FIXTURE_NAMES, export_of, exported_rows
from tests.encoder_testlib import round_trip_raw_columns


@pytest.fixture(scope="module", params=POJO_FIXTURE_NAMES)
def exported(request, tmp_path_factory):
    return export_of(request.param, "checkpoint", tmp_path_factory)


def _sorted_entries(entries: list) -> dict:
    return dict(sorted((key, value) for key, value in entries))


def test_the_pojo_of_primitive_arrays_and_collections_equals_the_computed_state(exported):
    _, out, expected = exported
    summary = json.loads((out / "_export.json").read_text())
    states = {s["state"]: s for op in summary["operators"] for s in op["states"]}
    for name in ("holder", "amounts"):
        assert states[name]["rows"] > 0 and states[name]["rows_with_errors"] == 0 and states[name]["raw_fallback"] == []
    found: dict[str, dict] = {}
    for row in exported_rows(out, "holder"):
        holder = json.loads(row["value"])
        for field in ("totals", "tagCounts"):  # HashMaps and Maps: entries in hash order
            holder[field] = _sorted_entries(holder[field])
        found.setdefault(row["key"], {"key": row["key"]})["holder"] = holder
    for row in exported_rows(out, "amounts"):
        assert row["error"] is None
        found.setdefault(row["key"], {"key": row["key"]})["amounts"] = row["value"]
    assert [found[key] for key in sorted(found)] == expected["by-user"]


@pytest.mark.parametrize("serializer, value, encoded", [
    (registry.BOOLEAN_ARRAY, [True, False], b"\0\0\0\x02\x01\x00"),
    (registry.CHAR_ARRAY, "a\U0001F600", b"\0\0\0\x03\x00a\xd8\x3d\xde\x00"),
    (registry.SHORT_ARRAY, [-2], b"\0\0\0\x01\xff\xfe"),
    (registry.INT_ARRAY, [1, -1], b"\0\0\0\x02\0\0\0\x01\xff\xff\xff\xff"),
    (registry.LONG_ARRAY, [], b"\0\0\0\0"),
    (registry.FLOAT_ARRAY, [0.5], b"\0\0\0\x01\x3f\x00\x00\x00"),
    (registry.DOUBLE_ARRAY, [0.1], b"\0\0\0\x01\x3f\xb9\x99\x99\x99\x99\x99\x9a"),
])
def test_primitive_arrays_decode_and_encode_as_flink_writes_them(serializer, value, encoded):
    snapshot = SerializerSnapshot(serializer.class_name, 1)
    decoder = decoder_for(snapshot)
    assert decoder.decode_all(encoded) == value
    assert decoder.fast(encoded, 0) == (value, len(encoded))
    assert encoder_for(snapshot)(value) == encoded


def test_a_primitive_array_longer_than_its_bytes_or_of_other_booleans_is_refused():
    with pytest.raises(FormatError, match="int\\[\\] length"):
        decoder_for(SerializerSnapshot(registry.INT_ARRAY.class_name, 1)).decode_all(b"\0\0\0\x02\0\0\0\x01")
    with pytest.raises(FormatError, match="boolean"):
        decoder_for(SerializerSnapshot(registry.BOOLEAN_ARRAY.class_name, 1)).decode_all(b"\0\0\0\x01\x02")


@pytest.mark.parametrize("serializer", [registry.BOOLEAN_ARRAY, registry.CHAR_ARRAY, registry.SHORT_ARRAY, registry.INT_ARRAY,
                                        registry.LONG_ARRAY, registry.FLOAT_ARRAY, registry.DOUBLE_ARRAY])
def test_a_primitive_array_length_of_two_to_the_31_allocates_nothing(serializer, monkeypatch):
    """A corrupt length prefix (2^31 - 1) is refused against the bytes left before any element is
    unpacked, on the row path and the fast path."""
    from repair.formats.flink.values import FastMiss, PrimitiveArray

    def never(*_):
        raise AssertionError("elements unpacked for a length the bytes cannot hold")

    monkeypatch.setattr(PrimitiveArray, "unpack", never)
    data = b"\x7f\xff\xff\xff" + b"\0" * 16
    decoder = decoder_for(SerializerSnapshot(serializer.class_name, 1))
    with pytest.raises(FormatError, match="length"):
        decoder.decode_all(data)
    with pytest.raises(FastMiss):
        decoder.fast(data, 0)


def test_a_registered_collection_is_read_as_by_name_and_written_back_under_its_id():
    # Kryo 5 (bytes as flink-2.1-pojo's): registration id 85 + 2, a new-object marker, a collection of
    # size + 1 with the same-type flag, its element class (String), no nulls, two Strings "a" and "b"
    data = bytes([87, 1, 0x83, 3, 0, 1, 0x82, ord("a"), 1, 0x82, ord("b")])
    node = kryo.read_node(ByteReader(data), 5, "java.util.ArrayList", kryo.Registrations(["java.util.ArrayList"], [None]))
    assert kryo.plain(node) == ["a", "b"] and node.registration == kryo.FIRST_USER_REGISTRATION
    assert write_node(node, 5) == data
    # a class registered with a serializer of its own stays raw, naming it
    with pytest.raises(UnsupportedSerializerError, match="its own serializer"):
        kryo.read_node(ByteReader(data), 5, "x", kryo.Registrations(["java.util.ArrayList"], ["my.Serializer"]))


@pytest.mark.parametrize("name", POJO_FIXTURE_NAMES)
def test_every_raw_column_flink_wrote_encodes_back_to_its_bytes(name, tmp_path):
    checked, covered = round_trip_raw_columns(name, tmp_path)
    assert checked >= 48 and "LongPrimitiveArraySerializer" in covered  # keys and amounts (a long[]) at least
