"""Make damaged copies of a healthy fixture, for tests. The original is never touched.

Each damage copies the fixture into a temp dir first and returns a :class:`Damage` that says what was
done, to which file, and which checkpoints reference it, so tests can predict what ``verify`` and
``fallback`` must report.

These helpers deliberately do not use the ``repair`` package (the code under test): they find files
by scanning raw bytes. A shared file belongs to a checkpoint when its name (a UUID) occurs in that
checkpoint's ``_metadata``; an SST is a file that ends with the block-based table magic; a MANIFEST is
a file that is not an SST and whose first record names the comparator.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

#: Block-based table magic number, little-endian, the last 8 bytes of every SST (RocksDB table/format.cc).
SST_MAGIC = (0x88E241B785F4CFF7).to_bytes(8, "little")
LEGACY_SST_MAGIC = (0xDB4775248B80FB57).to_bytes(8, "little")
#: The comparator every Flink MANIFEST names in its first record.
COMPARATOR = b"leveldb.BytewiseComparator"


@dataclass
class Damage:
    """What a damage helper did."""

    kind: str
    root: Path  # the job's checkpoint root in the copy (the dir holding chk-*/ and shared/)
    file: Path | None = None  # the damaged file in the copy
    offset: int | None = None  # byte offset of the damage inside ``file``
    checkpoints: list[int] = field(default_factory=list)  # checkpoint ids whose _metadata references it
    detail: str = ""


def fixture_path(name: str) -> Path:
    path = FIXTURES / name
    if not (path / "fixture.json").is_file():
        raise FileNotFoundError(f"no fixture {name} in {FIXTURES}")
    return path


def copy_fixture(name: str, dest: Path) -> Path:
    """Copy fixture ``name`` to ``dest/name`` and return the copy."""
    target = dest / name
    shutil.copytree(fixture_path(name), target)
    return target


def checkpoint_root(fixture_dir: Path) -> Path:
    job_id = json.loads((fixture_dir / "fixture.json").read_text())["job_id"]
    return fixture_dir / "checkpoints" / job_id


def checkpoint_ids(root: Path) -> list[int]:
    """Ids of the completed checkpoints under ``root``: ``chk-N`` directories with a ``_metadata`` (a job
    cancelled while a checkpoint was in progress leaves that one's directory without it)."""
    return sorted(int(p.name[4:]) for p in root.glob("chk-*") if p.name[4:].isdigit() and (p / "_metadata").is_file())


def referencing_checkpoints(root: Path, file: Path) -> list[int]:
    """Ids of the checkpoints whose ``_metadata`` names ``file`` (by its unique UUID file name)."""
    needle = file.name.encode()
    return [c for c in checkpoint_ids(root) if needle in _read_if_there(root / f"chk-{c}" / "_metadata")]


def _read_if_there(path: Path) -> bytes:
    """The file's bytes, or none when it is gone: under a running job's root Flink deletes the checkpoints
    it subsumes while a test looks."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def is_sst(path: Path) -> bool:
    data = path.read_bytes()
    return len(data) >= 48 and data[-8:] in (SST_MAGIC, LEGACY_SST_MAGIC)


def is_manifest(path: Path) -> bool:
    head = path.read_bytes()[:200]
    return not is_sst(path) and COMPARATOR in head


def referenced_files(root: Path, checkpoint: int, predicate) -> list[Path]:
    """State files below ``root`` (``shared/``, ``taskowned/``, ``chk-*/``: every file but ``_metadata``)
    that ``chk-<checkpoint>`` references and that satisfy ``predicate``."""
    metadata = (root / f"chk-{checkpoint}" / "_metadata").read_bytes()
    return sorted(p for p in _files_below(root) if p.name != "_metadata" and p.name.encode() in metadata and _holds(predicate, p))


def _files_below(root: Path) -> Iterator[Path]:
    """Every file below ``root``; a directory deleted during the walk (a subsumed checkpoint of a running
    job) is skipped, as ``os.walk`` skips what it cannot list."""
    for directory, _, names in os.walk(root):
        for name in names:
            yield Path(directory) / name


def _holds(predicate, path: Path) -> bool:
    """``predicate(path)``; false for a file deleted meanwhile (the predicates read the file's head)."""
    try:
        return path.is_file() and predicate(path)
    except FileNotFoundError:
        return False


def _pick(root: Path, checkpoint: int | None, predicate, what: str) -> tuple[Path, int]:
    checkpoint = checkpoint if checkpoint is not None else checkpoint_ids(root)[-1]
    files = referenced_files(root, checkpoint, predicate)
    if not files:
        raise LookupError(f"chk-{checkpoint} in {root} references no external {what}")
    return files[0], checkpoint


def delete_sst(fixture_dir: Path, checkpoint: int | None = None) -> Damage:
    root = checkpoint_root(fixture_dir)
    file, _ = _pick(root, checkpoint, is_sst, "SST")
    refs = referencing_checkpoints(root, file)
    file.unlink()
    return Damage("missing_sst", root, file, None, refs, "a referenced SST deleted")


def _rewrite_sst(fixture_dir: Path, checkpoint: int | None, kind: str, edit) -> Damage:
    """Apply ``edit(bytearray) -> (offset, detail)`` to the first external SST ``checkpoint`` references."""
    root = checkpoint_root(fixture_dir)
    file, _ = _pick(root, checkpoint, is_sst, "SST")
    data = bytearray(file.read_bytes())
    offset, detail = edit(data)
    file.write_bytes(bytes(data))
    return Damage(kind, root, file, offset, referencing_checkpoints(root, file), detail)


def flip_sst_data_byte(fixture_dir: Path, checkpoint: int | None = None, offset: int = 7) -> Damage:
    """Flip one byte of the first data block (data blocks start at offset 0 of a block-based table)."""

    def edit(data: bytearray):
        data[offset] ^= 0xFF
        return offset, "one byte flipped in the first data block"

    return _rewrite_sst(fixture_dir, checkpoint, "sst_flipped_byte", edit)


def overwrite_sst_magic(fixture_dir: Path, checkpoint: int | None = None) -> Damage:
    def edit(data: bytearray):
        data[-8:] = b"\x00" * 8
        return len(data) - 8, "footer magic zeroed"

    return _rewrite_sst(fixture_dir, checkpoint, "sst_bad_magic", edit)


def truncate_sst(fixture_dir: Path, checkpoint: int | None = None, keep: float = 0.5) -> Damage:
    def edit(data: bytearray):
        size = len(data)
        cut = max(1, int(size * keep))
        del data[cut:]
        return cut, f"truncated from {size} to {cut} bytes"

    return _rewrite_sst(fixture_dir, checkpoint, "sst_truncated", edit)


def delete_manifest(fixture_dir: Path, checkpoint: int | None = None) -> Damage:
    """Delete an external MANIFEST (fixtures with inline threshold 0 have them as files)."""
    root = checkpoint_root(fixture_dir)
    file, _ = _pick(root, checkpoint, is_manifest, "MANIFEST")
    refs = referencing_checkpoints(root, file)
    file.unlink()
    return Damage("missing_manifest", root, file, None, refs, "a referenced MANIFEST deleted")


def truncate_metadata(fixture_dir: Path, checkpoint: int | None = None, keep: float = 0.5) -> Damage:
    root = checkpoint_root(fixture_dir)
    checkpoint = checkpoint if checkpoint is not None else checkpoint_ids(root)[-1]
    file = root / f"chk-{checkpoint}" / "_metadata"
    data = file.read_bytes()
    cut = int(len(data) * keep)
    file.write_bytes(data[:cut])
    return Damage("metadata_truncated", root, file, cut, [checkpoint], f"_metadata truncated from {len(data)} to {cut} bytes")


def flip_inline_sst_byte(fixture_dir: Path, checkpoint: int | None = None, offset: int = 7) -> Damage:
    """Flip a byte inside an SST that is stored inline in ``_metadata`` (a byte-stream handle).

    An inline handle is ``UTF name, int length, bytes``; the SST's bytes end with the table magic, so
    the start is where a big-endian int just before it equals the distance to the magic's end. The
    length does not change, so ``_metadata`` stays decodable.
    """
    root = checkpoint_root(fixture_dir)
    checkpoint = checkpoint if checkpoint is not None else checkpoint_ids(root)[-1]
    file = root / f"chk-{checkpoint}" / "_metadata"
    data = bytearray(file.read_bytes())
    end = data.find(SST_MAGIC) + len(SST_MAGIC)
    while end >= len(SST_MAGIC):
        for start in range(end - 48, 4, -1):
            if int.from_bytes(data[start - 4 : start], "big") == end - start:
                data[start + offset] ^= 0xFF
                file.write_bytes(bytes(data))
                return Damage("inline_sst_flipped_byte", root, file, start + offset, [checkpoint], f"inline SST at offset {start} of _metadata")
        nxt = data.find(SST_MAGIC, end)
        end = nxt + len(SST_MAGIC) if nxt >= 0 else -1
    raise LookupError(f"{file} holds no inline SST")


def flip_inline_manifest_byte(fixture_dir: Path, checkpoint: int | None = None) -> Damage:
    """Flip the middle byte of the first MANIFEST stored inline in ``_metadata`` (a byte-stream handle).

    The VersionEdit that opens with the comparator's name (tag 1, its length, then the name) is a
    MANIFEST's first log record (``crc32c, length, type``: 7 bytes) in FRocksDB 6, its second in
    FRocksDB 8 (after an empty one); the inline handle's big-endian int length comes just before the
    MANIFEST. The length does not change, so ``_metadata`` stays decodable.
    """
    return flip_inline_manifest_byte_in(checkpoint_root(fixture_dir), checkpoint)


def flip_inline_manifest_byte_in(root: Path, checkpoint: int | None = None) -> Damage:
    """:func:`flip_inline_manifest_byte` in the job's checkpoint root ``root`` itself (one the test owns,
    e.g. where a freshly generated fixture's Flink wrote it)."""
    checkpoint = checkpoint if checkpoint is not None else checkpoint_ids(root)[-1]
    file = root / f"chk-{checkpoint}" / "_metadata"
    data = bytearray(file.read_bytes())
    name = b"\x01" + bytes([len(COMPARATOR)]) + COMPARATOR
    at = data.find(name)
    while at >= 0:
        for start in (at - 7, at - 14):  # the first record, or the second after an empty one
            length = int.from_bytes(data[start - 4 : start], "big")
            if start >= 4 and 7 + len(name) < length <= len(data) - start:
                data[start + length // 2] ^= 0xFF
                file.write_bytes(bytes(data))
                return Damage("inline_manifest_flipped_byte", root, file, start + length // 2, [checkpoint],
                              f"inline MANIFEST of {length} bytes at offset {start} of _metadata")
        at = data.find(name, at + 1)
    raise LookupError(f"{file} holds no inline MANIFEST")


def add_foreign_checkpoint(fixture_dir: Path, donor_fixture: str, as_checkpoint: int | None = None) -> Damage:
    """Put another job's newest checkpoint into this root, as when two deployments share a directory.

    The donor's ``chk-N`` is copied in as ``chk-<as_checkpoint>`` (default: one above this root's newest,
    so the directory's newest checkpoint is the other deployment's), with the shared files it names.
    """
    root = checkpoint_root(fixture_dir)
    donor_root = checkpoint_root(fixture_path(donor_fixture))
    donor_id = checkpoint_ids(donor_root)[-1]
    target_id = as_checkpoint if as_checkpoint is not None else checkpoint_ids(root)[-1] + 1
    target = root / f"chk-{target_id}"
    shutil.copytree(donor_root / f"chk-{donor_id}", target)
    for file in referenced_files(donor_root, donor_id, lambda p: True):
        dest = root / file.relative_to(donor_root)
        if file.is_relative_to(donor_root / f"chk-{donor_id}"):
            continue  # copied with its checkpoint directory
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, dest)
    return Damage(
        "foreign_checkpoint", root, target / "_metadata", None, [target_id],
        f"chk-{donor_id} of {donor_fixture} copied in as chk-{target_id}",
    )


DAMAGES = {
    "missing_sst": delete_sst,
    "sst_flipped_byte": flip_sst_data_byte,
    "sst_bad_magic": overwrite_sst_magic,
    "sst_truncated": truncate_sst,
    "missing_manifest": delete_manifest,
    "metadata_truncated": truncate_metadata,
    "inline_sst_flipped_byte": flip_inline_sst_byte,
    "inline_manifest_flipped_byte": flip_inline_manifest_byte,
}


def damaged_copy(name: str, dest: Path, kind: str, **kwargs) -> Damage:
    """Copy fixture ``name`` under ``dest`` and apply damage ``kind`` (a key of :data:`DAMAGES`)."""
    return DAMAGES[kind](copy_fixture(name, dest), **kwargs)
