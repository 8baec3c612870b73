"""``repair upgrade``: Flink 1.x state for Flink 2.x. ``--check`` is held to what real Flink 2.0, 2.1 and 2.3
did with the 1.20 fixture's savepoint (``fixtures/upgrade_outcomes.json``); the savepoint written reads
back the source's values (here, with our readers) and restores in real Flink 2.x with them (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import repair
from fixtures.upgrade_outcomes import OUTCOMES
from repair.cli.app import main
from repair.formats.flink.metadata import decode_metadata
from tests.conftest import canonical_savepoint, job_root

SOURCE = canonical_savepoint("flink-1.20-upgrade")
RECORDED = json.loads(OUTCOMES.read_text())


@pytest.mark.parametrize("release", sorted(RECORDED["releases"]))
def test_check_predicts_what_real_flink_did_per_state(release):
    result = repair.upgrade(str(SOURCE), release, check=True)
    predicted = {s.state: s.outcome for s in result.states}
    recorded = {state: outcome["outcome"] for state, outcome in RECORDED["releases"][release]["states"].items()}
    assert {state: predicted[state] for state in recorded} == recorded
    assert {"same values", "different values", "fails"} <= set(recorded.values())  # the record covers all three
    assert result.written is None and result.exit_code == 1  # some state does not restore the same


def _profile(savepoint: Path) -> tuple[bytes, object, dict[bytes, bytes]]:
    """The keyed meta data of the upgrade operator's first subtask in ``savepoint``, its ``profile`` POJO
    snapshot and the POJO values by key."""
    from repair.formats.flink.backend_meta import decode_keyed_backend_meta
    from repair.io import storage as st
    from repair.io.layout import discover
    from repair.io.snapshot import load_snapshot
    from repair.ops.export.sources import source_for
    from repair.readers.full_snapshot import read_key_groups_meta_bytes

    storage = st.default_storage()
    layout = discover(str(savepoint), storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    op = next(op for op in snapshot.metadata.operators if op.subtasks and op.subtasks[0].managed_keyed_state is not None)
    sub = op.subtasks[0]
    data = read_key_groups_meta_bytes(snapshot, storage, sub.managed_keyed_state)
    meta = decode_keyed_backend_meta(data)
    streams = source_for("managed_keyed_state", sub.managed_keyed_state).streams(snapshot, storage, op, sub, {"profile"})
    values = {row["key_raw"]: row["value_raw"] for stream in streams for row in stream.rows}
    return data[: meta.end_offset], meta.state("profile").serializer("VALUE_SERIALIZER"), values


def test_pojo_collection_fields_are_written_as_flink_2_1_writes_them():
    """The 1.20 fixture's POJO with List/Map/Set fields, upgraded, against the same job's state written by
    Flink 2.1 itself (flink-2.1-upgrade): the keyed meta data byte for byte, every value the same."""
    from repair.formats.flink.pojo_upgrade import FieldTypes, PojoColumn, flink2_meta
    from repair.formats.flink.values import decoder_for

    old_meta, old_pojo, old_values = _profile(SOURCE)
    new_meta, new_pojo, new_values = _profile(canonical_savepoint("flink-2.1-upgrade"))
    types = FieldTypes(old_pojo)
    for value in old_values.values():
        types.add(value)
    fields, why = types.result()
    assert why is None and [(f.name, f.declared) for f in fields] == [
        ("amounts", "java.util.Map"), ("ops", "java.util.Set"), ("tags", "java.util.List")]
    assert old_meta != new_meta and flink2_meta(old_meta, old_pojo, fields) == new_meta
    column, decode = PojoColumn(old_pojo, fields), decoder_for(new_pojo)

    def plain(data: bytes) -> dict:
        value = decode.decode_all(data)
        return {**value, "amounts": sorted(value["amounts"]), "ops": sorted(value["ops"])}  # a HashMap's, HashSet's order is its own

    assert old_values.keys() == new_values.keys()
    assert all(plain(column.kryo5(old_values[key])) == plain(new_values[key]) for key in old_values)


@pytest.mark.parametrize(("release", "version"), [("2.0", 5), ("2.1", 6)])
def test_the_upgraded_savepoint_holds_the_source_values_as_kryo_5_writes_them(tmp_path, release, version):
    out = tmp_path / f"for-{release}"
    result = repair.upgrade(str(SOURCE), release, str(out), workers=1)
    assert result.ok and result.exit_code == 0 and result.written is not None
    assert decode_metadata((out / "_metadata").read_bytes()).version == version
    rewritten = {s.state for s in result.states if s.action == "rewritten"}
    assert {"ratio", "ratio32", "small", "initial", "phase", "ratios", "ratio-by-tag", "amounts-by-op", "count-by-ratio",
            "profile"} == rewritten
    profile = repair.read_state(str(out), "upgrade", "profile").column("value").to_pylist()[0]
    assert isinstance(profile["tags"], list) and isinstance(profile["ops"], list)  # Flink 2.x's list and set serializers
    for state in rewritten | {"count", "last-tag", "count-by-tag"}:
        # the source read as Kryo 2.24 (Flink 1.x _metadata), the savepoint as Kryo 5 (Flink 2.x): the same values
        assert _values(out, "upgrade", state) == _values(SOURCE, "upgrade", state), state
    raw_in = repair.read_state(str(SOURCE), "upgrade", "ratio").column("value_raw").to_pylist()
    raw_out = repair.read_state(str(out), "upgrade", "ratio").column("value_raw").to_pylist()
    assert set(raw_in).isdisjoint(raw_out)  # every Double's bytes rewritten (Kryo 5: little-endian)


KRYO_SOURCE = job_root("flink-1.20-kryo")
#: The Kryo fixture's states of classes whose layout is the job's (FieldSerializer, a registered serializer).
KRYO_OWN_LAYOUT = ["by-object/tally", "by-object/marked", "by-object/note"]
KRYO_STATES = {"seen": ["seen"], "by-object": ["count", "amount-by-tag", "last", "history", "totals", "scalars", "arrays", "numbers",
                                               "wave", "lone", "uuid", "tag-set", "jdk"]}


def _values(path, operator: str, state: str) -> list:
    """A state's rows (key, map key, value, list index) as JSON values (a JSON text column parsed), sorted; a Pattern's flags left out
    (Flink 1.x restores a Pattern without them: chill's serializer drops them, so Kryo 2.24 bytes hold none)."""
    table: pa.Table = repair.read_state(str(path), operator, state)
    columns = [c for c in ("key", "user_key", "value", "list_index") if c in table.column_names]

    def plain(value):
        if isinstance(value, str):
            try:
                value = json.loads(value)  # a Kryo column's JSON text
            except ValueError:
                pass
        if isinstance(value, list):
            return [plain(v) for v in value]
        return {k: v for k, v in value.items() if k != "flags"} if isinstance(value, dict) and "pattern" in value else value

    return sorted(json.dumps([plain(row[c]) for c in columns], sort_keys=True, default=str) for row in table.select(columns).to_pylist())


def test_the_jobs_own_kryo_layouts_are_refused_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "for-2.3"
    assert main(["upgrade", KRYO_SOURCE, "--to", "2.3", "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "refused 3 state(s): nothing written" in printed and "--drop-state" in printed and "KryoJob$Tally" in printed
    assert not out.exists()
    checked = repair.upgrade(KRYO_SOURCE, "2.3", check=True)
    assert sorted(f"by-object/{s.state}" for s in checked.states if s.action == "refused") == sorted(KRYO_OWN_LAYOUT)
    assert {s.state for s in checked.states if s.outcome == "unknown"} == {"tally", "marked", "note"}


def test_every_kryo_class_of_the_kryo_fixture_is_upgraded_but_the_jobs_own_layouts(tmp_path):
    out = tmp_path / "for-2.3"
    result = repair.upgrade(KRYO_SOURCE, "2.3", str(out), drop_states=KRYO_OWN_LAYOUT, workers=1)
    assert result.ok and "seen" in {s.state for s in result.states if s.action == "rewritten"}  # operator state too
    for operator, states in KRYO_STATES.items():
        for state in states:
            assert _values(out, operator, state) == _values(KRYO_SOURCE, operator, state), state


def _checked_with(monkeypatch, source, **where) -> tuple[dict, list[tuple[int, object, object]]]:
    """``upgrade --check`` of ``source`` with ``where`` (workers, master): its document, and how its rows were
    read (the number of tasks, workers and master of each :func:`run_tasks` call)."""
    from repair.ops import upgrade as upgrade_op
    from repair.ops.runner import run_tasks

    calls = []

    def recorded(func, tasks, **options):
        calls.append((len(tasks), options.get("workers"), options.get("master")))
        return run_tasks(func, tasks, **options)

    monkeypatch.setattr(upgrade_op, "run_tasks", recorded)
    return repair.upgrade(str(source), "2.1", check=True, **where).to_json(), calls


@pytest.mark.parametrize("source", [SOURCE, KRYO_SOURCE], ids=["upgrade", "kryo"])
def test_check_reads_the_rows_in_a_process_pool_with_the_same_result(monkeypatch, source):
    """A task per subtask handle, run by two worker processes: every verdict, count and refusal the in-process one's."""
    in_process, calls = _checked_with(monkeypatch, source, workers=1)
    pooled, pool_calls = _checked_with(monkeypatch, source, workers=2)
    assert [(tasks, workers) for tasks, workers, _ in pool_calls] == [(calls[0][0], 2)] and calls[0][0] >= 2
    assert pooled == in_process
    assert any(s["rows_differing"] for s in pooled["states"]) and any(s["action"] == "refused" for s in pooled["states"]) == (source == KRYO_SOURCE)


@pytest.mark.slow
@pytest.mark.usefixtures("spark_class_archive")
def test_check_reads_the_rows_as_a_spark_job_with_the_same_result(monkeypatch):
    """One JVM run (Spark local[2])."""
    in_process, _ = _checked_with(monkeypatch, SOURCE, workers=1)
    on_spark, calls = _checked_with(monkeypatch, SOURCE, master="local[2]")
    assert calls[0][2] == "local[2]" and on_spark == in_process


SCALA_SOURCE = canonical_savepoint("flink-1.20-scala")


def test_scala_api_state_is_refused_as_real_flink_2_fails_to_restore_it(tmp_path, capsys):
    """Flink 2.x has no Scala API: its restore of the Scala job's savepoint (by the job ported to Java, same uids)
    fails on flink-scala's snapshot class (scala_upgrade_outcome.json: 2.0, 2.1, 2.3). The check predicts the
    failure for every keyed state (the key is a case class), naming the class; the write refuses, naming the way out."""
    from fixtures.scala_upgrade_outcome import OUTCOME

    recorded = json.loads(OUTCOME.read_text())
    for release, outcome in recorded["releases"].items():
        checked = repair.upgrade(str(SCALA_SOURCE), release, check=True)
        keyed = [s for s in checked.states if s.kind != "operator-list"]
        assert len(keyed) == 9 and {s.outcome for s in keyed} == {outcome["outcome"]} and {s.action for s in keyed} == {"refused"}
        assert all(outcome["message"] in s.reason and outcome["exception"].rsplit(".", 1)[-1] in s.reason for s in keyed)
        assert [s.outcome for s in checked.states if s.kind == "operator-list"] == ["same values"]  # the source's offsets
    out = tmp_path / "for-2.1"
    assert main(["upgrade", str(SCALA_SOURCE), "--to", "2.1", "--out", str(out)]) == 1
    assert "--drop-operator" in capsys.readouterr().out and not out.exists()
    # the other way out: every keyed state dropped, the timer states (names with slashes) too; the operator
    # then has no keyed state, so no key serializer (real Flink 2.1.1 restores it in ScalaPortJob, keyed by a Tuple2)
    drops = [arg for s in keyed for arg in ("--drop-state", f"{s.operator}/{s.state}")]
    assert any("/_timer_state/" in arg for arg in drops)
    assert main(["upgrade", str(SCALA_SOURCE), "--to", "2.1", "--out", str(out), *drops]) == 0
    written = decode_metadata((out / "_metadata").read_bytes())
    assert not any(sub.managed_keyed_state for op in written.operators for sub in op.subtasks)


@pytest.mark.parametrize(("args", "message"), [
    (["--to", "1.20"], "one of Flink 2.0, 2.1, 2.2, 2.3"),
    (["--to", "2.1", "--out", str(SOURCE / "inside")], "is inside the input"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    assert main(["upgrade", str(SOURCE), *args, *([] if "--out" in args else ["--out", str(tmp_path / "out")])]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and "\n" not in error
    assert not (SOURCE / "inside").exists() and not (tmp_path / "out").exists()


def test_a_flink_2_source_is_refused(tmp_path, capsys):
    assert main(["upgrade", str(canonical_savepoint("flink-2.1-kryo")), "--to", "2.3", "--check"]) == 2
    error = capsys.readouterr().err.strip()
    assert "written by Flink 2.x (_metadata version 6)" in error and "\n" not in error


@pytest.mark.slow
def test_real_flink_2_restores_the_upgraded_savepoint_with_the_source_state(tmp_path):
    """The judge: each release restores the savepoint written for it (the upgrade job's restore mode
    reads every state of every key) and reads back the 1.20 state (the state model Flink 1.20 restores,
    ``upgrade_outcomes.py`` checks) in every state, the POJO with List/Map/Set fields included. Three JVM runs."""
    from fixtures import state_model, upgrade_state_model
    from fixtures.upgrade_outcomes import RELEASES, SAME, outcomes, restored

    records = state_model.read_records(SOURCE.parent.parent / "records.tsv")
    expected = upgrade_state_model.expected_state(records)
    for release, version in RELEASES.items():
        out = tmp_path / f"for-{release}"
        repair.upgrade(str(SOURCE), release, str(out), workers=1)
        found = outcomes(expected, restored(version, Path(out), records))
        assert {state: o["outcome"] for state, o in found.items()} == dict.fromkeys(upgrade_state_model.STATES, SAME), release


@pytest.mark.slow
def test_real_flink_2_reads_every_upgraded_kryo_value_of_the_kryo_fixture(tmp_path):
    """Flink 2.1 restores the upgraded Kryo fixture on the heap backend (every value deserialized by Kryo 5
    and serialized again) and snapshots exactly the values the upgrade wrote. One JVM run."""
    from fixtures.restore import resnapshot

    out = tmp_path / "for-2.1"
    repair.upgrade(KRYO_SOURCE, "2.1", str(out), drop_states=KRYO_OWN_LAYOUT, workers=1)
    restored = resnapshot("2.1.1", out, "KryoJob", tmp_path / "resnapshot", state_backend="hashmap")
    for operator, states in KRYO_STATES.items():
        for state in states:
            assert _values(restored, operator, state) == _values(out, operator, state), state


def test_a_kryo_column_converts_each_small_value_once_and_remembers_a_bounded_number(monkeypatch):
    """Both passes of upgrade (the judging tasks, the write's spill tasks) convert every Kryo value; state repeats
    small values (enums, numbers, tags): each is converted once per column, within a bound."""
    from repair.formats.flink import kryo_upgrade

    calls = []
    monkeypatch.setattr(kryo_upgrade, "kryo5_bytes", lambda data, snapshot, **_: calls.append(data) or data[::-1])
    column = kryo_upgrade.KryoColumn("value_raw", None)  # type: ignore[arg-type]
    large = bytes(range(200))
    assert [column.kryo5(b"ab"), column.kryo5(b"ab"), column.kryo5(large), column.kryo5(large)] == [b"ba", b"ba", large[::-1], large[::-1]]
    assert calls == [b"ab", large, large]  # a large value is not remembered
    for i in range(kryo_upgrade.REMEMBERED + 10):
        column.kryo5(i.to_bytes(4, "big"))
    assert 0 < len(column._converted) <= kryo_upgrade.REMEMBERED
