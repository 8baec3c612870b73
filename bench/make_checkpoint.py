#!/usr/bin/env python3
"""Generate a large real Flink checkpoint (>= 1 GB of SST data) for the benchmarks; never committed.

Usage::

    python bench/make_checkpoint.py                  # default: ~/.cache/flink-checkpoint-repair/bench/flink-1.20-p2-1g
    python bench/make_checkpoint.py --records 23000  # smaller (about 1/10 of the default size)
    python bench/make_checkpoint.py --force          # regenerate even if the cached one is complete
    python bench/make_checkpoint.py --job UpgradeJob --records 20000 --user-chars 40 --tag-chars 12 --dir DIR --min-mb 1
                                                     # Kryo state for bench/upgrade.py

Real Flink (1.20.3 from the PyPI jars, a local MiniCluster, see ``fixtures/flink_harness.py``) runs the
fixture job of ``fixtures/job`` with parallelism 2, incremental RocksDB checkpoints, **default
compression (Snappy) and default block checksums (CRC32C)**, i.e. what users have. Only the input is
different: a generated ``records.tsv`` of many distinct users with long names and long tags, so that
every state of the job grows (the user name is in the key of every ``per-user`` state and of its
timers, and the value of ``user-by-wave`` and ``profile`` of ``per-account``; the tag is in ``tags``,
``last-tag``, ``recent-tag`` and the map keys of ``amount-by-tag``, and in ``checks`` and ``rows`` of
``per-type``, keyed like ``per-account``). The words come from a small
vocabulary, so Snappy compresses the blocks about 2:1, like ordinary text state.

``--job UpgradeJob`` runs the upgrade fixture job (``fixtures/extra_jobs/src/fixturejob/UpgradeJob.java``) on
the same input instead: per key (a Kryo key: a Long account in wave 0, a String user in wave 1) Kryo
values Kryo 5 reads otherwise (boxed Double, Float, Short, Character, an enum, collections, Kryo map
keys) and a POJO with ``List``/``Map``/``Set`` fields: every kind of state ``repair upgrade`` rewrites.

Only the newest checkpoint is retained (``num-retained`` 1), so every file in ``shared/`` belongs to it.
The result goes to ``<cache>/bench/<name>/`` (outside the repository): ``checkpoints/<job-id>/``
(``chk-N/_metadata``, ``shared/``, ``taskowned/``) and ``bench.json`` (parameters, file count, sizes,
generation time), written last: a directory without it is incomplete and is regenerated. A complete one is
reused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fixtures.flink_harness import DEFAULT_CACHE, JobSettings, ensure_flink, run_fixture_job  # noqa: E402

DEFAULT_NAME = "flink-1.20-p2-1g"
DEFAULT_FLINK = "1.20.3"
DEFAULT_RECORDS = 230_000
BLOCK_BASED_MAGIC = (0x88E241B785F4CFF7).to_bytes(8, "little")
LEGACY_BLOCK_BASED_MAGIC = (0xDB4775248B80FB57).to_bytes(8, "little")


def default_dir(name: str = DEFAULT_NAME, cache: Path = DEFAULT_CACHE) -> Path:
    return cache / "bench" / name


def write_records(path: Path, records: int, *, waves: int, user_chars: int, tag_chars: int, seed: int) -> int:
    """Write the job's input (``wave op user account amount tag ts``); returns its size in bytes."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randrange(4, 12))) for _ in range(128)]
    pool = " ".join(rng.choices(vocabulary, k=1_000_000))
    span = len(pool) - max(user_chars, tag_chars)
    ts = 1_767_225_600_000
    size = 0
    with open(path, "w", encoding="ascii", newline="\n") as out:
        lines = []
        for i in range(records):
            start = rng.randrange(span)
            user = f"u{i:09d}:{pool[start : start + user_chars]}"
            start = rng.randrange(span)
            tag = pool[start : start + tag_chars]
            ts += rng.randrange(1, 50)
            lines.append(f"{i * waves // records}\tadd\t{user}\t{i}\t{rng.randrange(-50, 500)}\t{tag}\t{ts}\n")
            if len(lines) == 10_000:
                chunk = "".join(lines)
                size += len(chunk)
                out.write(chunk)
                lines.clear()
        chunk = "".join(lines)
        size += len(chunk)
        out.write(chunk)
    return size


def is_block_based_table(path: Path) -> bool:
    """True when ``path`` ends with the magic number of a block-based table (an SST)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() < 48:
                return False
            f.seek(-8, os.SEEK_END)
            return f.read(8) in (BLOCK_BASED_MAGIC, LEGACY_BLOCK_BASED_MAGIC)
    except OSError:
        return False


def sst_files(checkpoint_root: Path) -> list[Path]:
    """The SST files of a generated checkpoint: files of ``shared/`` that the measured checkpoint's
    ``_metadata`` references, and are tables. Files of a subsumed ``chk-M`` that Flink had not yet
    deleted when the job stopped are not counted (nor is such a ``chk-M``: see :func:`checkpoint_dir`)."""
    info = load(checkpoint_root)
    newest = checkpoint_dir(checkpoint_root, info) if info is not None else newest_checkpoint(checkpoint_root)
    metadata = (newest / "_metadata").read_bytes()
    return sorted(p for p in checkpoint_root.glob("checkpoints/*/shared/*")
                  if p.is_file() and p.name.encode() in metadata and is_block_based_table(p))


def checkpoint_dir(root: Path, info: dict) -> Path:
    """The checkpoint the benchmarks measure: the ``chk-N`` of ``bench.json``. Benchmarks give it, not
    the job root: the root may still hold a subsumed ``chk-M`` whose shared files Flink already deleted
    (``repair verify`` of the root rightly reports it broken)."""
    return root / info["checkpoint"]


def newest_checkpoint(root: Path) -> Path:
    candidates = [p for p in root.glob("checkpoints/*/chk-*") if (p / "_metadata").is_file()]
    if not candidates:
        raise RuntimeError(f"no retained checkpoint under {root}")
    return max(candidates, key=lambda p: int(p.name[4:]))


def load(root: Path) -> dict | None:
    """The ``bench.json`` of a complete generated checkpoint, or ``None``."""
    try:
        return json.loads((root / "bench.json").read_text())
    except (OSError, ValueError):
        return None


def generate(
    root: Path,
    *,
    flink: str = DEFAULT_FLINK,
    records: int = DEFAULT_RECORDS,
    waves: int = 2,
    user_chars: int = 1000,
    tag_chars: int = 200,
    parallelism: int = 2,
    seed: int = 20260101,
    job: str = "FixtureJob",
    cache: Path = DEFAULT_CACHE,
    log=print,
) -> dict:
    """Run real Flink and leave a complete checkpoint in ``root``; returns its ``bench.json``."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    dist = ensure_flink(flink, cache)
    job_id = hashlib.md5(root.name.encode()).hexdigest()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="bench-checkpoint-") as work:
        work_dir = Path(work)
        records_path = work_dir / "records.tsv"
        tsv_bytes = write_records(records_path, records, waves=waves, user_chars=user_chars, tag_chars=tag_chars, seed=seed)
        log(f"records.tsv: {records} records, {tsv_bytes / 1e6:.0f} MB; running Flink {flink} (parallelism {parallelism})")
        settings = JobSettings(
            parallelism=parallelism,
            checkpoint_dir=root / "checkpoints",
            num_retained=1,
            interval_ms=10_000,
            job_id=job_id,
            rocksdb_local_dir=work_dir / "rocksdb",
            jvm_heap="3g",
            # Flink's local default (128 MB of managed memory for RocksDB) makes tiny memtables: with
            # these long keys RocksDB then flushes and compacts all the time. 2 GB is a modest TM.
            extra_conf={"taskmanager.memory.managed.size": "2g"},
        )
        options = {"--records": str(records_path), "--log": str(work_dir / "run.json"), "--timeout-s": "3000"}
        run_fixture_job(dist, "generate", settings, options, cache=cache, timeout_s=3600, job=job)
        run_log = json.loads((work_dir / "run.json").read_text())
    elapsed = time.time() - started
    checkpoint = newest_checkpoint(root)
    metadata = (checkpoint / "_metadata").read_bytes()
    files = [p for p in root.glob("checkpoints/*/shared/*") if p.is_file() and p.name.encode() in metadata and is_block_based_table(p)]
    subsumed = sorted(str(p.relative_to(root)) for p in root.glob("checkpoints/*/chk-*") if p != checkpoint)
    info = {
        "flink_version": flink,
        "job": job,
        "parallelism": parallelism,
        "job_id": run_log["job_id"],
        "checkpoint": str(checkpoint.relative_to(root)),
        "records": records,
        "waves": waves,
        "user_chars": user_chars,
        "tag_chars": tag_chars,
        "seed": seed,
        "records_tsv_bytes": tsv_bytes,
        "compression": "snappy (Flink default)",
        "checksum": "crc32c (RocksDB default)",
        "sst_files": len(files),
        "sst_bytes": sum(p.stat().st_size for p in files),
        "generation_seconds": round(elapsed, 1),
        # chk-M directories Flink had subsumed but not yet deleted when the job stopped (not measured)
        "subsumed_left": subsumed,
    }
    (root / "bench.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def ensure_checkpoint(
    root: Path | None = None, *, min_bytes: int = 1 << 30, force: bool = False, log=print, **kwargs
) -> tuple[Path, dict]:
    """Reuse the complete checkpoint in ``root`` or generate it; returns ``(root, bench.json)``."""
    root = root or default_dir()
    info = None if force else load(root)
    if info is not None:
        log(f"reusing {root} ({info['sst_files']} SST files, {info['sst_bytes'] / 1e6:.0f} MB)")
    else:
        info = generate(root, log=log, **kwargs)
        log(
            f"generated {root} in {info['generation_seconds']:.0f} s: "
            f"{info['sst_files']} SST files, {info['sst_bytes'] / 1e6:.0f} MB"
        )
    if info["sst_bytes"] < min_bytes:
        log(f"warning: only {info['sst_bytes'] / 1e6:.0f} MB of SST data (wanted {min_bytes / 1e6:.0f} MB); use --records")
    return root, info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=None, help=f"where the checkpoint goes (default {default_dir()})")
    parser.add_argument("--flink", default=DEFAULT_FLINK, help=f"Flink version (default {DEFAULT_FLINK})")
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS, help=f"input records (default {DEFAULT_RECORDS})")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--job", default="FixtureJob", choices=("FixtureJob", "UpgradeJob"), help="the job run (default FixtureJob)")
    parser.add_argument("--user-chars", type=int, default=1000, help="characters of each user name (default 1000)")
    parser.add_argument("--tag-chars", type=int, default=200, help="characters of each tag (default 200)")
    parser.add_argument("--min-mb", type=int, default=1024, help="warn when the SST data is smaller (default 1024)")
    parser.add_argument("--force", action="store_true", help="regenerate even when a complete checkpoint exists")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="Flink download and build cache")
    args = parser.parse_args(argv)
    root = args.dir or default_dir(cache=args.cache)
    ensure_checkpoint(
        root, min_bytes=args.min_mb << 20, force=args.force,
        flink=args.flink, records=args.records, parallelism=args.parallelism, cache=args.cache,
        job=args.job, user_chars=args.user_chars, tag_chars=args.tag_chars,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
