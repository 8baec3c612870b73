#!/usr/bin/env python3
"""``repair size`` (default mode: SST footers, metaindex and properties only) against ``repair verify`` of
the same checkpoint: the bytes size reads and its time (issue 36: under 2% of the bytes, under 5% of
verify's time, on the largest benchmark checkpoint).

Usage::

    python bench/make_checkpoint.py --dir D1 --records 23000 --min-mb 100   # 186 MB of SSTs
    python bench/make_checkpoint.py --dir D2                                # 1.85 GB (the default)
    python bench/size.py D1 D2 --runs 7 [--phases 5] [--results size.json]

For each generated checkpoint (its ``chk-N`` from ``bench.json``) three commands run, each its own
process, their runs alternated round robin over every checkpoint (a burst of other load on the shared
machine then hits every variant alike): ``repair size CHK --json``, ``repair verify CHK --json`` (the
default: every block's checksum, every block decompressed; a process pool above 64 MB) and
``repair verify CHK --checksums-only --json``. Per run: wall and CPU seconds (user + system of the process
and the pool workers it waited for, from ``wait4``) and the load average when it started. The checkpoint's
files are read once first (page cache warm) and our modules compiled to bytecode, as an installed
package is.

Bytes: size's own ``bytes_read`` (``_metadata`` and what the SST decoder read) against the checkpoint's
bytes (``totals.bytes``: ``_metadata`` plus every file it references, at the size it records; equal to the
files on disk, which ``tests/ops/test_size.py`` holds). Time: per round, size's seconds over verify's in the
same round; the median and the minimum of these ratios, in CPU and in wall seconds. ``--phases N``
also splits size's CPU seconds into start-up (interpreter, CLI imports, parsing and the operation's
imports), the operation and the output (the minimum of ``N`` runs each; ``bench/startup.py``'s method).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import make_checkpoint  # noqa: E402
from common import Variant, compile_bytecode, json_document, machine, repair_command, run_all, warm_page_cache, write_results  # noqa: E402

#: The commands compared, by the name each variant's label starts with.
COMMANDS = {"size": ["size"], "verify": ["verify"], "verify --checksums-only": ["verify", "--checksums-only"]}


def checkpoint_files(checkpoint: Path) -> list[Path]:
    """Every file under the job root of ``checkpoint`` (to warm the page cache: SSTs, meta data, ``_metadata``)."""
    return [p for p in checkpoint.parent.rglob("*") if p.is_file()]


def ratios(variants: dict[str, Variant], label: str, against: str) -> dict:
    """size's seconds over ``against``'s, round by round (the runs of one round are minutes apart at most)."""
    size, other = variants[f"size, {label}"], variants[f"{against}, {label}"]
    rounds = min(len(size.walls), len(other.walls))
    found = {}
    for unit, mine, theirs in (("cpu", size.cpus, other.cpus), ("wall", size.walls, other.walls)):
        per_round = [mine[i] / theirs[i] for i in range(rounds)]
        found[unit] = {"median": statistics.median(per_round), "min": min(per_round), "max": max(per_round), "rounds": per_round}
    return found


def describe(v: Variant) -> str:
    return (f"CPU s median {statistics.median(v.cpus):.3f} min {min(v.cpus):.3f}; wall s median {statistics.median(v.walls):.3f} "
            f"min {min(v.walls):.3f}; load {min(v.loads):.1f}-{max(v.loads):.1f}; {len(v.walls)} runs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", type=Path, nargs="+", help="directories written by bench/make_checkpoint.py (or bench/replicate_checkpoint.py)")
    parser.add_argument("--runs", type=int, default=7, help="runs per command and checkpoint, alternated (default 7)")
    parser.add_argument("--phases", type=int, default=0, metavar="N", help="also split size's CPU seconds into phases, minimum of N runs")
    parser.add_argument("--results", type=Path, default=None, help="write the results as JSON here (after every run)")
    args = parser.parse_args(argv)

    repair = repair_command()
    variants: dict[str, Variant] = {}
    checkpoints: dict[str, dict] = {}
    size_documents: dict[str, dict] = {}

    def results() -> dict:
        return {"benchmark": "size", "machine": machine(), "checkpoints": checkpoints,
                "variants": {name: {"walls": v.walls, "cpus": v.cpus, "loads": v.loads, "max_rss_kb": v.max_rss_kb, "error": v.error}
                             for name, v in variants.items()}}

    def after_run(variant: Variant, stdouts: list[str]) -> None:
        if variant.name.startswith("size, "):
            size_documents[variant.name.split(", ", 1)[1]] = json.loads(stdouts[0])
        write_results(args.results, results())

    compile_bytecode(Path(__file__).resolve())
    for root in args.dirs:
        info = make_checkpoint.load(root)
        if info is None:
            raise SystemExit(f"{root}: no bench.json (generate it with bench/make_checkpoint.py --dir)")
        checkpoint = make_checkpoint.checkpoint_dir(root, info)
        label = f"{info['sst_bytes'] / 1e9:.2f} GB"
        checkpoints[label] = {"path": str(checkpoint), "sst_files": info["sst_files"], "sst_bytes": info["sst_bytes"],
                              "flink": info["flink_version"], "copies": info.get("copies", 1)}
        warm_page_cache(checkpoint_files(checkpoint))
        for name, command in COMMANDS.items():
            variants[f"{name}, {label}"] = Variant(f"{name}, {label}", "all", [[*repair, *command, str(checkpoint), "--json"]],
                                                   json_document("ok"))
    load = run_all(list(variants.values()), args.runs, after_run=after_run)

    print(f"\nload average (1 min) before and after: {load[0]:.2f}, {load[1]:.2f}")
    for label, facts in checkpoints.items():
        document = size_documents.get(label)
        if document is None:
            print(f"\n{label}: size did not run ({variants[f'size, {label}'].error})")
            continue
        totals = document["checkpoints"][-1]["totals"]
        facts.update(bytes=totals["bytes"], files=totals["files"], bytes_read=document["bytes_read"],
                     bytes_read_fraction=document["bytes_read"] / totals["bytes"])
        print(f"\n{label} ({facts['path']}): {totals['files']} files, {totals['bytes']:,} bytes; size read {document['bytes_read']:,} "
              f"bytes = {100 * facts['bytes_read_fraction']:.3f}% (goal: under 2%)")
        for name in COMMANDS:
            v = variants[f"{name}, {label}"]
            print(f"  {name:26s} " + (describe(v) if v.walls else f"failed: {v.error}"))
        for against in list(COMMANDS)[1:]:
            if variants[f"size, {label}"].walls and variants[f"{against}, {label}"].walls:
                found = facts[f"size / {against}"] = ratios(variants, label, against)
                print(f"  size / {against:26s} CPU median {100 * found['cpu']['median']:.1f}% (min {100 * found['cpu']['min']:.1f}%), "
                      f"wall median {100 * found['wall']['median']:.1f}% (min {100 * found['wall']['min']:.1f}%)  (goal: under 5%)")
    if args.phases:
        from startup import PHASES, phase_seconds

        for label, facts in checkpoints.items():
            seconds = phase_seconds(sys.executable, "size", Path(facts["path"]), args.phases)
            facts["size_phases_cpu"] = seconds
            print(f"\nsize, {label}: CPU s per phase, minimum of {args.phases} (load {os.getloadavg()[0]:.1f}): "
                  + ", ".join(f"{name} {seconds[name]:.3f}" for name, _, _ in PHASES))
    write_results(args.results, {**results(), "load": load})
    return 0


if __name__ == "__main__":
    sys.exit(main())
