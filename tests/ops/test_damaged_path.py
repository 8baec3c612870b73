"""A damaged path in ``_metadata``: one handle's recorded path disagrees with where its checkpoint's files were written.

Real Flink restoring such a checkpoint in place fails with ``FileNotFoundException`` on the recorded path,
and restores exact state from ``repair relocate``'s output (the damage matrix's ``path`` cells record both,
``fixtures/damage_matrix.json``). A moved checkpoint (every path pointing to the old place) and a job restored
from another job's checkpoint (its paths point into that job's ``shared/``, as real Flink writes them in
CLAIM and LEGACY mode) are no damage.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.damage_matrix import Cell, Located, load_results, prepare
from repair.formats.flink.handles import FileHandle
from repair.io.layout import PathResolver, SnapshotRef
from repair.io.storage import Storage
from repair.ops.advice import output_next_to, relocate_command, verify_next_steps
from repair.ops.fallback import fallback
from repair.ops.rebuild import rebuild_manifest
from repair.ops.relocate import relocate
from repair.ops.triage import RELOCATE, triage
from repair.ops.verify.engine import DAMAGED_PATH, verify

JOB = "7f725960ff6eb2ce5516f53d7277aa03"
FILES = ["shared/a", "shared/b", "shared/c", "chk-5/m"]


def _in_place(tmp_path, recorded: list[str], read_from=None) -> PathResolver:
    """A resolver for ``<tmp>/flink/checkpoints/<JOB>/chk-5`` (or ``read_from``) holding :data:`FILES`,
    whose ``_metadata`` records ``recorded``."""
    root = read_from or tmp_path / "flink" / "checkpoints" / JOB
    for tail in FILES:
        (root / tail).parent.mkdir(parents=True, exist_ok=True)
        (root / tail).write_bytes(b"x")
    ref = SnapshotRef(str(root / "chk-5"), str(root / "chk-5" / "_metadata"), 5)
    return PathResolver(ref, str(root), Storage(), recorded)


@pytest.mark.parametrize("damaged", [
    "{base}/glink/checkpoints/{job}/shared/a",  # a directory above the job root
    "{base}/flink/checkpoints/7f725960ff6eb2ce4516f53d7277aa03/shared/a",  # the job id
    "{base}/flink/checkpoints/{job}/sharee/a",  # the shared/ segment
])
def test_one_path_that_disagrees_with_its_siblings_is_damaged_not_moved(tmp_path, damaged):
    root = tmp_path / "flink" / "checkpoints" / JOB
    good = [f"file:{root}/{tail}" for tail in FILES if tail != "shared/a"]
    bad = "file:" + damaged.format(base=tmp_path, job=JOB)
    resolver = _in_place(tmp_path, [bad, *good])
    resolved = resolver.resolve(FileHandle(bad, 1))
    assert (resolved.uri, resolved.misrecorded, resolved.relocated) == (str(root / "shared" / "a"), True, False)
    assert resolver.misrecorded == {bad: str(root / "shared" / "a")}
    for path in good:  # the siblings are read where they are recorded
        sibling = resolver.resolve(FileHandle(path, 1))
        assert not sibling.misrecorded and not sibling.relocated
    assert resolver.moves == {} and resolver.recorded_job_ids == {JOB}  # no second job, no move


def test_a_damaged_checkpoint_number_is_found_and_an_older_checkpoints_files_are_not(tmp_path):
    """``chk-5/m`` recorded as ``chk-4/m`` (the file is in chk-5/): damaged. A file of an older ``chk-3/`` that is
    there (the changelog backend's materialized state is referenced so) is read there."""
    root = tmp_path / "flink" / "checkpoints" / JOB
    (root / "chk-3").mkdir(parents=True)
    (root / "chk-3" / "old").write_bytes(b"x")
    good = [f"file:{root}/{tail}" for tail in FILES if tail != "chk-5/m"] + [f"file:{root}/chk-3/old"]
    bad = f"file:{root}/chk-4/m"
    resolver = _in_place(tmp_path, [bad, *good])
    assert (resolver.resolve(FileHandle(bad, 1)).uri, resolver.resolve(FileHandle(bad, 1)).misrecorded) == (str(root / "chk-5" / "m"), True)
    older = resolver.resolve(FileHandle(f"file:{root}/chk-3/old", 1))
    assert (older.uri, older.misrecorded) == (str(root / "chk-3" / "old"), False)
    assert resolver.misrecorded == {bad: str(root / "chk-5" / "m")}


def test_a_moved_checkpoint_is_relocated_not_damaged(tmp_path):
    recorded = [f"file:/var/lib/flink/checkpoints/{JOB}/{tail}" for tail in FILES]
    resolver = _in_place(tmp_path, recorded, read_from=tmp_path / "backup" / "p3")
    for path in recorded:
        resolved = resolver.resolve(FileHandle(path, 1))
        assert resolved.relocated and not resolved.misrecorded
    assert resolver.misrecorded == {} and resolver.moves == {f"/var/lib/flink/checkpoints/{JOB}": str(tmp_path / "backup" / "p3")}


def test_a_moved_checkpoint_with_one_damaged_path_is_moved_and_damaged(tmp_path):
    recorded = [f"file:/var/lib/flink/checkpoints/{JOB}/{tail}" for tail in FILES if tail != "shared/a"]
    bad = f"file:/var/lib/glink/checkpoints/{JOB}/shared/a"
    copy = tmp_path / "backup" / JOB
    resolver = _in_place(tmp_path, [bad, *recorded], read_from=copy)
    assert resolver.resolve(FileHandle(bad, 1)).uri == str(copy / "shared" / "a")
    for path in recorded:
        resolver.resolve(FileHandle(path, 1))
    assert resolver.misrecorded == {bad: str(copy / "shared" / "a")}
    assert resolver.moves == {f"/var/lib/flink/checkpoints/{JOB}": str(copy)}


def test_files_where_another_root_records_them_are_no_damage(tmp_path):
    """The same job id under another checkpoint directory (changed between runs of a job with a fixed id),
    or another job's root, with the files there: never a damaged path."""
    root = tmp_path / "flink" / "checkpoints" / JOB
    elsewhere = [tmp_path / "old-dir" / JOB / "shared" / "z", tmp_path / "flink" / "checkpoints" / ("e" * 32) / "shared" / "y"]
    for path in elsewhere:
        path.parent.mkdir(parents=True)
        path.write_bytes(b"x")
    recorded = [f"file:{root}/{tail}" for tail in FILES] + [f"file:{path}" for path in elsewhere]
    resolver = _in_place(tmp_path, recorded)
    for path in recorded:
        assert not resolver.resolve(FileHandle(path, 1)).misrecorded
    assert resolver.misrecorded == {}


def _flip_first(metadata_file: Path, kind, attribute: str, old: str, new: str) -> str:
    """One handle's recorded path (the first ``kind`` handle's ``attribute``) with ``old`` replaced by ``new``."""
    from dataclasses import replace

    from repair.formats.flink.metadata import decode_metadata, encode_metadata

    metadata = decode_metadata(metadata_file.read_bytes())
    done = []

    def flip(handle):
        if done or not isinstance(handle, kind) or old not in getattr(handle, attribute):
            return handle
        done.append(getattr(handle, attribute).replace(old, new, 1))
        return replace(handle, **{attribute: done[0]})

    metadata.map_stream_handles(flip)
    metadata_file.write_bytes(encode_metadata(metadata))
    return done[0]


def test_a_damaged_segment_path_in_a_moved_file_merging_checkpoint_is_found(tmp_path):
    """File merging (Flink 1.20): segments record their physical file's path; the fixture is read away from
    where Flink wrote it (/var/lib/flink/...), so every root is moved, and one segment's root is damaged."""
    import shutil

    from repair.formats.flink.handles import SegmentFileHandle
    from tests.conftest import FIXTURES, fixture_info

    fixture = FIXTURES / "flink-1.20-file-merging"
    job = fixture_info(fixture)["job_id"]
    shutil.copytree(fixture / "checkpoints" / job, tmp_path / job)
    chk = tmp_path / job / f"chk-{fixture_info(fixture)['retained_checkpoints'][-1]}"
    flipped = _flip_first(chk / "_metadata", SegmentFileHandle, "physical_path", "/flink/checkpoints/", "/glink/checkpoints/")
    report = verify(str(chk))
    damaged = [f for f in report.findings if f.severity == "error"]
    assert damaged and {(f.kind, f.found) for f in damaged} == {(DAMAGED_PATH, flipped)}
    assert damaged[0].path == str(tmp_path / job / flipped.split(f"/{job}/", 1)[1])
    assert report.snapshots[0].relocated_from  # and the rest is read as moved, as before


def test_a_flipped_job_id_is_no_second_job_for_fallback(tmp_path):
    """A job root laid out as Flink writes it (every retained checkpoint in place), the newest with one job-id
    character flipped in one path: one lineage, the newest broken, the one before chosen."""
    import shutil

    from tests.conftest import FIXTURES, fixture_info

    fixture = FIXTURES / "flink-1.20-p3-external-xxhash-lz4"
    job = fixture_info(fixture)["job_id"]
    root = tmp_path / "flink" / "checkpoints" / job
    shutil.copytree(fixture / "checkpoints" / job, root)
    for chk in sorted(root.glob("chk-*")):  # each _metadata recording where its files are: in place
        assert relocate(str(chk), str(tmp_path / f"in-place-{chk.name}")).ok
        shutil.copy(tmp_path / f"in-place-{chk.name}" / chk.name / "_metadata", chk / "_metadata")
    assert verify(str(root / "chk-5")).ok
    _flip_first(root / "chk-5" / "_metadata", FileHandle, "path", f"/{job}/shared/", f"/{job[:8]}{chr(ord(job[8]) ^ 1)}{job[9:]}/shared/")
    result = fallback(str(root))
    assert len(result.lineages) == 1 and result.chosen.name == "chk-4"
    (broken,) = [v for v in result.checkpoints if v.name == "chk-5"]
    assert {c.kind for c in broken.culprits} == {DAMAGED_PATH}


# -- the damage matrix's path cells: real Flink refused them in place and restored relocate's output -------------

PATH_ROWS = [row for row in load_results()["cells"] if row["role"] == "path"]


def test_real_flink_refused_every_damaged_path_and_restored_relocates_output_exactly():
    assert {row["damage"] for row in PATH_ROWS} == {"flipped-dir", "flipped-job-id", "flipped-anchor"}
    for row in PATH_ROWS:
        assert not row["flink"]["restored"]
        # Flink names the recorded path it could not open (or, about one run in ten, another download thread's
        # "registry is already closed" surfaces instead: diagnose's restore-download-failed)
        cause = row["flink"]["root_cause"]
        assert cause["class"] == "java.io.FileNotFoundException" or "registry is already closed" in cause["message"]
        assert row["after_relocate"] == {"relocated": True, "restored": True, "state_equal": True}, row["id"]


@pytest.mark.parametrize("row", PATH_ROWS, ids=[row["id"] for row in PATH_ROWS])
def test_verify_names_the_damaged_path_and_triage_offers_relocate(row, tmp_path):
    prepared = prepare(Cell(row["fixture"], row["role"], row["damage"]), tmp_path)
    recorded = prepared.data.decode()
    report = verify(str(prepared.root))
    (finding,) = [f for f in report.findings if f.severity == "error"]
    assert finding.kind == DAMAGED_PATH and finding.found == recorded
    assert finding.reference.operator and finding.reference.subtask == 0 and finding.reference.local_name.endswith(".sst")
    assert finding.path.startswith(str(prepared.root) + "/shared/")  # where the file is: under the job root read
    assert recorded in finding.message and finding.path in finding.message

    result = triage(str(prepared.root))
    assert len(result.lineages) == 1  # the damaged job id is no second job
    best = result.best
    assert (best.action, best.snapshot, best.lossless) == (RELOCATE, prepared.chk_dir.name, True)
    relocation = relocate_command(str(prepared.chk_dir), output_next_to(str(prepared.root), "relocated", prepared.chk_dir.name))
    assert best.commands[0] == relocation
    assert recorded in best.why
    chosen = fallback(str(prepared.root))
    assert chosen.chosen is None and "repair relocate" in chosen.lost[-1]  # the newest (and only) checkpoint is broken

    assert any(f"`{relocation.to_shell()}`" in step for step in verify_next_steps(report))

    out = tmp_path / "relocated"
    written = relocate(str(prepared.chk_dir), str(out))
    assert written.ok
    (rewritten,) = [f for f in written.files if f.damaged_path]
    assert (rewritten.recorded, rewritten.target) == (recorded, "file:" + finding.path)
    assert verify(str(out / prepared.chk_dir.name)).ok


def test_a_damaged_path_beside_a_missing_manifest_is_mended_by_the_rebuild(tmp_path):
    """rebuild-manifest writes its _metadata as relocate does (each file where it is): a damaged path does not
    make a checkpoint whose MANIFEST is lost beyond a lossless rebuild."""
    prepared = prepare(Cell("flink-1.20-p3-external-xxhash-lz4", "path", "flipped-dir"), tmp_path)
    (_op, _sub, keyed) = next(Located(prepared.chk_dir).keyed())
    manifest = next(entry.handle.path for entry in keyed.private if entry.local_path.startswith("MANIFEST-"))
    Path(manifest.removeprefix("file:")).unlink()
    report = verify(str(prepared.root))
    assert {f.kind for f in report.findings if f.severity == "error"} == {DAMAGED_PATH, "missing_file"}
    best = triage(str(prepared.root)).best
    assert (best.action, best.lossless) == ("rebuild-manifest", True)
    rebuilt = rebuild_manifest(str(prepared.chk_dir), str(tmp_path / "rebuilt"))
    assert rebuilt.written is not None and rebuilt.written.ok
    assert verify(str(tmp_path / "rebuilt" / prepared.chk_dir.name)).ok


@pytest.mark.slow
@pytest.mark.parametrize("claim_mode", ["CLAIM"])
def test_a_job_restored_from_another_jobs_checkpoint_records_its_files_and_is_no_damage(tmp_path, claim_mode):
    """Real Flink 1.20 restoring another job's incremental checkpoint in CLAIM mode (LEGACY writes the same
    paths) under a new job id: its own checkpoints record that job's ``shared/`` files, by that job's root.
    Verified in place they are sound and one lineage; copied away with that job they are moved, not damaged;
    a flipped byte in one of those recorded paths is still found as a damaged path."""
    import shutil

    from fixtures import state_model
    from fixtures.damage_matrix import FIXTURES, _as_written, _relocated, fixture_info
    from fixtures.flink_harness import JobSettings, ensure_flink, run_fixture_job
    from repair.formats.flink.metadata import decode_metadata, encode_metadata
    from repair.io.snapshot import recorded_paths

    fixture = "flink-1.20-p3-external-xxhash-lz4"
    info, spec = fixture_info(fixture), fixture_info(fixture)["spec"]
    base = tmp_path / "flink" / "checkpoints"
    restored = _as_written(_relocated(fixture, info["retained_checkpoints"][-1], tmp_path / "copy"), base / info["job_id"])
    records = tmp_path / "records.tsv"
    state_model.write_records(state_model.read_records(FIXTURES / fixture / "records.tsv")[:200], records)
    new_job = "0123456789abcdef0123456789abcdef"
    settings = JobSettings(parallelism=info["parallelism"], max_parallelism=spec["max_parallelism"], checkpoint_dir=base,
                           restore_from=restored.resolve().as_uri(), job_id=new_job, inline_threshold="0b",
                           checksum=spec["checksum"], compression=spec["compression"], rocksdb_local_dir=tmp_path / "rocksdb",
                           extra_conf={"execution.state-recovery.claim-mode": claim_mode})
    run_fixture_job(ensure_flink(info["flink_version"]), "generate", settings, {"--records": str(records), "--log": str(tmp_path / "run.json")})

    root = base / new_job
    newest = max(root.glob("chk-*/_metadata"), key=lambda p: int(p.parent.name[4:]))
    old_paths = [p for p in recorded_paths(decode_metadata(newest.read_bytes())) if f"/{info['job_id']}/shared/" in p]
    assert old_paths  # Flink recorded the restored job's shared files by that job's root
    report = verify(str(root))
    assert report.ok and not report.findings
    result = triage(str(root))
    assert len(result.lineages) == 1 and result.best.action == "restore" and result.best.snapshot == newest.parent.name

    moved = tmp_path / "moved"
    shutil.copytree(base, moved)  # both job directories copied away together
    report = verify(str(moved / new_job))
    assert report.ok and not report.findings

    metadata = decode_metadata(newest.read_bytes())
    flipped = old_paths[0].replace("/flink/checkpoints/", "/glink/checkpoints/")
    metadata.map_stream_handles(lambda h: FileHandle(flipped, h.size) if isinstance(h, FileHandle) and h.path == old_paths[0] else h)
    newest.write_bytes(encode_metadata(metadata))
    damaged = [f for f in verify(str(newest.parent)).findings if f.severity == "error"]
    assert {(f.kind, f.found) for f in damaged} == {(DAMAGED_PATH, flipped)}
