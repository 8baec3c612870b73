"""``repair fallback``: the checkpoint it picks is the one an independent computation predicts.

The prediction comes from tests/damage.py, which finds the checkpoints that reference a damaged file
by scanning raw ``_metadata`` bytes for its name. The slow test restores the chosen checkpoint of a
freshly generated, damaged checkpoint in real Flink.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures import state_model
from fixtures.generate import SPECS, generate
from fixtures.restore import restore_state
from repair.cli.app import main
from repair.errors import UsageError
from repair.ops.fallback import fallback
from tests import damage
from tests.conftest import FIXTURES, fixture_info

EXTERNAL = "flink-1.20-p3-external-xxhash-lz4"


def _predicted(root: Path, broken: set[int]) -> int | None:
    valid = [c for c in damage.checkpoint_ids(root) if c not in broken]
    return max(valid) if valid else None


@pytest.mark.parametrize(
    "kind, fixture, options",
    [
        ("sst_flipped_byte", EXTERNAL, {}),
        ("missing_sst", "flink-2.1-p3-external-xxh3-zstd", {}),
        ("sst_bad_magic", EXTERNAL, {"checkpoint": 2}),
        ("missing_manifest", EXTERNAL, {}),
        ("metadata_truncated", EXTERNAL, {}),
        ("inline_sst_flipped_byte", "flink-1.20-default", {}),
    ],
)
def test_fallback_picks_the_predicted_checkpoint(tmp_path, kind, fixture, options):
    dmg = damage.damaged_copy(fixture, tmp_path, kind, **options)
    expected = _predicted(dmg.root, set(dmg.checkpoints))
    # Newest first, stopping at the first valid checkpoint: everything newer is checked and broken.
    quick = fallback(str(dmg.root))
    assert quick.chosen is not None and quick.chosen.checkpoint_id == expected
    assert all(v.valid is False for v in quick.checkpoints if v.checkpoint_id > expected)
    assert {v.checkpoint_id for v in quick.checkpoints if v.valid is False} <= set(dmg.checkpoints)
    # With --all every retained checkpoint is verified: exactly those referencing the damage are broken.
    result = fallback(str(dmg.root), check_all=True)
    assert result.chosen.checkpoint_id == expected
    broken = [v.checkpoint_id for v in result.checkpoints if not v.valid]
    assert sorted(broken) == sorted(dmg.checkpoints)
    assert [v.checkpoint_id for v in result.checkpoints] == sorted(damage.checkpoint_ids(dmg.root), reverse=True)
    if kind not in ("metadata_truncated",):
        # The dependency is spelled out: every checkpoint that references the bad file, newest first.
        (bad,) = [d for d in result.damaged if d.kind != "sst_not_in_manifest"][:1]
        assert bad.checkpoints == [f"chk-{c}" for c in sorted(dmg.checkpoints, reverse=True)]
        if len(dmg.checkpoints) > 1:
            assert "all reference" in bad.explain()


def test_no_valid_checkpoint_says_what_is_lost(tmp_path, capsys):
    copy = damage.copy_fixture(EXTERNAL, tmp_path)
    root = damage.checkpoint_root(copy)
    everything = set(damage.checkpoint_ids(root))
    covered: set[int] = set()
    victims = []
    # Damage SSTs until every retained checkpoint references a damaged one.
    for sst in (p for p in sorted((root / "shared").iterdir()) if damage.is_sst(p)):
        refs = set(damage.referencing_checkpoints(root, sst))
        if refs - covered:
            data = bytearray(sst.read_bytes())
            data[7] ^= 0xFF
            sst.write_bytes(bytes(data))
            covered |= refs
            victims.append(sst)
        if covered == everything:
            break
    assert covered == everything
    result = fallback(str(root))
    assert result.chosen is None and result.restore is None
    assert all(not v.valid for v in result.checkpoints)
    *losses, hint = result.lost
    assert losses and all("key groups" in line for line in losses)
    assert "cannot be recovered" in hint and "--drop-missing" in hint and "last resort" in hint
    assert main(["fallback", str(root), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["chosen"] is None and doc["lost"]


def test_two_deployments_in_one_directory_are_not_mixed(tmp_path, capsys):
    copy = damage.copy_fixture("flink-1.20-default", tmp_path)
    dmg = damage.add_foreign_checkpoint(copy, "flink-2.1-default")
    result = fallback(str(dmg.root))
    assert result.chosen is None and len(result.lineages) == 2
    (foreign_id,) = dmg.checkpoints
    foreign = next(l for l in result.lineages if f"chk-{foreign_id}" in l.checkpoints)
    own = next(l for l in result.lineages if l is not foreign)
    assert foreign.checkpoints == [f"chk-{foreign_id}"]
    assert own.checkpoints == [f"chk-{c}" for c in sorted(fixture_info(copy)["retained_checkpoints"], reverse=True)]
    assert fixture_info(FIXTURES / "flink-2.1-default")["job_id"] in foreign.job_ids
    assert "differ from their chk-N directories" in foreign.reason
    assert main(["fallback", str(dmg.root)]) == 1
    assert "2 jobs or deployments" in capsys.readouterr().out
    chosen = fallback(str(dmg.root), lineage=own.index).chosen
    assert chosen is not None and chosen.checkpoint_id == max(fixture_info(copy)["retained_checkpoints"])
    with pytest.raises(UsageError):
        fallback(str(dmg.root), lineage=7)


def test_json_contract_and_restore_advice(tmp_path, capsys):
    dmg = damage.damaged_copy(EXTERNAL, tmp_path, "sst_flipped_byte")
    assert main(["fallback", str(dmg.root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["chosen"]) == {"checkpoint_id", "path"}
    assert doc["chosen"]["path"].endswith(f"chk-{doc['chosen']['checkpoint_id']}")
    ids = [c["checkpoint_id"] for c in doc["checkpoints"]]
    assert ids == sorted(ids, reverse=True)
    for entry in doc["checkpoints"]:  # the fields: tests/cli/test_json_contracts.py; here, their values
        if entry["valid"] is not None:  # null: older than the chosen one, not verified
            assert entry["valid"] == (entry["culprits"] == [])
    # A relocated copy (the fixture was written under /var/lib/flink): relocate first, next to the root,
    # then restore the relocated checkpoint (Flink would open the recorded paths).
    chosen = doc["chosen"]["path"]
    target = f"{dmg.root}-relocated-chk-{doc['chosen']['checkpoint_id']}"
    relocate_step, *restores = doc["restore"]["commands"]
    assert relocate_step.startswith(f"repair relocate {chosen} --out {target} ")
    assert restores and all(f"-s {target}/chk-{doc['chosen']['checkpoint_id']} " in c and "NO_CLAIM" in c for c in restores)
    config = " ".join(doc["restore"]["config"])
    assert "execution.state-recovery.path" in config and "execution.savepoint.path" in config  # metadata V4: 1.16-1.20
    assert f"execution.state-recovery.path: {target}/chk-" in config
    assert any("written at /var/lib/flink" in note for note in doc["restore"]["notes"])


def test_fallback_needs_a_job_root():
    with pytest.raises(UsageError, match="job checkpoint root"):
        root = damage.checkpoint_root(FIXTURES / EXTERNAL)
        fallback(str(root / f"chk-{damage.checkpoint_ids(root)[-1]}"))


@pytest.mark.slow
def test_real_flink_restores_the_chosen_checkpoint(tmp_path):
    spec = SPECS[EXTERNAL]
    staging = tmp_path / "staging"
    fresh = generate(spec, tmp_path / "out", staging=staging)
    info = fixture_info(fresh)
    root = staging / "checkpoints" / spec.name / info["job_id"]  # in place: the paths in _metadata are valid
    ids = damage.checkpoint_ids(root)
    victim = next(
        p for p in sorted((root / "shared").iterdir())
        if damage.is_sst(p) and min(damage.referencing_checkpoints(root, p)) > ids[0]
    )
    refs = damage.referencing_checkpoints(root, victim)
    data = bytearray(victim.read_bytes())
    data[7] ^= 0xFF
    victim.write_bytes(bytes(data))

    result = fallback(str(root))
    expected_id = _predicted(root, set(refs))
    assert result.chosen is not None and result.chosen.checkpoint_id == expected_id

    records = state_model.read_records(fresh / "records.tsv")
    restored = restore_state(spec.flink_version, Path(result.chosen.path), records,
                             parallelism=spec.parallelism, max_parallelism=spec.max_parallelism)
    contained = info["records_per_checkpoint"][str(expected_id)]
    expected = state_model.expected_state(records[:contained])
    assert restored["keyed"] == expected["keyed"]
    assert restored["operator"] == expected["operator"]


def test_every_fixture_falls_back_past_a_damaged_file(fixture_dir, tmp_path):
    """Each fixture: damage a file the newest checkpoint references; the prediction comes from raw bytes."""
    copy = damage.copy_fixture(fixture_dir.name, tmp_path)
    root = damage.checkpoint_root(copy)
    newest = damage.checkpoint_ids(root)[-1]
    ssts = damage.referenced_files(root, newest, damage.is_sst)
    external = damage.referenced_files(root, newest, lambda p: True)
    if ssts:
        victim = min(ssts, key=lambda p: len(damage.referencing_checkpoints(root, p)))
        data = bytearray(victim.read_bytes())
        data[7] ^= 0xFF
        victim.write_bytes(bytes(data))
        kind = "block_checksum_mismatch"
    elif external:  # every SST is inline: lose an external file (OPTIONS, key-group data) instead
        victim = min(external, key=lambda p: len(damage.referencing_checkpoints(root, p)))
        victim.unlink()
        kind = "missing_file"
    else:  # all state inline in _metadata (the heap backend's small checkpoints): damage _metadata itself
        victim = damage.truncate_metadata(copy).file
        kind = "metadata_undecodable"
    refs = set(damage.referencing_checkpoints(root, victim)) if victim.name != "_metadata" else {newest}
    result = fallback(str(root))
    expected = _predicted(root, refs)
    assert (result.chosen.checkpoint_id if result.chosen else None) == expected
    assert {c.kind for v in result.checkpoints for c in v.culprits} == {kind}


def test_a_healthy_root_costs_one_checkpoint(monkeypatch):
    """Newest first: when the newest checkpoint is valid, only its files are read."""
    from repair.ops.verify import file_checks

    read = []
    original = file_checks.check_file
    monkeypatch.setattr("repair.ops.verify.engine.check_file", lambda task, storage=None: read.append(task.key) or original(task, storage))
    root = damage.checkpoint_root(FIXTURES / EXTERNAL)
    result = fallback(str(root))
    newest = max(damage.checkpoint_ids(root))
    assert result.chosen.checkpoint_id == newest
    assert [v.valid for v in result.checkpoints] == [True] + [None] * (len(result.checkpoints) - 1)
    newest_only = len(read)
    read.clear()
    from repair.ops.verify.engine import verify

    verify(str(root / f"chk-{newest}"))
    assert newest_only == len(read)


def test_broken_manifests_everywhere_point_to_rebuild_manifest(tmp_path):
    copy = damage.copy_fixture(EXTERNAL, tmp_path)
    root = damage.checkpoint_root(copy)
    for checkpoint in damage.checkpoint_ids(root):
        for manifest in damage.referenced_files(root, checkpoint, damage.is_manifest)[:1]:
            if manifest.exists():
                manifest.unlink()
    result = fallback(str(root), check_all=True)
    assert result.chosen is None
    assert "repair rebuild-manifest" in result.lost[-1]
