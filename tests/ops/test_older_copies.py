"""``rebuild-manifest --older`` and ``triage --older``: older copies of a damaged checkpoint's state, from real Flink.

The fixture (``fixtures/older_copies.py``): a Flink 1.20 job ran over two waves (root A, one checkpoint
retained, then a native savepoint), and the same job restored A's newest checkpoint in NO_CLAIM mode and
ran a third wave into its own root B. B's first checkpoint uploaded A's live SSTs again, so some SSTs of
B's newest checkpoint are byte for byte files of A (found here by hashing the files, independently of the
code under test); the others hold what B wrote or compacted since. An SST of B is damaged:

* one that A holds: ``--older A`` replaces it by A's copy, nothing is lost, and real Flink restores the
  result with exactly ``expected.json`` (slow test); ``triage --older`` ranks that way above salvage;
* one that A does not hold: it is never taken for another file; each lost key of the ``count`` state
  says whether A (or its savepoint) holds the lost value, and the keys reported recoverable are exactly
  those whose count at A's checkpoint equals their count now, by the job's state model
  (``fixtures/state_model.py``), and the value reported is A's count.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from fixtures import state_model
from repair.formats.bytes.random_access import BytesSource
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.rocksdb.table.sst import BlockKind, open_table
from repair.ops.rebuild import rebuild_manifest
from repair.ops.triage import REBUILD_DROPPING, REBUILD_REPLACING, REBUILD_SALVAGING, triage
from repair.ops.verify.engine import verify
from tests.conftest import FIXTURES, tree_digest
from tests.json_schemas import schema_problems

FIXTURE = FIXTURES / "older_copies" / "flink-1.20-no-claim"
INFO = json.loads((FIXTURE / "fixture.json").read_text())
FIRST, SECOND = INFO["runs"]
UIDS = {operator_id_for_uid(uid): uid for uid in INFO["uids"]}


def _roots(base: Path) -> tuple[Path, Path, Path]:
    """Root A, root B and B's newest checkpoint under ``base``."""
    root_a, root_b = base / "checkpoints" / FIRST["job_id"], base / "checkpoints" / SECOND["job_id"]
    return root_a, root_b, root_b / f"chk-{SECOND['retained_checkpoints'][-1]}"


def _ssts(root: Path) -> dict[str, tuple[str, str, int]]:
    """``file name -> (sha1, column family, entries)`` of every SST in a root's shared/."""
    out = {}
    for path in sorted((root / "shared").iterdir()):
        data = path.read_bytes()
        try:
            props = open_table(BytesSource(data)).properties
        except Exception:  # MANIFEST, OPTIONS and meta data files
            continue
        out[path.name] = (hashlib.sha1(data).hexdigest(), props.column_family_name, props.num_entries)
    return out


ROOT_A, ROOT_B, _ = _roots(FIXTURE)
SST_A, SST_B = _ssts(ROOT_A), _ssts(ROOT_B)
IN_A = {sha for sha, _, _ in SST_A.values()}
#: B's SSTs that are byte for byte files of A (uploaded again after the NO_CLAIM restore), and the others.
SHARED_WITH_A = sorted(name for name, (sha, _, _) in SST_B.items() if sha in IN_A)
ONLY_IN_B = sorted(name for name, (sha, _, _) in SST_B.items() if sha not in IN_A)


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "fixture")
    return tmp_path / "fixture"


def _damage(path: Path, how: str) -> None:
    """A byte of the first data block flipped, or the file cut in the middle of its index block, or a byte of
    the first data block's stored checksum flipped (``checksum``: the block is lost, its bytes still read), or a
    byte of the properties block flipped (``properties``: salvage loses nothing)."""
    data = bytearray(path.read_bytes())
    blocks = list(open_table(BytesSource(bytes(data))).iter_block_handles())
    if how == "truncated":
        index = next(b.handle for b in blocks if b.kind == BlockKind.INDEX)
        path.write_bytes(bytes(data[: index.offset + index.size // 2]))
        return
    handle = next(b.handle for b in blocks if b.kind == (BlockKind.PROPERTIES if how == "properties" else BlockKind.DATA))
    data[handle.offset + (handle.size + 2 if how == "checksum" else 3)] ^= 0x20
    path.write_bytes(bytes(data))


def test_the_fixture_has_copies_and_new_files():
    assert SECOND["restored_from"] == {"job_id": FIRST["job_id"], "checkpoint": FIRST["retained_checkpoints"][-1], "claim_mode": "NO_CLAIM"}
    assert SHARED_WITH_A and ONLY_IN_B
    assert any(SST_B[name][1] == "count" for name in SHARED_WITH_A)


@pytest.mark.parametrize("how", ["flipped", "truncated"])
def test_a_damaged_sst_is_replaced_by_its_intact_original_and_nothing_is_lost(tmp_path, read_only_guard, how):
    name = next(n for n in SHARED_WITH_A if SST_B[n][1] == "count")
    base = _copy(tmp_path)
    root_a, root_b, chk = _roots(base)
    intact = (root_b / "shared" / name).read_bytes()
    _damage(root_b / "shared" / name, how)
    if how == "flipped":  # its only data block: without the older copy, its entries are lost
        assert rebuild_manifest(str(chk), str(tmp_path / "salvaged"), salvage=True).status == "rebuilt_with_losses"

    read_only_guard(root_a)
    result = rebuild_manifest(str(chk), str(tmp_path / "out"), salvage=True, older=[str(root_a)])
    assert result.ok and result.status == "rebuilt" and result.lost == [] and result.salvaged == []
    (item,) = result.replaced
    assert (item.reason, item.column_family, item.source.directory) == ("truncated" if how == "truncated" else "corrupt", "count",
                                                                          str(root_a / f"chk-{FIRST['retained_checkpoints'][-1]}"))
    assert (root_a / "shared" / item.copy_path.rsplit("/", 1)[-1]).read_bytes() == intact
    out = tmp_path / "out" / chk.name
    assert (out / item.new_file).read_bytes() == intact
    assert result.rebuilt == []  # the instance keeps its MANIFEST: the file is the one it lists
    assert verify(str(out)).ok
    doc = json.loads(json.dumps(result.to_json()))
    assert schema_problems(doc, "rebuild-manifest") == []
    assert doc["replaced"][0]["evidence"] and doc["older_sources"][0]["checkpoint"] == FIRST["retained_checkpoints"][-1]


def test_a_native_savepoint_is_a_source_too(tmp_path):
    name = next(n for n in SHARED_WITH_A if SST_B[n][1] == "count")
    base = _copy(tmp_path)
    _, root_b, chk = _roots(base)
    _damage(root_b / "shared" / name, "flipped")
    result = rebuild_manifest(str(chk), str(tmp_path / "out"), older=[str(base / "savepoints")])
    (item,) = result.replaced
    assert result.ok and item.source.kind == "savepoint"


def test_without_a_copy_older_alone_writes_nothing(tmp_path):
    name = next(n for n in ONLY_IN_B if SST_B[n][1] == "count")
    base = _copy(tmp_path)
    root_a, root_b, chk = _roots(base)
    _damage(root_b / "shared" / name, "flipped")
    result = rebuild_manifest(str(chk), str(tmp_path / "out"), older=[str(root_a)])
    assert result.replaced == [] and result.unrepairable and result.written is None
    assert not (tmp_path / "out").exists()


def test_the_output_may_not_be_inside_an_older_source(tmp_path):
    from repair.errors import UsageError

    base = _copy(tmp_path)
    root_a, _, chk = _roots(base)
    before = tree_digest(root_a)
    with pytest.raises(UsageError):
        rebuild_manifest(str(chk), str(root_a / "new"), salvage=True, older=[str(root_a)])
    assert tree_digest(root_a) == before


def test_lost_keys_are_recoverable_exactly_where_the_older_source_holds_their_value(tmp_path):
    """Every SST of B's ``count`` state that A does not hold, damaged in turn (its block's stored checksum:
    the entries still read): no replacement, and per lost key (whose entry was B's newest) the report
    matches the state model: A's count is the value reported, recoverable exactly when it is the count now."""
    records = state_model.make_records(waves=INFO["spec"]["waves"])
    at_a = state_model.expected_state(records[: max(FIRST["records_per_checkpoint"].values())])["keyed"]
    now = json.loads((FIXTURE / "expected.json").read_text())["keyed"]
    seen = {"recoverable": 0, "older": 0, "absent": 0}
    names = [n for n in ONLY_IN_B if SST_B[n][1] == "count"]
    assert names
    for i, name in enumerate(names):
        base = _copy(tmp_path / str(i))
        root_a, root_b, chk = _roots(base)
        _damage(root_b / "shared" / name, "checksum")
        result = rebuild_manifest(str(chk), str(tmp_path / str(i) / "out"), salvage=True, older=[str(root_a), str(base / "savepoints")])
        assert result.replaced == []
        (item,) = [*result.lost, *result.salvaged]
        assert item.lost_keys.complete
        for key in item.lost_keys.keys:
            user = key.key.key
            assert isinstance(user, str)
            operator = UIDS[item.operator_id]
            held = at_a[operator].get(user, {}).get("count")  # per-user's count, or the count window's
            assert (key.older.value if key.older is not None else None) == held, user
            if key.fate == "newer_kept":
                continue  # B holds a newer count: nothing lost, the comparison says nothing
            recoverable = key.older is not None and key.older.recoverable
            # (a count window purged is a deletion: absent at A and now, the same "value")
            assert recoverable == (key.older is not None and held == now[operator].get(user, {}).get("count")), user
            seen["recoverable" if recoverable else "older" if key.older is not None else "absent"] += 1
            if key.older is not None:
                assert key.older.source.checkpoint_id in (FIRST["retained_checkpoints"][-1], FIRST["retained_checkpoints"][-1] + 1)
    assert seen["recoverable"] and seen["older"]  # both outcomes occur: the test can tell them apart
    doc = json.loads(json.dumps(result.to_json()))
    assert schema_problems(doc, "rebuild-manifest") == []


@pytest.mark.parametrize("how, other", [("flipped", REBUILD_DROPPING), ("properties", REBUILD_SALVAGING)])
def test_triage_ranks_the_replacement_above_salvage_and_drop(tmp_path, how, other):
    """A damaged data block (the only one: salvage keeps nothing, dropping loses the file) and a damaged
    properties block (salvage loses nothing too): replacing the file by its original ranks first."""
    name = next(n for n in SHARED_WITH_A if SST_B[n][1] == "count")
    base = _copy(tmp_path)
    root_a, root_b, chk = _roots(base)
    _damage(root_b / "shared" / name, how)
    result = triage(str(root_b), older=[str(root_a)])
    actions = [way.action for way in result.ways]
    assert actions[0] == REBUILD_REPLACING and other in actions
    best = result.best
    assert best.lossless and result.ok and best.checkpoint_id == SECOND["retained_checkpoints"][-1]
    assert "--older" in best.commands[0].argv and str(root_a) in best.commands[0].argv
    without = triage(str(root_b))
    assert REBUILD_REPLACING not in [way.action for way in without.ways]
    doc = json.loads(json.dumps(result.to_json()))
    assert schema_problems(doc, "triage") == []


@pytest.mark.slow
def test_real_flink_restores_the_replaced_checkpoint_exactly(tmp_path):
    """What we claim restores does: B's checkpoint with a damaged count SST replaced from A, restored in real
    Flink 1.20, gives exactly expected.json (one JVM run)."""
    from fixtures.restore import restore_state
    from fixtures.salvage_matrix import differing_states

    name = next(n for n in SHARED_WITH_A if SST_B[n][1] == "count")
    base = _copy(tmp_path)
    root_a, root_b, chk = _roots(base)
    _damage(root_b / "shared" / name, "flipped")
    result = rebuild_manifest(str(chk), str(tmp_path / "out"), salvage=True, older=[str(root_a)])
    assert result.ok and result.replaced
    expected = json.loads((FIXTURE / "expected.json").read_text())
    restored = restore_state(INFO["flink_version"], tmp_path / "out" / chk.name, state_model.read_records(FIXTURE / "records.tsv"),
                             parallelism=1, max_parallelism=None, state_backend="rocksdb")
    assert restored["operator"] == expected["operator"] and differing_states(restored, expected) == []


def test_a_copy_is_never_the_original_of_another_file_of_the_same_size():
    """Hand-built bytes for the corner cases: another file of the same size (a data byte changed and its
    block's checksum written anew, so every block of it proves itself) is not the damaged file's original,
    nor is a damaged file compared with itself, nor a copy of another size; the damaged original is."""
    from repair.formats.rocksdb.table.checksum import stored_block_checksum
    from repair.formats.rocksdb.table.same_file import intact_original

    name = next(n for n in SHARED_WITH_A if SST_B[n][1] == "count")
    intact = (ROOT_B / "shared" / name).read_bytes()
    table = open_table(BytesSource(intact))
    handle = next(b.handle for b in table.iter_block_handles() if b.kind == BlockKind.DATA)
    other = bytearray(intact)
    other[handle.offset + 3] ^= 0x20
    checksum = stored_block_checksum(table.footer.checksum_type, bytes(other[handle.offset:handle.offset + handle.size]),
                                     other[handle.offset + handle.size], table.footer.base_context_checksum, handle.offset)
    other[handle.offset + handle.size + 1:handle.offset + handle.size + 5] = checksum.to_bytes(4, "little")
    damaged_original = bytearray(intact)
    damaged_original[handle.offset + 3] ^= 0x20
    assert intact_original(bytes(damaged_original), intact, len(intact))  # the damaged original: proven
    assert intact_original(bytes(other), intact, len(intact)) is None  # a block proving itself with other bytes
    assert intact_original(intact, intact, len(intact)) is None  # not damaged at all
    assert intact_original(bytes(damaged_original), intact, len(intact) + 1) is None  # not the recorded size


def test_the_text_report_says_what_was_replaced_and_what_each_lost_key_shows_in_the_source(tmp_path, capsys):
    from repair.cli.app import main

    base = _copy(tmp_path)
    root_a, root_b, chk = _roots(base)
    _damage(root_b / "shared" / next(n for n in SHARED_WITH_A if SST_B[n][1] == "count"), "flipped")
    assert main(["rebuild-manifest", str(chk), "--out", str(tmp_path / "out"), "--older", str(root_a)]) == 0
    text = capsys.readouterr().out
    assert "replaced by their intact original (--older), nothing lost" in text and "byte-identical" in text

    base = _copy(tmp_path / "second")
    root_a, root_b, chk = _roots(base)
    _damage(root_b / "shared" / next(n for n in ONLY_IN_B if SST_B[n][1] == "count"), "checksum")
    assert main(["rebuild-manifest", str(chk), "--out", str(tmp_path / "out2"), "--salvage", "--older", str(root_a)]) == 1
    text = capsys.readouterr().out
    result = rebuild_manifest(str(chk), str(tmp_path / "out3"), salvage=True, older=[str(root_a)])
    for key in [k for item in [*result.lost, *result.salvaged] for k in item.lost_keys.keys if k.older is not None]:
        assert key.older.describe() in text
    assert f"recoverable from {root_a / ('chk-' + str(FIRST['retained_checkpoints'][-1]))}" in text


def test_a_missing_sst_is_replaced_by_the_copy_its_manifest_record_describes(tmp_path):
    """A missing file has no bytes to compare: its copy must verify and have the recorded size and the column
    family, key range and sequence numbers the instance's MANIFEST records for it."""
    name = next(n for n in SHARED_WITH_A if SST_B[n][1] == "count")
    base = _copy(tmp_path)
    root_a, root_b, chk = _roots(base)
    intact = (root_b / "shared" / name).read_bytes()
    (root_b / "shared" / name).unlink()
    result = rebuild_manifest(str(chk), str(tmp_path / "out"), older=[str(root_a)])
    (item,) = result.replaced
    assert result.ok and item.reason == "missing" and "MANIFEST" in item.evidence and "file creation time" in item.evidence
    assert (tmp_path / "out" / chk.name / item.new_file).read_bytes() == intact
    assert verify(str(tmp_path / "out" / chk.name)).ok
