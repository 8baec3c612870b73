#!/usr/bin/env python3
"""verify, fallback and export time and peak memory against checkpoint size (bench/make_checkpoint.py).

Usage::

    python bench/make_checkpoint.py --dir D1 --records 23000     # about 0.19 GB of SSTs
    python bench/make_checkpoint.py --dir D2                    # about 1.8 GB (the default, 230,000 records)
    python bench/replicate_checkpoint.py D2 --copies 6 --dir D3  # 11 GB: D2's files and operators 6 times
    python bench/scale.py D1 D2 D3 --runs 3 --spark --results scale.json

For each generated checkpoint (its ``chk-N`` from ``bench.json``, never the job root), the ``repair``
command runs as its own process: ``verify --workers 1`` and ``--workers 2``, ``fallback --workers 1``
(on the job root: fallback's input), ``export --workers 1`` and ``--workers 2``; with ``--spark`` also
verify and export with ``--master local[1]`` and ``local[2]`` (JVM start-up included). What each run's
JSON said is kept (verify: ok; export: rows), and the load average when each run started. Runs go round robin
over every size and command; the median wall time counts (the machine is shared: compare ratios), and
the peak RSS is the largest process's (``wait4``; pool workers included) and all processes' together.
Per size: MB of SSTs per second, and time per GB against the smallest size (linear: constant).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import make_checkpoint  # noqa: E402
from common import Variant, json_document, machine, measured, print_speedups, repair_command, run_all, write_results  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", type=Path, nargs="+", help="directories written by bench/make_checkpoint.py or bench/replicate_checkpoint.py")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spark", action="store_true", help="also verify and export with --master local[1] and local[2]")
    parser.add_argument("--only", default=None, help="run only the variants whose name matches this regular expression")
    parser.add_argument("--skip", default=None, help="skip the variants whose name matches this regular expression")
    parser.add_argument("--results", type=Path, default=None, help="write the results as JSON here (after every run)")
    args = parser.parse_args(argv)
    repair = repair_command()
    variants: list[Variant] = []
    sizes: dict[str, int] = {}
    facts: dict[str, list[dict]] = {}  # variant -> what each run's JSON said (verify: ok; export: rows)

    def results() -> dict:
        return {"machine": machine(), "sizes": sizes,
                "variants": {v.name: {"walls": v.walls, "cpus": v.cpus, "max_rss_kb": v.max_rss_kb, "tree_rss_kb": v.tree_rss_kb,
                                      "loads": v.loads, "facts": facts.get(v.name, []), "error": v.error} for v in variants}}

    def after_run(variant: Variant, stdouts: list[str]) -> None:
        if variant.note:
            shutil.rmtree(variant.note, ignore_errors=True)
        document = json.loads(stdouts[0])
        facts.setdefault(variant.name, []).append({key: document[key] for key in ("ok", "rows", "files") if key in document})
        write_results(args.results, results())

    with tempfile.TemporaryDirectory(prefix="bench-scale-") as scratch:
        for root in args.dirs:
            info = make_checkpoint.load(root)
            if info is None:
                raise SystemExit(f"{root}: no bench.json (generate it with bench/make_checkpoint.py --dir)")
            checkpoint = make_checkpoint.checkpoint_dir(root, info)
            size = sum(p.stat().st_size for p in make_checkpoint.sst_files(root))
            label = f"{size / 1e9:.2f} GB"
            if label in sizes:
                raise SystemExit(f"{root}: the same size as another directory ({label}); give checkpoints of different sizes")
            sizes[label] = size
            job_root = checkpoint.parent
            parallel = [(f"--workers {n}", str(n), ["--workers", str(n)]) for n in (1, 2)]
            if args.spark:
                parallel += [(f"--master local[{n}]", str(n), ["--master", f"local[{n}]"]) for n in (1, 2)]
            for how, cores, options in parallel:
                variants.append(Variant(f"verify {how}, {label}", cores, [[*repair, "verify", str(checkpoint), *options, "--json"]],
                                        json_document(), ok_codes=(0, 1)))
            variants.append(Variant(f"fallback --workers 1, {label}", "1", [[*repair, "fallback", str(job_root), "--workers", "1", "--json"]],
                                    json_document(), ok_codes=(0, 1)))
            for how, cores, options in parallel:
                out = Path(scratch) / f"export-{len(variants)}"
                variants.append(Variant(f"export {how}, {label}", cores, [[*repair, "export", str(checkpoint), "--out", str(out), *options, "--json"]],
                                        json_document(), note=str(out)))
        variants = [v for v in variants if (not args.only or re.search(args.only, v.name)) and not (args.skip and re.search(args.skip, v.name))]
        load = run_all(variants, args.runs, after_run=after_run)
    print(f"load average (1 min) before and after: {load[0]:.2f}, {load[1]:.2f}")
    smallest = min(sizes, key=sizes.get)
    print()
    for v in variants:
        if not v.walls:
            print(f"{v.name:36s} failed: {v.error}")
            continue
        label = v.name.rsplit(", ", 1)[1]
        median = statistics.median(v.walls)
        base = measured(variants, v.name.rsplit(", ", 1)[0] + ", " + smallest)
        per_gb = median / (sizes[label] / 1e9)
        linear = "" if base is None else f"  s/GB vs {smallest}: {per_gb / (statistics.median(base.walls) / (sizes[smallest] / 1e9)):.2f}x"
        print(f"{v.name:36s} median {median:8.2f} s  {sizes[label] / 1e6 / median:7.1f} MB/s  peak RSS {max(v.max_rss_kb) / 1024:6.0f} MB "
              f"(all {max(v.tree_rss_kb) / 1024:6.0f} MB){linear}  runs {', '.join(f'{w:.1f}' for w in v.walls)}  "
              f"load {', '.join(f'{x:.1f}' for x in v.loads)}  {facts.get(v.name, [])[-1:]}")
    print_speedups(variants, [(f"{work} {two} / {one}, {label}", f"{work} {one}, {label}", f"{work} {two}, {label}")
                              for label in sizes for work in ("verify", "export")
                              for one, two in (("--workers 1", "--workers 2"), ("--master local[1]", "--master local[2]"))])
    write_results(args.results, {**results(), "load": load})
    return 0


if __name__ == "__main__":
    sys.exit(main())
