#!/usr/bin/env python3
"""Benchmark: ``repair upgrade`` against ``repair rescale`` of the same Flink 1.20 Kryo checkpoint.

Issue #34 asks ``upgrade`` within 1.5x of ``rescale`` per entry, memory bounded the same way. Both take
the same route (the checkpoint exported, written back as a canonical savepoint by write-savepoint's
tasks); ``upgrade`` first reads every row's Kryo values to judge each state (``--check``'s pass), and
its write rewrites every Kryo value Kryo 5 reads otherwise. Variants, each its own process, one worker
(``--workers 1``: one core), round robin over ``--runs``:

* ``rescale``: ``repair rescale CHK --parallelism 3`` (rescale needs a change; the subtask count is the
  cheapest one: key groups are not recomputed);
* ``upgrade``: ``repair upgrade CHK --to 2.1 --out DIR``;
* ``check``: ``repair upgrade CHK --to 2.1 --check`` (the judging pass alone).

CPU seconds (user + system, the process and its reaped children) count: the machine is shared, and load
distorts wall time more. The 1-minute load average is recorded beside each run.

Usage::

    python bench/make_checkpoint.py --job UpgradeJob --records 20000 --user-chars 40 --tag-chars 12 --dir /tmp/upg/20k --min-mb 1
    python bench/upgrade.py /tmp/upg/20k [/tmp/upg/80k ...] [--runs 1] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.common import Variant, json_document, machine, markdown_table, repair_command, run_all  # noqa: E402
from bench.make_checkpoint import checkpoint_dir, load  # noqa: E402


def variants(checkpoint: Path, scratch: Path) -> list[Variant]:
    repair = repair_command()
    return [
        Variant("rescale", "all", [[*repair, "rescale", str(checkpoint), "--parallelism", "3", "--workers", "1",
                                    "--out", str(scratch / "rescale"), "--json"]], json_document()),
        Variant("upgrade", "all", [[*repair, "upgrade", str(checkpoint), "--to", "2.1", "--workers", "1",
                                    "--out", str(scratch / "upgrade"), "--json"]], json_document("ok")),
        Variant("check", "all", [[*repair, "upgrade", str(checkpoint), "--to", "2.1", "--check", "--workers", "1", "--json"]],
                json_document(), ok_codes=(0, 1)),
    ]


def measure(root: Path, runs: int) -> dict:
    info = load(root)
    if info is None:
        raise SystemExit(f"{root}: no bench.json (generate it with bench/make_checkpoint.py --job UpgradeJob)")
    checkpoint = checkpoint_dir(root, info)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-upgrade-") as work:
        scratch = Path(work)
        found = variants(checkpoint, scratch)

        def clean(variant: Variant, stdouts: list[str]) -> None:
            if variant.name == "check":
                document = json.loads(stdouts[0])
                rows["entries"] = sum(state["rows"] for state in document["states"])
                rows["rewritten"] = sum(state["rows_differing"] for state in document["states"])
            shutil.rmtree(scratch / variant.name, ignore_errors=True)

        run_all(found, runs, after_run=clean)
    result = {"checkpoint": str(checkpoint), "records": info["records"], "sst_bytes": info["sst_bytes"], **rows, "variants": {}}
    for v in found:
        result["variants"][v.name] = {"cpu": v.cpus, "wall": v.walls, "max_rss_kb": v.max_rss_kb, "load": v.loads, "error": v.error}
    return result


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")


def loads(result: dict) -> list[float]:
    return [load for variant in result["variants"].values() for load in variant["load"]] or [float("nan")]


def table(results: list[dict]) -> str:
    lines = []
    for r in results:
        v = r["variants"]
        cpu = {name: median(v[name]["cpu"]) for name in v}
        lines.append([f"{r['records']:,} records, {r['sst_bytes'] / 1e6:.0f} MB", f"{r.get('entries', 0):,}",
                      *(f"{cpu[name]:.1f}" for name in ("rescale", "upgrade", "check")),
                      f"**{cpu['upgrade'] / cpu['rescale']:.2f}x**",
                      *(f"{max(v[name]['max_rss_kb'], default=0) / 1024:.0f}" for name in ("rescale", "upgrade")),
                      f"{min(loads(r)):.0f}-{max(loads(r)):.0f}"])
    return markdown_table(["checkpoint", "rows", "rescale CPU s", "upgrade CPU s", "check CPU s", "upgrade / rescale",
                           "rescale peak RSS MB", "upgrade peak RSS MB", "load"], lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="+", type=Path, help="checkpoints made by bench/make_checkpoint.py --job UpgradeJob")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    results = [measure(root, args.runs) for root in args.roots]
    print(table(results))
    if args.json is not None:
        args.json.write_text(json.dumps({"machine": machine(), "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
