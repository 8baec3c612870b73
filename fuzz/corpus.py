"""The seed corpus, generated deterministically from the committed fixtures (nothing of it is committed).

Every Flink-written file the fixtures hold is sorted into the decoder that reads it, by walking the
``_metadata`` files the way ``verify`` does: the ``_metadata`` itself, the SSTs, MANIFESTs and meta
data files of native (incremental) checkpoints, the key-group streams of canonical savepoints and heap
checkpoints (with their offsets, in :func:`fuzz.targets.join_key_group_input`'s layout), the DSTL files
of changelog checkpoints, and the serializer snapshots inside the backend meta data. WAL seeds are
built with the project's own log encoder (Flink's native checkpoints flush, so no WAL is kept). At most
:data:`PER_TARGET` seeds per target, the smallest first, each at most :data:`MAX_SEED` bytes.
"""

from __future__ import annotations

import functools
import hashlib
import struct
from collections import defaultdict
from pathlib import Path

from fuzz.targets import TARGETS, join_key_group_input
from repair.errors import RepairError
from repair.formats.bytes.coding import encode_varint
from repair.formats.flink.backend_meta import decode_keyed_backend_meta
from repair.formats.flink.handles import (
    ByteStreamHandle,
    ChangelogStreamHandle,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
)
from repair.formats.flink.metadata import decode_metadata
from repair.formats.rocksdb.log_format import encode_log
from tests._flink_state_files import SAMPLES, all_metadata, local_file

PER_TARGET = 12
MAX_SEED = 256 * 1024


def _bytes_of(fixture_dir: Path, metadata_path: Path, handle) -> bytes | None:
    if handle is None:
        return None
    if isinstance(handle, ByteStreamHandle):
        return handle.data
    path = local_file(fixture_dir, metadata_path, handle)
    if path is None or not path.is_file() or path.stat().st_size > MAX_SEED:
        return None
    return path.read_bytes()


def _write_batch(sequence: int, puts: list[tuple[bytes, bytes]], deletes: list[bytes]) -> bytes:
    out = bytearray(struct.pack("<QI", sequence, len(puts) + len(deletes)))
    for key, value in puts:
        out += b"\x01" + encode_varint(len(key)) + key + encode_varint(len(value)) + value
    for key in deletes:
        out += b"\x00" + encode_varint(len(key)) + key
    return bytes(out)


def _wal_seeds() -> list[bytes]:
    batches = [_write_batch(1 + 10 * i, [(b"k%03d" % j, b"v" * (j % 7)) for j in range(i * 3)], [b"d%d" % i]) for i in range(6)]
    big = _write_batch(100, [(b"big", b"x" * 40_000)], [])  # spans blocks: first, middle and last records
    return [encode_log(batches), encode_log(batches, log_number=7), encode_log([big, *batches])]


def _collect() -> dict[str, list[bytes]]:
    seeds: dict[str, list[bytes]] = defaultdict(list)
    for fixture_dir, metadata_path in all_metadata():
        data = metadata_path.read_bytes()
        seeds["metadata"].append(data)
        try:
            metadata = decode_metadata(data)
        except RepairError:
            continue
        for operator in metadata.operators:
            for subtask in operator.subtasks:
                for _, handle in subtask.handles():
                    _sort_handle(seeds, fixture_dir, metadata_path, handle)
    for sample in sorted(SAMPLES.glob("*.bin")):
        target = "backend_meta" if "meta" in sample.name else "metadata" if sample.name.startswith("v") else None
        if target:
            seeds[target].append(sample.read_bytes())
    seeds["wal"].extend(_wal_seeds())
    return seeds


def _sort_handle(seeds: dict[str, list[bytes]], fixture_dir: Path, metadata_path: Path, handle) -> None:
    if isinstance(handle, IncrementalKeyedHandle):
        for entry in (*handle.shared, *handle.private):
            name = entry.local_path
            target = "sst" if name.endswith(".sst") else "manifest" if name.startswith("MANIFEST") else None
            if target and (data := _bytes_of(fixture_dir, metadata_path, entry.handle)):
                seeds[target].append(data)
        if meta := _bytes_of(fixture_dir, metadata_path, handle.meta):
            seeds["backend_meta"].append(meta)
            seeds["serializer_snapshot"].append(meta[5:])  # version (4) and compression flag (1) first
    elif isinstance(handle, KeyGroupsHandle):
        stream = _bytes_of(fixture_dir, metadata_path, handle.delegate)
        if not stream:
            return
        try:
            meta = decode_keyed_backend_meta(stream)
        except RepairError:
            return
        seeds["backend_meta"].append(stream[: meta.end_offset or 4096])
        seeds["serializer_snapshot"].append(stream[5 : meta.end_offset or 4096])
        if handle.key_groups.count <= 256:
            states = max(1, len(meta.states))
            seeds["key_group_stream"].append(
                join_key_group_input(meta.key_group_compression, handle.key_groups, handle.offsets, states, stream))
    elif isinstance(handle, ChangelogStreamHandle):
        for offset_handle in handle.handles:
            if data := _bytes_of(fixture_dir, metadata_path, offset_handle.handle):
                seeds["changelog"].append(data)
    elif hasattr(handle, "materialized"):  # a changelog backend: its materialized and changelog parts
        for part in (*handle.materialized, *handle.non_materialized):
            if part is not None:
                _sort_handle(seeds, fixture_dir, metadata_path, part)


@functools.cache
def seed_corpus() -> dict[str, list[bytes]]:
    """``target -> seeds``: distinct, at most :data:`MAX_SEED` bytes, :data:`PER_TARGET` spread over the sizes.
    Collected once per process (every target's run writes its corpus from it); read it, never change it."""
    out: dict[str, list[bytes]] = {}
    for target, found in _collect().items():
        unique = {hashlib.sha256(d).digest(): d for d in found if 0 < len(d) <= MAX_SEED}
        ordered = sorted(unique.values(), key=lambda d: (len(d), d))
        step = max(1, len(ordered) / PER_TARGET)  # spread over the sizes, the smallest first
        out[target] = [ordered[int(i * step)] for i in range(min(PER_TARGET, len(ordered)))]
    missing = set(TARGETS) - set(out)
    if missing:
        raise RuntimeError(f"no seeds found for {sorted(missing)}: have the fixtures moved?")
    return out


def write_corpus(directory: Path) -> dict[str, Path]:
    """Writes ``directory/<target>/<sha256 prefix>`` for every seed; returns each target's directory."""
    dirs = {}
    for target, seeds in seed_corpus().items():
        d = directory / target
        d.mkdir(parents=True, exist_ok=True)
        for data in seeds:
            (d / hashlib.sha256(data).hexdigest()[:16]).write_bytes(data)
        dirs[target] = d
    return dirs
