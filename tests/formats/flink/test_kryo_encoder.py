"""Kryo values written back (``repair/formats/flink/kryo_encoder.py``), checked on the bytes real Flink 1.20
(Kryo 2.24) and 2.1 (Kryo 5) wrote in the Kryo fixtures (``fixtures/flink-*-kryo``, KryoJob):

* every Kryo key and value of the fixtures, read as nodes and written again, is Flink's bytes exactly,
  and so is the encoding of the JSON text export wrote for it;
* an edited value, written in the classes of the bytes it replaces, decodes to the edited value;
* ``write-savepoint`` writes a Kryo column whose JSON text was edited in the Parquet (keyed and operator
  state), and exports back the edited value (the real-Flink restore of such a savepoint is ``test_real_flink_restores_edited_kryo_values``);
* values that do not fit the classes they replace, or whose bytes are not read here, are refused.
"""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader
from repair.formats.flink import kryo
from repair.formats.flink.arrow import json_text
from repair.formats.flink.kryo_encoder import KryoEncodeError, encode_like, infer, write_node
from repair.ops.export.job import export
from repair.ops.write_savepoint import write_savepoint
from tests.conftest import FIXTURES, KRYO_FIXTURE_NAMES, fixture_info, job_root
from tests.kryo_testlib import DECODED, edit_export, edit_value, state_rows


def _generation(name: str) -> int:
    return 2 if fixture_info(FIXTURES / name)["flink_version"].startswith("1.") else 5


@pytest.fixture(scope="module", params=KRYO_FIXTURE_NAMES)
def exported(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) / "export"
    export(job_root(request.param), str(out))
    return request.param, out




def test_every_kryo_value_of_the_fixtures_is_written_back_byte_for_byte(exported):
    name, out = exported
    generation = _generation(name)
    seen = 0
    for state in DECODED:
        rows = state_rows(out, state)
        assert rows, state
        for row in rows:
            for raw, text in ((row["value_raw"], row["value"]), (row["key_raw"], row["key"])):
                node = kryo.read_node(ByteReader(raw), generation)
                assert write_node(node, generation) == raw, (state, raw.hex())
                assert json_text(kryo.plain(node)) == text
                # the export's own JSON text, written in the classes of the bytes, is those bytes
                assert encode_like(json.loads(text), raw, generation) == raw
                seen += 1
    assert seen >= 2 * 40 * len(DECODED)




def test_an_edited_kryo_value_is_written_in_the_classes_it_replaces_and_reads_back(exported):
    name, out = exported
    generation = _generation(name)
    for state in DECODED:
        for row in state_rows(out, state):
            raw, old = row["value_raw"], json.loads(row["value"])
            new = edit_value(state, old)
            data = encode_like(new, raw, generation)
            assert data != raw, state
            back = kryo.read_class_and_object(ByteReader(data), generation=generation)
            assert json_text(back) == json_text(new), (state, old, new)
            # the classes are those of the bytes replaced: the class tag of the value is unchanged
            assert data[0] == raw[0]


def test_edits_that_do_not_fit_the_classes_they_replace_are_refused(exported):
    name, out = exported
    generation = _generation(name)
    lone = {type(kryo.read_class_and_object(ByteReader(r["value_raw"]), generation=generation)): r["value_raw"]
            for r in state_rows(out, "lone")}
    last = next(r["value_raw"] for r in state_rows(out, "last") if isinstance(json.loads(r["value"]), int))
    with pytest.raises(KryoEncodeError, match="Long"):
        encode_like("not a number", last, generation)
    with pytest.raises(KryoEncodeError, match="Boolean"):
        encode_like(3, lone[bool], generation)
    with pytest.raises(KryoEncodeError, match="Character"):
        encode_like("two", lone[str], generation)
    short = next(r["value_raw"] for r in state_rows(out, "lone") if r["value_raw"][0] - 2 == kryo.SHORT)
    with pytest.raises(KryoEncodeError, match="16-bit"):
        encode_like(40000, short, generation)
    with pytest.raises(KryoEncodeError, match="UUID"):
        encode_like("not-a-uuid", state_rows(out, "uuid")[0]["value_raw"], generation)
    with pytest.raises(KryoEncodeError, match="enum"):
        encode_like({"enum": "other.Enum", "ordinal": 1}, state_rows(out, "wave")[0]["value_raw"], generation)
    with pytest.raises(KryoEncodeError, match="BigDecimal"):
        encode_like([1, "x", 2, []], state_rows(out, "numbers")[0]["value_raw"], generation)
    # a class Kryo wrote with a FieldSerializer: its fields are unknown, so nothing can be written in it
    with pytest.raises(KryoEncodeError, match="Java classes to write are unknown"):
        encode_like({"op": "add"}, state_rows(out, "note")[0]["value_raw"], generation)
    with pytest.raises(KryoEncodeError, match="generation"):
        encode_like(1, last, None)
    jdk = state_rows(out, "jdk")[0]
    value = json.loads(jdk["value"])
    with pytest.raises(KryoEncodeError, match="nanos"):  # nanos that disagree with the time's milliseconds
        encode_like([{"time": value[0]["time"], "nanos": (value[0]["nanos"] + 1_000_000) % 1_000_000_000}, *value[1:]], jdk["value_raw"], generation)
    if generation == 2:  # Flink 1.x: a Locale is Java-serialized, a Pattern has no flags
        with pytest.raises(KryoEncodeError, match="Java-serialized"):
            encode_like([*value[:5], "fr_FR", *value[6:]], jdk["value_raw"], generation)
        with pytest.raises(KryoEncodeError, match="writes no flags"):
            encode_like([*value[:4], {"pattern": "x", "flags": 2}, *value[5:]], jdk["value_raw"], generation)
    else:
        changed = encode_like([*value[:5], "fr_FR", *value[6:]], jdk["value_raw"], generation)
        assert kryo.read_class_and_object(ByteReader(changed), generation=generation)[5] == "fr_FR"


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=70),
    lambda inner: st.lists(inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_JSON_VALUES, st.sampled_from((2, 5)))
def test_a_new_value_is_written_by_its_json_type_and_reads_back(value, generation):
    data = write_node(infer(value), generation)
    back = kryo.read_class_and_object(ByteReader(data), generation=generation)
    assert json_text(back) == json_text(value)
    assert write_node(kryo.read_node(ByteReader(data), generation), generation) == data








@pytest.mark.parametrize("name", KRYO_FIXTURE_NAMES)
def test_write_savepoint_writes_edited_kryo_json_and_exports_it_back(name, tmp_path):
    export(job_root(name), str(tmp_path / "export"))
    edited = edit_export(tmp_path / "export")
    result = write_savepoint(str(tmp_path / "export"), str(tmp_path / "written"))
    encoded = {s.state: s.encoded for op in result.operators for s in op.states if s.encoded}
    assert set(encoded) == set(DECODED) and all(columns == {"value_raw": 40} for columns in encoded.values()), encoded
    export(str(tmp_path / "written"), str(tmp_path / "again"))
    for state in DECODED:
        assert {row["key"]: row["value"] for row in state_rows(tmp_path / "again", state)} == edited[state], state
        assert all(row["error"] is None for row in state_rows(tmp_path / "again", state))
    assert {row["list_index"]: row["value"] for row in state_rows(tmp_path / "again", "seen")} == edited["seen"]


@pytest.mark.parametrize("name", KRYO_FIXTURE_NAMES)
def test_an_edited_kryo_key_is_written_into_its_key_group(name, tmp_path, capsys):
    """A Kryo key of a boxed JDK type or a String has the hashCode of its Java class (read from the bytes):
    an edited key is written into the key group Flink assigns it, and verify agrees."""
    from repair.cli.app import main
    from repair.formats.flink.keygroups import assign_key_group, java_long_hash, java_string_hash

    export(job_root(name), str(tmp_path / "export"))
    part = next(p for p in sorted((tmp_path / "export").glob("operator=*/state=last/*.parquet")) if pq.read_metadata(p).num_rows)
    table = pq.read_table(part)
    rows = table.to_pylist()
    old = json.loads(rows[0]["key"])
    new = 10**15 + 7 if isinstance(old, int) else "someone new ☃"
    rows[0]["key"] = json_text(new)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), part)
    write_savepoint(str(tmp_path / "export"), str(tmp_path / "written"))
    export(str(tmp_path / "written"), str(tmp_path / "again"))
    moved = [row for row in state_rows(tmp_path / "again", "last") if row["key"] == json_text(new)]
    hashed = java_long_hash(new) if isinstance(new, int) else java_string_hash(new)
    assert len(moved) == 1 and moved[0]["key_group"] == assign_key_group(hashed, 128) and moved[0]["value"] == rows[0]["value"]
    assert main(["verify", str(tmp_path / "written"), "--json", "--workers", "1"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("name", KRYO_FIXTURE_NAMES)
def test_the_key_group_of_every_kryo_key_is_computed_from_its_bytes(name, tmp_path):
    """Every row of every keyed state (and timer) of the Kryo fixtures: the key group computed from the Kryo
    key's bytes (a Long's or a String's hashCode) is the one Flink put it in; so write-savepoint can move
    Kryo keys to another max parallelism."""
    from repair.formats.flink.key_hash import RawKeyHash, key_group_of, key_hasher
    from repair.formats.flink.serializers import KRYO_GENERATION, KRYO_SNAPSHOT, SerializerSnapshot

    hasher = key_hasher(SerializerSnapshot(KRYO_SNAPSHOT, 2, attributes={KRYO_GENERATION: _generation(name)}))
    assert isinstance(hasher, RawKeyHash)
    export(job_root(name), str(tmp_path / "export"))
    checked = 0
    for part in (tmp_path / "export").glob("operator=*/state=*/*.parquet"):
        for row in pq.read_table(part).to_pylist():
            if row["key_raw"] is None:
                continue
            raw = row["key_raw"][8:] if "timer" in part.parent.name else row["key_raw"]
            assert key_group_of(hasher, 0, 128, raw) == row["key_group"], (part, row["key"])
            checked += 1
    assert checked > 1000
    write_savepoint(str(tmp_path / "export"), str(tmp_path / "rescaled"), max_parallelism=256, parallelism=3)
    export(str(tmp_path / "rescaled"), str(tmp_path / "again"))
    assert all(key_group_of(hasher, 0, 256, r["key_raw"]) == r["key_group"] for r in state_rows(tmp_path / "again", "last"))


def test_nan_and_back_references_survive():
    # a Kryo 5 ArrayList of "b" twice (a back-reference) stays byte for byte when given as it decodes
    kryo5 = b"\x01\x00" + b"java.util.ArrayLis" + bytes([ord("t") | 0x80]) + b"\x01\x83\x03\x00\x01\x82b\x03"
    assert encode_like(["b", "b"], kryo5, 5) == kryo5
    changed = encode_like(["b", "c"], kryo5, 5)
    assert kryo.read_class_and_object(ByteReader(changed), generation=5) == ["b", "c"]
    nan = write_node(kryo.Node(kryo.DOUBLE, math.nan), 2)
    assert encode_like(math.nan, nan, 2) == nan


def test_edited_json_text_of_operator_state_without_a_kryo_encoder_is_refused_not_lost():
    from repair.formats.flink.serializers import SerializerSnapshot
    from repair.ops.write_savepoint.operator_rows import with_encoded_value
    from repair.ops.write_savepoint.rows import JSON_TEXT

    row = {JSON_TEXT + "value": json.dumps(["edited"]), "value_raw": b"\x00\x01", "value": None}
    with pytest.raises(FormatError, match="JSON columns are not read back"):
        with_encoded_value(row, SerializerSnapshot("a.NotKnownSerializerSnapshot", 1), "part-00000.parquet, row 0")


@pytest.mark.parametrize(("data", "text", "end"), [
    (b"..ab\xe3rest", "abc", 5),  # ASCII form: the last char's high bit set
    (b"..\x84abcrest", "abc", 6),  # the length form, every char one byte
    (b"..\x83h\xc3\xa9rest", "h\u00e9", 6),  # the length form, a two-byte char
])
def test_kryo_strings_are_read_in_both_forms_to_their_end(data, text, end):
    from repair.formats.flink.kryo import read_string

    reader = ByteReader(data, 2)
    assert read_string(reader) == text and reader.pos == end


def test_a_kryo_ascii_string_without_its_last_char_is_truncated_at_the_end():
    from repair.errors import TruncatedError
    from repair.formats.flink.kryo import read_string

    with pytest.raises(TruncatedError) as raised:
        read_string(ByteReader(b"..abc", 2, base=100))
    assert raised.value.offset == 105 and raised.value.field == "kryo ascii string"
