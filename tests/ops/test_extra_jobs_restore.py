"""Real Flink restores what ``repair write-savepoint`` writes from the SQL, Kryo and POJO fixtures' exports.

The SQL, Kryo and POJO jobs have no restore mode that prints their state, so Flink is asked to say what it
restored another way: the job resumes from the written savepoint after its last record (it emits
nothing: it is given no records at all) and takes a canonical savepoint of its own (``fixtures.restore.resnapshot``). That savepoint,
exported, must hold exactly the rows of the export the written savepoint was made from: every RowData
and Kryo key and value, raw Kryo values of classes this toolkit does not decode, TTL timestamps, timers.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from repair.ops.export.job import export
from repair.ops.write_savepoint import write_savepoint
from tests.conftest import FIXTURES, fixture_info, job_root
from tests.writeback_testlib import export_rows


@pytest.mark.slow  # a JVM per case
@pytest.mark.parametrize("name", ["flink-1.20-kryo", "flink-2.1-kryo", "flink-1.20-sql", "flink-2.3-sql", "flink-2.1-pojo"])
def test_real_flink_restores_the_written_savepoint_exactly(name, tmp_path):
    from fixtures.restore import resnapshot

    info = fixture_info(FIXTURES / name)
    export(job_root(name), str(tmp_path / "export"))
    write_savepoint(str(tmp_path / "export"), str(tmp_path / "written"))
    job = next(job for flag, job in (("sql", "SqlJob"), ("pojo", "PojoJob"), ("kryo", "KryoJob")) if info["spec"].get(flag))
    again = resnapshot(info["flink_version"], tmp_path / "written", job, tmp_path / "flink",
                       parallelism=info["parallelism"], state_backend=info["spec"]["state_backend"], extra_conf=info["spec"]["extra"])
    export(str(again), str(tmp_path / "again"))
    first, restored = export_rows(tmp_path / "export"), export_rows(tmp_path / "again")
    assert sorted(first) == sorted(restored)
    for state in first:
        assert restored[state] == first[state], state
    assert sum(map(len, first.values())) > (40 if job == "PojoJob" else 500)  # the POJO job keeps two states of 24 users


@pytest.mark.slow  # a JVM per case
@pytest.mark.parametrize("name", ["flink-1.20-kryo", "flink-2.1-kryo"])
def test_real_flink_restores_edited_kryo_values(name, tmp_path):
    """Every decoded Kryo value of the Kryo fixture edited in its JSON text (lists, maps, a TreeSet, a
    UUID, an enum, lone boxed values, BigDecimal, arrays), written by write-savepoint in the classes of
    the bytes replaced, then restored by real Flink on the heap backend (which deserializes every value
    with its Kryo and serializes it again into its own savepoint): the savepoint Flink takes exports
    exactly the rows of the written one: the edited values. (Not always the same bytes: Flink's Kryo
    writes a back-reference where one Java object is met twice, e.g. the one empty String every ``""``
    reads as, where the encoder wrote each element of the JSON list anew.)"""
    from tests.kryo_testlib import DECODED, edit_export

    info = fixture_info(FIXTURES / name)
    export(job_root(name), str(tmp_path / "export"))
    edited = edit_export(tmp_path / "export")
    result = write_savepoint(str(tmp_path / "export"), str(tmp_path / "written"))
    assert {s.state for op in result.operators for s in op.states if s.encoded} == set(DECODED)
    written = _heap_resnapshot_equals_written(info, tmp_path, parallelism=info["parallelism"])
    assert sum(len(written[state]) for state in written if state in DECODED) == 40 * len(DECODED)
    assert {r["list_index"]: r["value"] for part in (tmp_path / "again").glob("operator=*/state=seen/*.parquet")
            for r in pq.read_table(part).to_pylist()} == edited["seen"]  # operator state, restored and written by Flink
    for state in (s for s in DECODED if s != "totals"):  # what Flink restored is the edit (totals: its hash order)
        assert {r["key"]: r["value"] for part in (tmp_path / "again").glob(f"operator=*/state={state}/*.parquet")
                for r in pq.read_table(part).to_pylist()} == edited[state], state


@pytest.mark.slow  # a JVM per case
@pytest.mark.parametrize("name", ["flink-1.20-kryo", "flink-2.1-kryo"])
def test_real_flink_restores_kryo_keys_moved_to_another_max_parallelism(name, tmp_path):
    """The Kryo fixture written by write-savepoint for max parallelism 256 and parallelism 3 (every Kryo key
    moved to the key group of its Long's or String's hashCode): real Flink restores it at that max
    parallelism on the heap backend and snapshots the same rows."""
    info = fixture_info(FIXTURES / name)
    export(job_root(name), str(tmp_path / "export"))
    write_savepoint(str(tmp_path / "export"), str(tmp_path / "written"), max_parallelism=256, parallelism=3)
    written = _heap_resnapshot_equals_written(info, tmp_path, parallelism=3, max_parallelism=256)
    assert len(written["last"]) == 40


def _heap_resnapshot_equals_written(info: dict, tmp_path, **job) -> dict[str, list]:
    """Real Flink resumes KryoJob from ``tmp_path/written`` on the heap backend (every value deserialized
    and serialized again) with the ``job`` settings and takes a savepoint (exported to ``tmp_path/again``):
    its rows equal the written savepoint's (returned, as :func:`_decoded_rows`)."""
    from fixtures.restore import resnapshot

    again = resnapshot(info["flink_version"], tmp_path / "written", "KryoJob", tmp_path / "flink", state_backend="hashmap",
                       extra_conf=info["spec"]["extra"], **job)
    export(str(tmp_path / "written"), str(tmp_path / "written-export"))
    export(str(again), str(tmp_path / "again"))
    written, restored = _decoded_rows(tmp_path / "written-export"), _decoded_rows(tmp_path / "again")
    assert sorted(written) == sorted(restored)
    for state in written:
        assert restored[state] == written[state], state
    return written


def _decoded_rows(export_dir) -> dict[str, list]:
    """Every state's rows of an export without their raw key and value bytes, order-free; a HashMap's
    entries (``totals``) in sorted order (Java's hash order depends on the map's capacity)."""
    import json

    out = {}
    for part in export_dir.glob("operator=*/state=*/*.parquet"):
        state = part.parent.name.removeprefix("state=")
        for row in pq.read_table(part).to_pylist():
            if state == "totals":
                row["value"] = json.dumps(sorted(json.loads(row["value"])))
            out.setdefault(state, []).append(repr(sorted((k, v) for k, v in row.items() if k not in ("key_raw", "value_raw"))))
    return {state: sorted(rows) for state, rows in out.items()}


def _edit_parts(export_dir, state: str, change) -> int:
    """Rewrite every part of ``state`` with ``change(row)`` applied (same schema); the rows changed."""
    changed = 0
    for part in export_dir.glob(f"operator=*/state={state}/*.parquet"):
        table = pq.read_table(part)
        rows = [change(dict(row)) for row in table.to_pylist()]
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), part)
        changed += len(rows)
    return changed


@pytest.mark.parametrize("name", ["flink-1.20-sql", "flink-2.3-sql"])
def test_changed_row_data_is_encoded_and_exports_back_as_changed(name, tmp_path):
    """RowData values and keys edited in the Parquet (an ARRAY, a MAP, a count) are written by the RowData
    encoder; everything else keeps Flink's bytes."""
    export(job_root(name), str(tmp_path / "export"))
    first = export_rows(tmp_path / "export")

    def top_n(row):
        row["value"] = [{**kept, "f3": [*kept["f3"], "added"], "f5": [*kept["f5"], ("ünï", -1)]} for kept in row["value"]]
        return row

    def accumulator(row):
        if isinstance(row["key"]["f0"], int):  # the mini-batch GROUP BY wave
            row["value"] = {**row["value"], "f0": row["value"]["f0"] + 1000, "f2": "changed ☃"}
        return row

    assert _edit_parts(tmp_path / "export", "data-state-with-append", top_n) > 0
    _edit_parts(tmp_path / "export", "accState", accumulator)
    result = write_savepoint(str(tmp_path / "export"), str(tmp_path / "written"))
    encoded = {(op.operator_id, s.state): s.encoded for op in result.operators for s in op.states if s.encoded}
    assert sorted(state for _, state in encoded) == ["accState", "data-state-with-append"]
    assert {column for (_, state), columns in encoded.items() if state == "accState" for column in columns} == {"value_raw"}
    export(str(tmp_path / "written"), str(tmp_path / "again"))
    again = export_rows(tmp_path / "again")
    assert {k for k in first if again[k] != first[k]} == set(encoded)
    for row in (r for part in (tmp_path / "again").glob("operator=*/state=data-state-with-append/*.parquet")
                for r in pq.read_table(part).to_pylist()):
        assert all(kept["f3"][-1] == "added" and kept["f5"][-1] == ("ünï", -1) for kept in row["value"])
    batched = [r["value"] for part in (tmp_path / "again").glob("operator=*/state=accState/*.parquet")
               for r in pq.read_table(part).to_pylist() if isinstance(r["key"]["f0"], int)]
    assert batched and all(v["f2"] == "changed ☃" and v["f0"] > 1000 for v in batched)
