"""Tests of repair.formats.bytes.java_serialization: the V4+ CheckpointProperties trailer and the stream reader.

Evidence: the trailers of the real fixtures, trailers written by Flink 2.1.1 for every snapshot type
(tests/data/flink_metadata/expected.txt says what Flink put in), and a general stream written by the JVM
(java_objects.bin: back references, arrays, enums, writeObject data).
"""

from __future__ import annotations

import struct

import pytest

from repair.errors import FormatError, TruncatedError
from repair.formats.bytes.java_serialization import (
    JavaArray,
    JavaBlockData,
    JavaEnum,
    JavaObject,
    decode_checkpoint_properties,
    read_java_object,
)
from repair.formats.flink.metadata import decode_metadata
from tests._flink_state_files import SAMPLES, all_metadata


def _trailer(path) -> bytes:
    return decode_metadata(path.read_bytes()).trailer


@pytest.mark.parametrize("line", (SAMPLES / "expected.txt").read_text().splitlines(), ids=lambda l: l.split()[0])
def test_trailers_written_by_flink(line):
    name, version, *expected = line.split()
    m = decode_metadata((SAMPLES / name).read_bytes())
    if int(version) < 4:
        assert m.trailer == b"" and m.properties is None and m.properties_error is None
        return
    type_name, is_savepoint, sharing, unclaimed, *fmt = expected
    p = m.properties
    assert p.checkpoint_type == type_name.replace("_", " ")
    assert p.is_savepoint == (is_savepoint == "true")
    assert p.unclaimed == (unclaimed == "true")
    if p.is_savepoint:
        # SavepointType has no sharing-strategy field (Flink answers NO_SHARING from a method).
        assert sharing == "NO_SHARING" and p.sharing_files_strategy is None
        assert p.savepoint_format == fmt[0]
        assert p.snapshot_type_class == "org.apache.flink.runtime.checkpoint.SavepointType"
        assert p.post_checkpoint_action == {"Savepoint": "NONE", "Suspend Savepoint": "SUSPEND", "Terminate Savepoint": "TERMINATE"}[p.checkpoint_type]
    else:
        assert p.sharing_files_strategy == sharing
        assert p.snapshot_type_class == "org.apache.flink.runtime.checkpoint.CheckpointType"
        assert p.discard_subsumed is True and p.discard_cancelled is False  # RETAIN_ON_CANCELLATION
    assert p.trailing_bytes == 0


def test_real_trailers_decode():
    seen = set()
    for _, path in all_metadata():
        m = decode_metadata(path.read_bytes())
        if m.version >= 4:
            seen.add((m.properties.checkpoint_type, m.properties.savepoint_format))
    assert ("Checkpoint", None) in seen
    assert {("Savepoint", "CANONICAL"), ("Savepoint", "NATIVE")} <= seen


def test_general_java_stream():
    value, consumed = read_java_object((SAMPLES / "java_objects.bin").read_bytes())
    assert consumed == (SAMPLES / "java_objects.bin").stat().st_size
    assert isinstance(value, JavaObject) and value.class_name == "java.util.ArrayList"
    assert value.get("size") == 10
    block, *items = value.class_data[0][2]
    assert isinstance(block, JavaBlockData) and block.data == struct.pack(">i", 10)
    shared, again, boxed_int, boxed_long, ints, raw, unit, null, mapping, nested = items
    assert shared == again == "shared-\u00e9"
    assert boxed_int.class_name == "java.lang.Integer" and boxed_int.get("value") == 42
    assert [c for c, _, _ in boxed_long.class_data] == ["java.lang.Number", "java.lang.Long"]
    assert boxed_long.get("value") == -(2**63)
    assert ints == JavaArray("[I", [1, -2, 3]) and raw == JavaArray("[B", b"\x07\x08\x09")
    assert unit == JavaEnum("java.util.concurrent.TimeUnit", "SECONDS")
    assert null is None
    assert mapping.class_name == "java.util.HashMap" and mapping.get("loadFactor") == 0.75
    assert mapping.class_data[0][2][1:3][0] == "key" and mapping.class_data[0][2][2].get("value") == 2.5
    # The nested list refers back to the first TimeUnit constant (TC_REFERENCE).
    assert nested.class_data[0][2][1:] == ["x", unit]
    assert nested.class_desc is value.class_desc


def test_trailer_errors_name_offsets():
    trailer = _trailer(SAMPLES / "v4_checkpoint.bin")
    with pytest.raises(FormatError) as err:
        decode_checkpoint_properties(b"\xac\xed\x00\x06" + trailer[4:], base=100)
    assert (err.value.field, err.value.offset) == ("java serialization version", 102)
    with pytest.raises(TruncatedError) as err:
        decode_checkpoint_properties(trailer[:-3], base=100)
    assert 100 < err.value.offset <= 100 + len(trailer)
    list_stream = (SAMPLES / "java_objects.bin").read_bytes()
    with pytest.raises(FormatError) as err:
        decode_checkpoint_properties(list_stream)
    assert err.value.found == "java.util.ArrayList"


def test_bad_back_reference_and_type_code():
    # TC_REFERENCE to a handle that was never assigned.
    with pytest.raises(FormatError) as err:
        read_java_object(b"\xac\xed\x00\x05\x71\x00\x7e\x00\x05")
    assert (err.value.field, err.value.offset) == ("java back reference", 5)
    with pytest.raises(FormatError) as err:
        read_java_object(b"\xac\xed\x00\x05\x42")
    assert (err.value.field, err.value.offset) == ("java type code", 4)


def test_deep_nesting_is_bounded():
    # An array of arrays of ... (each level a new TC_ARRAY with a class descriptor reference).
    head = b"\xac\xed\x00\x05"
    desc = b"\x72" + struct.pack(">H", 3) + b"[[I" + bytes(8) + b"\x02\x00\x00\x78\x70"
    level = b"\x75" + desc + struct.pack(">i", 1)
    data = head + level + (b"\x75\x71\x00\x7e\x00\x00" + struct.pack(">i", 1)) * 200
    with pytest.raises(FormatError) as err:
        read_java_object(data)
    assert "nested" in str(err.value)


def test_rare_protocol_parts_written_by_the_jvm():
    data = (SAMPLES / "java_objects_rare.bin").read_bytes()
    value, consumed = read_java_object(data)
    assert consumed == len(data)
    prims, ext, proxy, cls, long_text = value.class_data[0][2][1:]
    assert {name: prims.get(name) for name in "bcdfilsz"} == {
        "b": -5, "c": "\u00e9", "d": -0.25, "f": 1.5, "i": 70000, "l": 1 << 40, "s": -300, "z": True,
    }
    assert prims.get("text") == "prims"
    # Externalizable in block-data mode: the object's bytes are kept as block data.
    assert ext.class_desc.flags & 0x04 and ext.class_data[0][2] == [JavaBlockData(struct.pack(">i", 12345) + b"\x00\x08external")]
    assert proxy.class_desc.proxy_interfaces == ["java.lang.Runnable", "java.io.Serializable"]
    assert proxy.class_desc.super_desc.name == "java.lang.reflect.Proxy"
    assert proxy.get("h").class_name == "GenerateMetadataSamples$Handler"
    assert cls.class_desc.name == "java.lang.String"
    assert long_text == "L" * 70000
