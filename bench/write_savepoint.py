#!/usr/bin/env python3
"""Benchmark: ``repair write-savepoint`` and ``repair rescale`` on a real Flink checkpoint.

Measures, each in its own process (best of ``--runs``; wall seconds, CPU seconds, peak RSS):

* ``export``: ``repair export`` of the checkpoint (``--workers 1``), for reference;
* ``write-savepoint``: the export written back unchanged (one process: one core);
* ``write-savepoint --max-parallelism 256 --parallelism 3``: key groups recomputed from every key;
* ``rescale``: export and write-back in one (``--workers 1``, and ``--workers 2`` for the export part);
* ``rescale --master local[2]``: the same with the export's and the write-back's tasks on Spark (two
  local executor threads). CPU seconds count this process, its reaped children and its descendants still
  running at the end (the Spark JVM and its Python workers); peak RSS is this process's and its reaped
  children's, and ``live MB`` the largest of the descendants still running (e.g. the Spark JVM).

``--variants`` picks some of them (by the short names of :data:`VARIANTS`), e.g. only the rescales of
the 1 GB checkpoint on a shared machine.

Entries/s are RocksDB entries of the checkpoint (live keys: a list is one entry) per second. That real
Flink restores what these commands write is shown by the slow tests (tests/ops/test_write_savepoint.py).

Usage::

    python bench/make_checkpoint.py --records 23000 --dir /tmp/bench-small --min-mb 50
    python bench/write_savepoint.py --checkpoint /tmp/bench-small [--runs 2] [--variants rescale,rescale-spark]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

VARIANTS = {
    "export": "export",
    "write-savepoint": "write",
    "write-savepoint --max-parallelism 256 --parallelism 3": "write-256",
    "rescale --max-parallelism 256 --parallelism 3": "rescale",
    "rescale --max-parallelism 256 --parallelism 3 --workers 2": "rescale-2",
    "rescale --max-parallelism 256 --parallelism 3 --master local[2]": "rescale-spark",
}
#: Variants that read the export made once beforehand.
NEEDS_EXPORT = ("write", "write-256")


def one(kind: str, checkpoint: str, export_dir: str, out: str) -> dict:
    """Run one measured operation in this process; its seconds, counts and peak RSS."""
    from repair.ops.export.job import export
    from repair.ops.write_savepoint import rescale, write_savepoint

    started, cpu = time.perf_counter(), time.process_time()
    if kind == "export":
        result = export(checkpoint, out, workers=1)
        counts = {"rows": result.rows}
    elif kind in ("write", "write-256"):
        options = {"max_parallelism": 256, "parallelism": 3} if kind == "write-256" else {}
        result = write_savepoint(export_dir, out, **options)
        counts = result.to_json()["entries"], sum(s.rows for op in result.operators for s in op.states)
        counts = {"entries": counts[0], "rows": counts[1]}
    else:
        options = {"master": "local[2]"} if kind == "rescale-spark" else {"workers": 2 if kind == "rescale-2" else 1}
        result = rescale(checkpoint, out, max_parallelism=256, parallelism=3, **options)
        document = result.to_json()
        counts = {"entries": document["entries"], "rows": sum(s["rows"] for op in document["operators"] for s in op["states"])}
    seconds = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    live_cpu, live_peaks = live_descendants()
    return {"seconds": seconds, "cpu": time.process_time() - cpu + children.ru_utime + children.ru_stime + live_cpu,
            "max_rss_mb": max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, children.ru_maxrss) / 1024,
            "live_peak_rss_mb": max(live_peaks, default=0) / 1024, **counts}


def live_descendants() -> tuple[float, list[int]]:
    """CPU seconds (their own and their reaped children's) and peak RSS in KB of this process's
    descendants still running: the Spark JVM and its Python workers, which the rusage of reaped
    children leaves out (they run until this process exits)."""
    import os

    parents, stats = {}, {}
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        parents[int(pid)] = int(fields[1])
        stats[int(pid)] = sum(int(f) for f in fields[11:15]) / ticks  # utime stime cutime cstime
    me, cpu, peaks = os.getpid(), 0.0, []
    for pid in stats:
        ancestor = parents.get(pid)
        while ancestor and ancestor != me:
            ancestor = parents.get(ancestor)
        if ancestor == me:
            cpu += stats[pid]
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                peaks.extend(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
            except OSError:
                pass
    return cpu, peaks


def run(kind: str, checkpoint: str, export_dir: str, scratch: Path) -> dict:
    out = tempfile.mkdtemp(dir=scratch) + "/out"
    done = subprocess.run([sys.executable, __file__, "--one", kind, "--checkpoint", checkpoint, "--export", export_dir, "--out", out],
                          capture_output=True, text=True, check=True)
    subprocess.run(["rm", "-rf", str(Path(out).parent)], check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a directory from bench/make_checkpoint.py, or a chk-N directory")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--variants", help=f"comma-separated, of {', '.join(VARIANTS.values())} (default: all)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--export", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    checkpoint = args.checkpoint
    bench_json = Path(checkpoint) / "bench.json"
    if bench_json.is_file():
        checkpoint = str(Path(checkpoint) / json.loads(bench_json.read_text())["checkpoint"])
    if args.one:
        print(json.dumps(one(args.one, checkpoint, args.export, args.out)))
        return 0
    from repair.ops.export.job import export

    wanted = set(args.variants.split(",")) if args.variants else set(VARIANTS.values())
    unknown = wanted - set(VARIANTS.values())
    if unknown:
        parser.error(f"unknown variants {', '.join(sorted(unknown))}")
    variants = {name: kind for name, kind in VARIANTS.items() if kind in wanted}
    with tempfile.TemporaryDirectory(prefix="bench-write-savepoint-") as work:
        scratch = Path(work)
        export_dir = str(scratch / "export")
        if wanted & set(NEEDS_EXPORT):
            export(checkpoint, export_dir)
        best: dict[str, dict] = {}
        for _ in range(args.runs):  # round robin, so that a burst of other load hits every variant alike
            for name, kind in variants.items():
                measured = run(kind, checkpoint, export_dir, scratch)
                if name not in best or measured["seconds"] < best[name]["seconds"]:
                    best[name] = measured
        counted = next(m for m in best.values() if "entries" in m)
        entries = counted["entries"]
        print(f"checkpoint: {checkpoint}; {entries} entries ({counted['rows']} rows)")
        print(f"{'variant':58} {'wall s':>7} {'cpu s':>7} {'entries/s':>10} {'per cpu s':>10} {'RSS MB':>7} {'live MB':>7}")
        for name, m in best.items():
            print(f"{name:58} {m['seconds']:7.2f} {m['cpu']:7.2f} {entries / m['seconds']:10.0f} {entries / m['cpu']:10.0f} "
                  f"{m['max_rss_mb']:7.0f} {m['live_peak_rss_mb']:7.0f}")
            print(json.dumps({"variant": name, **m}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
