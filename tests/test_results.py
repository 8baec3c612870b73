"""One result contract for every command (repair/results.py): each exported result type has ``ok``,
``exit_code``, ``source``, ``findings`` and ``to_json()``, and the library's ``to_json()`` is the
``--json`` document byte for byte, envelope included (docs/library.md says so)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pytest

import repair
from repair.cli.app import main
from repair.cli.output import print_json
from repair.results import CommandResult
from tests import damage
from tests.samples import ROOT_120, SEED_TRACE, UPGRADE_SOURCE

#: The compatibility matrix's Flink 1.20 snapshots: OLD, and the NEW of each change.
COMPAT = ROOT_120.parents[2] / "compat" / "flink-1.20"

RESULT_TYPES = [name for name in repair.__all__ if name.endswith("Result")]


@pytest.mark.parametrize("name", RESULT_TYPES)
def test_every_exported_result_follows_the_contract(name):
    result_type = getattr(repair, name)
    assert issubclass(result_type, CommandResult)
    assert result_type.ok is not CommandResult.ok, "defines ok"
    assert result_type.document is not CommandResult.document, "defines its document"
    fields = {field.name for field in dataclasses.fields(result_type)}
    for attribute in ("source", "findings"):
        assert attribute in fields or isinstance(getattr(result_type, attribute, None), property), attribute


def test_the_contract_covers_every_command():
    assert len(RESULT_TYPES) == 18  # one per command; write-savepoint and rescale share one


#: Commands run on a copy of a fixture with one SST missing (what they judge is then not empty).
ON_DAMAGE = {"verify", "fallback", "triage", "rebuild-manifest", "size", "diff"}


def _cases(tmp_path, damaged) -> dict:
    """Per command: ``(library call, CLI arguments, the output both write to or None)``."""
    out = tmp_path / "out"
    config = tmp_path / "flink-conf.yaml"
    config.write_text("state.backend.type: rocksdb\nstate.checkpoints.num-retained: 1\n")
    newest = damaged and damaged / f"chk-{max(damage.checkpoint_ids(damaged))}"
    oldest = damaged and damaged / f"chk-{min(damage.checkpoint_ids(damaged))}"
    return {
        "inspect": (lambda: repair.inspect(str(ROOT_120)), ["inspect", str(ROOT_120)], None),
        "verify": (lambda: repair.verify(str(damaged)), ["verify", str(damaged)], None),
        "fallback": (lambda: repair.fallback(str(damaged)), ["fallback", str(damaged)], None),
        "triage": (lambda: repair.triage(str(damaged)), ["triage", str(damaged)], None),
        "orphans": (lambda: repair.orphans(str(ROOT_120)), ["orphans", str(ROOT_120)], None),
        "size": (lambda: repair.size(str(damaged)), ["size", str(damaged)], None),
        "diff": (lambda: repair.diff(str(oldest), str(newest)), ["diff", str(oldest), str(newest)], None),
        "compat": (lambda: repair.compat(str(COMPAT / "old"), str(COMPAT / "state-renamed")),
                   ["compat", str(COMPAT / "old"), str(COMPAT / "state-renamed")], None),
        "relocate": (lambda: repair.relocate(str(ROOT_120 / "chk-5"), str(out)), ["relocate", str(ROOT_120 / "chk-5"), "--out", str(out)], out),
        "rebuild-manifest": (lambda: repair.rebuild_manifest(str(newest), str(out), drop_missing=True),
                             ["rebuild-manifest", str(newest), "--out", str(out), "--drop-missing"], out),
        "diagnose": (lambda: repair.diagnose(SEED_TRACE.read_text(errors="replace"), source=str(SEED_TRACE)), ["diagnose", str(SEED_TRACE)], None),
        "doctor": (lambda: repair.doctor(str(config), flink_version="1.20"), ["doctor", str(config), "--flink", "1.20"], None),
        "export": (lambda: repair.export(str(ROOT_120), str(out)), ["export", str(ROOT_120), "--out", str(out)], out),
        "edit": (lambda: repair.edit(str(ROOT_120 / "chk-5"), str(out), rename_uids={"per-type": "gone"}),
                 ["edit", str(ROOT_120 / "chk-5"), "--out", str(out), "--rename-uid", "per-type=gone"], out),
        "rescale": (lambda: repair.rescale(str(ROOT_120), str(out), max_parallelism=256),
                    ["rescale", str(ROOT_120), "--out", str(out), "--max-parallelism", "256"], out),
        "upgrade": (lambda: repair.upgrade(str(UPGRADE_SOURCE), "2.1", check=True),
                    ["upgrade", str(UPGRADE_SOURCE), "--to", "2.1", "--check"], None),
    }


@pytest.mark.parametrize("command", ["inspect", "verify", "fallback", "triage", "orphans", "size", "diff", "compat", "relocate", "rebuild-manifest",
                                     "diagnose", "doctor", "export", "edit", "rescale", "upgrade"])
def test_the_library_json_is_the_cli_json(command, tmp_path, capsys, monkeypatch):
    import repair.ops.triage

    monkeypatch.setattr(repair.ops.triage.time, "time", lambda: 1_800_000_000.0)  # triage's ages, the same in both runs
    damaged = damage.damaged_copy("flink-1.20-p3-external-xxhash-lz4", tmp_path, "missing_sst").root if command in ON_DAMAGE else None
    call, args, out = _cases(tmp_path, damaged)[command]
    _assert_the_cli_prints(call(), args, out, capsys)


def _assert_the_cli_prints(result, args: list[str], out, capsys) -> None:
    """``repair <args> --json`` prints the library's ``result.to_json()`` byte for byte and exits with
    ``result.exit_code`` (writing ``out`` again, when the command writes)."""
    print_json(result.to_json())
    library = capsys.readouterr().out
    if out is not None:
        shutil.rmtree(out)
    assert main([*args, "--json"]) == result.exit_code
    assert capsys.readouterr().out == library


def test_write_savepoint_library_json_is_the_cli_json(tmp_path, capsys):
    export_dir, out = tmp_path / "export", tmp_path / "savepoint"
    repair.export(str(ROOT_120), str(export_dir))
    _assert_the_cli_prints(repair.write_savepoint(str(export_dir), str(out)), ["write-savepoint", str(export_dir), "--out", str(out)],
                           out, capsys)


def test_sources_are_absolute_when_the_arguments_are_relative(tmp_path, capsys, monkeypatch):
    """``source`` (and the _metadata an export records for write-savepoint) does not depend on the
    directory a command ran in: relative arguments are echoed absolute."""
    monkeypatch.chdir(tmp_path)
    root = os.path.relpath(ROOT_120, tmp_path)
    config = tmp_path / "flink-conf.yaml"
    config.write_text("state.backend.type: rocksdb\n")
    runs = [["inspect", root], ["verify", root], ["orphans", root], ["fallback", root], ["triage", root], ["size", root],
            ["diff", f"{root}/chk-4", f"{root}/chk-5"],
            ["relocate", f"{root}/chk-5", "--out", "relocated"], ["rebuild-manifest", f"{root}/chk-5", "--out", "rebuilt"],
            ["edit", f"{root}/chk-5", "--out", "edited", "--rename-uid", "per-type=gone"],
            ["export", root, "--out", "export"], ["write-savepoint", "export", "--out", "savepoint"],
            ["diagnose", os.path.relpath(SEED_TRACE, tmp_path)], ["doctor", "flink-conf.yaml"]]
    for args in runs:
        main([*args, "--json"])
        document = json.loads(capsys.readouterr().out)
        assert os.path.isabs(document["source"]), (args[0], document["source"])
    exported = json.loads((tmp_path / "export" / "_export.json").read_text())
    assert exported["schema_version"] == 1
    assert os.path.isabs(exported["source"]) and os.path.isabs(exported["metadata"])


def test_rebuild_db_library_json_is_the_cli_json(tmp_path, capsys):
    from tests.flink_instances import flink_instances

    db, out = flink_instances("flink-1.20-p3-external-xxhash-lz4", tmp_path)[0], tmp_path / "new-db"
    for manifest in db.glob("MANIFEST-*"):
        manifest.unlink()
    _assert_the_cli_prints(repair.rebuild_db(str(db), str(out)), ["rebuild-manifest", str(db), "--out", str(out)], out, capsys)
