#!/usr/bin/env python3
"""A checkpoint K times the size of a real Flink one, for the scale benchmark; never committed.

Usage::

    python bench/replicate_checkpoint.py SOURCE --copies 6 --dir /tmp/bench-11g

``SOURCE`` is a directory written by ``bench/make_checkpoint.py`` (its ``chk-N`` from ``bench.json``)
or a checkpoint directory ``chk-N``. Generating a 10 GB checkpoint with real Flink takes about an hour
on our shared machines; this takes the minutes it needs to copy the bytes. ``DIR`` gets the layout of
``bench/make_checkpoint.py`` (``checkpoints/<job-id>/chk-N/_metadata``, ``shared/``, ``bench.json``
written last), so ``bench/scale.py`` measures it like a generated one:

- every file the source's ``_metadata`` references is copied ``K`` times (real copies of the bytes,
  not links: every read of the result is a read of its own file), copy 0 under its own name, copy
  ``k`` under a name derived from it (``uuid5``, a UUID like Flink's);
- the new ``_metadata`` holds the source's operators ``K`` times: copy 0 as they were, copy ``k``
  under a new operator id (the uid ``<uid>-copy<k>`` and its id; without a uid, an id derived from the
  original's), its RocksDB backend ids and state handle ids renamed too, its file handles pointing to copy ``k`` of the files. It is written by the encoder
  ``repair relocate`` and ``repair edit`` use (:func:`repair.formats.flink.metadata.encode_metadata`)
  and decoded again before it is published.

So verify, fallback and export read K times the data of real Flink files. What this does not scale:
the size of one RocksDB instance (one subtask of one operator), which stays the source's: a real
checkpoint ten times larger has instances ten times larger (``bench/make_checkpoint.py --records``).
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

import make_checkpoint  # noqa: E402

from repair.formats.flink.handles import FileHandle, RelativeFileHandle  # noqa: E402
from repair.formats.flink.keygroups import operator_id_for_uid  # noqa: E402
from repair.formats.flink.metadata import CheckpointMetadata, OperatorState, decode_metadata, encode_metadata  # noqa: E402
from repair.io import storage as st  # noqa: E402
from repair.io.layout import recorded_root  # noqa: E402
from repair.ops.relocate import flink_path, load_single_snapshot  # noqa: E402

#: The namespace of the derived names (operator ids, file names, backend ids) of copies 1..K-1.
NAMESPACE = uuid.UUID("6f0d5f0e-27b0-4c1a-9d2e-5ca1ab1e0027")


def derived(original: str, copy_index: int) -> str:
    """A UUID (as text) standing for ``original`` in copy ``copy_index``; copy 0 keeps ``original``."""
    return original if copy_index == 0 else str(uuid.uuid5(NAMESPACE, f"{copy_index}/{original}"))


def rename_operator(op: OperatorState, copy_index: int) -> None:
    """Give ``op`` its identity in copy ``copy_index`` (copy 0 keeps its own): an operator with a uid
    gets the uid ``<uid>-copy<k>`` and the id Flink derives from it (as ``repair edit`` renames one);
    one without, an id derived from its own."""
    if copy_index == 0:
        return
    if op.uid:
        op.uid = f"{op.uid}-copy{copy_index}"
        op.operator_id = operator_id_for_uid(op.uid)
    else:
        op.operator_id = uuid.uuid5(NAMESPACE, f"{copy_index}/operator/{op.operator_id}").hex


def replicate_metadata(metadata: CheckpointMetadata, copies: int, copy_of) -> tuple[CheckpointMetadata, list[tuple[str, str]]]:
    """The metadata with its operators ``copies`` times (see the module doc), and the files to copy.

    ``copy_of(handle, copy_index)`` returns ``(source, target, new_handle)`` for one file handle (absolute
    or relative to ``_metadata``): where its bytes are now, where their copy goes (relative to the new
    job root) and the handle recording the copy. Returns the new metadata and every ``(source, target)``.
    """
    files: list[tuple[str, str]] = []
    operators: list[OperatorState] = []
    for k in range(copies):
        for original in metadata.operators:
            op = copy.deepcopy(original)
            rename_operator(op, k)
            for sub in op.subtasks:
                for _, handle in sub.handles():
                    for attribute in ("backend_id", "state_handle_id"):
                        if getattr(handle, attribute, None):
                            setattr(handle, attribute, derived(getattr(handle, attribute), k))

            def retarget(handle, k=k):
                if not isinstance(handle, (FileHandle, RelativeFileHandle)):
                    return handle  # inline bytes travel inside _metadata
                source, target, new_handle = copy_of(handle, k)
                files.append((source, target))
                return new_handle

            # every handle of this operator (all its slots), mapped as repair relocate maps a whole file
            holder = CheckpointMetadata(metadata.version, metadata.checkpoint_id, [], [op], dialect=metadata.dialect)
            holder.map_stream_handles(retarget)
            operators.append(op)
    result = copy.copy(metadata)
    result.operators = operators
    return result, files


def replicate(source: Path, copies: int, out: Path, *, log=print) -> dict:
    """Write the replicated checkpoint to ``out`` (a new directory); returns its ``bench.json``."""
    if copies < 1:
        raise SystemExit("--copies must be at least 1")
    if out.exists():
        raise SystemExit(f"{out} already exists: the output must be a new directory")
    info = make_checkpoint.load(source)
    checkpoint = make_checkpoint.checkpoint_dir(source, info) if info is not None else source
    started = time.time()
    storage = st.default_storage()
    snapshot = load_single_snapshot(str(checkpoint), storage, out=str(out))
    job_id, chk = checkpoint.parent.name, checkpoint.name
    final_root = out / "checkpoints" / job_id

    def copy_of(handle, k: int):
        source = st.parse_location(snapshot.resolver.resolve(handle).uri).fs_path
        if isinstance(handle, RelativeFileHandle):  # exclusive state next to _metadata
            head, _, name = handle.relative_path.rpartition("/")
            relative = f"{head}/{derived(name, k)}" if head else derived(name, k)
            return source, f"{chk}/{relative}", RelativeFileHandle(relative, handle.size)
        split = recorded_root(handle.path)  # shared/x, taskowned/x, chk-M/x keep their place
        tail = split[1] if split is not None else ["shared", st.basename(handle.path)]
        if tail[0].startswith("chk-"):
            tail = [chk, *tail[1:]]
        target = "/".join([*tail[:-1], derived(tail[-1], k)])
        return source, target, FileHandle(flink_path(str(final_root / target)), handle.size)

    metadata, files = replicate_metadata(snapshot.metadata, copies, copy_of)
    data = encode_metadata(metadata)
    decode_metadata(data)  # the encoder round-trips every fixture; check this one too before copying bytes
    if len({target for _, target in files}) != len(files):
        raise SystemExit("two file handles would share one copy (a file referenced twice): not supported")
    total = sum(Path(s).stat().st_size for s, _ in files)
    log(f"copying {len(files)} files ({total / 1e9:.2f} GB): {copies} copies of {checkpoint}")
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    job_root = staging / "checkpoints" / job_id
    try:
        for done, (src, target) in enumerate(files, 1):
            (job_root / target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, job_root / target)  # the bytes, not a link
            if done % 500 == 0:
                log(f"  {done}/{len(files)} files")
        (job_root / chk).mkdir(parents=True, exist_ok=True)
        (job_root / chk / "_metadata").write_bytes(data)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    tables = [final_root / target for _, target in files]
    tables = [p for p in tables if p.parent.name == "shared" and make_checkpoint.is_block_based_table(p)]
    new_info = {  # the keys of bench/make_checkpoint.py's bench.json that hold for the copy; the source's under "source"
        "flink_version": (info or {}).get("flink_version"),
        "parallelism": (info or {}).get("parallelism"),
        "job_id": job_id,
        "checkpoint": f"checkpoints/{job_id}/{chk}",
        "replicated_from": str(checkpoint),
        "copies": copies,
        "operators": len(metadata.operators),
        "sst_files": len(tables),
        "sst_bytes": sum(p.stat().st_size for p in tables),
        "generation_seconds": round(time.time() - started, 1),
        "subsumed_left": [],
        "source": info,
    }
    (out / "bench.json").write_text(json.dumps(new_info, indent=2) + "\n")
    log(f"wrote {out} in {new_info['generation_seconds']:.0f} s: {new_info['sst_files']} SST files, {new_info['sst_bytes'] / 1e9:.2f} GB")
    return new_info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="a bench/make_checkpoint.py directory, or a chk-N directory")
    parser.add_argument("--copies", type=int, required=True, help="how many times the source's operators and files")
    parser.add_argument("--dir", type=Path, required=True, help="the new directory to write")
    args = parser.parse_args(argv)
    replicate(args.source.resolve(), args.copies, args.dir.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
