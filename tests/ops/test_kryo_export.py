"""Export of Kryo-serialized keys and values equals the state computed independently from the input.

``fixtures/flink-1.20-kryo`` (Kryo 2.24) and ``flink-2.1-kryo`` (Kryo 5) were written by real Flink
running ``fixtures/extra_jobs/src/fixturejob/KryoJob.java``: a ``keyBy`` returning ``Object`` (Long
accounts and String users), ``ValueState<Object>`` of a Long or String, of a ``java.util.ArrayList`` and of
a ``java.util.HashMap`` (written by class name; Kryo 5 writes collection headers of its own and
back-references to a String met before), boxed Float/Double/Short/Character/Byte/Boolean (whose byte
order differs between the generations), alone too, arrays of primitives, Strings and Objects, a UUID, a
TreeSet, a Java enum, the JDK classes of Flink's chill registrations, Long and map states, event-time
timers under the Kryo key and an operator ListState<Object>; ``expected.json`` is
``fixtures/kryo_state_model.py``'s. The states of classes registered with Kryo (its FieldSerializer, a
serializer of their own) and of an unregistered class stay raw, each row's error naming the class. The readers set the Kryo generation
from the checkpoint's _metadata version, so a Float, Double, Short or Character alone (not in a
collection) decodes too.
"""

from __future__ import annotations

import json
import shutil
import struct
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fixtures import kryo_state_model
from repair.cli.app import main
from repair.formats.bytes.binary import ByteReader
from repair.formats.flink import kryo
from repair.formats.flink.handles import IncrementalKeyedHandle
from repair.formats.flink.metadata import generation_of_metadata_version
from repair.formats.flink.serializers import KRYO_GENERATION, KRYO_SNAPSHOT
from repair.formats.flink.values import decoder_for
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.snapshot import load_snapshot
from repair.ops.inspect import inspect
from repair.readers.rocksdb import read_handle_meta
from tests.conftest import FIXTURES, KRYO_FIXTURE_NAMES, export_of, exported_rows, fixture_info, job_root, newest_and_savepoints


def _value(text):
    return json.loads(text) if isinstance(text, str) else text


def _key(row) -> tuple[str, str]:
    key = _value(row["key"])
    return type(key).__name__, str(key)


@pytest.fixture(scope="module", params=newest_and_savepoints(KRYO_FIXTURE_NAMES))
def exported(request, tmp_path_factory):
    return export_of(*request.param, tmp_path_factory)


def test_kryo_keys_and_values_equal_the_computed_state(exported):
    fixture_name, out, expected = exported
    summary = json.loads((out / "_export.json").read_text())
    raw_states = expected["raw_states"]
    for state in (s for op in summary["operators"] for s in op["states"]):
        if state["state"] in raw_states:
            assert state["raw_fallback"] == ["value"] and state["rows_with_errors"] == state["rows"] > 0, state
            continue
        assert state["rows_with_errors"] == 0 and state["raw_fallback"] == [], state["state"]
    for name, cls in raw_states.items():
        rows = exported_rows(out, name)
        assert rows and all(r["value"] is None and r["value_raw"] and cls in r["error"] and r["key"] is not None for r in rows), name
    found: dict[tuple[str, str], dict] = {}

    def entry(row) -> dict:
        key = _value(row["key"])
        assert type(key) in (int, str)
        return found.setdefault(_key(row), {"key": key, "timers": []})

    for row in exported_rows(out, "count"):
        entry(row)["count"] = row["value"]
    for row in exported_rows(out, "amount-by-tag"):
        entry(row).setdefault("amount-by-tag", {})[row["user_key"]] = row["value"]
    for row in exported_rows(out, "last"):
        entry(row)["last"] = _value(row["value"])
    for row in exported_rows(out, "history"):
        entry(row)["history"] = _value(row["value"])
    for row in exported_rows(out, "totals"):
        entry(row)["totals"] = dict(sorted((op, total) for op, total in _value(row["value"])))
    for state in ("scalars", "arrays", "numbers", "lone", "uuid", "tag-set", "wave", "jdk"):
        for row in exported_rows(out, state):
            entry(row)[state] = _value(row["value"])
    flink = fixture_info(FIXTURES / fixture_name)["flink_version"]
    for item in expected["by-object"]:  # Flink 1.x's chill serializer keeps no Pattern flags
        item["jdk"][4] = kryo_state_model.pattern_of(item["jdk"][4], flink)
    for row in exported_rows(out, "_timer_state/event_user-timers"):
        entry(row)["timers"].append(row["timestamp"])
    for item in found.values():
        item["timers"].sort()
        if "amount-by-tag" in item:
            item["amount-by-tag"] = dict(sorted(item["amount-by-tag"].items()))
    # the seen operator's ListState<Object> (operator state, Kryo): a Long, a String, an ArrayList
    seen = sorted((row["list_index"], _value(row["value"])) for row in exported_rows(out, "seen"))
    assert [value for _, value in seen] == expected["seen"] and all(row["error"] is None for row in exported_rows(out, "seen"))
    ordered = [found[k] for k in sorted(found, key=lambda k: (k[0], k[1]))]
    assert ordered == expected["by-object"]
    assert {type(e["key"]) for e in ordered} == {int, str} and {type(e["last"]) for e in ordered} == {int, str}
    # the lone boxed values cover each of Kryo's fixed-width and one-byte wrappers, alone (their class id first)
    lone_classes = {row["value_raw"][0] - 2 for row in exported_rows(out, "lone")}
    assert lone_classes == {kryo.FLOAT, kryo.DOUBLE, kryo.SHORT, kryo.CHAR, kryo.BOOLEAN, kryo.BYTE}


def test_inspect_names_the_kryo_key(exported):
    name, _, _ = exported
    states = {s.name: s for op in inspect(job_root(name)).operators for sub in op.subtasks for s in sub.states}
    assert states["last"].describe() == "value: Kryo java.lang.Object -> Kryo java.lang.Object"


def test_kryo_strings_and_longs_of_both_generations():
    # Kryo 2.24 writes ASCII strings of up to 63 chars in its ASCII form, Kryo 5 up to 32 only: both
    # forms occur in the fixtures (the 40-char tag); here with a non-BMP char (two 3-byte code units).
    ascii_form = b"\x03\x01" + b"t" * 39 + bytes([ord("t") | 0x80])
    utf8_form = b"\x03\x01" + bytes([0x80 | 41]) + b"t" * 40
    assert kryo.read_class_and_object(ByteReader(ascii_form)) == "t" * 40
    assert kryo.read_class_and_object(ByteReader(utf8_form)) == "t" * 40
    emoji = "😀".encode("utf-16-be")
    units = [int.from_bytes(emoji[i:i + 2], "big") for i in (0, 2)]
    cesu = b"".join(bytes([0xE0 | u >> 12, 0x80 | (u >> 6) & 0x3F, 0x80 | u & 0x3F]) for u in units)
    assert kryo.read_class_and_object(ByteReader(b"\x03\x01\x83" + cesu)) == "😀"
    assert kryo.read_class_and_object(ByteReader(b"\x03\x01\x81")) == ""
    assert kryo.read_class_and_object(ByteReader(b"\x00")) is None
    # a long of 9 bytes (the ninth holds 8 bits): -2**63, zig-zag 2**64 - 1
    assert kryo.read_class_and_object(ByteReader(b"\x09" + b"\xff" * 8 + b"\xff")) == -(2**63)


def test_kryo_bytes_not_understood_stay_raw_instead_of_failing():
    from repair.errors import UnsupportedSerializerError
    from repair.formats.flink.serializers import KRYO_SNAPSHOT, SerializerSnapshot
    from repair.formats.flink.values import decoder_for

    # a whole value with bytes after what was read: not understood, so unsupported (raw kept), not corrupt
    decoder = decoder_for(SerializerSnapshot(KRYO_SNAPSHOT, 2, attributes={"type_class": "java.lang.Object"}))
    assert decoder.decode_all(b"\x09\x0a") == 5
    with pytest.raises(UnsupportedSerializerError, match="2 bytes left after the value read"):
        decoder.decode_all(b"\x09\x0a\x09\x0a")
    # a back-reference to the first object of the graph (the list itself, then "b" twice)
    kryo5 = b"\x01\x00" + b"java.util.ArrayLis" + bytes([ord("t") | 0x80]) + b"\x01\x83\x03\x00\x01\x82b\x03"
    assert kryo.read_class_and_object(ByteReader(kryo5), "java.lang.Object") == ["b", "b"]


@pytest.mark.parametrize("name", KRYO_FIXTURE_NAMES)
def test_verify_finds_nothing(name, capsys):
    savepoint = FIXTURES / name / fixture_info(FIXTURES / name)["savepoints"]["CANONICAL"]
    for path in (job_root(name), str(savepoint)):
        assert main(["verify", path, "--json", "--workers", "1"]) == 0
        capsys.readouterr()


def test_kryo_fixed_width_values_follow_each_generations_byte_order():
    from repair.errors import UnsupportedSerializerError

    # a Float 1.25 alone: 4 bytes either way, big-endian in Kryo 2.24, little-endian in Kryo 5
    assert kryo.read_class_and_object(ByteReader(b"\x04\x3f\xa0\x00\x00"), generation=2) == 1.25
    assert kryo.read_class_and_object(ByteReader(b"\x04\x00\x00\xa0\x3f"), generation=5) == 1.25
    # without the generation both readings end at the end and differ: not guessed, kept raw
    with pytest.raises(UnsupportedSerializerError, match="read differently as Kryo 2.24 and Kryo 5"):
        kryo.read_class_and_object(ByteReader(b"\x04\x3f\xa0\x00\x00"))
    # a char[] "hé" and a null short[] by name, then a Character in Kryo 5
    chars = b"\x01\x00[" + bytes([ord("C") | 0x80]) + b"\x01\x03\x68\x00\xe9\x00"
    assert kryo.read_class_and_object(ByteReader(chars), generation=5) == "hé"
    assert kryo.read_class_and_object(ByteReader(b"\x01\x00[" + bytes([ord("S") | 0x80]) + b"\x01\x00"), generation=5) is None
    assert kryo.read_class_and_object(ByteReader(b"\x07\xe9\x00"), generation=5) == "é"


#: A lone boxed value as Kryo writes it: its class id (the default registration + 2) and its fixed-width bytes.
_LONE = {"Float": (b"\x04", "f"), "Double": (b"\x0a", "d"), "Short": (b"\x08", "h"), "Character": (b"\x07", "H")}


def _lone(kind: str, value, order: str) -> bytes:
    class_id, code = _LONE[kind]
    return class_id + struct.pack(order + code, ord(value) if kind == "Character" else value)


def test_a_lone_kryo_float_double_short_or_char_decodes_in_the_generation_of_the_checkpoints_flink(exported):
    """The readers mark the Kryo snapshots with the generation of the checkpoint's Flink (from the _metadata
    version); the values Flink wrote inside the ``scalars`` lists, each read alone with the state's own
    decoder, equal the expected values - and without the mark they are ambiguous and stay raw."""
    from repair.errors import UnsupportedSerializerError

    name, out, expected = exported
    storage = st.default_storage()
    layout = discover(job_root(name), storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    generation = 2 if fixture_info(FIXTURES / name)["flink_version"].startswith("1.") else 5
    assert generation_of_metadata_version(snapshot.metadata.version) == generation
    metas = [read_handle_meta(snapshot, storage, sub.managed_keyed_state) for op in snapshot.metadata.operators
             for sub in op.subtasks if isinstance(sub.managed_keyed_state, IncrementalKeyedHandle)]
    marked = [s for meta in metas for s in [meta.key_serializer, *(x for state in meta.states for _, x in state.serializers)]
              if s is not None and s.class_name == KRYO_SNAPSHOT]
    assert marked and all(s.attributes[KRYO_GENERATION] == generation for s in marked)
    serializer = next(meta.state("scalars") for meta in metas if meta.state("scalars")).serializer("VALUE_SERIALIZER")
    decoder = decoder_for(serializer)
    unmarked = decoder_for(replace(serializer, attributes={k: v for k, v in serializer.attributes.items() if k != KRYO_GENERATION}))
    order, other = (">", "<") if generation == 2 else ("<", ">")
    by_key = {(type(e["key"]).__name__, str(e["key"])): e["scalars"] for e in expected["by-object"] if "scalars" in e}
    rows = exported_rows(out, "scalars")
    assert rows
    for row in rows:
        values = by_key[_key(row)]
        for kind, value in zip(("Float", "Double", "Short", "Character"), values):
            lone = _lone(kind, value, order)
            assert lone in row["value_raw"], (kind, value)  # the byte order real Flink wrote
            assert decoder.decode_all(lone) == value
            if _lone(kind, value, other) != lone:  # a palindrome reads the same either way
                with pytest.raises(UnsupportedSerializerError, match="read differently"):
                    unmarked.decode_all(lone)


def _lone_float_savepoint(name: str, out, tmp_path):
    """The savepoint write-savepoint writes from the export ``out`` of fixture ``name`` with every
    ``scalars`` value's raw bytes set to a lone Float 1.25 in the byte order of the source's Flink."""
    copy = tmp_path / "export"
    shutil.copytree(out, copy)
    order = ">" if fixture_info(FIXTURES / name)["flink_version"].startswith("1.") else "<"
    parts = sorted(copy.glob("operator=*/state=scalars/*.parquet"))
    assert parts
    for part in parts:
        table = pq.read_table(part)
        rows = [{**row, "value_raw": _lone("Float", 1.25, order), "value": None} for row in table.to_pylist()]
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), part)
    assert main(["write-savepoint", str(copy), "--out", str(tmp_path / "sp")]) == 0
    return tmp_path / "sp"


def _all_lone_floats(export_dir) -> bool:
    rows = exported_rows(export_dir, "scalars")
    return bool(rows) and all(_value(row["value"]) == 1.25 and row["error"] is None for row in rows)


def test_a_lone_kryo_float_written_back_by_write_savepoint_exports_decoded(exported, tmp_path):
    """A lone Float in the byte order of the source's Flink, through write-savepoint (its _metadata of the
    same version), exports back as that Float."""
    name, out, _ = exported
    savepoint = _lone_float_savepoint(name, out, tmp_path)
    assert main(["export", str(savepoint), "--out", str(tmp_path / "back"), "--workers", "1"]) == 0
    assert _all_lone_floats(tmp_path / "back")


@pytest.mark.slow  # Spark
@pytest.mark.parametrize("name", KRYO_FIXTURE_NAMES)
def test_a_lone_kryo_float_exports_decoded_on_spark(name, local_spark, tmp_path):
    """The Kryo generation reaches Spark's executors too: the readers set it wherever they run."""
    assert main(["export", job_root(name), "--out", str(tmp_path / "source"), "--workers", "1"]) == 0
    savepoint = _lone_float_savepoint(name, tmp_path / "source", tmp_path)
    assert main(["export", str(savepoint), "--out", str(tmp_path / "back"), "--master", local_spark]) == 0
    assert _all_lone_floats(tmp_path / "back")


def test_the_generation_reaches_kryo_snapshots_nested_anywhere_in_the_meta_data():
    from repair.formats.flink.backend_meta import KeyedBackendMeta, StateMetaInfo, set_meta_kryo_generation
    from repair.formats.flink.serializers import POJO_SNAPSHOT, PojoField, SerializerSnapshot

    def kryo_snapshot():
        return SerializerSnapshot(KRYO_SNAPSHOT, 2)

    key, element, field = kryo_snapshot(), kryo_snapshot(), kryo_snapshot()
    listed = SerializerSnapshot("org.apache.flink.api.common.typeutils.base.ListSerializerSnapshot", 1, [element])
    pojo = SerializerSnapshot(POJO_SNAPSHOT, 2, pojo_fields=[PojoField("f", "C", field), PojoField("g", "C", None, "unknown")])
    state = StateMetaInfo("s", 0, serializers=[("VALUE_SERIALIZER", listed), ("USER_KEY_SERIALIZER", pojo)])
    set_meta_kryo_generation(KeyedBackendMeta(6, False, key, 1, [state]), 5)
    assert [s.attributes.get(KRYO_GENERATION) for s in (key, element, field)] == [5, 5, 5]
    assert KRYO_GENERATION not in listed.attributes and KRYO_GENERATION not in pojo.attributes


def test_kryo_registrations_name_the_class_that_stays_raw():
    from repair.errors import UnsupportedSerializerError

    registrations = kryo.Registrations(["java.lang.Object", "a.Tally", "a.Marked"], [None, None, "a.MarkedSerializer"])
    first = kryo.FIRST_USER_REGISTRATION
    with pytest.raises(UnsupportedSerializerError, match="a.Tally, written by the serializer Kryo chooses"):
        kryo.read_class_and_object(ByteReader(bytes([first + 1 + 2, 1, 0x82])), registrations=registrations)
    with pytest.raises(UnsupportedSerializerError, match="a.Marked, written by its own serializer a.MarkedSerializer"):
        kryo.read_class_and_object(ByteReader(bytes([first + 2 + 2, 1, 0x82])), registrations=registrations)
    with pytest.raises(UnsupportedSerializerError, match="not one of the snapshot's registrations"):
        kryo.read_class_and_object(ByteReader(bytes([first + 9 + 2, 1])), registrations=registrations)


@pytest.mark.parametrize("name", KRYO_FIXTURE_NAMES)
def test_an_edited_json_text_column_is_refused_not_dropped(name, tmp_path):
    """Kryo values are exported as JSON text: an unchanged export writes their raw bytes; edited text is
    written in the Java classes of the bytes it replaces (``tests/formats/flink/test_kryo_encoder.py``), and text that
    does not fit them (a number where the list held Strings) is refused, naming the part and the row,
    rather than lost. A JSON column no encoder reads back (e.g. a Scala Either) is refused the same way."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from repair import write_savepoint
    from repair.errors import FormatError
    from repair.formats.flink.row_codecs import RowColumn
    from repair.ops.write_savepoint.rows import JSON_TEXT, RowPieces

    out = tmp_path / "export"
    assert main(["export", job_root(name), "--out", str(out), "--workers", "1"]) == 0
    write_savepoint(str(out), str(tmp_path / "unchanged"))  # the export's own text is no edit
    shutil.rmtree(tmp_path / "unchanged")
    part = next(p for p in sorted(out.glob("operator=*/state=history/part-*.parquet")) if pq.read_metadata(p).num_rows)
    table = pq.read_table(part)
    rows = table.to_pylist()
    rows[0]["value"] = json.dumps(["edited", 5])
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), part)
    with pytest.raises(FormatError) as refused:
        write_savepoint(str(out), str(tmp_path / "sp"))
    assert f"{part.name}, row 0" in str(refused.value) and "a String is needed, not 5" in str(refused.value)
    assert not (tmp_path / "sp").exists()
    # the same column without a Kryo encoder: its edited text is refused as not read back
    pieces = object.__new__(RowPieces)
    pieces.columns = {"value": RowColumn("value_raw", lambda data: ["a"], None, lambda row: None)}
    with pytest.raises(FormatError, match="JSON columns are not read back"):
        pieces._refuse_edited_json_text({JSON_TEXT + "value": json.dumps(["b"])}, "value", b"raw", "part-0, row 0")
