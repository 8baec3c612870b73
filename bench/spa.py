#!/usr/bin/env python3
"""Flink's State Processor API reading every keyed state of a benchmark checkpoint (``bench/spa``).

Usage::

    python bench/spa.py CHECKPOINT [--parallelism 1]   # build (mvn, once) and run; prints its JSON
    python bench/spa.py CHECKPOINT --compare --runs 3  # beside repair export --columns both|decoded|raw

``command(checkpoint, parallelism)`` is the command line bench/export.py times beside ``repair export``
(a JVM, start-up included). The job (``bench/spa/src/main/java/benchspa/ReadAllStates.java``) is built
with Maven (``flink-state-processor-api`` from Maven Central, pinned in ``bench/spa/pom.xml``) and runs
on the PyPI jars' ``flink-dist`` of the benchmark's Flink version, with the fixture job's classes
(compiled by ``fixtures/flink_harness.py``), which its POJO and enum serializers need.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SPA = BENCH / "spa"
sys.path.insert(0, str(REPO))


def build() -> list[Path]:
    """``mvn package`` when the job's jar is older than its sources; the jars to add to flink-dist."""
    jar = SPA / "target" / "bench-spa-1.0.jar"
    sources = [SPA / "pom.xml", *SPA.glob("src/**/*.java")]
    if not jar.is_file() or jar.stat().st_mtime < max(p.stat().st_mtime for p in sources):
        subprocess.run(["mvn", "-q", "-B", "package"], cwd=SPA, check=True, timeout=900)
    return [jar, *sorted((SPA / "target" / "lib").glob("flink-state-processor-api-*.jar"))]


def command(checkpoint: str, parallelism: int = 1, flink: str = "1.20.3") -> list[str]:
    from fixtures.flink_harness import compile_job, ensure_flink

    dist = ensure_flink(flink)
    classes = compile_job(dist)
    classpath = [*build(), classes, *dist.classpath()]
    log4j = REPO / "fixtures" / "job" / "log4j2.properties"
    return ["java", "-Xmx2g", f"-Dlog4j.configurationFile={log4j}", f"-Dlog4j2.configurationFile={log4j}",
            "--add-opens=java.base/java.util=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED",
            "-cp", os.pathsep.join(map(str, classpath)), "benchspa.ReadAllStates", checkpoint, str(parallelism)]


def result(stdout: str) -> dict:
    """The JSON line the job prints last."""
    return json.loads(stdout.strip().splitlines()[-1])


def compare(checkpoint: str, runs: int, parallelism: int) -> None:
    """The State Processor API job and ``repair export --workers N`` (N = parallelism; ``--columns``
    both, decoded and raw), each a process (start-up included), round robin; medians and ratios."""
    import shutil
    import statistics
    import tempfile

    sys.path.insert(0, str(BENCH))
    from common import Variant, repair_command, run_all

    def check_spa(stdouts: list[str]) -> str | None:
        return None if result(stdouts[0]).get("rows") else "no rows read"

    def check_export(stdouts: list[str]) -> str | None:
        return None if json.loads(stdouts[0]).get("rows") else "no rows exported"

    with tempfile.TemporaryDirectory(prefix="bench-spa-") as scratch:
        variants = [Variant(f"State Processor API, parallelism {parallelism}", str(parallelism), [command(checkpoint, parallelism)], check_spa,
                            "reads every state of per-user, per-account, per-type; counts and checksums rows")]
        for columns in ("both", "decoded", "raw"):
            out = str(Path(scratch) / f"export-{columns}")
            variants.append(Variant(f"repair export --workers {parallelism} --columns {columns}", str(parallelism),
                                    [[*repair_command(), "export", checkpoint, "--out", out, "--workers", str(parallelism), "--columns", columns,
                                      "--json"]], check_export, note=out))
        outputs: dict[str, str] = {}

        def after(v: Variant, stdouts: list[str]) -> None:
            outputs[v.name] = stdouts[0]
            if v.note:
                sizes[v.name] = sum(p.stat().st_size for p in Path(v.note).rglob("*.parquet"))
                shutil.rmtree(v.note, ignore_errors=True)

        sizes: dict[str, int] = {}
        run_all(variants, runs, after_run=after)
    spa = result(outputs[variants[0].name]) if variants[0].name in outputs else None
    export_doc = json.loads(outputs[variants[1].name]) if variants[1].name in outputs else None
    if spa and export_doc:
        exported = {f"{op['operator']}/{s['state']}": s["rows"] for op in export_doc["operators"] for s in op["states"]}
        by_id = {}
        from repair.formats.flink.keygroups import operator_id_for_uid
        for name, (rows, _checksum) in spa["states"].items():
            uid, state = name.split("/", 1)
            key = next((k for k in (f"{uid}/{state}", f"{operator_id_for_uid(uid)}/{state}") if k in exported), None)
            by_id[name] = (rows, exported.get(key))
        same = [n for n, (a, b) in by_id.items() if a == b]
        print(f"rows per state, State Processor API against repair export: {len(same)} of {len(by_id)} states equal; "
              f"differ: {', '.join(f'{n} {a} vs {b}' for n, (a, b) in by_id.items() if a != b) or 'none'}")
        print(f"State Processor API rows {spa['rows']}, its job {spa['job_seconds']:.1f} s of {spa['seconds']:.1f} s in main()")
    for v in variants:
        if v.walls:
            print(f"{v.name:48s} median {statistics.median(v.walls):7.2f} s  CPU {statistics.median(v.cpus):7.2f} s  "
                  f"Parquet {sizes.get(v.name, 0) / 1e6:7.1f} MB  runs {', '.join(f'{w:.1f}' for w in v.walls)}")
    base = variants[0]
    for v in variants[1:]:
        if v.walls and base.walls:
            print(f"{v.name} against the State Processor API: {statistics.median(base.walls) / statistics.median(v.walls):.2f}x as fast (wall)")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--compare", action="store_true", help="time it beside repair export (round robin, --runs)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    if args.compare:
        compare(args.checkpoint, args.runs, args.parallelism)
        return 0
    out = subprocess.run(command(args.checkpoint, args.parallelism), capture_output=True, text=True)
    if out.returncode:
        print(out.stderr[-4000:], file=sys.stderr)
        return out.returncode
    print(json.dumps(result(out.stdout), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
