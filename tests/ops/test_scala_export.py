"""Export of Scala-API state (Flink 1.x, ``flink-scala``) equals the state computed independently from the input.

``fixtures/flink-1.20-scala`` was written by real Flink 1.20 running
``fixtures/extra_jobs/scala/fixturejob/ScalaJob.scala`` (compiled with scalac 2.12): keyed by the case
class ``Who(user, parity)``, ValueStates of a case class with an Option field, of a ``List``, a ``Map``,
an ``Option[Long]`` and a ``Seq``, and a MapState from a case class to a ``List``; ``expected.json`` is
``fixtures/scala_state_model.py``'s. Case classes are decoded as their fields by position (the snapshot
names the class, not its fields), Options as the value or None, collections as lists.
"""

from __future__ import annotations

import pytest

from repair.errors import UnsupportedSerializerError
from repair.formats.flink import registry, scala_types
from repair.formats.flink.serializers import KRYO_SNAPSHOT, SerializerSnapshot
from repair.formats.flink.value_encoders import EncodeError, encoder_for
from repair.formats.flink.values import decoder_for
from repair.ops.inspect import inspect
from tests.conftest import (
    FIXTURES,
    SCALA_FIXTURE_NAMES,
    export_of,
    exported_rows,
    job_root,
    newest_and_savepoints,
    verify_exit_codes,
    written_back_with_edits,
)

_B = "org.apache.flink.api.common.typeutils.base."
LONG = SerializerSnapshot(_B + "LongSerializer$LongSerializerSnapshot", 3)
STRING = SerializerSnapshot(_B + "StringSerializer$StringSerializerSnapshot", 3)


@pytest.fixture(scope="module", params=newest_and_savepoints(SCALA_FIXTURE_NAMES))
def exported(request, tmp_path_factory):
    return export_of(*request.param, tmp_path_factory)


def _key(row) -> tuple[str, int]:
    key = row["key"]
    return key["f0"], key["f1"]


def state_of_export(out) -> list[dict]:
    """The exported state in the shape of ``expected.json``'s entries (``scala_state_model.py``), by key."""
    found: dict[tuple[str, int], dict] = {}

    def entry(row) -> dict:
        return found.setdefault(_key(row), {"key": list(_key(row)), "per-wave": {}})

    for row in exported_rows(out, "totals"):
        totals = row["value"]
        entry(row)["totals"] = [totals["f0"], totals["f1"], totals["f2"]]
    for row in exported_rows(out, "amount-by-tag"):
        entry(row)["amount-by-tag"] = dict(sorted((pair["f0"], pair["f1"]) for pair in row["value"]))
    for state in ("tags", "last-untag", "waves", "last-op"):
        for row in exported_rows(out, state):
            entry(row)[state] = row["value"]
    for row in exported_rows(out, "per-wave"):
        entry(row)["per-wave"][str(row["user_key"]["f0"])] = row["value"]
    for item in found.values():
        item["per-wave"] = dict(sorted(item["per-wave"].items()))
    return [found[k] for k in sorted(found)]


def test_scala_keys_and_values_equal_the_computed_state(exported):
    import json

    _, out, expected = exported
    summary = json.loads((out / "_export.json").read_text())
    for state in (s for op in summary["operators"] for s in op["states"]):
        assert state["rows_with_errors"] == 0 and state["raw_fallback"] == [], state["state"]
        assert all(c["type"] != "json" for c in state["columns"].values()), state
    ordered = state_of_export(out)
    wanted = [{**e, "per-wave": dict(sorted(e["per-wave"].items()))} for e in expected["by-who"]]
    assert ordered == wanted
    # both sides of the Option occur: Some(tag) and None in the case class, a Long and None at the top
    assert {e["totals"][2] is None for e in ordered} == {True, False}
    assert {e["last-untag"] is None for e in ordered} == {True, False}


def test_inspect_describes_the_scala_types(exported):
    name, _, _ = exported
    states = {s.name: s for op in inspect(job_root(name)).operators for sub in op.subtasks for s in sub.states}
    who = "Scala case class fixturejob.Who(String, Integer)"
    assert states["totals"].describe() == f"value: {who} -> Scala case class fixturejob.Totals(Long, Long, Option<String>)"
    assert states["amount-by-tag"].describe() == f"value: {who} -> Scala Map<String, Long>"
    assert states["waves"].describe() == f"value: {who} -> Scala Seq<Integer>"
    assert states["last-op"].describe() == f"value: {who} -> Scala Enumeration fixturejob.Op$"
    assert states["per-wave"].describe() == f"map: {who} -> Map<Scala case class fixturejob.WaveKey(Integer), Scala List<Long>>"


def _composite(class_name: str, *nested: SerializerSnapshot, **attributes) -> SerializerSnapshot:
    return SerializerSnapshot(class_name, 3, list(nested), outer_version=2, attributes=attributes)


def test_scala_values_round_trip_and_nulls():
    option = _composite(registry.SCALA_OPTION.class_name, LONG)
    seq = _composite(registry.SCALA_TRAVERSABLE.class_name, STRING, cbf_code="implicitly[CanBuildFrom[scala.collection.immutable.Vector[String], String, Vector[String]]]")
    either = _composite(registry.SCALA_EITHER.class_name, STRING, LONG)
    case = _composite(registry.SCALA_CASE_CLASS.class_name, STRING, option, seq, either, case_class="a.B")
    value = {"f0": "x", "f1": None, "f2": ["p", None, "q"], "f3": {"right": 7}}
    data = encoder_for(case)(value)
    # String x, Option None (false), 3 elements (a null one: flag false), Right(7)
    assert data == b"\x02x" + b"\x00" + b"\x00\x00\x00\x03" + b"\x01\x02p" + b"\x00" + b"\x01\x02q" + b"\x01" + (7).to_bytes(8, "big")
    assert decoder_for(case).decode_all(data) == value
    other = {"f0": "y", "f1": 5, "f2": [], "f3": {"left": "l"}}
    assert decoder_for(case).decode_all(encoder_for(case)(other)) == other
    assert case.describe() == "Scala case class a.B(String, Option<Long>, Scala Vector<String>, Either<String, Long>)"
    # a null field is written by the field's serializer: a String can, a Long cannot (Flink's throws)
    assert decoder_for(case).decode_all(encoder_for(case)({**other, "f0": None}))["f0"] is None
    with pytest.raises(EncodeError):
        encoder_for(case)({**other, "f3": {"right": None}})
    with pytest.raises(EncodeError):
        encoder_for(case)(["y", 5, [], {"left": "l"}])  # fields by name, as the Parquet struct holds them


def test_scala_enumeration_values_by_name():
    from repair.errors import FormatError

    enum = SerializerSnapshot(scala_types.ENUM_SNAPSHOT, 3, attributes={"enum_class": "a.Color$", "enum_names": {0: "red", 5: "blue"}})
    assert decoder_for(enum).decode_all(b"\x00\x00\x00\x05") == "blue"
    assert encoder_for(enum)("red") == b"\x00\x00\x00\x00"
    with pytest.raises(FormatError, match="scala enumeration value id"):
        decoder_for(enum).decode_all(b"\x00\x00\x00\x01")
    with pytest.raises(EncodeError):
        encoder_for(enum)("green")


def test_a_collection_of_an_unknown_element_stays_raw_with_its_reason():
    unknown = SerializerSnapshot("com.example.CustomSerializerSnapshot", -1, attributes={"undecoded": "unknown class"})
    seq = _composite(registry.SCALA_TRAVERSABLE.class_name, unknown, cbf_code="")
    decoder = decoder_for(seq)
    assert not decoder.supported
    with pytest.raises(UnsupportedSerializerError, match="no decoder for CustomSerializerSnapshot"):
        decoder.decode_all(b"\x00\x00\x00\x00")
    assert encoder_for(seq) is None
    # an Option of a Kryo value decodes what Kryo decodes, but is not written back from the Parquet
    kryo = SerializerSnapshot(KRYO_SNAPSHOT, 2, attributes={"type_class": "a.Custom"})
    assert decoder_for(_composite(registry.SCALA_OPTION.class_name, kryo)).decode_all(b"\x00") is None
    assert encoder_for(_composite(registry.SCALA_OPTION.class_name, kryo)) is None


@pytest.mark.parametrize("name", SCALA_FIXTURE_NAMES)
def test_every_scala_value_flink_wrote_encodes_back_to_its_bytes(name, tmp_path):
    from tests.encoder_testlib import round_trip_raw_columns

    checked, covered = round_trip_raw_columns(name, tmp_path)
    assert checked > 500
    # a Scala Map's elements are case classes of scala.Tuple2 (Flink 1.20 writes no Tuple2CaseClass snapshot here)
    assert {"ScalaCaseClassSerializerSnapshot", "ScalaOptionSerializerSnapshot", "TraversableSerializerSnapshot",
            "ScalaEnumSerializerSnapshot"} <= covered


@pytest.mark.parametrize("name", SCALA_FIXTURE_NAMES)
def test_verify_finds_nothing(name, capsys):
    assert verify_exit_codes(name) == [0, 0]


def test_written_back_with_changed_scala_values(tmp_path):
    """write-savepoint encodes changed case classes, Options and collections (a null element too) from
    the Parquet; the savepoint verifies clean and exports exactly the edited state."""
    changed = written_back_with_edits(SCALA_FIXTURE_NAMES[0], tmp_path, {
        "totals": lambda v: {**v, "f0": v["f0"] + 1000, "f2": None},
        "tags": lambda v: [*v, "new", None],
        "last-untag": lambda v: 7 if v is None else None,
        "last-op": lambda v: "clear" if v != "clear" else "add",
    }, key=lambda k: (k["f0"], k["f1"]))
    assert len(changed) == 16


@pytest.mark.slow
def test_real_flink_restores_the_written_savepoint_with_the_changed_scala_values(tmp_path):
    """The savepoint write-savepoint made of the edited export is restored by real Flink 1.20 running the
    Scala job (restore mode: each key's state as Flink's own serializers read it): it equals the export."""
    import json

    from fixtures.flink_harness import JobSettings, ensure_flink, no_restarts, run_fixture_job
    from fixtures.state_model import Record, write_records

    written_back_with_edits(SCALA_FIXTURE_NAMES[0], tmp_path, {
        "totals": lambda v: {**v, "f0": v["f0"] + 1000, "f2": None},
        "tags": lambda v: [*v, "new"],
        "last-untag": lambda v: 7 if v is None else None,
        "last-op": lambda v: "clear" if v != "clear" else "add",
    }, key=lambda k: (k["f0"], k["f1"]))
    edited = state_of_export(tmp_path / "second")
    dist = ensure_flink("1.20.3")
    write_records([Record(e["key"][1], "dump-user", e["key"][0], 0, 0, "", 0) for e in edited], tmp_path / "dumps.tsv")
    settings = JobSettings(restore_from=(tmp_path / "savepoint").resolve().as_uri(), rocksdb_local_dir=tmp_path / "rocksdb",
                           extra_conf=no_restarts(dist.version))
    run_fixture_job(dist, "restore", settings, {"--records": str(tmp_path / "dumps.tsv"), "--out": str(tmp_path / "state.jsonl")},
                    job="ScalaJob")
    restored = [json.loads(line) for line in (tmp_path / "state.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(restored, key=lambda e: (e["key"][0], e["key"][1])) == edited
    assert any(e["totals"][0] > 1000 for e in restored) and any("new" in e["tags"] for e in restored)


def test_generated_scala_values_round_trip_and_every_truncation_is_a_format_error():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from repair.errors import FormatError

    option = _composite(registry.SCALA_OPTION.class_name, LONG)
    seq = _composite(registry.SCALA_TRAVERSABLE.class_name, STRING, cbf_code="")
    either = _composite(registry.SCALA_EITHER.class_name, STRING, LONG)
    case = _composite(registry.SCALA_CASE_CLASS.class_name, STRING, option, seq, either, case_class="a.B")
    encode, decoder = encoder_for(case), decoder_for(case)
    text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)
    long = st.integers(-(2**63), 2**63 - 1)
    values = st.fixed_dictionaries({"f0": text, "f1": st.none() | long, "f2": st.lists(st.none() | text, max_size=20),
                                    "f3": st.fixed_dictionaries({"left": text}) | st.fixed_dictionaries({"right": long})})

    @settings(max_examples=150, deadline=None)
    @given(values)
    def check(value):
        data = encode(value)
        assert decoder.decode_all(data) == value and encode(decoder.decode_all(data)) == data
        for end in range(len(data)):
            with pytest.raises(FormatError):
                decoder.decode_all(data[:end])

    check()


#: Every keyed state of the Scala job's operator ``by-who``: its own and the timer states its
#: ``KeyedProcessFunction`` registers (even without timers), named with their slashes.
BY_WHO_KEYED_STATES = ("totals", "tags", "amount-by-tag", "last-untag", "waves", "per-wave", "last-op",
                       "_timer_state/processing_user-timers", "_timer_state/event_user-timers")


def _without_keyed_state(tmp_path):
    """write-savepoint of the Scala fixture's newest checkpoint with every keyed state of ``by-who`` dropped."""
    from repair.ops.export.job import export
    from repair.ops.write_savepoint import write_savepoint

    export(job_root(SCALA_FIXTURE_NAMES[0]), str(tmp_path / "export"))
    return write_savepoint(str(tmp_path / "export"), str(tmp_path / "savepoint"),
                           drop_states=[f"by-who/{state}" for state in BY_WHO_KEYED_STATES])


def test_dropping_every_keyed_state_writes_no_keyed_state_as_flink_does_for_an_operator_without_any(tmp_path):
    """Flink writes no keyed state handle for an operator without keyed state (``SavepointSnapshotStrategy``:
    "savepoint performed on empty keyed state"), so no key serializer is restored or checked. With every
    keyed state of ``by-who`` dropped (its timer states too) the savepoint has none either, rather than a
    key serializer snapshot of the case class ``Who`` with no state behind it; the rest is kept."""
    from repair.formats.flink.keygroups import operator_id_for_uid
    from repair.formats.flink.metadata import decode_metadata
    from repair.ops.verify.engine import verify

    by_who, records = operator_id_for_uid("by-who"), operator_id_for_uid("records")
    result = _without_keyed_state(tmp_path)
    written = next(op for op in result.operators if op.operator_id == by_who)
    assert written.dropped == sorted(BY_WHO_KEYED_STATES) and not written.keyed and written.states == []
    operators = {op.operator_id: op for op in decode_metadata((tmp_path / "savepoint" / "_metadata").read_bytes()).operators}
    assert not any(sub.managed_keyed_state for sub in operators[by_who].subtasks)
    assert any(sub.managed_operator_state for sub in operators[records].subtasks)
    report = verify(str(tmp_path / "savepoint"), workers=1)
    assert report.ok and not report.findings


@pytest.mark.slow
def test_real_flink_restores_a_job_keyed_otherwise_once_every_keyed_state_is_dropped(tmp_path):
    """One JVM run: Flink 1.20 restores the savepoint with every keyed state of ``by-who`` dropped in
    ``ScalaPortJob``, the Scala job ported to Java (``by-who`` keyed by a ``Tuple2``, no flink-scala on its
    class path), every value state of every key empty. With a key serializer snapshot left (only the job's own
    states dropped) the same restore fails: ClassNotFoundException ScalaCaseClassSerializerSnapshot."""
    import json

    from fixtures import state_model
    from fixtures.restore import restore_lines
    from fixtures.upgrade_outcomes import NO_CHECKPOINTS

    _without_keyed_state(tmp_path)
    dumps = state_model.dump_records(state_model.read_records(FIXTURES / SCALA_FIXTURE_NAMES[0] / "records.tsv"))
    lines = [json.loads(line) for line in restore_lines("1.20.3", tmp_path / "savepoint", dumps, job="ScalaPortJob",
                                                        extra_conf=NO_CHECKPOINTS)]
    assert len(lines) == 7 * len(dumps) and all(set(line) == {"key", "state", "value"} for line in lines)
    # every value state empty (the port job prints the map state's entries as the Iterable object they are)
    assert {line["value"] for line in lines if line["state"] != "per-wave"} == {"null"}
