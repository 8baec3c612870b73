#!/usr/bin/env python3
"""Benchmark: ``repair fallback`` over all retained checkpoints versus ``repair verify`` of the newest.

Incremental checkpoints share most of their SSTs, and the verification engine reads each physical
file once, so checking every retained checkpoint should cost little more than checking the newest one
(the goal: less than 1.5x). This measures both in one process, on one real Flink checkpoint root with
several retained checkpoints, best of ``--runs``, with one worker (``--workers 1``) so that the ratio is
about the work, not about the pool.

Usage::

    python bench/fallback.py                  # generates ~/.cache/flink-checkpoint-repair/bench/fallback-5 once
    python bench/fallback.py --root ROOT      # any job checkpoint root with retained checkpoints
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from make_checkpoint import write_records  # noqa: E402

from fixtures.flink_harness import DEFAULT_CACHE, JobSettings, ensure_flink, run_fixture_job  # noqa: E402
from repair.ops.fallback import fallback  # noqa: E402
from repair.ops.verify.engine import verify  # noqa: E402


def ensure_root(cache: Path, records: int) -> Path:
    """A real Flink 1.20 checkpoint root with the checkpoints of four waves of input retained."""
    base = cache / "bench" / f"fallback-{records}"
    done = base / "done.json"
    if done.is_file():
        return Path(json.loads(done.read_text())["root"])
    dist = ensure_flink("1.20.3", cache)
    with tempfile.TemporaryDirectory(prefix="bench-fallback-") as work:
        work_dir = Path(work)
        records_path = work_dir / "records.tsv"
        write_records(records_path, records, waves=4, user_chars=1000, tag_chars=200, seed=7)
        settings = JobSettings(
            parallelism=2, checkpoint_dir=base / "checkpoints", num_retained=10, interval_ms=2000,
            job_id="fa11bac4" * 4, rocksdb_local_dir=work_dir / "rocksdb",
        )
        options = {"--records": str(records_path), "--log": str(work_dir / "run.json"), "--timeout-s": "3000"}
        run_fixture_job(dist, "generate", settings, options, cache=cache, timeout_s=3600)
    root = base / "checkpoints" / ("fa11bac4" * 4)
    done.write_text(json.dumps({"root": str(root)}))
    return root


def best_of(runs: int, func) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        func()
        times.append(time.perf_counter() - started)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, help="job checkpoint root (default: generate one)")
    parser.add_argument("--records", type=int, default=6_000, help="input records when generating (default 6000)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    root = args.root or ensure_root(args.cache, args.records)
    newest = sorted(root.glob("chk-*"), key=lambda p: int(p.name[4:]))[-1]

    report = verify(str(root), workers=1)
    referenced = verify(str(newest), workers=1)
    t_newest = best_of(args.runs, lambda: verify(str(newest), workers=1))
    t_fallback = best_of(args.runs, lambda: fallback(str(root), workers=1))
    t_all = best_of(args.runs, lambda: fallback(str(root), workers=1, check_all=True))
    retained = len(report.snapshots)
    mb_all, mb_newest = report.bytes / 1e6, referenced.bytes / 1e6
    print(f"root: {root}")
    print(f"retained checkpoints: {retained}; distinct bytes of all: {report.files} files, {mb_all:.1f} MB; "
          f"of the newest: {referenced.files} files, {mb_newest:.1f} MB (unique-bytes ratio {mb_all / mb_newest:.2f})")
    print(f"verify newest:          {t_newest:6.2f} s  {mb_newest / t_newest:6.1f} MB/s")
    print(f"fallback (newest first): {t_fallback:6.2f} s  ratio to verify newest {t_fallback / t_newest:.2f}")
    print(f"fallback --all:          {t_all:6.2f} s  ratio {t_all / t_newest:.2f}  {mb_all / t_all:6.1f} MB/s of unique bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
