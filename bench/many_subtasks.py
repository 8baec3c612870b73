#!/usr/bin/env python3
"""export and verify time per subtask against the number of subtasks (jobs with thousands of subtasks).

Usage::

    python bench/many_subtasks.py --copies 25,100 --dir /tmp/bench-many --runs 1 --results many.json

A fixture checkpoint (``flink-1.20-default``'s newest by default: 6 operators, 12 subtasks, its small
files inline in ``_metadata``) is replicated ``K`` times for each ``--copies`` value by
``bench/replicate_checkpoint.py`` (K times its operators and files): 25 copies are 300 subtasks, 100
copies 1,200 subtasks and a 33 MB ``_metadata``. ``repair export --workers 1`` and ``repair verify
--workers 1`` run on each as their own process. Per run: wall and CPU seconds, and CPU milliseconds
per subtask; the last column compares that with the fewest copies'. Work that grows linearly with the
job keeps it near 1.0x; a term quadratic in the number of subtasks (each subtask's task decoding every
subtask's handles, as export's tasks did before they shared one decoded ``_metadata`` per process)
makes it grow with K.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import replicate_checkpoint  # noqa: E402
from common import Variant, json_document, machine, print_table, repair_command, run_all, write_results  # noqa: E402

from repair.formats.flink.metadata import decode_metadata  # noqa: E402

DEFAULT_SOURCE = BENCH.parent / "fixtures" / "flink-1.20-default" / "checkpoints"


def newest_checkpoint(root: Path) -> Path:
    job = next(p for p in root.iterdir() if p.is_dir())
    return max((p for p in job.iterdir() if p.name.startswith("chk-")), key=lambda p: int(p.name[4:]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, help="a chk-N directory to replicate (default: flink-1.20-default's newest)")
    parser.add_argument("--copies", default="25,100", help="comma-separated replication counts")
    parser.add_argument("--dir", type=Path, required=True, help="where the replicated checkpoints are kept (made once)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--results", type=Path, help="write the measurements as JSON here")
    args = parser.parse_args(argv)
    source = (args.source or newest_checkpoint(DEFAULT_SOURCE)).resolve()
    repair = repair_command()
    sizes: dict[int, dict] = {}
    variants: list[Variant] = []
    with tempfile.TemporaryDirectory(prefix="bench-many-") as scratch:
        for copies in sorted(int(c) for c in args.copies.split(",")):
            root = args.dir / f"x{copies}"
            if not (root / "bench.json").is_file():
                shutil.rmtree(root, ignore_errors=True)
                root.parent.mkdir(parents=True, exist_ok=True)
                replicate_checkpoint.replicate(source, copies, root)
            checkpoint = newest_checkpoint(root / "checkpoints")
            data = (checkpoint / "_metadata").read_bytes()
            metadata = decode_metadata(data)
            sizes[copies] = {"subtasks": sum(len(op.subtasks) for op in metadata.operators), "metadata_bytes": len(data)}
            out = Path(scratch) / f"export-{copies}"
            variants.append(Variant(f"export --workers 1, x{copies}", "1",
                                    [[*repair, "export", str(checkpoint), "--out", str(out), "--workers", "1", "--json"]],
                                    json_document(), note=str(out)))
            variants.append(Variant(f"verify --workers 1, x{copies}", "1",
                                    [[*repair, "verify", str(checkpoint), "--workers", "1", "--json"]],
                                    json_document(), ok_codes=(0, 1)))

        def after_run(variant: Variant, stdouts: list[str]) -> None:
            if variant.note:
                shutil.rmtree(variant.note, ignore_errors=True)

        run_all(variants, args.runs, after_run=after_run)
    fewest = min(sizes)
    rows, results = [], []
    for v in variants:
        work, label = v.name.rsplit(", x", 1)
        copies = int(label)
        if not v.cpus:
            rows.append([v.name, "failed", "", "", "", ""])
            continue
        cpu = min(v.cpus)
        per_subtask = cpu / sizes[copies]["subtasks"] * 1000
        base = next(b for b in variants if b.name == f"{work}, x{fewest}")
        base_per = min(base.cpus) / sizes[fewest]["subtasks"] * 1000 if base.cpus else None
        rows.append([v.name, str(sizes[copies]["subtasks"]), f"{min(v.walls):.1f}", f"{cpu:.1f}", f"{per_subtask:.1f}",
                     f"{per_subtask / base_per:.2f}x" if base_per else ""])
        results.append({"variant": v.name, **sizes[copies], "walls": v.walls, "cpus": v.cpus, "cpu_ms_per_subtask": per_subtask})
    print_table(["variant", "subtasks", "wall s", "CPU s", "CPU ms/subtask", f"vs x{fewest}"], rows)
    write_results(args.results, {"machine": machine(), "source": str(source), "runs": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
