"""repair export: keyed state of real Flink checkpoints and native savepoints to Hive-partitioned
Parquet, read back from the Parquet files alone and compared with each fixture's expected.json (built
independently of the code under test by fixtures/state_model.py), plus the typed columns, the
streaming part writer, S3 output, and identical output on Spark (local and a standalone cluster)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from repair.errors import FormatError, RepairError, UsageError
from repair.formats.flink.arrow import StateColumns, column_type
from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.keygroups import (
    operator_id_for_uid,
)
from repair.formats.flink.serializers import SerializerSnapshot
from repair.ops.export import parts as export_parts
from repair.ops.export.job import COLUMNS, export, partition_value
from repair.ops.export.parts import write_state_part
from repair.readers.rocksdb import StateStream
from tests.conftest import (
    FIXTURE_NAMES,
    FIXTURES,
    fixture_info,
    fixture_spec,
    logs_state_changes,
    timers_in_raw_keyed_state,
    writes_rocksdb_instances,
)
from tests.export_testlib import KEYED_UIDS, assert_identical, operator_dir_of, parquet_parts, rebuild

#: fixture.json's operator state kinds -> the export's state kinds
_OPERATOR_KINDS = {"list": "operator-list", "union": "union-list", "broadcast": "broadcast"}
#: (fixture, which): the newest checkpoint of every fixture, and every native and canonical savepoint.
SOURCES = [(name, "checkpoint") for name in FIXTURE_NAMES] + [
    (name, f"{form.lower()}-savepoint")
    for form in ("NATIVE", "CANONICAL") for name in FIXTURE_NAMES if form in fixture_info(FIXTURES / name).get("savepoints", {})
]
SOURCE_IDS = [f"{name}:{which}" for name, which in SOURCES]


def _from_rocksdb_instances(name: str, which: str) -> bool:
    """Whether keyed state of this source is read from RocksDB instances (checkpoints and native
    savepoints of the RocksDB backend), not from key-group streams (canonical savepoints, every snapshot
    of the heap backend)."""
    return which != "canonical-savepoint" and writes_rocksdb_instances(FIXTURES / name)


def _job_root(name: str) -> Path:
    root = FIXTURES / name / "checkpoints"
    return root / next(iter(os.listdir(root)))


def _source(name: str, which: str) -> Path:
    if which == "checkpoint":
        return _job_root(name)
    form = which.split("-")[0].upper()  # native-savepoint -> NATIVE
    return FIXTURES / name / fixture_info(FIXTURES / name)["savepoints"][form]


def _export(source: Path, out: Path, read_only_guard=None, **options) -> dict:
    if read_only_guard is not None:
        read_only_guard(source)
    result = export(str(source), str(out), **options)
    document = json.loads((out / "_export.json").read_text())
    assert document == json.loads(json.dumps(result.to_json()))
    assert not [p for p in out.parent.iterdir() if ".tmp-" in p.name]  # published whole, nothing left
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]
    return document


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[tuple[str, str], Path]:
    """Every source exported once in-process (shared by the tests that only read)."""
    base = tmp_path_factory.mktemp("exports")
    outs = {}
    for name, which in SOURCES:
        out = base / f"{name}-{which}"
        _export(_source(name, which), out, workers=1)
        outs[(name, which)] = out
    return outs


# -- reading the Parquet back --------------------------------------------------------------------








def _rebuild_operator_state(out: Path, name: str) -> dict:
    """Operator state in expected.json's shape (per uid and state: the elements of every subtask in
    subtask order), from the Parquet files alone; kinds from fixture.json."""
    declared = fixture_info(FIXTURES / name)["operator_states"]
    found: dict[str, dict] = {}
    for uid, states in declared.items():
        operator_dir = operator_dir_of(out, uid)
        for state, kind in states.items():
            values = found.setdefault(uid, {}).setdefault(state, [])
            for _, table in parquet_parts(operator_dir / f"state={partition_value(state)}"):
                assert table.column_names == list(COLUMNS)
                for index, row in enumerate(table.to_pylist()):
                    assert row["error"] is None and row["key"] is None and row["key_group"] is None
                    assert row["namespace"] is None and row["timestamp"] is None
                    if kind == "broadcast":
                        assert row["list_index"] is None
                        values.append([row["user_key"], row["value"]])
                    else:
                        assert row["list_index"] == index
                        values.append(row["value"])
    return found


# -- every fixture -------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "which"), SOURCES, ids=SOURCE_IDS)
def test_export_equals_expected_json(name, which, exported):
    out = exported[(name, which)]
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    for uid in KEYED_UIDS:
        assert rebuild(out, name, uid) == expected["keyed"][uid], uid
    assert _rebuild_operator_state(out, name) == expected["operator"]
    document = json.loads((out / "_export.json").read_text())
    kinds = {(op["uid"] or op["operator_id"], s["state"]): s["kind"] for op in document["operators"] for s in op["states"]}
    for uid, states in fixture_info(FIXTURES / name)["operator_states"].items():
        label = uid if (uid, next(iter(states))) in kinds else operator_id_for_uid(uid)
        assert {state: kinds[(label, state)] for state in states} == {s: _OPERATOR_KINDS[k] for s, k in states.items()}
    if which == "checkpoint":
        assert document["checkpoint_id"] == expected["checkpoint_id"]
    # every file the document names is there, and nothing else
    listed = {f"{s['path']}/part-{int(i):05d}.parquet" for op in document["operators"] for s in op["states"] for i in s["subtasks"]}
    on_disk = {str(p.relative_to(out)) for p in out.rglob("*.parquet")}
    assert listed == on_disk and document["files"] == len(on_disk)
    assert document["rows"] == sum(pq.ParquetFile(out / p).metadata.num_rows for p in on_disk)
    for op in document["operators"]:
        for state in op["states"]:
            lsm = state["lsm"]
            raw_timers = which == "checkpoint" and timers_in_raw_keyed_state(FIXTURES / name) and state["kind"] == "priority-queue"
            assert (state["source"] == "raw-keyed-timers") is raw_timers, state
            keyed = state["kind"] not in _OPERATOR_KINDS.values()
            changelog = which == "checkpoint" and logs_state_changes(FIXTURES / name) and keyed
            assert (state["source"] == "changelog-keyed") is changelog, state
            assert (state["changelog"] is not None) is changelog, state
            materialized_in_rocksdb = changelog and fixture_spec(FIXTURES / name)["state_backend"] == "rocksdb"
            from_rocksdb = (_from_rocksdb_instances(name, which) or materialized_in_rocksdb) and keyed and not raw_timers
            if lsm is None:  # not read from RocksDB, or a state without a column family (never written)
                assert not from_rocksdb or state["rows"] == 0, state
                continue
            assert from_rocksdb, state
            # RocksDB resolved the LSM tree (the default engine): only the live keys are known
            assert lsm["live"] is not None and lsm["entries"] is None
            if state["kind"] != "list" and not (changelog and state["changelog"]["scopes"]):  # one row per live key (list state: one per element)
                assert state["rows"] == lsm["live"] - state["outside_key_groups"]
            assert state["rows_with_errors"] == 0 and state["outside_key_groups"] == 0 and not state["not_representable"]


@pytest.mark.parametrize(("name", "which"), SOURCES, ids=SOURCE_IDS)
def test_columns_are_typed_from_the_serializer_snapshots(name, which, exported):
    out = exported[(name, which)]
    info = fixture_info(FIXTURES / name)

    def schema(uid: str, state: str) -> pa.Schema:
        return pq.read_schema(next((operator_dir_of(out, uid) / f"state={partition_value(state)}").glob("part-*.parquet")))

    assert schema("per-user", "count").field("value").type == pa.int64()
    assert schema("per-user", "count").field("key").type == pa.string()
    assert schema("per-user", "count").field("namespace").type == pa.null()  # VoidNamespace
    assert schema("per-user", "tags").field("value").type == pa.string()  # one row per element
    assert schema("per-user", "amount-by-tag").field("user_key").type == pa.string()
    assert schema("per-account", "balance").field("key").type == pa.int64()
    assert schema("per-account", "user-by-wave").field("user_key").type == pa.int32()
    assert schema("per-account", "stats").field("value").type == pa.struct([("f0", pa.int64()), ("f1", pa.int64())])
    assert schema("per-account", "profile").field("value").type == pa.struct([("owner", pa.string()), ("updates", pa.int64())])
    # one state per built-in serializer (per-type, keyed by Integer)
    typed = {
        "small": pa.int16(), "tiny": pa.int8(), "positive": pa.bool_(), "ratio": pa.float64(), "ratio32": pa.float32(),
        "initial": pa.string(), "tag-bytes": pa.binary(), "wave": pa.string(),
        "last-row": pa.struct([("kind", pa.string()), ("f0", pa.string()), ("f1", pa.int64()), ("f2", pa.float64())]),
        "recent-small": pa.list_(pa.int16()), "ratio32-by-tag": pa.map_(pa.string(), pa.float32()),
        "ratio-by-initial": pa.float64(), "checks": pa.struct([("f0", pa.string()), ("f1", pa.bool_())]),
        "rows": pa.struct([("kind", pa.string()), ("f0", pa.int32()), ("f1", pa.string())]),
    }
    assert set(typed) == set(info["keyed_operators"]["per-type"]["states"])
    for state, arrow in typed.items():
        assert (schema("per-type", state).field("key").type, schema("per-type", state).field("value").type) == (pa.int32(), arrow), state
    assert schema("per-type", "ratio-by-initial").field("user_key").type == pa.string()  # Character
    timers = schema("per-user", "_timer_state/event_user-timers")
    assert (timers.field("key").type, timers.field("timestamp").type, timers.field("value").type) == (pa.string(), pa.int64(), pa.null())
    value = schema("per-user", "count").field("value")
    assert value.metadata[b"flink.serializer"].endswith(b"LongSerializer$LongSerializerSnapshot")
    # window operators: a TimeWindow namespace is a struct, the GlobalWindow (countWindow) null like VoidNamespace
    window = pa.struct([("start", pa.int64()), ("end", pa.int64())])
    contents = schema("per-account-window", "window-contents")
    assert (contents.field("namespace").type, contents.field("value").type) == (
        window, pa.struct([("f0", pa.int64()), ("f1", pa.int64()), ("f2", pa.string())]))
    assert schema("per-account-window", "_timer_state/event_window-timers").field("namespace").type == window
    assert schema("per-user-count-window", "count").field("namespace").type == pa.null()
    assert schema("per-user-count-window", "count").field("value").type == pa.int64()
    records = schema("per-user-count-window", "window-contents").field("value").type  # the Record POJO, one row per element
    assert {records.field(i).name: records.field(i).type for i in range(records.num_fields)} == {
        "wave": pa.int32(), "op": pa.string(), "user": pa.string(), "account": pa.int64(), "amount": pa.int64(),
        "tag": pa.string(), "ts": pa.int64()}

    # TTL: the value is the inner type and every row has its last-access timestamp
    recent = pq.read_table(operator_dir_of(out, "per-user") / "state=recent-tag")
    assert recent.schema.field("value").type == pa.string() and recent.num_rows > 0
    low, high = info["generated_between_ms"]
    assert all(low <= ts <= high for ts in recent.column("ttl_timestamp").to_pylist())

    # the decisions, per state and column, in _export.json
    document = json.loads((out / "_export.json").read_text())
    uids = {operator_id_for_uid(uid): uid for uid in KEYED_UIDS}
    states = {(uids.get(op["operator_id"]), s["state"]): s for op in document["operators"] for s in op["states"]}
    count = states[("per-user", "count")]
    assert count["columns"]["value"] == {
        "type": "int64", "serializer": "org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot",
        "describes": "Long",
    }
    assert count["ttl"] is False and states[("per-user", "recent-tag")]["ttl"] is True
    assert states[("per-user", "recent-tag")]["columns"]["value"]["describes"] == "String"
    assert states[("per-account", "profile")]["columns"]["value"]["type"] == "struct<owner: string, updates: int64>"
    assert states[("per-account", "profile")]["columns"]["value"]["describes"] == "POJO fixturejob.AccountProfile"
    assert states[("per-user", "count")]["columns"]["user_key"]["type"] == "null"
    assert states[("per-user-count-window", "count")]["columns"]["namespace"] == {
        "type": "null", "describes": "GlobalWindow",
        "serializer": "org.apache.flink.streaming.api.windowing.windows.GlobalWindow$Serializer$GlobalWindowSerializerSnapshot"}
    assert states[("per-account-window", "window-contents")]["columns"]["namespace"]["type"] == "struct<start: int64, end: int64>"
    assert {s["state"] for (uid, _), s in states.items() if uid == "per-user"} >= set(info["keyed_operators"]["per-user"]["states"])


def test_hive_partitioning_and_skipped_state(exported):
    out = exported[("flink-2.1-default", "checkpoint")]
    document = json.loads((out / "_export.json").read_text())
    assert not [s for s in document["skipped"] if s["what"] in ("operator-state", "full-snapshot-keyed-state")]
    assert "operator-list" in {s["kind"] for op in document["operators"] if op["uid"] == "records-seen" for s in op["states"]}
    timer_dir = operator_dir_of(out, "per-user") / f"state={partition_value('_timer_state/event_user-timers')}"
    assert timer_dir.name == "state=_timer_state%2Fevent_user-timers"
    timers = ds.dataset(timer_dir, partitioning=ds.partitioning(flavor="hive"), partition_base_dir=str(out))
    table = timers.to_table(columns=["operator", "state", "timestamp"])
    assert set(table.column("state").to_pylist()) == {"_timer_state/event_user-timers"}
    assert set(table.column("operator").to_pylist()) == {"per-user"}
    assert table.num_rows == sum(len(v.get("timers", [])) for v in json.loads((FIXTURES / "flink-2.1-default" / "expected.json").read_text())["keyed"]["per-user"].values())


def test_filters_and_refusals(tmp_path, read_only_guard):
    root = _job_root("flink-2.1-default")
    out = tmp_path / "filtered"
    document = _export(root, out, read_only_guard, operators=["per-account"], states=["balance", "amounts"])
    assert [op["uid"] for op in document["operators"]] == ["per-account"]
    assert [s["state"] for s in document["operators"][0]["states"]] == ["amounts", "balance"]
    assert sorted(p.name for p in (out / "operator=per-account").iterdir()) == ["state=amounts", "state=balance"]
    only_state = _export(root, tmp_path / "one-state", read_only_guard, states=["count"])  # a name two operators use
    assert sorted((op["uid"], [s["state"] for s in op["states"]]) for op in only_state["operators"]) == [
        ("per-user", ["count"]), ("per-user-count-window", ["count"])]
    # an operator id selects too
    op_id = document["operators"][0]["operator_id"]
    again = _export(root, tmp_path / "by-id", read_only_guard, operators=[op_id], states=["balance"])
    assert again["rows"] == document["operators"][0]["states"][1]["rows"]
    with pytest.raises(UsageError, match="no operator 'nope'"):
        export(str(root), str(tmp_path / "x"), operators=["nope"])
    with pytest.raises(UsageError, match="no state named 'nope'"):
        export(str(root), str(tmp_path / "y"), states=["nope"])
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    with pytest.raises(UsageError, match="inside the input"):
        export(str(root), str(root / "exported"))
    assert not (root / "exported").exists()
    with pytest.raises(UsageError, match="not empty"):
        export(str(root), str(out))


@pytest.mark.parametrize(("name", "which"), [s for s in SOURCES if _from_rocksdb_instances(*s)],
                         ids=[i for s, i in zip(SOURCES, SOURCE_IDS) if _from_rocksdb_instances(*s)])
def test_both_lsm_engines_write_identical_files(name, which, exported, tmp_path):
    """RocksDB (the default, through rocksdict) and the Python merge resolve every instance to the same
    entries, and the column-wise and row-wise decoders turn them into the same Parquet bytes."""
    python = _export(_source(name, which), tmp_path / "python", workers=1, engine="python")
    assert_identical(exported[(name, which)], tmp_path / "python", document=False)
    rocksdb = json.loads((exported[(name, which)] / "_export.json").read_text())
    for document, engine in ((rocksdb, "rocksdb"), (python, "python")):
        keyed = [op for op in document["operators"] if op["engines"]]
        assert keyed and all(e == {"engine": engine, "reason": None} for op in keyed for e in op["engines"].values())
    for op, theirs in zip(python["operators"], rocksdb["operators"]):
        for state, other in zip(op["states"], theirs["states"]):
            lsm = state["lsm"]
            if lsm is None:
                continue
            # the Python merge accounts for every SST entry; its live keys are RocksDB's
            assert lsm["entries"] == lsm["live"] + lsm["merged"] + lsm["shadowed"] + lsm["range_deleted"] + lsm["tombstones"]
            assert lsm["live"] == other["lsm"]["live"], state["state"]
            # the fast path decoded every batch of the fixtures (non-ASCII strings, TTL, timers, lists, maps, POJOs)
            assert state["batches"]["rows"] == 0 and other["batches"]["rows"] == 0, state["state"]


@pytest.mark.parametrize("name", ["flink-1.20-default", "flink-2.0-p3-mp300"])
def test_row_by_row_decoding_writes_identical_files(name, exported, tmp_path, monkeypatch):
    """The exact row-by-row decoder (taken for batches the column-wise one refuses) writes the same bytes."""
    from repair.formats.flink.in_rocksdb.keyed_columns import ColumnarMiss

    def refuse(self, *args, **kwargs):
        raise ColumnarMiss

    monkeypatch.setattr(export_parts.ColumnarStateDecoder, "decode", refuse)
    document = _export(_source(name, "checkpoint"), tmp_path / "rows", workers=1)
    assert_identical(exported[(name, "checkpoint")], tmp_path / "rows", document=False)
    batches = [s["batches"] for op in document["operators"] for s in op["states"] if s["lsm"] is not None]
    assert batches and all(b["columnar"] == 0 for b in batches) and any(b["rows"] for b in batches)


def test_auto_falls_back_to_the_python_merge_where_rocksdb_cannot_open_an_instance(tmp_path, exported, capsys):
    """A subtask whose MANIFEST is gone cannot be opened by RocksDB: ``auto`` reads it with the Python
    merge (which needs no MANIFEST) and says why, in ``_export.json`` and in the text output;
    ``--engine rocksdb`` refuses. The Parquet is the same."""
    from repair.cli.app import main
    from tests import damage

    name = "flink-1.20-p3-external-xxhash-lz4"
    harm = damage.damaged_copy(name, tmp_path / "in", "missing_manifest")
    document = _export(harm.root, tmp_path / "auto", workers=1)
    engines = [e for op in document["operators"] for e in op["engines"].values()]
    fallen = [e for e in engines if e["engine"] == "python"]
    assert len(fallen) == 1 and harm.file.name in fallen[0]["reason"] and "not found" in fallen[0]["reason"]
    assert [e for e in engines if e["engine"] == "rocksdb"]
    assert_identical(exported[(name, "checkpoint")], tmp_path / "auto", document=False)
    with pytest.raises(RepairError, match="RocksDB cannot serve this instance"):
        export(str(harm.root), str(tmp_path / "strict"), workers=1, engine="rocksdb")
    assert not (tmp_path / "strict").exists()
    capsys.readouterr()
    assert main(["export", str(harm.root), "--out", str(tmp_path / "text"), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "read by the toolkit's own LSM merge, as RocksDB could not serve them: 1 subtask(s)" in " ".join(out.split())
    assert harm.file.name in "".join(out.split()) and "not found" in out  # (the terminal width may fold the path)


def test_process_pool_gives_identical_files(tmp_path, exported):
    name = "flink-2.1-p3-external-xxh3-zstd"
    pooled = _export(_source(name, "checkpoint"), tmp_path / "pool", workers=2)
    assert_identical(exported[(name, "checkpoint")], tmp_path / "pool")
    assert pooled["rows"] == json.loads((exported[(name, "checkpoint")] / "_export.json").read_text())["rows"]


def _fail_at_part(monkeypatch, n: int) -> list[str]:
    """Make the ``n``-th part written raise a FormatError; returns the parts asked for so far."""
    from repair.ops.export import job as export_module

    real = export_module.write_state_part
    calls: list[str] = []

    def failing(storage, staging, file, columns, stream, **options):
        calls.append(file)
        if len(calls) == n:
            raise FormatError("value", 3, "something", "something else")
        return real(storage, staging, file, columns, stream, **options)

    monkeypatch.setattr(export_module, "write_state_part", failing)
    return calls


def test_a_failing_task_publishes_nothing(tmp_path, monkeypatch):
    """A task that fails after others wrote their parts: a typed error, and no output at all."""
    _fail_at_part(monkeypatch, 7)
    with pytest.raises(FormatError, match="something else"):
        export(str(_job_root("flink-2.1-default")), str(tmp_path / "out"), workers=1)
    assert list(tmp_path.iterdir()) == []


def test_files_left_by_dead_task_attempts_are_not_published(tmp_path, monkeypatch, exported):
    """A task attempt that died mid-write leaves a temporary file in the staging directory; a retry
    rewrote its part. The published directory holds exactly the parts the tasks reported."""
    from repair.ops.export import job as export_module

    real = export_module.write_state_part

    def leaving_debris(storage, staging, file, columns, stream, **options):
        Path(staging, file + ".tmp-0123456789abcdef").parent.mkdir(parents=True, exist_ok=True)
        Path(staging, file + ".tmp-0123456789abcdef").write_bytes(b"PAR1 half a file")
        Path(staging, file).write_bytes(b"an earlier attempt's part")
        return real(storage, staging, file, columns, stream, **options)

    monkeypatch.setattr(export_module, "write_state_part", leaving_debris)
    name = "flink-2.1-default"
    _export(_source(name, "checkpoint"), tmp_path / "out", workers=1)
    assert_identical(exported[(name, "checkpoint")], tmp_path / "out")


# -- the part writer: exact conversion, errors kept, bounded batches --------------------------------

_B = "org.apache.flink.api.common.typeutils.base."
INT = SerializerSnapshot(_B + "IntSerializer$IntSerializerSnapshot", 3)
STRING = SerializerSnapshot(_B + "StringSerializer$StringSerializerSnapshot", 3)
LONG = SerializerSnapshot(_B + "LongSerializer$LongSerializerSnapshot", 3)


def _row(**fields) -> dict:
    row = dict.fromkeys(("state", "kind", *COLUMNS))
    row.update(state="s", kind="value", key_group=1, key_raw=b"k", namespace_raw=b"\x00", value_raw=b"v")
    row.update(fields)
    return row


def _columns(value: SerializerSnapshot | None) -> StateColumns:
    from repair.formats.flink.arrow import absent

    return StateColumns({"key": column_type(STRING), "namespace": absent("void"), "user_key": absent("no map"), "value": column_type(value)})


def _write(tmp_path, columns: StateColumns, rows: list[dict]):
    from repair.io import storage as st

    stats = write_state_part(st.default_storage(), str(tmp_path), "part.parquet", columns, StateStream("s", "value", StateMetaInfo("s", 0), iter(rows)))
    return stats, pq.read_table(tmp_path / "part.parquet")


def test_values_a_column_cannot_hold_exactly_become_null_with_an_error(tmp_path):
    rows = [
        _row(key="a", value=7),
        _row(key="b", value=(1 << 31)),  # beyond int32
        _row(key="c", value=True),  # a bool is no int
        _row(key="\ud800", value=1),  # a lone surrogate (a Java string may hold one)
        _row(key="d", value=None, error="value: cannot decode com.example.Custom", value_raw=b"\x01\x02"),
    ]
    stats, table = _write(tmp_path, _columns(INT), rows)
    assert table.schema.field("value").type == pa.int32() and table.num_rows == 5
    assert table.column("value").to_pylist() == [7, None, None, 1, None]
    assert table.column("key").to_pylist() == ["a", "b", "c", None, "d"]
    assert table.column("value_raw").to_pylist() == [b"v", b"v", b"v", b"v", b"\x01\x02"]  # raw bytes always kept
    errors = table.column("error").to_pylist()
    assert errors[0] is None and "int32" in errors[1] and "int32" in errors[2] and errors[3].startswith("key: not representable")
    assert errors[4] == "value: cannot decode com.example.Custom"
    assert stats.not_representable == {"value": 2, "key": 1} and stats.rows_with_errors == 4 and stats.rows == 5
    assert stats.raw_fallback == ["key", "value"]


def test_columns_decoded_keeps_raw_bytes_only_where_decoding_failed_and_raw_keeps_no_decoded_value(tmp_path):
    from repair.io import storage as st

    rows = [
        _row(key="a", value=7),
        _row(key="b", value=(1 << 31)),  # beyond int32: not representable
        _row(key="\ud800", value=1),  # a lone surrogate
        _row(key="d", value=None, error="value: cannot decode com.example.Custom", value_raw=b"\x01\x02"),
    ]
    tables = {}
    for kept in ("decoded", "raw"):
        stream = StateStream("s", "value", StateMetaInfo("s", 0), iter(rows))
        stats = write_state_part(st.default_storage(), str(tmp_path), f"{kept}.parquet", _columns(INT), stream, kept=kept)
        tables[kept] = pq.read_table(tmp_path / f"{kept}.parquet")
        assert stats.rows == 4 and stats.raw_fallback == ["key", "value"]
    decoded, raw = tables["decoded"], tables["raw"]
    assert decoded.column("value").to_pylist() == [7, None, 1, None]
    assert decoded.column("value_raw").to_pylist() == [None, b"v", None, b"\x01\x02"]
    assert decoded.column("key").to_pylist() == ["a", "b", None, "d"]
    assert decoded.column("key_raw").to_pylist() == [None, None, b"k", None]
    assert decoded.column("error").equals(raw.column("error")) and decoded.column("error").null_count == 1
    assert raw.schema == decoded.schema  # the same columns and types whatever is kept
    for name in ("key", "namespace", "user_key", "value"):
        assert raw.column(name).null_count == 4
    assert raw.column("value_raw").to_pylist() == [b"v", b"v", b"v", b"\x01\x02"]


@pytest.mark.parametrize("name", ["flink-1.20-default", "flink-2.0-p3-mp300"])
def test_columns_decoded_and_raw_hold_the_same_state_as_both(name, exported, tmp_path, monkeypatch):
    """``--columns decoded``: every decoded cell as ``both`` writes it, a raw cell only where its decoded
    cell is null (then the same bytes), unless write-savepoint could not encode the column back (then
    every raw cell); ``raw``: every raw cell and no decoded value. The row-by-row decoder gives the same
    files as the column-wise one."""
    from repair.formats.flink.in_rocksdb.keyed_columns import ColumnarMiss
    from repair.formats.flink.value_encoders import writes_serializer

    both = exported[(name, "checkpoint")]
    outs = {kept: tmp_path / kept for kept in ("decoded", "raw")}
    for kept, out in outs.items():
        document = _export(_source(name, "checkpoint"), out, workers=1, columns=kept)
        assert document["columns"] == kept and document["format_version"] == 4
    assert json.loads((both / "_export.json").read_text())["columns"] == "both"
    thinned, kept_whole = 0, 0
    states = {state["path"]: state for op in json.loads((both / "_export.json").read_text())["operators"] for state in op["states"]}
    for part in sorted(both.rglob("part-*.parquet")):
        relative = part.relative_to(both)
        full = pq.read_table(part)
        decoded, raw = pq.read_table(outs["decoded"] / relative), pq.read_table(outs["raw"] / relative)
        assert decoded.schema == full.schema == raw.schema and decoded.num_rows == full.num_rows == raw.num_rows
        serializers = {column: decision["serializer"] for column, decision in states[str(relative.parent)]["columns"].items()}
        for column in ("key", "namespace", "user_key", "value"):
            values, bytes_ = full.column(column).to_pylist(), full.column(column + "_raw").to_pylist()
            assert decoded.column(column).to_pylist() == values
            encodable = writes_serializer(serializers[column]) and (column != "key" or writes_serializer(serializers["namespace"]))
            if encodable:
                assert decoded.column(column + "_raw").to_pylist() == [b if v is None else None for v, b in zip(values, bytes_)]
            else:
                assert decoded.column(column + "_raw").to_pylist() == bytes_
                kept_whole += bool(full.num_rows and bytes_[0] is not None)
            assert raw.column(column + "_raw").to_pylist() == bytes_ and raw.column(column).null_count == raw.num_rows
            thinned += sum(v is not None and b is not None for v, b in zip(values, bytes_))
        for column in ("key_group", "list_index", "ttl_timestamp", "timestamp", "error"):
            assert decoded.column(column).equals(full.column(column)) and raw.column(column).equals(full.column(column))
    assert thinned > 0 and kept_whole > 0

    def refuse(self, *args, **kwargs):
        raise ColumnarMiss

    monkeypatch.setattr(export_parts.ColumnarStateDecoder, "decode", refuse)
    _export(_source(name, "checkpoint"), tmp_path / "rows", workers=1, columns="decoded")
    assert_identical(outs["decoded"], tmp_path / "rows", document=False)


def test_columns_choice_from_the_cli_and_an_unknown_one_refused(tmp_path, capsys):
    from repair.cli.app import main

    source = str(_source("flink-1.20-default", "checkpoint"))
    with pytest.raises(UsageError, match="columns must be one of both, decoded, raw"):
        export(source, str(tmp_path / "x"), columns="typed")
    assert not (tmp_path / "x").exists()
    assert main(["export", source, "--out", str(tmp_path / "raw"), "--columns", "raw", "--workers", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["columns"] == "raw"
    assert main(["export", source, "--out", str(tmp_path / "y"), "--columns", "typed"]) == 2
    assert not (tmp_path / "y").exists()


def test_nan_non_bmp_and_pojo_nulls_are_exact(tmp_path):
    _P = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
    from repair.formats.flink.serializers import PojoField

    pojo = SerializerSnapshot(_P, 2, attributes={"pojo_class": "x.P"},
                              pojo_fields=[PojoField("name", "x.P", STRING), PojoField("n", "x.P", LONG)])
    rows = [_row(key="😀-\U0001F600", value={"name": None, "n": 3}), _row(key="x", value=None), _row(key="y", value={"name": "ü", "n": -(1 << 63)})]
    _stats, table = _write(tmp_path, _columns(pojo), rows)
    assert table.column("key").to_pylist()[0] == "😀-\U0001F600"
    assert table.column("value").to_pylist() == [{"name": None, "n": 3}, None, {"name": "ü", "n": -(1 << 63)}]
    assert table.column("value").null_count == 1  # a null POJO is a null struct, not a struct of nulls

    double = SerializerSnapshot(_B + "DoubleSerializer$DoubleSerializerSnapshot", 3)
    floats = SerializerSnapshot(_B + "FloatSerializer$FloatSerializerSnapshot", 3)
    for snapshot, arrow in ((double, pa.float64()), (floats, pa.float32())):
        directory = tmp_path / arrow.__str__()
        directory.mkdir()
        stats, table = _write(directory, _columns(snapshot), [_row(key="n", value=math.nan), _row(key="i", value=-math.inf), _row(key="h", value=0.5)])
        values = table.column("value").to_pylist()
        assert table.schema.field("value").type == arrow and math.isnan(values[0]) and values[1:] == [-math.inf, 0.5]
        assert table.column("value").null_count == 0 and not stats.not_representable
    # a float32 column refuses a double it would round
    directory = tmp_path / "rounded"
    directory.mkdir()
    stats, table = _write(directory, _columns(floats), [_row(key="r", value=0.1)])
    assert table.column("value").to_pylist() == [None] and stats.not_representable == {"value": 1}


def test_unsupported_serializer_gives_json_column_and_keeps_raw_bytes(tmp_path):
    kryo = SerializerSnapshot("org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot", 2, attributes={"type_class": "x.K"})
    columns = _columns(kryo)
    assert columns.columns["value"].to_json()["type"] == "json" and "Kryo x.K" in columns.columns["value"].describes
    rows = [_row(key="a", value=None, value_raw=b"\x09", error="value: cannot decode Kryo x.K")]
    stats, table = _write(tmp_path, columns, rows)
    assert table.schema.field("value").type == pa.string()
    assert table.schema.field("value").metadata[b"repair.encoding"] == b"json"
    assert table.to_pylist()[0]["value_raw"] == b"\x09" and stats.raw_fallback == ["value"]


def test_parts_are_written_in_bounded_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(export_parts, "BATCH_ROWS", 1000)
    seen = []

    def rows():
        for i in range(4500):
            seen.append(i)
            yield _row(key=str(i), value=i)

    stats, table = _write(tmp_path, _columns(LONG), list(rows()))
    assert stats.rows == 4500 and table.column("value").to_pylist() == list(range(4500))
    assert pq.ParquetFile(tmp_path / "part.parquet").metadata.num_row_groups == 5  # one row group per batch


def test_an_empty_state_still_gets_a_part_with_its_schema(tmp_path):
    from repair.io import storage as st

    stats = write_state_part(st.default_storage(), str(tmp_path), "p/part-00000.parquet", _columns(LONG), None)
    table = pq.read_table(tmp_path / "p" / "part-00000.parquet")
    assert stats.rows == 0 and table.num_rows == 0 and table.schema.field("value").type == pa.int64()


# -- S3 ------------------------------------------------------------------------------------------


def test_export_from_and_to_s3_is_identical(s3, s3_storage, tmp_path, exported):
    name = "flink-2.1-p3-external-xxh3-zstd"
    root = _job_root(name)
    files = {f"ckpt/{root.name}/{p.relative_to(root)}": p.read_bytes() for p in root.rglob("*") if p.is_file()}
    bucket = s3.new_bucket(files)
    out = f"s3://{bucket}/export/chk"
    result = export(f"s3://{bucket}/ckpt/{root.name}", out, storage=s3_storage, workers=1)
    keys = [k for k in s3.keys(bucket) if k.startswith("export/") and not k.endswith("/")]  # not "directory" objects
    local = exported[(name, "checkpoint")]
    assert sorted(k.removeprefix("export/chk/") for k in keys) == sorted(str(p.relative_to(local)) for p in local.rglob("*") if p.is_file())
    client = s3.client()
    for key in keys:
        relative = key.removeprefix("export/chk/")
        data = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        if relative == "_export.json":
            remote_doc, local_doc = json.loads(data), json.loads((local / relative).read_text())
            for doc in (remote_doc, local_doc):
                for k in ("source", "metadata", "out"):
                    doc.pop(k)
            assert remote_doc == local_doc
        else:
            assert pq.read_table(pa.BufferReader(data)).equals(pq.read_table(local / relative)), relative
    assert result.rows > 0


def test_a_failing_export_to_s3_leaves_no_key(s3, s3_storage, monkeypatch):
    calls = _fail_at_part(monkeypatch, 9)
    bucket = s3.new_bucket({"keep/me": b"x"})
    with pytest.raises(FormatError, match="something else"):
        export(str(_job_root("flink-2.1-default")), f"s3://{bucket}/export/chk", storage=s3_storage, workers=1)
    # nothing left but, perhaps, the empty "directory" markers pyarrow leaves (as publish_dir's own aborts do)
    assert len(calls) == 9 and [k for k in s3.keys(bucket) if not k.endswith("/")] == ["keep/me"]


# -- Spark ---------------------------------------------------------------------------------------




@pytest.mark.slow
@pytest.mark.parametrize(("name", "which"), SOURCES, ids=SOURCE_IDS)
def test_spark_local_export_is_identical(name, which, exported, local_spark, tmp_path):
    out = tmp_path / "spark"
    _export(_source(name, which), out, master=local_spark)
    assert_identical(exported[(name, which)], out)


@pytest.mark.slow
@pytest.mark.usefixtures("spark_class_archive")
def test_spark_standalone_cluster_on_loopback(exported, tmp_path):
    from tests.spark_cluster import standalone_cluster

    with standalone_cluster(tmp_path / "cluster") as cluster:
        for name, which in SOURCES:  # every fixture and savepoint, as in-process (which equals expected.json)
            out = tmp_path / f"{name}-{which}"
            _export(_source(name, which), out, master=cluster.url)
            assert_identical(exported[(name, which)], out)
        apps = cluster.state()["activeapps"]
        assert [app["name"] for app in apps] == ["repair"] and apps[0]["cores"] == 1  # the executor ran on the worker


def test_tasks_in_one_process_decode_the_metadata_once(tmp_path, monkeypatch):
    """Each task re-loads the snapshot where it runs; in one process they share one decoded ``_metadata``
    (the driver's load plus one for the tasks), not one decode per subtask (quadratic in the job's size)."""
    from repair.io import snapshot as snapshot_module

    decodes = []
    real = snapshot_module.decode_metadata
    monkeypatch.setattr(snapshot_module, "decode_metadata", lambda data: decodes.append(len(data)) or real(data))
    document = _export(_job_root("flink-1.20-default"), tmp_path / "out", workers=1)
    subtasks = {(op["operator_id"], sub) for op in document["operators"] for sub in op.get("subtasks", [])}
    assert len(subtasks) > 2
    assert len(decodes) == 2
    assert snapshot_module._shared == {}  # let go when the operation ends


def test_a_task_refuses_a_metadata_that_changed_since_planning(tmp_path):
    """A ``_metadata`` replaced between planning and a task (another version than the planned one) is a
    typed error naming the file, not a silent read of another checkpoint."""
    import shutil

    from repair.io import storage as st
    from repair.io.layout import discover
    from repair.io.snapshot import load_snapshot, load_snapshot_shared

    root = tmp_path / "job"
    shutil.copytree(_job_root("flink-1.20-default"), root)
    storage = st.default_storage()
    ref = discover(str(root), storage).snapshots[-1]
    planned = load_snapshot(ref, str(root), storage)
    assert load_snapshot_shared(ref, str(root), storage, planned.metadata_digest).metadata == planned.metadata
    metadata = Path(ref.metadata_uri.removeprefix("file://"))
    metadata.write_bytes(metadata.read_bytes() + b"\0")
    with pytest.raises(FormatError) as error:
        load_snapshot_shared(ref, str(root), storage, "0" * 16)
    assert "_metadata" in str(error.value) and "changed meanwhile" in str(error.value)
