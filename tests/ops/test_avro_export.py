"""Export of Avro state (``flink-avro``'s ``AvroSerializer``) equals the state computed independently from the input.

``fixtures/flink-1.20-avro`` and ``flink-2.1-avro`` were written by real Flink running
``fixtures/extra_jobs/avro/fixturejob/AvroJob.java`` (flink-avro and Avro 1.11.4 from Maven Central):
keyed by user, a ValueState of a ``GenericRecord`` with every Avro type and the logical types
timestamp-millis, date and decimal, and a specific record (``fixturejob.AccountEvent``) as ValueState
and ListState; ``expected.json`` is ``fixtures/avro_state_model.py``'s. The values are decoded with the
writer schema in the serializer snapshot, from the bytes of Flink's own ``DataOutputEncoder`` (not Avro's
binary encoding).
"""

from __future__ import annotations

import json

import pytest

from repair.errors import UnsupportedSerializerError
from repair.formats.flink import avro
from repair.formats.flink.serializers import SerializerSnapshot
from repair.formats.flink.value_encoders import EncodeError, encoder_for
from repair.formats.flink.values import decoder_for
from repair.ops.inspect import inspect
from tests.conftest import (
    AVRO_FIXTURE_NAMES,
    FIXTURES,
    export_of,
    exported_rows,
    fixture_info,
    job_root,
    newest_and_savepoints,
    verify_exit_codes,
    written_back_with_edits,
)


@pytest.fixture(scope="module", params=newest_and_savepoints(AVRO_FIXTURE_NAMES))
def exported(request, tmp_path_factory):
    return export_of(*request.param, tmp_path_factory)


def _as_expected(stats: dict) -> dict:
    """A decoded ``UserStats`` as ``expected.json`` writes it: bytes as hex, the map as an object."""
    return {**stats, "tagBytes": stats["tagBytes"].hex(), "digest": stats["digest"].hex(),
            "amountByTag": dict(sorted(stats["amountByTag"]))}


def test_avro_values_equal_the_computed_state(exported):
    _, out, expected = exported
    summary = json.loads((out / "_export.json").read_text())
    for state in (s for op in summary["operators"] for s in op["states"]):
        assert state["rows_with_errors"] == 0 and state["raw_fallback"] == [], state["state"]
        assert all(c["type"] != "json" for c in state["columns"].values()), state  # Parquet structs, not JSON
    found: dict[str, dict] = {}
    for row in exported_rows(out, "stats"):
        found.setdefault(row["key"], {})["stats"] = _as_expected(row["value"])
    for row in exported_rows(out, "last-event"):
        found.setdefault(row["key"], {})["last-event"] = row["value"]
    for row in exported_rows(out, "events"):
        found.setdefault(row["key"], {}).setdefault("events", []).append(row["value"])
    assert dict(sorted(found.items())) == expected["by-user"]
    # both branches of the null unions occur
    assert {e["stats"]["lastTag"] is None for e in found.values()} == {True, False}
    assert {e["tag"] is None for user in found.values() for e in user["events"]} == {True, False}


def test_inspect_describes_the_avro_records(exported):
    name, _, _ = exported
    states = {s.name: s for op in inspect(job_root(name)).operators for sub in op.subtasks for s in sub.states}
    assert states["last-event"].describe() == (
        "value: String -> Avro SpecificRecord fixturejob.AccountEvent{account: long, amount: long, tag: null|string, wave: int}")
    assert states["stats"].describe().startswith(
        "value: String -> Avro GenericRecord fixturejob.avro.UserStats{user: string, count: long, total: long, lastTag: null|string, "
        "tags: array<string>, amountByTag: map<long>, lastOp: enum fixturejob.avro.Op, wave: int, ... (16 fields)}")


@pytest.mark.parametrize("name", AVRO_FIXTURE_NAMES)
def test_every_avro_value_flink_wrote_encodes_back_to_its_bytes(name, tmp_path):
    from tests.encoder_testlib import round_trip_raw_columns

    checked, covered = round_trip_raw_columns(name, tmp_path)
    assert checked > 500 and "AvroSerializerSnapshot" in covered


def test_written_back_with_changed_avro_values(tmp_path):
    """write-savepoint encodes changed generic and specific records (a union to null, a map entry added,
    a decimal, an enum, bytes) from the Parquet; the savepoint verifies clean and exports them as edited."""
    changed = written_back_with_edits(AVRO_FIXTURE_NAMES[0], tmp_path, {
        "stats": lambda v: {**v, "count": v["count"] + 1000, "lastTag": None, "amountByTag": [*v["amountByTag"], ("new", 1)],
                            "balance": "-0.05", "lastOp": "untag", "tagBytes": b"\x00\xff"},
        "last-event": lambda v: {**v, "tag": "edited", "wave": -1},
    })
    assert len(changed) == 8


@pytest.mark.slow
@pytest.mark.parametrize("name", AVRO_FIXTURE_NAMES)
def test_real_flink_restores_the_written_savepoint_with_the_changed_avro_values(name, tmp_path):
    """The savepoint write-savepoint made of the edited export is restored by real Flink running the Avro
    job (restore mode: each user's state as Flink's AvroSerializer reads it): it equals the export."""
    from fixtures.flink_harness import JobSettings, ensure_flink, no_restarts, run_fixture_job
    from fixtures.state_model import Record, write_records

    written_back_with_edits(name, tmp_path, {
        "stats": lambda v: {**v, "count": v["count"] + 1000, "lastTag": None, "amountByTag": [*v["amountByTag"], ("new", 1)],
                            "balance": "-0.05", "lastOp": "untag", "tagBytes": b"\x00\xff"},
        "last-event": lambda v: {**v, "tag": "edited", "wave": -1},
    })
    edited: dict[str, dict] = {}
    for row in exported_rows(tmp_path / "second", "stats"):
        edited.setdefault(row["key"], {"user": row["key"]})["stats"] = {**_as_expected(row["value"]), "ratio32": row["value"]["ratio32"]}
    for row in exported_rows(tmp_path / "second", "last-event"):
        edited[row["key"]]["last-event"] = row["value"]
    for row in exported_rows(tmp_path / "second", "events"):
        edited[row["key"]].setdefault("events", []).append(row["value"])
    dist = ensure_flink(fixture_info(FIXTURES / name)["flink_version"])
    write_records([Record(0, "dump-user", user, 0, 0, "", 0) for user in edited], tmp_path / "dumps.tsv")
    settings = JobSettings(restore_from=(tmp_path / "savepoint").resolve().as_uri(), rocksdb_local_dir=tmp_path / "rocksdb",
                           extra_conf=no_restarts(dist.version))
    run_fixture_job(dist, "restore", settings, {"--records": str(tmp_path / "dumps.tsv"), "--out": str(tmp_path / "state.jsonl")},
                    job="AvroJob")
    restored = {e["user"]: e for e in map(json.loads, (tmp_path / "state.jsonl").read_text(encoding="utf-8").splitlines())}
    assert restored == edited
    assert any(e["stats"]["balance"] == "-0.05" and e["stats"]["count"] > 1000 for e in restored.values())


def _snapshot(schema: dict | str) -> SerializerSnapshot:
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return SerializerSnapshot(avro.AVRO_SNAPSHOT, 3, attributes={"runtime_class": avro.GENERIC_RECORD, "schema": text})


def test_unions_fixed_decimals_and_recursion_round_trip():
    schema = {"type": "record", "name": "Node", "namespace": "a", "fields": [
        {"name": "value", "type": ["int", "string", "null"]},
        {"name": "id", "type": {"type": "fixed", "name": "Id", "size": 3, "logicalType": "decimal", "precision": 6, "scale": 1}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "next", "type": ["null", "Node"]},
        {"name": "names", "type": {"type": "array", "items": "string"}},
    ]}
    snapshot = _snapshot(schema)
    value = {"value": {"string": "x"}, "id": "-12.8", "amount": "-1.28", "next":
             {"value": None, "id": "0.0", "amount": "1.27", "next": None, "names": []}, "names": ["p", "ü"]}
    assert avro.arrow_type(snapshot) == (None, "no decoded type for Avro: a union of 2 non-null types has no single Arrow type")
    data = encoder_for(snapshot)(value)
    assert decoder_for(snapshot).decode_all(data) == value
    # Flink's DataOutputEncoder: int union index, big-endian ints, int-length strings, varint block counts;
    # a bytes decimal as few bytes as Java's BigInteger.toByteArray (-128: one byte), a fixed one sign-extended
    assert data.startswith(b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01x" + (-128).to_bytes(3, "big", signed=True)
                           + b"\x00\x00\x00\x01\x80")
    assert data.endswith(b"\x02" + b"\x00\x00\x00\x01p" + b"\x00\x00\x00\x02" + "ü".encode() + b"\x00")
    assert decoder_for(snapshot).decode_all(encoder_for(snapshot)({**value, "value": {"int": 5}}))["value"] == {"int": 5}
    with pytest.raises(EncodeError):
        encoder_for(snapshot)({**value, "amount": "1.234"})  # more places than the scale
    with pytest.raises(EncodeError):
        encoder_for(snapshot)({**value, "value": 5})  # a union of several types names its branch


def test_an_unusable_schema_keeps_the_values_raw_with_its_reason():
    for schema in ("{not json", {"type": "record", "name": "R", "fields": [{"name": "a", "type": "Missing"}]}):
        decoder = decoder_for(_snapshot(schema))
        assert not decoder.supported
        with pytest.raises(UnsupportedSerializerError, match="cannot decode Avro values"):
            decoder.decode_all(b"\x00")
        assert encoder_for(_snapshot(schema)) is None


@pytest.mark.parametrize("name", AVRO_FIXTURE_NAMES)
def test_verify_finds_nothing(name, capsys):
    assert verify_exit_codes(name) == [0, 0]


_RICH = {"type": "record", "name": "R", "namespace": "t", "fields": [
    {"name": "s", "type": "string"}, {"name": "l", "type": "long"}, {"name": "i", "type": "int"},
    {"name": "d", "type": "double"}, {"name": "b", "type": "boolean"}, {"name": "raw", "type": "bytes"},
    {"name": "opt", "type": ["null", "long"]}, {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    {"name": "xs", "type": {"type": "array", "items": ["null", "string"]}}, {"name": "m", "type": {"type": "map", "values": "E"}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 3}},
]}


def _rich_values():
    from hypothesis import strategies as st

    text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)
    return st.fixed_dictionaries({
        "s": text, "l": st.integers(-(2**63), 2**63 - 1), "i": st.integers(-(2**31), 2**31 - 1),
        "d": st.floats(allow_nan=False), "b": st.booleans(), "raw": st.binary(max_size=8),
        "opt": st.none() | st.integers(-(2**63), 2**63 - 1), "e": st.sampled_from(["A", "B"]),
        "xs": st.lists(st.none() | text, max_size=200),
        "m": st.dictionaries(text, st.sampled_from(["A", "B"]), max_size=4).map(lambda m: list(m.items())),
        "dec": st.integers(-(10**29), 10**29).map(lambda n: str(__import__("decimal").Decimal(n).scaleb(-3))),
    })


def test_generated_avro_values_round_trip_and_every_truncation_is_a_format_error():
    from hypothesis import given, settings

    from repair.errors import FormatError

    snapshot = _snapshot(_RICH)
    encode, decoder = encoder_for(snapshot), decoder_for(snapshot)

    @settings(max_examples=150, deadline=None)
    @given(_rich_values())
    def check(value):
        data = encode(value)
        assert decoder.decode_all(data) == value
        assert encode(decoder.decode_all(data)) == data
        for end in range(0, len(data), max(1, len(data) // 16)):
            with pytest.raises(FormatError):
                decoder.decode_all(data[:end])

    check()
