"""Helpers of the Flink metadata / backend meta tests: where the committed fixtures and samples are, and
how a handle's recorded path maps onto the fixture copy (test-only; the decoders never touch paths)."""

from __future__ import annotations

import json
from pathlib import Path

from repair.formats.flink.handles import ByteStreamHandle, FileHandle, RelativeFileHandle, SegmentFileHandle

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
#: Small files written by Flink's own serializers (see the two Generate*.java there).
SAMPLES = Path(__file__).parent / "data" / "flink_metadata"


def fixture_dirs() -> list[Path]:
    return sorted(p.parent for p in FIXTURES.glob("*/fixture.json"))


def fixture_info(fixture_dir: Path) -> dict:
    return json.loads((fixture_dir / "fixture.json").read_text())


def metadata_paths(fixture_dir: Path) -> list[Path]:
    """Every ``_metadata`` of a fixture: retained checkpoints, then savepoints."""
    return sorted(fixture_dir.glob("checkpoints/*/chk-*/_metadata")) + sorted(fixture_dir.glob("savepoints/*/_metadata"))


def all_metadata() -> list[tuple[Path, Path]]:
    """(fixture dir, _metadata path) of every committed fixture."""
    return [(d, p) for d in fixture_dirs() for p in metadata_paths(d)]


def metadata_id(item: tuple[Path, Path]) -> str:
    fixture_dir, path = item
    return f"{fixture_dir.name}/{path.parent.name}"


def local_file(fixture_dir: Path, metadata_path: Path, handle) -> Path | None:
    """Where the fixture keeps the file of a file-backed handle.

    Flink wrote absolute paths below /var/lib/flink/...; the fixture keeps the same tail below
    ``checkpoints/<job-id>/`` (``shared/<file>``, ``chk-N/<file>``, ``taskowned/...``) or
    ``savepoints/savepoint-*/``.
    """
    if isinstance(handle, RelativeFileHandle):
        return metadata_path.parent / handle.relative_path
    if isinstance(handle, FileHandle):
        recorded = handle.path
    elif isinstance(handle, SegmentFileHandle):
        recorded = handle.physical_path
    else:
        return None
    parts = recorded.split("/")
    job_id = fixture_info(fixture_dir)["job_id"]
    if job_id in parts:
        i = parts.index(job_id)
        return fixture_dir.joinpath("checkpoints", job_id, *parts[i + 1 :])
    for i, part in enumerate(parts):
        if part.startswith("savepoint-"):
            return fixture_dir.joinpath("savepoints", *parts[i:])
    return None


def handle_bytes(fixture_dir: Path, metadata_path: Path, handle) -> bytes:
    """The bytes behind a stream handle (inline, or the fixture's copy of the file)."""
    if isinstance(handle, ByteStreamHandle):
        return handle.data
    path = local_file(fixture_dir, metadata_path, handle)
    assert path is not None, f"no local file for {handle}"
    data = path.read_bytes()
    if isinstance(handle, SegmentFileHandle):
        return data[handle.start : handle.start + handle.size]
    return data
