"""``repair compat OLD NEW`` against the compatibility matrix (fixtures/compat_matrix.py): in every cell
and release, the verdict is what real Flink did when the job's next version restored OLD."""

from __future__ import annotations

import json

import pytest

from fixtures.compat_matrix import CELLS_BY_NAME, RESULTS, baseline_key, new_snapshot, old_snapshot
from repair.cli.app import main
from repair.errors import RepairError
from repair.ops.compat import LOST, RESTORES, UNKNOWN, compat, default_max_parallelism
from repair.ops.compat.avro_schemas import generic_migration_problem, read_incompatibility
from tests.conftest import FIXTURES
from tests.json_schemas import schema_problems

RECORD = json.loads(RESULTS.read_text())
MATRIX = [(name, version) for name, cell in RECORD["cells"].items() for version in cell["flink"]]


def outcome_of(result) -> tuple[str, list[str]]:
    """What the verdicts predict, in the matrix's terms: ``failed`` when an entry is incompatible (or
    unknown), ``state-lost`` (with the lost states) when one is lost, else ``restored``."""
    verdicts = {e.verdict for e in result.entries}
    if verdicts - {*RESTORES, LOST}:
        return "failed", []
    if LOST in verdicts:
        return "state-lost", sorted(e.state for e in result.entries if e.verdict == LOST)
    return "restored", []


@pytest.mark.parametrize(("cell", "version"), MATRIX, ids=[f"{v}-{c}" for c, v in MATRIX])
def test_verdict_is_the_recorded_restore_outcome(cell, version):
    recorded = RECORD["cells"][cell]["flink"][version]
    result = compat(str(old_snapshot(version, cell)), str(new_snapshot(version, cell)))
    assert outcome_of(result) == (recorded["outcome"], recorded.get("lost", []))
    assert result.exit_code == (0 if recorded["outcome"] == "restored" else 1)
    assert not schema_problems(result.to_json(), "compat")
    for entry in result.entries:  # every entry that does not restore says what to do
        assert entry.verdict in RESTORES or entry.remedy is not None or entry.remedy_text


SAME_JOB = sorted(path.parent.name for path in FIXTURES.glob("flink-*/fixture.json"))


@pytest.mark.parametrize("fixture", SAME_JOB)
def test_a_job_restores_its_own_older_checkpoint(fixture):
    """Every fixture's oldest retained checkpoint against its newest (one job, every backend, changelog,
    SQL, Kryo, Avro, Scala): every state compatible as is, nothing lost."""
    root = FIXTURES / fixture / "checkpoints" / json.loads((FIXTURES / fixture / "fixture.json").read_text())["job_id"]
    checkpoints = sorted(root.glob("chk-*"), key=lambda p: int(p.name.removeprefix("chk-")))
    result = compat(str(checkpoints[0]), str(checkpoints[-1]))
    assert result.exit_code == 0 and {e.verdict for e in result.entries} == {"compatible"}


def test_matrix_covers_every_cell_on_both_releases():
    assert len(RECORD["cells"]) >= 20
    assert {v for _c, v in MATRIX} == set(RECORD["flink_versions"])
    assert all(set(cell["flink"]) == set(RECORD["flink_versions"]) for cell in RECORD["cells"].values())


def test_operator_gone_names_the_edit_that_renames_its_uid():
    version = "2.1.1" if "2.1.1" in RECORD["flink_versions"] else "1.20.3"
    result = compat(str(old_snapshot(version)), str(new_snapshot(version, "uid-changed")))
    (gone,) = [e for e in result.entries if e.state is None and e.verdict == "incompatible"]
    assert gone.remedy is not None and gone.remedy.argv[:2] == ("repair", "edit")
    assert "--rename-uid" in gone.remedy.argv


def test_the_rename_uid_remedy_makes_the_restore_compatible(tmp_path, capsys):
    """The printed edit, run as printed (its output elsewhere), gives a snapshot the new job restores."""
    old, new = old_snapshot("2.1.1"), new_snapshot("2.1.1", "uid-changed")
    (gone,) = [e for e in compat(str(old), str(new)).entries if e.state is None]
    argv = list(gone.remedy.argv[1:])
    argv[argv.index("--out") + 1] = str(tmp_path / "edited")
    assert main(argv) == 0
    capsys.readouterr()
    assert compat(str(tmp_path / "edited" / old.name), str(new)).ok


def test_max_parallelism_names_the_rescale_that_makes_the_restore_compatible(tmp_path, capsys):
    old, new = old_snapshot("1.20.3"), new_snapshot("1.20.3", "max-parallelism")
    (entry,) = [e for e in compat(str(old), str(new)).entries if e.state is None]
    assert entry.remedy.argv[:2] == ("repair", "rescale") and entry.remedy.argv[-2:] == ("--max-parallelism", "256")
    argv = list(entry.remedy.argv[1:])
    argv[argv.index("--out") + 1] = str(tmp_path / "rescaled")
    assert main(argv) == 0
    capsys.readouterr()
    assert compat(str(tmp_path / "rescaled"), str(new)).ok


def test_across_the_2_0_wall_points_to_upgrade_check():
    old = sorted((FIXTURES / "flink-1.20-default" / "savepoints").iterdir())[0]
    new = sorted((FIXTURES / "flink-2.1-default" / "savepoints").iterdir())[0]
    result = compat(str(old), str(new))
    (entry,) = result.entries
    assert entry.verdict == UNKNOWN and result.exit_code == 2
    assert entry.remedy.argv[:2] == ("repair", "upgrade") and "--check" in entry.remedy.argv


def test_a_job_root_is_refused():
    with pytest.raises(RepairError, match="job root"):
        compat(str(next((FIXTURES / "flink-1.20-default" / "checkpoints").iterdir())), str(new_snapshot("1.20.3", "unchanged")))


def test_default_max_parallelism_is_flinks():
    assert [default_max_parallelism(p) for p in (1, 85, 86, 100, 30000)] == [128, 128, 256, 256, 32768]


@pytest.mark.parametrize(("old", "new", "problem"), [
    ({"name": "a", "type": "long"}, {"name": "a", "type": "double"}, None),
    ({"name": "a", "type": "double"}, {"name": "a", "type": "long"}, "double in the old schema"),
    ({"name": "a", "type": "string"}, {"name": "a", "type": ["null", "string"]}, None),
    ({"name": "a", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
     {"name": "a", "type": {"type": "enum", "name": "E", "symbols": ["X"]}}, "enum symbols Y"),
])
def test_avro_reader_writer_rules(old, new, problem):
    def schema(field):
        return json.dumps({"type": "record", "name": "R", "fields": [field]})

    reason = read_incompatibility(schema(old), schema(new))
    assert (reason is None) if problem is None else (problem in reason)


def test_generic_record_migration_is_by_position():
    def schema(*names):
        return json.dumps({"type": "record", "name": "R", "fields": [{"name": n, "type": "long", "default": 0} for n in names]})

    assert generic_migration_problem(schema("a", "b"), schema("a")) is None
    assert "no field 2" in generic_migration_problem(schema("a", "b"), schema("a", "b", "c"))
    assert "position 0" in generic_migration_problem(schema("a", "b"), schema("b"))


def test_cli_exit_codes(capsys):
    version, old = "1.20.3", str(old_snapshot("1.20.3"))
    assert main(["compat", old, str(new_snapshot(version, "unchanged"))]) == 0
    assert main(["compat", old, str(new_snapshot(version, "state-renamed"))]) == 1
    assert "state-lost" in capsys.readouterr().out
    assert main(["compat", old, "/no/such/savepoint", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["command"] == "compat"


#: Cells generated again in real Flink by the slow test: a silent loss and a refused restore.
REGENERATED = [("1.20.3", "state-renamed"), ("1.20.3", "pojo-field-retyped")]


@pytest.mark.slow
@pytest.mark.parametrize(("version", "cell"), REGENERATED)
def test_real_flink_gives_the_recorded_outcome_again(tmp_path, version, cell):
    """The recorded outcome is Flink's, not a one-off: the next version run again (a new NEW) and OLD
    restored into it give the recorded outcome, and compat's verdict on the new NEW is the same."""
    from fixtures.compat_matrix import generate, restore_outcome

    (tmp_path / "new").mkdir()
    (tmp_path / "restore").mkdir()
    spec = CELLS_BY_NAME[cell]
    new = generate(version, spec, tmp_path / "snapshot", tmp_path / "new")
    again = restore_outcome(version, spec, old_snapshot(version, cell), RECORD["baseline"][baseline_key(version, cell)],
                            tmp_path / "restore")
    recorded = RECORD["cells"][cell]["flink"][version]
    assert again["outcome"] == recorded["outcome"]
    assert again.get("lost", []) == recorded.get("lost", [])
    if recorded["outcome"] == "failed":
        assert again["root_cause"]["class"] == recorded["root_cause"]["class"]
    assert outcome_of(compat(str(old_snapshot(version, cell)), str(new))) == (recorded["outcome"], recorded.get("lost", []))


@pytest.mark.parametrize(("snapshot", "backend"), [
    ("flink-1.20-heap", "heap"),  # the heap backend's checkpoint: full key groups
    ("flink-2.1-heap-changelog", "heap"),  # its materialized state under the changelog
    ("flink-1.20-rocksdb-full-snappy", "rocksdb"),  # RocksDB's full checkpoints are SST files too
    ("flink-1.20-changelog", "rocksdb"),
])
def test_the_backend_a_checkpoint_names(snapshot, backend):
    from repair.io import storage as st
    from repair.ops.compat import _one_snapshot
    from repair.ops.compat.states import operator_states

    root = FIXTURES / snapshot / "checkpoints" / json.loads((FIXTURES / snapshot / "fixture.json").read_text())["job_id"]
    latest = max(root.glob("chk-*"), key=lambda p: int(p.name.removeprefix("chk-")))
    storage = st.default_storage()
    keyed = [op for op in operator_states(_one_snapshot(str(latest), storage, "NEW"), storage) if op.keyed]
    assert keyed and {op.backend for op in keyed} == {backend}


def test_a_canonical_savepoint_names_no_backend_and_ttl_migration_says_what_the_heap_does():
    """Flink 2.x migrates TTL turned on on RocksDB; its heap backend refuses it. A heap checkpoint as NEW
    says incompatible; a canonical savepoint (every backend writes the same) gives RocksDB's verdict and
    names the heap backend's refusal."""
    heap = compat(str(old_snapshot("2.1.1", "hashmap-ttl-on")), str(new_snapshot("2.1.1", "hashmap-ttl-on")))
    savepoint = compat(str(old_snapshot("2.1.1", "ttl-on")), str(new_snapshot("2.1.1", "ttl-on")))
    (on_heap,) = [e for e in heap.entries if e.state == "last-tag"]
    (unknown,) = [e for e in savepoint.entries if e.state == "last-tag"]
    assert on_heap.verdict == "incompatible" and "heap backend refuses" in on_heap.reason
    assert unknown.verdict == "compatible-after-migration" and "heap backend refuses" in unknown.reason
