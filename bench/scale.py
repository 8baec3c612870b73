#!/usr/bin/env python3
"""verify, fallback and export time and peak memory against checkpoint size (bench/make_checkpoint.py).

Usage::

    python bench/make_checkpoint.py --dir D1 --records 23000     # about 0.19 GB of SSTs
    python bench/make_checkpoint.py --dir D2                    # about 1.8 GB (the default, 230,000 records)
    python bench/make_checkpoint.py --dir D3 --records 1300000  # about 10 GB (disk: the checkpoint plus its export)
    python bench/scale.py D1 D2 [D3] --runs 3 --results scale.json

For each generated checkpoint (its ``chk-N`` from ``bench.json``, never the job root), the ``repair``
command runs as its own process: ``verify --workers 1`` and ``--workers 2``, ``fallback --workers 1``
(on the job root: fallback's input), ``export --workers 1`` and ``--workers 2``. Runs go round robin
over every size and command; the median wall time counts (the machine is shared: compare ratios), and
the peak RSS is the largest process's (``wait4``; pool workers included) and all processes' together.
Per size: MB of SSTs per second, and time per GB against the smallest size (linear: constant).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import make_checkpoint  # noqa: E402
from common import Variant, json_document, machine, repair_command, run_all  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", type=Path, nargs="+", help="directories written by bench/make_checkpoint.py")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default=None, help="run only the variants whose name contains this")
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args(argv)
    repair = repair_command()
    variants: list[Variant] = []
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as scratch:
        for root in args.dirs:
            info = make_checkpoint.load(root)
            if info is None:
                raise SystemExit(f"{root}: no bench.json (generate it with bench/make_checkpoint.py --dir)")
            checkpoint = make_checkpoint.checkpoint_dir(root, info)
            size = sum(p.stat().st_size for p in make_checkpoint.sst_files(root))
            label = f"{size / 1e9:.2f} GB"
            sizes[label] = size
            job_root = checkpoint.parent
            for workers in (1, 2):
                variants.append(Variant(f"verify --workers {workers}, {label}", str(workers),
                                        [[*repair, "verify", str(checkpoint), "--workers", str(workers), "--json"]], json_document(), ok_codes=(0, 1)))
            variants.append(Variant(f"fallback --workers 1, {label}", "1", [[*repair, "fallback", str(job_root), "--workers", "1", "--json"]],
                                    json_document(), ok_codes=(0, 1)))
            for workers in (1, 2):
                out = Path(scratch) / f"export-{len(variants)}"
                variants.append(Variant(f"export --workers {workers}, {label}", str(workers),
                                        [[*repair, "export", str(checkpoint), "--out", str(out), "--workers", str(workers), "--json"]],
                                        json_document(), note=str(out)))
        if args.only:
            variants = [v for v in variants if args.only in v.name]
        load = run_all(variants, args.runs, after_run=lambda v, _: v.note and shutil.rmtree(v.note, ignore_errors=True))
    results = {"machine": machine(), "load": load, "sizes": sizes,
               "variants": {v.name: {"walls": v.walls, "cpus": v.cpus, "max_rss_kb": v.max_rss_kb, "tree_rss_kb": v.tree_rss_kb,
                                     "error": v.error} for v in variants}}
    smallest = min(sizes, key=sizes.get)
    print()
    for v in variants:
        if not v.walls:
            print(f"{v.name:36s} failed: {v.error}")
            continue
        label = v.name.rsplit(", ", 1)[1]
        median = statistics.median(v.walls)
        base = next((b for b in variants if b.name == v.name.rsplit(", ", 1)[0] + ", " + smallest and b.walls), None)
        per_gb = median / (sizes[label] / 1e9)
        linear = "" if base is None else f"  s/GB vs {smallest}: {per_gb / (statistics.median(base.walls) / (sizes[smallest] / 1e9)):.2f}x"
        print(f"{v.name:36s} median {median:8.2f} s  {sizes[label] / 1e6 / median:7.1f} MB/s  peak RSS {max(v.max_rss_kb) / 1024:6.0f} MB "
              f"(all {max(v.tree_rss_kb) / 1024:6.0f} MB){linear}  runs {', '.join(f'{w:.1f}' for w in v.walls)}")
    for label in sizes:
        for work in ("verify", "export"):
            one = next((v for v in variants if v.name == f"{work} --workers 1, {label}" and v.walls), None)
            two = next((v for v in variants if v.name == f"{work} --workers 2, {label}" and v.walls), None)
            if one and two:
                print(f"{work} --workers 2 / --workers 1, {label}: {statistics.median(one.walls) / statistics.median(two.walls):.2f}x")
    if args.results:
        args.results.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
