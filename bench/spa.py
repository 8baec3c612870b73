#!/usr/bin/env python3
"""Flink's State Processor API reading every keyed state of a benchmark checkpoint (``bench/spa``),
beside ``repair export``.

Usage::

    python bench/spa.py CHECKPOINT [--flink 2.3.0] [--per-state] [--unmanaged-memory] [--parquet OUT]   # the job alone: its JSON
    python bench/spa.py CHECKPOINT --compare --workers 2 --runs 3 --startup TINY_CHECKPOINT [--flink 2.3.0,1.20.3]

``--compare`` times, round robin, each a process pinned to the same ``--workers`` cores (JVM and
interpreter start-up included):

- the State Processor API of each ``--flink`` (2.3.0: ``flink-state-processor-api`` 2.3.0 on Flink 2.3.0,
  the current release; 1.20.3: ``flink-state-processor-api`` 1.20.0 on Flink 1.20.3) with parallelism
  ``--workers``, one reader function per operator (all its states) and one per state; Flink 1.20's also
  with ``state.backend.rocksdb.memory.managed: false`` (``--unmanaged-memory``); 2.x's also with one
  reader per state writing every state's rows to Parquet (``--parquet OUT``: flink-parquet's writer in a
  FileSink, Snappy, the columns export writes as far as the State Processor API's objects allow: the
  like-for-like variant, ``ParquetStates.java``), whose rows of a few states (``COMPARED``) are compared
  with the export's, read with pyarrow;
- ``repair export --workers N`` (``--columns both``, the default).

``--startup TINY`` runs every variant on a tiny checkpoint of the same job too (a committed fixture's
native savepoint: the fixtures' checkpoints point to the machine that wrote them): its CPU is the
variant's start-up (JVM, MiniCluster, or interpreter, imports and planning), and CPU beyond start-up is
the CPU on ``CHECKPOINT`` minus that; ``--startup-from RESULTS`` takes those start-up CPUs from an
earlier run's ``--results`` instead. ``--only REGEX`` keeps the variants whose
name matches (the State Processor API 1.20 with managed memory and one reader for all states takes
15 minutes on the 186 MB checkpoint: leave it out of a 2 GB run with ``--skip-slow``).

The job (``bench/spa/src/main/java/benchspa/ReadAllStates.java``) is built with Maven for each Flink
(``flink-state-processor-api`` from Maven Central, pinned in ``bench/spa/pom.xml``) and runs on the PyPI
jars' ``flink-dist`` of that Flink, with the fixture job's classes (compiled by
``fixtures/flink_harness.py``), which its POJO and enum serializers need.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SPA = BENCH / "spa"
sys.path.insert(0, str(REPO))

#: The flink-state-processor-api release run on each Flink (Maven Central has no 1.20.1-1.20.3 of it).
SPA_RELEASE = {"1.20.3": "1.20.0", "2.3.0": "2.3.0"}


def build(flink: str, *, parquet: bool = False) -> list[Path]:
    """``mvn package`` for ``flink`` when its jar is older than the sources; the jars to add to flink-dist
    (with ``parquet``, also flink-parquet's and the Hadoop client's, in ``lib/parquet``)."""
    target = SPA / "target" / f"flink-{flink}"
    jar = target / "bench-spa-1.0.jar"
    sources = [SPA / "pom.xml", *SPA.glob("src/**/*.java")]
    if not jar.is_file() or jar.stat().st_mtime < max(p.stat().st_mtime for p in sources):
        subprocess.run(["mvn", "-q", "-B", "package", f"-Dflink.version={flink}", f"-Dspa.version={SPA_RELEASE[flink]}"],
                       cwd=SPA, check=True, timeout=900)
    return [jar, *sorted((target / "lib").glob("flink-state-processor-api-*.jar")),
            *(sorted((target / "lib" / "parquet").glob("*.jar")) if parquet else [])]


def command(checkpoint: str, parallelism: int = 1, flink: str = "1.20.3", *, per_state: bool = False,
            unmanaged_memory: bool = False, parquet: str | None = None) -> list[str]:
    from fixtures.flink_harness import compile_job, ensure_flink

    dist = ensure_flink(flink)
    classes = compile_job(dist)
    classpath = [*build(flink, parquet=parquet is not None), classes, *dist.classpath()]
    log4j = REPO / "fixtures" / "job" / "log4j2.properties"
    options = [*(["--per-state"] if per_state else []), *(["--unmanaged-memory"] if unmanaged_memory else []),
               *(["--parquet", parquet] if parquet else [])]
    return ["java", "-Xmx2g", f"-Dlog4j.configurationFile={log4j}", f"-Dlog4j2.configurationFile={log4j}",
            "--add-opens=java.base/java.util=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED",
            "-cp", os.pathsep.join(map(str, classpath)), "benchspa.ReadAllStates", checkpoint, str(parallelism), *options]


def result(stdout: str) -> dict:
    """The JSON line the job prints last."""
    return json.loads(stdout.strip().splitlines()[-1])


def spa_variants(flinks: list[str], workers: int) -> list[tuple[str, dict]]:
    """``(name, command options)`` of every State Processor API variant, the current release first; the
    2.x releases also writing every state to Parquet (``parquet``: the variant takes an output directory)."""
    found = []
    for flink in flinks:
        label = f"State Processor API {SPA_RELEASE[flink]}"
        memories = [("", False)] if flink.startswith("2.") else [("", False), (", unmanaged memory", True)]
        for memory, unmanaged in memories:
            for readers, per_state in (("one reader for all states", False), ("one reader per state", True)):
                found.append((f"{label}{memory}, {readers}, parallelism {workers}",
                              {"flink": flink, "per_state": per_state, "unmanaged_memory": unmanaged}))
        if flink.startswith("2."):
            found.append((f"{label}, one reader per state, writing Parquet, parallelism {workers}",
                          {"flink": flink, "per_state": True, "parquet": True}))
    return found


#: Minutes, not seconds: RocksDB flushes and compacts after nearly every key (docs/benchmarks/state-processor-api.md).
SLOW = re.compile(r"API 1\.20\.0, one reader for all states")


def compare(checkpoint: str, *, runs: int, workers: int, flinks: list[str], startup: str | None,
            startup_from: Path | None, only: str | None, skip_slow: bool, results: Path | None) -> None:
    """Every variant on ``checkpoint`` (and on ``startup``), round robin; medians, ratios, loads."""
    import shutil
    import statistics
    import tempfile

    sys.path.insert(0, str(BENCH))
    from common import Variant, code_state, compile_bytecode, machine, repair_command, run_all, taskset, write_results

    compile_bytecode()  # as an installed repair is: no module compiled again in every process
    cores = ",".join(str(c) for c in range(workers))
    pin = taskset(cores)

    def check_spa(stdouts: list[str]) -> str | None:
        return None if result(stdouts[0]).get("rows") else "no rows read"

    def check_export(stdouts: list[str]) -> str | None:
        return None if json.loads(stdouts[0]).get("rows") else "no rows exported"

    with tempfile.TemporaryDirectory(prefix="bench-spa-") as scratch:
        def variants_for(target: str, suffix: str) -> list[Variant]:
            found = []
            for name, options in spa_variants(flinks, workers):
                out = str(Path(scratch) / f"spa-parquet{len(suffix)}") if options.pop("parquet", False) else None
                found.append(Variant(name + suffix, cores, [[*pin, *command(target, workers, **options, parquet=out)]],
                                     check_spa, note=out or ""))
            out = str(Path(scratch) / f"export{len(suffix)}")
            found.append(Variant(f"repair export --workers {workers}" + suffix, cores,
                                 [[*pin, *repair_command(), "export", target, "--out", out, "--workers", str(workers), "--json"]],
                                 check_export, note=out))
            return [v for v in found if (not only or re.search(only, v.name)) and not (skip_slow and SLOW.search(v.name))]

        variants = variants_for(checkpoint, "")
        tiny = variants_for(startup, " (start-up)") if startup else []
        outputs: dict[str, str] = {}
        digests: dict[str, dict[str, str | None]] = {}
        written: dict[str, int] = {}  # Parquet bytes

        def after(v: Variant, stdouts: list[str]) -> None:
            outputs[v.name] = stdouts[0]
            if v.note:
                if v in variants and v.name not in digests:  # the rows of a few states and the bytes, once, untimed
                    digests[v.name] = {state: state_digest(Path(v.note), state) for state in COMPARED}
                    written[v.name] = sum(f.stat().st_size for f in Path(v.note).rglob("*.parquet"))
                shutil.rmtree(v.note, ignore_errors=True)

        load_before = os.getloadavg()
        run_all([*tiny, *variants], runs, after_run=after)
        load_after = os.getloadavg()

    earlier = {r["variant"]: r for r in json.loads(startup_from.read_text())["variants"]} if startup_from else {}
    print(f"load before {load_before}, after {load_after}; cores {cores} ({workers}); {checkpoint}")
    export = next((v for v in variants if v.name.startswith("repair export") and v.walls), None)
    export_doc = json.loads(outputs[export.name]) if export else None
    rows = []
    for v in variants:
        if not v.walls:
            print(f"{v.name}: {v.error or 'not run'}")
            continue
        start = next((t for t in tiny if t.name == v.name + " (start-up)" and t.cpus), None)
        startup_cpu = statistics.median(start.cpus) if start else earlier.get(v.name, {}).get("startup_cpu_s")
        row = {"variant": v.name, "wall_s": statistics.median(v.walls), "cpu_s": statistics.median(v.cpus),
               "startup_cpu_s": startup_cpu,
               "walls": v.walls, "cpus": v.cpus, "loads": v.loads}
        row["cpu_beyond_startup_s"] = row["cpu_s"] - startup_cpu if startup_cpu is not None else None
        if v.name in written:
            row["parquet_bytes"] = written[v.name]
        if v is export:
            row.update(rows_written=export_doc["rows"], files_written=export_doc["files"])
        if v.name.startswith("State Processor API"):
            spa = result(outputs[v.name])
            row.update(rows_read=spa["rows"], job_s=spa["job_seconds"])
            if export_doc:
                row["same_rows"] = same_rows(spa, export_doc)
                if v.name in digests and export.name in digests:
                    row["same_parquet_rows"] = same_parquet_rows(digests[v.name], digests[export.name])
        rows.append(row)
        beyond = f"{row['cpu_beyond_startup_s']:7.2f}" if startup_cpu is not None else "    n/a"
        print(f"{v.name:72s} wall {row['wall_s']:7.2f} s  CPU {row['cpu_s']:7.2f} s  beyond start-up {beyond} s  "
              f"loads {', '.join(f'{x:.1f}' for x in v.loads)}  runs {', '.join(f'{w:.1f}' for w in v.walls)}"
              + (f"  same rows {row['same_rows']}" if "same_rows" in row else "")
              + (f"  same Parquet rows {row['same_parquet_rows']}" if "same_parquet_rows" in row else ""))
    base = next((r for r in rows if r["variant"].startswith("repair export")), None)
    if base:
        for r in rows:
            if r is base:
                continue
            beyond = (f", {r['cpu_beyond_startup_s'] / base['cpu_beyond_startup_s']:.1f}x less CPU beyond start-up"
                      if r["cpu_beyond_startup_s"] is not None and base["cpu_beyond_startup_s"] else "")
            print(f"repair export against {r['variant']}: {r['wall_s'] / base['wall_s']:.1f}x as fast (wall), "
                  f"{r['cpu_s'] / base['cpu_s']:.1f}x less CPU{beyond}")
    write_results(results, {"checkpoint": checkpoint, "startup_checkpoint": startup or (str(startup_from) if startup_from else None), "workers": workers, "runs": runs,
                            "load_before": load_before, "load_after": load_after, "machine": machine(),
                            "code": code_state(), "variants": rows})


def same_rows(spa: dict, export_doc: dict) -> str:
    """``"25 of 25"``: the states whose row count the State Processor API and ``repair export`` agree on."""
    from repair.formats.flink.keygroups import operator_id_for_uid

    exported = {f"{op['operator']}/{s['state']}": s["rows"] for op in export_doc["operators"] for s in op["states"]}
    equal = 0
    for name, (rows, _checksum) in spa["states"].items():
        uid, state = name.split("/", 1)
        key = next((k for k in (f"{uid}/{state}", f"{operator_id_for_uid(uid)}/{state}") if k in exported), None)
        equal += exported.get(key) == rows
    return f"{equal} of {len(spa['states'])}"


#: The states whose Parquet rows the writing variant and ``repair export`` are compared on (pyarrow reads
#: both; the columns the State Processor API writes): a POJO, a Row, a map state, a list state of
#: tuples, a map value and a list value.
COMPARED = {"per-account/profile": ("key", "value"), "per-type/last-row": ("key", "value"),
            "per-account/user-by-wave": ("key", "user_key", "value"), "per-type/checks": ("key", "value", "list_index"),
            "per-type/ratio32-by-tag": ("key", "value"), "per-type/recent-small": ("key", "value")}


def state_digest(out: Path, state: str) -> str | None:
    """A digest of the rows of ``state`` (``uid/name``) in an export-like directory ``out`` (the
    ``COMPARED`` columns, values compared as Python values: an int16 equals the int32 of the same number;
    a map's entries and the rows in sorted order); None when the state is not there."""
    import hashlib

    import pyarrow.parquet as pq

    from repair.formats.flink.keygroups import operator_id_for_uid

    uid, name = state.split("/", 1)
    directory = next((d for d in (out / f"operator={uid}" / f"state={name}",
                                  out / f"operator={operator_id_for_uid(uid)}" / f"state={name}") if d.is_dir()), None)
    if directory is None:
        return None
    table = pq.read_table(directory, columns=list(COMPARED[state]))
    types = [table.schema.field(c).type for c in COMPARED[state]]
    rows = sorted(repr(tuple(canonical(row[c], t) for c, t in zip(COMPARED[state], types))) for row in table.to_pylist())
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def canonical(value, arrow_type):
    """``value`` (from pyarrow's ``to_pylist``) with its map entries sorted and NaN comparable."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(arrow_type):
        return tuple(sorted(((k, canonical(v, arrow_type.item_type)) for k, v in value), key=repr))
    if pa.types.is_list(arrow_type):
        return tuple(canonical(v, arrow_type.value_type) for v in value)
    if pa.types.is_struct(arrow_type):
        return tuple((f.name, canonical(value[f.name], f.type)) for f in arrow_type)
    if isinstance(value, float) and value != value:
        return "NaN"
    return value


def same_parquet_rows(spa: dict[str, str | None], export: dict[str, str | None]) -> str:
    """``"6 of 6"``: the ``COMPARED`` states whose rows the two Parquet outputs agree on."""
    return f"{sum(spa[s] is not None and spa[s] == export[s] for s in COMPARED)} of {len(COMPARED)}"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--workers", "--parallelism", type=int, default=1,
                        help="the State Processor API's parallelism, export's --workers, and the cores both are pinned to")
    parser.add_argument("--flink", default=None,
                        help="comma-separated Flink versions of the State Processor API (default: 1.20.3 alone; with --compare 2.3.0,1.20.3)")
    parser.add_argument("--per-state", action="store_true", help="one reader function per state (alone)")
    parser.add_argument("--unmanaged-memory", action="store_true", help="state.backend.rocksdb.memory.managed: false (alone)")
    parser.add_argument("--parquet", metavar="OUT", help="write every state to Parquet under OUT too (alone; one reader per state; Flink 2.x)")
    parser.add_argument("--compare", action="store_true", help="time it beside repair export (round robin, --runs)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--startup", help="a tiny checkpoint of the same job: every variant's start-up CPU")
    parser.add_argument("--startup-from", type=Path, help="the start-up CPUs of an earlier run's --results")
    parser.add_argument("--only", help="only the variants whose name matches this regular expression")
    parser.add_argument("--skip-slow", action="store_true", help="leave out Flink 1.20's one reader for all states with managed memory")
    parser.add_argument("--results", type=Path, help="write the results as JSON")
    args = parser.parse_args(argv)
    if args.compare:
        flinks = (args.flink or "2.3.0,1.20.3").split(",")
        compare(args.checkpoint, runs=args.runs, workers=args.workers, flinks=flinks, startup=args.startup,
                startup_from=args.startup_from, only=args.only, skip_slow=args.skip_slow, results=args.results)
        return 0
    out = subprocess.run(command(args.checkpoint, args.workers, args.flink or "1.20.3", per_state=args.per_state,
                                 unmanaged_memory=args.unmanaged_memory, parquet=args.parquet), capture_output=True, text=True)
    if out.returncode:
        print(out.stderr[-4000:], file=sys.stderr)
        return out.returncode
    print(json.dumps(result(out.stdout), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
