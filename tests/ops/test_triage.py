"""``repair triage``: every way back from a damaged job root, ranked, with its loss and exact commands.

Each case damages a copy of a real-Flink fixture as the verify tests do (tests/damage.py) and predicts
the answer from the damage alone: which checkpoints reference the damaged file, and what kind of file
it is. The slow test restores, in real Flink, the repaired newest checkpoint that triage proposes.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fixtures import state_model
from fixtures.restore import restore_state
from repair.cli.app import main
from repair.errors import UsageError
from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.table.sst import open_table
from repair.ops.triage import REBUILD, REBUILD_DROPPING, REBUILD_SALVAGING, RESTORE, triage
from tests import damage
from tests.conftest import FIXTURES, fixture_info

EXTERNAL = "flink-1.20-p3-external-xxhash-lz4"
#: Damage to an SST: rebuilt without it, with a loss. Damage to a MANIFEST: rebuilt, nothing lost.
SST_DAMAGE = {"missing_sst", "sst_flipped_byte", "sst_bad_magic", "sst_truncated", "inline_sst_flipped_byte"}
MANIFEST_DAMAGE = {"missing_manifest", "inline_manifest_flipped_byte"}
#: Damage to an SST's footer only (its magic): salvaged by scanning with every entry kept, a lossless way
#: ranked before the drop. (A flipped data byte hits the only data block of these small SSTs: nothing of
#: them is sound, so there is no salvage way.)
SALVAGED_WHOLE = {"sst_bad_magic"}
#: An SST truncated in its index: salvaged by scanning, every entry kept (the last one is the MANIFEST's
#: largest key), but whether it held range deletions is unknown: a lossy way, ranked above the drop.
SALVAGED_LOSSY = {"sst_truncated"}

CASES = [
    ("missing_sst", EXTERNAL),
    ("sst_flipped_byte", EXTERNAL),
    ("sst_bad_magic", EXTERNAL),
    ("sst_truncated", EXTERNAL),
    ("missing_manifest", EXTERNAL),
    ("metadata_truncated", EXTERNAL),
    ("inline_sst_flipped_byte", "flink-1.20-default"),
    ("inline_manifest_flipped_byte", "flink-1.20-default"),
    ("sst_flipped_byte", "flink-2.1-p3-external-xxh3-zstd"),
]


@pytest.mark.parametrize("kind, fixture", CASES)
def test_triage_ranks_the_ways_back_the_damage_leaves(tmp_path, kind, fixture):
    dmg = damage.damaged_copy(fixture, tmp_path, kind)
    retained = damage.checkpoint_ids(dmg.root)
    broken = sorted(dmg.checkpoints)
    valid = [c for c in retained if c not in broken]
    newest_valid = max(valid) if valid else None
    repairable = [c for c in broken if newest_valid is None or c > newest_valid]

    result = triage(str(dmg.root))

    expected = []  # (action, checkpoint), best first: lossless newest first, then lossy newest first
    if kind in MANIFEST_DAMAGE:
        expected += [(REBUILD, c) for c in repairable]
    if kind in SALVAGED_WHOLE:
        expected += [(REBUILD_SALVAGING, c) for c in repairable]
    if newest_valid is not None:
        expected.append((RESTORE, newest_valid))
    expected.sort(key=lambda way: -way[1])
    if kind in SST_DAMAGE:
        for c in sorted(repairable, reverse=True):
            expected += [(REBUILD_SALVAGING, c)] * (kind in SALVAGED_LOSSY) + [(REBUILD_DROPPING, c)]
    assert [(w.action, w.checkpoint_id) for w in result.ways] == expected
    assert [w.rank for w in result.ways] == list(range(1, len(expected) + 1))
    assert result.ok == any(w.lossless for w in result.ways) == (newest_valid is not None or kind in MANIFEST_DAMAGE)
    if kind == "metadata_truncated":
        assert [b.snapshot for b in result.beyond_repair] == [f"chk-{c}" for c in repairable]
    for way in result.ways:
        lossy_salvage = way.action == REBUILD_SALVAGING and kind in SALVAGED_LOSSY
        assert way.lossless == (way.action != REBUILD_DROPPING and not lossy_salvage) == (not way.lost and not lossy_salvage)
        if way.action == REBUILD_SALVAGING:  # exactly the damaged file, every entry kept
            (salvaged,) = way.salvaged
            assert salvaged.entries_lost == 0 and salvaged.entries_kept > 0 and salvaged.path.endswith(dmg.file.name)
            assert salvaged.range_deletions_lost == (None if kind in SALVAGED_LOSSY else 0)
            assert way.commands[0].argv[-1] == "--salvage"
        assert way.age_seconds is not None and way.written_at is not None
        if way.action == REBUILD_DROPPING:  # exactly the damaged file is lost
            assert {item.local_name for item in way.lost} and len(way.lost) == 1
            if dmg.file is not None and dmg.file.name != "_metadata":
                assert way.lost[0].path.endswith(dmg.file.name)
        # Every way's commands are in order: a repair first (writing next to the root, never inside), then the restore.
        assert way.commands[-1].argv[:3] == ("flink", "run", "-s")
        for command in way.commands[:-1]:
            if command.argv[0] == "repair":
                out = command.argv[command.argv.index("--out") + 1]
                assert not Path(out).is_relative_to(dmg.root) and Path(out).is_absolute()


def test_repairing_the_newest_checkpoint_is_best_when_only_its_manifest_is_bad(tmp_path, capsys):
    dmg = damage.damaged_copy("flink-1.20-default", tmp_path, "inline_manifest_flipped_byte")
    newest = max(damage.checkpoint_ids(dmg.root))
    assert dmg.checkpoints == [newest]
    assert main(["triage", str(dmg.root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    best = doc["ways"][0]
    assert doc["ok"] is True and doc["best"] == 1
    assert (best["action"], best["checkpoint_id"], best["lossless"], best["lost"]) == (REBUILD, newest, True, [])
    assert best["commands"][0] == f"repair rebuild-manifest {dmg.root / f'chk-{newest}'} --out {dmg.root}-rebuilt-chk-{newest}"
    assert best["commands"][1].startswith(f"flink run -s {dmg.root}-rebuilt-chk-{newest}/chk-{newest} ")
    assert (doc["ways"][1]["action"], doc["ways"][1]["checkpoint_id"]) == (RESTORE, newest - 1)
    assert main(["triage", str(dmg.root)]) == 0
    text = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert f"best way back: rebuild-manifest chk-{newest} (nothing lost)" in text
    assert f"1) repair rebuild-manifest {dmg.root}/chk-{newest}" in text


def test_each_metadata_is_decoded_once_the_rebuild_plan_reuses_verifys(tmp_path, monkeypatch):
    """Triage plans the rebuild of a broken checkpoint from the snapshot verify loaded (it decoded every
    ``_metadata`` a second time for each broken checkpoint before), and asks what the root is once."""
    import repair.io.snapshot as snapshot_module

    dmg = damage.damaged_copy("flink-1.20-default", tmp_path, "inline_manifest_flipped_byte")
    decoded = []
    original = snapshot_module.decode_metadata
    monkeypatch.setattr(snapshot_module, "decode_metadata", lambda data, *a, **k: decoded.append(len(data)) or original(data, *a, **k))
    result = triage(str(dmg.root))
    assert result.best.action == REBUILD  # the broken newest checkpoint's rebuild was planned
    assert len(decoded) == len(damage.checkpoint_ids(dmg.root))


def test_nothing_lossless_exits_1_and_says_what_is_lost(tmp_path, capsys):
    root = damage.checkpoint_root(damage.copy_fixture(EXTERNAL, tmp_path))
    retained = damage.checkpoint_ids(root)
    # An SST of the oldest checkpoint that every later one still references: no checkpoint is valid.
    shared = next(f for f in damage.referenced_files(root, retained[0], damage.is_sst)
                  if damage.referencing_checkpoints(root, f) == retained)
    shared.unlink()
    assert main(["triage", str(root), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False
    assert [(w["action"], w["checkpoint_id"]) for w in doc["ways"]] == [(REBUILD_DROPPING, c) for c in reversed(retained)]
    for way in doc["ways"]:
        assert [(lost["reason"], Path(lost["path"]).name) for lost in way["lost"]] == [("missing", shared.name)]
    assert main(["triage", str(root)]) == 1
    text = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert "lost: " in text and doc["ways"][0]["lost"][0]["local_name"] in text and "--drop-missing" in text


def test_a_moved_job_root_is_restored_after_relocating(tmp_path):
    copy = tmp_path / "backup" / "p3"
    shutil.copytree(damage.checkpoint_root(FIXTURES / EXTERNAL), copy)
    newest = max(damage.checkpoint_ids(copy))
    best = triage(str(copy)).best
    assert (best.action, best.checkpoint_id) == (RESTORE, newest) and best.relocated_from
    target = f"{copy}-relocated-chk-{newest}"
    assert best.commands[0].argv == ("repair", "relocate", f"{copy}/chk-{newest}", "--out", target)
    assert best.commands[1].argv[:4] == ("flink", "run", "-s", f"{target}/chk-{newest}")


def test_savepoints_are_ways_back_too(tmp_path):
    fixture = FIXTURES / "flink-2.1-default"
    info = fixture_info(fixture)
    result = triage(str(damage.checkpoint_root(fixture)), savepoints=str(fixture / "savepoints"))
    savepoints = [w for w in result.ways if w.kind == "savepoint"]
    assert sorted(w.snapshot for w in savepoints) == sorted(Path(p).name for p in info["savepoints"].values())
    assert all(w.action == RESTORE and w.lossless and w.commands[0].argv[:4] == ("flink", "run", "-s", w.path) for w in savepoints)
    assert result.checked["savepoints"] == len(savepoints)
    # Savepoints take their ids from the job's checkpoint counter: ranked among the checkpoints by id.
    ids = [w.checkpoint_id for w in result.ways]
    assert ids == sorted(ids, reverse=True) and result.ok
    with pytest.raises(UsageError, match="job checkpoint root"):
        triage(str(fixture / "savepoints" / Path(next(iter(info["savepoints"].values()))).name))


@pytest.mark.slow
def test_real_flink_restores_the_repaired_newest_checkpoint_triage_proposes(tmp_path):
    name = "flink-2.1-p3-external-xxh3-zstd"
    dmg = damage.damaged_copy(name, tmp_path, "missing_manifest")
    best = triage(str(dmg.root)).best
    newest = max(damage.checkpoint_ids(dmg.root))
    assert (best.action, best.checkpoint_id) == (REBUILD, newest)
    argv = shlex.split(best.commands[0].to_shell())  # exactly the command triage prints
    assert argv[:2] == ["repair", "rebuild-manifest"]
    assert main(argv[1:]) == 0
    restore_path = Path(shlex.split(best.commands[1].to_shell())[3])
    info = fixture_info(FIXTURES / name)
    records = state_model.read_records(FIXTURES / name / "records.tsv")
    restored = restore_state(info["flink_version"], restore_path, records, parallelism=info["parallelism"],
                             max_parallelism=info["spec"]["max_parallelism"], extra_conf=info["spec"].get("extra"))
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    assert restored["keyed"] == expected["keyed"]
    assert restored["operator"] == expected["operator"]


def test_several_deployments_in_one_root_choose_nothing_until_a_lineage_is_given(tmp_path, capsys):
    copy = damage.copy_fixture(EXTERNAL, tmp_path)
    dmg = damage.add_foreign_checkpoint(copy, "flink-2.1-default")
    foreign = max(dmg.checkpoints)
    assert main(["triage", str(dmg.root), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["best"] is None and len(doc["lineages"]) == 2
    assert "not choosing one for you" in doc["message"]
    own = next(l["index"] for l in doc["lineages"] if f"chk-{foreign}" not in l["checkpoints"])
    result = triage(str(dmg.root), lineage=own)
    assert result.ok and (result.best.action, result.best.checkpoint_id) == (RESTORE, foreign - 1)
    assert all(w.lineage == own for w in result.ways)
    with pytest.raises(UsageError, match="no lineage 7"):
        triage(str(dmg.root), lineage=7)


def test_a_broken_savepoint_is_listed_beyond_repair(tmp_path):
    fixture = damage.copy_fixture("flink-2.1-default", tmp_path)
    savepoint = next(p for p in sorted((fixture / "savepoints").iterdir())
                     if any(f.name != "_metadata" for f in p.iterdir()))  # one with files besides _metadata
    victim = next(f for f in sorted(savepoint.iterdir()) if f.name != "_metadata")
    victim.unlink()
    result = triage(str(damage.checkpoint_root(fixture)), savepoints=str(fixture / "savepoints"))
    assert savepoint.name not in {w.snapshot for w in result.ways}
    broken = next(b for b in result.beyond_repair if b.snapshot == savepoint.name)
    assert any(victim.name in reason for reason in broken.reasons)


def test_triage_of_a_renamed_copy_on_s3(tmp_path, s3, s3_storage):
    dmg = damage.damaged_copy(EXTERNAL, tmp_path, "missing_manifest")
    newest = max(dmg.checkpoints)
    files = {f"backup/p3/{p.relative_to(dmg.root)}": p.read_bytes() for p in sorted(dmg.root.rglob("*")) if p.is_file()}
    root = f"s3://{s3.new_bucket(files)}/backup/p3"
    result = triage(root, storage=s3_storage)
    best = result.best
    assert result.ok and (best.action, best.checkpoint_id) == (REBUILD, newest)
    assert best.commands[0].to_shell() == f"repair rebuild-manifest {root}/chk-{newest} --out {root}-rebuilt-chk-{newest}"
    assert list(best.relocated_from.values()) == [root]


#: A time none of the fixtures' files was written at: every file of a copy gets it, as a copy resets times.
COPIED_AT = 2_000_000_000  # 2033-05-18


def _copy_with_reset_times(fixture: str, tmp_path: Path) -> Path:
    root = damage.checkpoint_root(damage.copy_fixture(fixture, tmp_path))
    for path in [root, *root.rglob("*")]:
        os.utime(path, (COPIED_AT, COPIED_AT))
    return root


def _newest_sst_time(root: Path) -> int:
    """The newest creation time RocksDB recorded in any SST under ``root`` (the newest checkpoint holds it)."""
    magic = (0x88E241B785F4CFF7).to_bytes(8, "little")
    times = [open_table(BytesSource(data)).properties.file_creation_time
             for data in (p.read_bytes() for p in root.rglob("*") if p.is_file()) if data[-8:] == magic]
    return max(times)


def test_the_age_of_a_copied_checkpoint_comes_from_the_time_rocksdb_recorded(tmp_path, capsys):
    """`cp -r` resets every file's time; the creation time RocksDB records inside each SST stays."""
    root = _copy_with_reset_times(EXTERNAL, tmp_path)  # SSTs in files, not inline
    assert main(["triage", str(root), "--json"]) == 0
    (way,) = [w for w in json.loads(capsys.readouterr().out)["ways"] if w["action"] == RESTORE]
    recorded = datetime.fromtimestamp(_newest_sst_time(root), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert way["age_source"] == "newest-sst" and way["written_at"] == recorded
    assert main(["triage", str(root)]) == 0
    assert "newest SST" in capsys.readouterr().out


def test_without_ssts_the_age_is_the_file_time_and_says_so(tmp_path, capsys):
    root = _copy_with_reset_times("flink-2.1-heap-p3-snappy", tmp_path)  # the heap backend: no SST
    assert main(["fallback", str(root), "--json"]) == 0
    newest = json.loads(capsys.readouterr().out)["checkpoints"][0]
    assert newest["age_source"] == "metadata-file-time" and newest["written_at"] == "2033-05-18T03:33:20Z"
    assert main(["fallback", str(root)]) == 0
    out = capsys.readouterr().out
    assert " *" in out and "modification time" in out and "copy resets it" in out


def test_a_truncated_metadata_still_has_its_file_time(tmp_path, capsys):
    root = _copy_with_reset_times("flink-1.20-default", tmp_path)
    newest = root / f"chk-{max(damage.checkpoint_ids(root))}" / "_metadata"
    newest.write_bytes(newest.read_bytes()[:100])
    os.utime(newest, (COPIED_AT, COPIED_AT))
    assert main(["fallback", str(root), "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)["checkpoints"][0]
    assert verdict["verdict"] == "broken" and verdict["written_at"] == "2033-05-18T03:33:20Z"
    assert verdict["age_source"] == "metadata-file-time"
