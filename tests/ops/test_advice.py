"""Text output ends with the next step: rebuild-manifest when it saves state, relocate for a moved
checkpoint, fallback when the newest _metadata is unreadable, triage when anything is broken; and
fallback and inspect show how old each checkpoint is."""

from __future__ import annotations

import shutil

from repair.cli.app import main
from tests import damage
from tests.conftest import FIXTURES

EXTERNAL = "flink-1.20-p3-external-xxhash-lz4"


def _text(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    return code, " ".join(capsys.readouterr().out.split())  # rich wraps long lines


def test_a_broken_manifest_of_the_newest_checkpoint_points_to_rebuild_manifest(tmp_path, capsys):
    dmg = damage.damaged_copy("flink-1.20-default", tmp_path, "inline_manifest_flipped_byte")
    newest = max(dmg.checkpoints)
    code, out = _text(capsys, "verify", str(dmg.root))
    assert code == 1
    tail = out[out.index(" next "):]
    assert f"`repair rebuild-manifest {dmg.root}/chk-{newest} --out {dmg.root}-rebuilt-chk-{newest}` rebuilds it from its SSTs with nothing lost" in tail
    assert f"`repair triage {dmg.root}`" in tail
    code, out = _text(capsys, "fallback", str(dmg.root))
    assert code == 0
    tail = out[out.index(" next "):]
    assert f"chk-{newest} is newer than chk-{newest - 1}" in tail and "rebuild-manifest" in tail


def test_lost_ssts_do_not_point_to_a_lossless_rebuild(tmp_path, capsys):
    dmg = damage.damaged_copy(EXTERNAL, tmp_path, "missing_sst")
    code, out = _text(capsys, "verify", str(dmg.root))
    assert code == 1
    assert "rebuilds it from its SSTs with nothing lost" not in out and f"`repair triage {dmg.root}`" in out


def test_an_unreadable_newest_metadata_points_to_fallback(tmp_path, capsys):
    dmg = damage.damaged_copy(EXTERNAL, tmp_path, "metadata_truncated")
    code, out = _text(capsys, "verify", str(dmg.root))
    assert code == 1
    assert f"cannot be read: `repair fallback {dmg.root}` picks the newest valid checkpoint" in out


def test_a_moved_checkpoint_points_to_relocate_and_a_clean_one_has_no_advice(tmp_path, capsys):
    copy = tmp_path / "p3"
    shutil.copytree(damage.checkpoint_root(FIXTURES / EXTERNAL), copy)
    newest = max(damage.checkpoint_ids(copy))
    code, out = _text(capsys, "verify", str(copy / f"chk-{newest}"))
    assert code == 0 and f"restore it after `repair relocate {copy}/chk-{newest} --out {copy}-relocated-chk-{newest}`" in out
    code, out = _text(capsys, "fallback", str(copy))
    assert code == 0 and f"repair relocate {copy}/chk-{newest} --out {copy}-relocated-chk-{newest}" in out
    assert f"flink run -s {copy}-relocated-chk-{newest}/chk-{newest} -claimMode NO_CLAIM" in out
    relocated = tmp_path / "relocated"
    assert main(["relocate", str(copy / f"chk-{newest}"), "--to", str(relocated)]) == 0
    capsys.readouterr()
    code, out = _text(capsys, "verify", str(relocated / f"chk-{newest}"))
    assert code == 0 and " next " not in out


def test_fallback_and_inspect_show_ages(tmp_path, capsys):
    import json
    import os
    import time

    root = damage.checkpoint_root(damage.copy_fixture(EXTERNAL, tmp_path))
    newest = root / f"chk-{max(damage.checkpoint_ids(root))}" / "_metadata"
    stamp = 1767225600  # 2026-01-01T00:00:00Z
    os.utime(newest, (stamp, stamp))
    code, out = _text(capsys, "fallback", str(root))
    assert code == 0 and " age " in out
    code, out = _text(capsys, "inspect", str(root))
    assert code == 0 and "written 2026-01-01 00:00:00 UTC (" in out and " ago; the _metadata file's time" in out
    assert main(["inspect", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["written_at"] == "2026-01-01T00:00:00Z"
    assert main(["fallback", str(root), "--json"]) == 0
    chosen = json.loads(capsys.readouterr().out)["checkpoints"][0]
    # a verified checkpoint is dated by its newest SST (RocksDB records when it wrote it), not by the
    # _metadata file's time, which a copy resets
    assert chosen["age_source"] == "newest-sst" and chosen["written_at"] != "2026-01-01T00:00:00Z"
    assert time.time() > stamp


def test_inspect_of_a_root_whose_newest_metadata_is_unreadable_names_an_older_one(tmp_path, capsys):
    dmg = damage.damaged_copy(EXTERNAL, tmp_path, "metadata_truncated")
    newest = max(dmg.checkpoints)
    assert main(["inspect", str(dmg.root)]) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert f"`repair inspect {dmg.root} -c {newest - 1}` reads an older one" in error
    assert main(["inspect", str(dmg.root), "-c", str(newest - 1)]) == 0


def test_orphans_with_missing_files_point_to_triage(tmp_path, capsys):
    dmg = damage.damaged_copy(EXTERNAL, tmp_path, "missing_sst")
    code, out = _text(capsys, "orphans", str(dmg.root))
    assert "1 referenced file(s) missing" in out and f"`repair triage {dmg.root}` ranks the ways back" in out
