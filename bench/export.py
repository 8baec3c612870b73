#!/usr/bin/env python3
"""Benchmark ``repair export`` against rocksdict iterating the same RocksDB instances, one core each.

Usage::

    python bench/export.py                      # the 1 GB checkpoint of make_checkpoint.py; writes docs/benchmarks/export.md
    python bench/export.py --runs 5             # best of 5 instead of 3
    python bench/export.py --no-doc             # print the table only
    python bench/export.py --skip-spark         # no Spark variant
    python bench/export.py --checkpoint PATH --runs 1 --no-doc   # any checkpoint (e.g. a fixture: a smoke test)
    python bench/export.py --results R.json     # also save the measurements; --render R.json rewrites the page from them

**The ceiling.** Every keyed RocksDB instance of the checkpoint's newest snapshot (one per keyed
subtask: an incremental handle) is materialised once, before timing, as a *copy* in a scratch
directory: its SSTs, MANIFEST, CURRENT and OPTIONS, resolved through ``repair``'s snapshot resolver
(inline files written out). rocksdict (RocksDB's C++ iterator behind a Python binding) opens each
copy read-only with the OPTIONS file the copy holds, i.e. with every column family and Flink's merge
operator (``StringAppendTESTOperator``, which RocksDB itself knows by that name), and iterates every
key and value of every column family: what one Python process can get out of a RocksDB instance
at best. Open and iteration are timed separately; the iteration counts.

**Ours.** ``repair export CHECKPOINT --out OUT`` (the CLI, start-up included) with ``--workers 1``
pinned to one core, ``--workers 2`` and ``--master local[2]`` (Spark), and ``export()`` called in a
worker process (``--workers 1``, pinned; and on a running SparkSession with ``local[1]``, pinned, and
``local[2]``), which measures the call itself.

**Units.** A *RocksDB entry* is a live key of a column family after the LSM merge (newest version,
tombstones applied, list-state merge operands merged): exactly what a RocksDB iterator yields, so
rocksdict's count. ``repair export`` reports the same number per state (``lsm.live`` in
``_export.json``); the benchmark checks that they are equal. A *row* is a row of the Parquet output:
list state has one row per element (a RocksDB value holds the whole list), map state one row per map
entry (one RocksDB key each), value state and timers one row per RocksDB entry. The headline ratio is
in RocksDB entries per second, the unit both sides share.

Every variant runs as its own process (``taskset -c 0`` pins the one-core variants), timed from start
to exit; the best of ``--runs`` runs counts, round robin over the variants. Every run is checked: exit
code 0, and the same rows (per state and subtask) and LSM accounting as the first export run. Peak
memory: the largest single process (``wait4``, exact) and all processes of the variant together
(sampled every 0.1 s). ``--profile`` adds, for the largest subtask: the time of the LSM merge alone,
of the merge and the decoding, of the whole subtask export, and the functions that cost most.
"""

from __future__ import annotations

# Only what the workers need is imported here: their start-up counts in the timed variants.
# The harness imports the rest where it uses it.
import json
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))

from common import (  # noqa: E402
    Variant,
    code_state,
    compile_bytecode,
    describe_code,
    machine,
    markdown_table,
    print_table,
    repair_command,
    run_all,
    split_in_two,
    spread,
    taskset,
    warm_page_cache,
)

DOC = REPO / "docs" / "benchmarks" / "export.md"
#: The stages :func:`profile_subtask` times, each including the one before.
STAGE_LSM = "entries read by RocksDB (rocksdb engine: scratch directory, open, iterate in batches)"
STAGE_ROWS = "entries + column-wise decoding (ColumnarStateDecoder, Arrow columns)"
STAGE_EXPORT = "export of the subtask (plan, read, decode, Parquet with Snappy, publish)"
STAGE_EXPORT_NONE = "the same with --compression none"
#: Kinds of operator state in ``_export.json``; every other kind is keyed state.
OPERATOR_STATE_KINDS = ("operator-list", "union-list", "broadcast")


# -- workers: each runs in its own process ---------------------------------------------------------


def iterate_instances(dbs: list[str]) -> dict:
    """Open each RocksDB copy read-only with rocksdict and iterate every key and value of every
    column family; returns the entries per instance and column family, open and iteration seconds."""
    from rocksdict import AccessType, Options, Rdict, ReadOptions

    result: dict = {"instances": {}, "entries": 0, "open_seconds": 0.0, "seconds": 0.0}
    for db in dbs:
        started = time.perf_counter()
        options, families = Options.load_latest(db, ignore_unknown_options=True)
        options.set_wal_dir(db)  # the OPTIONS file names the TaskManager's local directory
        opened = Rdict(db, options, column_families=families, access_type=AccessType.read_only(False))
        iterating = time.perf_counter()
        counts = {}
        for name in sorted(families):
            read = ReadOptions()
            read.fill_cache(False)  # a scan reads every block once; checksums are verified (the default)
            entries = 0
            for _ in opened.get_column_family(name).items(read_opt=read):
                entries += 1
            counts[name] = entries
        done = time.perf_counter()
        opened.close()
        result["instances"][Path(db).name] = {"entries": counts, "open_seconds": iterating - started, "seconds": done - iterating}
        result["entries"] += sum(counts.values())
        result["open_seconds"] += iterating - started
        result["seconds"] += done - iterating
    return result


def export_in_process(checkpoint: str, out: str, workers: int, master: str | None = None, **options: str) -> dict:
    """``repair.ops.export.job.export`` timed from the call to its return (imports excluded). With
    ``master``, a SparkSession is started first and its Python workers warmed up by a job of one task
    per core, so the time is the export's Spark job alone (the tasks, not the JVM start-up)."""
    from repair.ops.export.job import export

    if master is not None:
        from repair.ops.runner import spark_session

        context = spark_session(master, "bench").sparkContext
        context.setLogLevel("ERROR")
        cores = context.defaultParallelism
        context.parallelize(range(cores), cores).map(lambda x: x).collect()
        started = time.perf_counter()
        result = export(checkpoint, out, master=master, **options)
    else:
        started = time.perf_counter()
        result = export(checkpoint, out, workers=workers, **options)
    return {"seconds": time.perf_counter() - started, "rows": result.rows}


def worker_main(argv: list[str]) -> int:
    """A worker process: ``--baseline FILE`` (one DB directory a line), ``--export CHECKPOINT --out OUT
    --workers N``, or ``--profile CHECKPOINT --operator ID --subtask N --out OUT``; prints its result
    as one JSON line. Every worker allocates as the ``repair`` command does (its pyarrow pool and malloc
    settings, chosen when ``repair.cli.app`` is imported, before pyarrow): what a user's export pays."""
    import repair.cli.app  # noqa: F401  (imported for its allocator choice)

    options = dict(zip(argv[0::2], argv[1::2]))
    if "--baseline" in options:
        dbs = [line for line in Path(options["--baseline"]).read_text().splitlines() if line]
        result = iterate_instances(dbs)
    elif "--per-state" in options:
        result = per_state(options["--per-state"], options["--operator"], int(options["--subtask"]), options["--db"], options["--out"])
    elif "--export" in options:
        extra = {name[2:]: options[name] for name in ("--engine", "--compression", "--master") if name in options}
        result = export_in_process(options["--export"], options["--out"], int(options.get("--workers", 1)), **extra)
    else:
        result = profile_subtask(options["--profile"], options["--operator"], int(options["--subtask"]), options["--out"])
    print(json.dumps(result))
    return 0


# -- the instances -----------------------------------------------------------------------------------


@dataclass
class Instance:
    """One keyed subtask's RocksDB instance, materialised as a copy in the scratch directory."""

    operator_id: str
    subtask: int
    directory: Path
    sst_files: int
    sst_bytes: int
    #: Where the instance's SSTs are (local input files), to warm the page cache.
    sources: list[Path]


def materialise_instances(checkpoint: str, scratch: Path) -> tuple[str, list[Instance]]:
    """Copy every keyed RocksDB instance of ``checkpoint``'s newest snapshot (the one ``repair export``
    reads) into ``scratch/<operator id>-<subtask>/``, under the local file names its handle records."""
    from repair.formats.flink.handles import IncrementalKeyedHandle
    from repair.io import storage as st
    from repair.io.layout import discover
    from repair.io.resolved import open_resolved
    from repair.io.snapshot import load_snapshot

    storage = st.default_storage()
    layout = discover(checkpoint, storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    keyed = [(op.operator_id, sub.index, sub.managed_keyed_state) for op in snapshot.metadata.operators for sub in op.subtasks
             if isinstance(sub.managed_keyed_state, IncrementalKeyedHandle)]
    instances = []
    for operator_id, subtask, handle in keyed:
        directory = scratch / f"{operator_id}-{subtask}"
        directory.mkdir(parents=True)
        instance = Instance(operator_id, subtask, directory, 0, 0, [])
        for entry in [*handle.shared, *handle.private]:
            resolved = snapshot.resolver.resolve(entry.handle)
            target = Path(st.resolve_within(str(directory), entry.local_path))  # names from the checkpoint stay inside
            source = open_resolved(storage, resolved)
            try:
                with open(target, "wb") as out:
                    for offset in range(0, resolved.size, 8 << 20):
                        out.write(source.read(offset, min(8 << 20, resolved.size - offset)))
            finally:
                getattr(source, "close", lambda: None)()
            if target.stat().st_size != resolved.size:
                raise RuntimeError(f"{target}: copied {target.stat().st_size} of {resolved.size} bytes")
            if entry.local_path.endswith(".sst"):
                instance.sst_files += 1
                instance.sst_bytes += resolved.size
            if resolved.inline is None and "://" not in resolved.uri:
                instance.sources.append(Path(resolved.uri.removeprefix("file:")))
        instances.append(instance)
    return snapshot.ref.metadata_uri, instances


# -- checks --------------------------------------------------------------------------------------


def summarise_export(doc: dict) -> dict:
    """Per ``operator id/state`` of an ``_export.json``: kind, rows per subtask, LSM accounting, bytes."""
    states = {}
    for op in doc["operators"]:
        for state in op["states"]:
            lsm = state.get("lsm") or {}
            states[f"{op['operator_id']}/{state['state']}"] = {
                "kind": state["kind"], "subtasks": state["subtasks"], "rows": state["rows"],
                "live": lsm.get("live", 0), "sst_entries": lsm.get("entries", 0), "bytes": state["bytes"],
            }
    return states


def totals(states: dict) -> dict:
    keyed = [s for s in states.values() if s["kind"] not in OPERATOR_STATE_KINDS]
    return {
        "entries": sum(s["live"] for s in keyed),
        "sst_entries": sum(s["sst_entries"] or 0 for s in keyed),  # 0 unless the python engine read them
        "keyed_rows": sum(s["rows"] for s in keyed),
        "rows": sum(s["rows"] for s in states.values()),
        "list_rows": sum(s["rows"] for s in keyed if s["kind"] == "list"),
        "list_entries": sum(s["live"] for s in keyed if s["kind"] == "list"),
        "map_rows": sum(s["rows"] for s in keyed if s["kind"] == "map"),
    }


class Expectations:
    """What every run must reproduce: the first export's rows and LSM accounting, the first rocksdict
    run's entries; and whether rocksdict's entries equal the export's live keys, state by state."""

    def __init__(self):
        self.export: dict | None = None
        self.baseline: dict[str, dict[str, int]] | None = None  # instance directory name -> column family -> entries
        self.bytes_differ: set[str] = set()
        #: SST entries the Python merge read (known when the python engine ran).
        self.sst_entries: int | None = None

    def check_export(self, variant: str, out: Path):
        def check(stdouts: list[str]) -> str | None:
            try:
                states = summarise_export(json.loads((out / "_export.json").read_text()))
            except (OSError, ValueError, KeyError) as error:
                return f"no readable {out}/_export.json: {error}"
            if self.export is None:
                self.export = states
                return None
            # rows and live keys must agree whatever the engine or codec (the Python merge also counts SST entries)
            strip = [{k: {f: v for f, v in s.items() if f not in ("bytes", "sst_entries")} for k, s in d.items()}
                     for d in (states, self.export)]
            if strip[0] != strip[1]:
                different = sorted(k for k in set(strip[0]) | set(strip[1]) if strip[0].get(k) != strip[1].get(k))
                return f"rows or live keys differ from the first export run in {different[:5]}"
            if any(s["sst_entries"] is not None for s in states.values()):
                self.sst_entries = sum(s["sst_entries"] or 0 for s in states.values() if s["kind"] not in OPERATOR_STATE_KINDS)
            if "compression" not in variant and any(states[k]["bytes"] != self.export[k]["bytes"] for k in states):
                self.bytes_differ.add(variant)
            return None

        return check

    def check_baseline(self, stdouts: list[str]) -> str | None:
        counts: dict[str, dict[str, int]] = {}
        for out in stdouts:
            counts.update({name: i["entries"] for name, i in json.loads(out.strip().splitlines()[-1])["instances"].items()})
        if self.baseline is None:
            self.baseline = counts
            return None
        return None if counts == self.baseline else "rocksdict counted other entries than in its first run"

    def entries_agree(self) -> list[str] | None:
        """Where rocksdict's entries per state differ from ``lsm.live`` of the export (empty: they agree;
        None: not compared, a side did not run)."""
        if self.export is None or self.baseline is None:
            return None
        ours: dict[str, int] = {}
        theirs: dict[str, int] = {}
        for key, state in self.export.items():
            if state["kind"] not in OPERATOR_STATE_KINDS:
                ours[key] = state["live"]
        for name, families in self.baseline.items():
            operator_id = name.rsplit("-", 1)[0]
            for family, entries in families.items():
                key = f"{operator_id}/{family}"
                theirs[key] = theirs.get(key, 0) + entries
        return [f"{key}: rocksdict {theirs.get(key, 0)}, export {ours.get(key, 0)}"
                for key in sorted(set(ours) | set(theirs)) if theirs.get(key, 0) != ours.get(key, 0)]


# -- variants ------------------------------------------------------------------------------------


SPARK_ONE = "export() in-process, Spark local[1]"
SPARK_TWO = "export() in-process, Spark local[2]"


def build_variants(checkpoint: str, instances: list[Instance], scratch: Path, expect: Expectations, *,
                   skip_spark: bool) -> tuple[list[Variant], dict[str, Path]]:
    """The variants, and the output directory of each export variant (deleted after each run)."""
    import shutil

    python = sys.executable
    entry = f"import sys; sys.path.insert(0, {str(BENCH)!r}); from export import worker_main; sys.exit(worker_main(sys.argv[1:]))"

    def db_list(name: str, group: list[Instance]) -> str:
        path = scratch / f"{name}.txt"
        path.write_text("".join(f"{i.directory}\n" for i in group))
        return str(path)

    def baseline(name: str, group: list[Instance], core: str) -> list[str]:
        return [*taskset(core), python, "-c", entry, "--baseline", db_list(name, group)]

    variants = [
        Variant("rocksdict iterate", "1", [baseline("all", instances, "0")], expect.check_baseline,
                "every key and value of every column family; in-process s: iteration only", worker=True),
    ]
    if len(instances) > 1:
        groups = split_in_two(instances, lambda i: i.sst_bytes)
        variants.append(Variant("rocksdict iterate x2", "2", [baseline(f"half-{n}", g, str(n)) for n, g in enumerate(groups)],
                                expect.check_baseline, "two processes, one per core, instances split by size; in-process s: the slower one's iteration",
                                worker=True))

    repair_cmd = [*repair_command(python), "export", checkpoint]
    outputs: dict[str, Path] = {}

    def ours(name: str, cores: str, command: list[str], note: str, **kwargs) -> Variant:
        target = scratch / "out" / f"variant-{len(outputs)}"
        outputs[name] = target
        command = [str(target) if part == "{out}" else part for part in command]
        return Variant(name, cores, [command], expect.check_export(name, target), note, **kwargs)

    spark_skip = ("--skip-spark" if skip_spark else None) or (None if shutil.which("java") else "no java for Spark")
    variants += [
        ours("repair export --workers 1", "1", [*taskset("0"), *repair_cmd, "--out", "{out}", "--workers", "1"],
             "the command, start-up included"),
        ours("export() in-process, workers=1", "1", [*taskset("0"), python, "-c", entry, "--export", checkpoint, "--out", "{out}", "--workers", "1"],
             "in-process s: the export() call (defaults: rocksdb engine, Snappy)", worker=True),
        ours("export() in-process, workers=1, compression none", "1",
             [*taskset("0"), python, "-c", entry, "--export", checkpoint, "--out", "{out}", "--workers", "1", "--compression", "none"],
             "in-process s: the export() call, Parquet uncompressed", worker=True),
        ours("export() in-process, workers=1, engine python", "1",
             [*taskset("0"), python, "-c", entry, "--export", checkpoint, "--out", "{out}", "--workers", "1", "--engine", "python"],
             "in-process s: the export() call with the Python LSM merge (the only engine before)", worker=True),
        ours("repair export --workers 2", "2", [*repair_cmd, "--out", "{out}", "--workers", "2"], "the command, process pool of 2"),
        ours("repair export --master local[2]", "2", [*repair_cmd, "--out", "{out}", "--master", "local[2]"],
             "the command, Spark local mode (JVM start-up included)", skipped=spark_skip),
        ours(SPARK_ONE, "1", [*taskset("0"), python, "-c", entry, "--export", checkpoint, "--out", "{out}", "--master", "local[1]"],
             "in-process s: the export() call on a running SparkSession (JVM and Python worker started before)",
             worker=True, skipped=spark_skip),
        ours(SPARK_TWO, "2", [python, "-c", entry, "--export", checkpoint, "--out", "{out}", "--master", "local[2]"],
             "in-process s: the export() call on a running SparkSession (JVM and Python workers started before)",
             worker=True, skipped=spark_skip),
    ]
    return variants, outputs


# -- profile ---------------------------------------------------------------------------------------


def profile_subtask(checkpoint: str, operator_id: str, subtask: int, out: str) -> dict:
    """Where one subtask's export spends its time, in this process: the LSM merge alone, the merge and
    the decoding of every row, the whole export of the subtask; then the same under cProfile."""
    import cProfile
    import pstats

    import repair.ops.export.job as export_module
    from repair.formats.flink.arrow import keyed_state_columns
    from repair.formats.flink.in_rocksdb.keyed_columns import ColumnarMiss, ColumnarStateDecoder
    from repair.io import storage as st
    from repair.io.layout import discover
    from repair.io.snapshot import load_snapshot
    from repair.readers.rocksdb import decode_batch_rows, iter_incremental_handle

    storage = st.default_storage()
    layout = discover(checkpoint, storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    op = snapshot.metadata.operator(operator_id)
    handle = next(s for s in op.subtasks if s.index == subtask).managed_keyed_state
    stages: dict[str, float] = {}
    counts: dict[str, int] = {}

    started = time.process_time()
    entries = 0
    for stream in iter_incremental_handle(snapshot, storage, handle, op.max_parallelism, engine="rocksdb"):
        for keys, _ in stream.entries.batches:
            entries += len(keys)
    stages[STAGE_LSM] = time.process_time() - started
    counts["entries"] = entries

    started = time.process_time()
    rows = 0
    for stream in iter_incremental_handle(snapshot, storage, handle, op.max_parallelism, engine="rocksdb"):
        keyed = stream.entries
        decoder = ColumnarStateDecoder(stream.meta, keyed.key_serializer, keyed.max_parallelism,
                                       keyed_state_columns(stream.meta, keyed.key_serializer))
        for keys, values in keyed.batches:
            try:
                decoded, _ = decoder.decode(keys, values, keyed.key_groups.start, keyed.key_groups.end)
                rows += len(decoded["key_group"])
            except ColumnarMiss:
                rows += len(decode_batch_rows(stream, keys, values))
    stages[STAGE_ROWS] = time.process_time() - started
    counts["rows"] = rows

    with _only_subtask(export_module, operator_id, subtask):
        started = time.process_time()
        export_module.export(checkpoint, out + "-timed", workers=1)
        stages[STAGE_EXPORT] = time.process_time() - started
        started = time.process_time()
        export_module.export(checkpoint, out + "-uncompressed", workers=1, compression="none")
        stages[STAGE_EXPORT_NONE] = time.process_time() - started
        profiler = cProfile.Profile()
        profiler.enable()
        export_module.export(checkpoint, out + "-profiled", workers=1)
        profiler.disable()
    stats = pstats.Stats(profiler)
    total = sum(row[2] for row in stats.stats.values())  # tottime
    top = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:20]
    functions = [
        {"function": f"{Path(file).name}:{line}({name})" if line else name, "calls": calls, "tottime": tottime, "cumtime": cumtime}
        for (file, line, name), (_, calls, tottime, cumtime, _) in top
    ]
    return {"stages": stages, "counts": counts, "profiled_seconds": total, "top": functions, "seconds": stages[STAGE_EXPORT]}


@contextmanager
def _only_subtask(export_module, operator_id: str, subtask: int):
    """While active, ``export()`` runs the task of this one subtask only (in this process)."""
    real_run_tasks = export_module.run_tasks

    def this_subtask_only(func, tasks, **kwargs):
        return real_run_tasks(func, [t for t in tasks if (t.operator_id, t.subtask) == (operator_id, subtask)], workers=1)

    export_module.run_tasks = this_subtask_only
    try:
        yield
    finally:
        export_module.run_tasks = real_run_tasks


#: Rounds of the per-state measurements: each side's best round counts.
PER_STATE_ROUNDS = 2


def per_state(checkpoint: str, operator_id: str, subtask: int, db: str, out: str, rounds: int = PER_STATE_ROUNDS) -> dict:
    """Per state of one subtask: rocksdict's iteration of its column family (on the copy ``db``),
    ``export()`` of that state alone, and the Parquet alone (:func:`parquet_write_seconds`), in CPU
    seconds of this process (``time.process_time``: threads included, other processes' load left
    out), the three one after the other state by state, in ``rounds`` rounds: the best of each counts."""
    import shutil

    from rocksdict import AccessType, Options, Rdict, ReadOptions

    import repair.ops.export.job as export_module

    meta = {m.name for m in read_states(checkpoint, operator_id, subtask)}
    options, families = Options.load_latest(db, ignore_unknown_options=True)
    options.set_wal_dir(db)
    opened = Rdict(db, options, column_families=families, access_type=AccessType.read_only(False))
    states = [{"state": name} for name in sorted(families) if name in meta]
    best = lambda state, name, seconds: state.__setitem__(name, min(state.get(name, float("inf")), seconds))  # noqa: E731
    try:
        with _only_subtask(export_module, operator_id, subtask):
            for _ in range(rounds):
                for number, state in enumerate(states):
                    read = ReadOptions()
                    read.fill_cache(False)
                    entries = size = 0
                    started = time.process_time()
                    for key, value in opened.get_column_family(state["state"]).items(read_opt=read):
                        entries += 1
                        size += len(key) + len(value)
                    best(state, "rocksdict_seconds", time.process_time() - started)
                    state.update(entries=entries, bytes=size)
                    target = f"{out}-{number}"
                    started = time.process_time()
                    export_module.export(checkpoint, target, workers=1, states=[state["state"]], operators=[operator_id])
                    best(state, "export_seconds", time.process_time() - started)
                    if entries:
                        parquet = state.setdefault("parquet_seconds", {})
                        for codec, seconds in parquet_write_seconds(Path(target), ("snappy", "none"), runs=1).items():
                            best(parquet, codec, seconds)
                    shutil.rmtree(target, ignore_errors=True)
    finally:
        opened.close()
    empty = [s["export_seconds"] for s in states if not s["entries"]]
    return {"operator_id": operator_id, "subtask": subtask, "states": [s for s in states if s["entries"]],
            "fixed_seconds": min(empty) if empty else None, "seconds": sum(s["export_seconds"] for s in states),
            "clock": "cpu", "rounds": rounds}


def parquet_write_seconds(export_dir: Path, compressions: tuple[str, ...], runs: int = 2) -> dict[str, float]:
    """CPU seconds to write the keyed rows an export wrote (its parts under ``export_dir``, read back
    row group by row group: the same row groups) again with the export's own Parquet options and each
    of ``compressions``, to ``/dev/null``: the cost of the output alone, which no export of these rows
    through pyarrow avoids (best of ``runs``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from repair.ops.export.parts import parquet_writer_options

    parts = []
    for path in sorted(export_dir.glob("operator=*/state=*/*.parquet")):
        file = pq.ParquetFile(path)
        parts.append((file.schema_arrow, [file.read_row_group(i) for i in range(file.num_row_groups)]))
    best = {}
    for compression in compressions:
        best[compression] = float("inf")
        for _ in range(runs):
            started = time.process_time()
            for schema, groups in parts:
                with pa.OSFile(os.devnull, "wb") as sink, pq.ParquetWriter(sink, schema, **parquet_writer_options(compression)) as writer:
                    for group in groups:
                        writer.write_table(group, row_group_size=max(group.num_rows, 1))
            best[compression] = min(best[compression], time.process_time() - started)
    return best


def read_states(checkpoint: str, operator_id: str, subtask: int):
    """The states of one keyed subtask's backend meta data."""
    from repair.io import storage as st
    from repair.io.layout import discover
    from repair.io.snapshot import load_snapshot
    from repair.readers.rocksdb import read_handle_meta

    storage = st.default_storage()
    layout = discover(checkpoint, storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    handle = next(s for s in snapshot.metadata.operator(operator_id).subtasks if s.index == subtask).managed_keyed_state
    return read_handle_meta(snapshot, storage, handle).states


def run_per_state(checkpoint: str, instances: list[Instance], scratch: Path) -> list[dict]:
    """:func:`per_state` for the largest instance of every operator, each in a process pinned to one core."""
    import subprocess

    entry = f"import sys; sys.path.insert(0, {str(BENCH)!r}); from export import worker_main; sys.exit(worker_main(sys.argv[1:]))"
    largest: dict[str, Instance] = {}
    for instance in instances:
        if instance.operator_id not in largest or instance.sst_bytes > largest[instance.operator_id].sst_bytes:
            largest[instance.operator_id] = instance
    results = []
    for instance in largest.values():
        command = [*taskset("0"), sys.executable, "-c", entry, "--per-state", checkpoint, "--operator", instance.operator_id,
                   "--subtask", str(instance.subtask), "--db", str(instance.directory), "--out", str(scratch / "per-state")]
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
        if done.returncode != 0:
            raise RuntimeError(f"per state: exit code {done.returncode}: {(done.stdout + done.stderr)[-2000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


def per_state_text(results: list[dict] | None) -> str:
    """The per-state table: how the ratio to rocksdict follows the size of the entries, and the ratio
    no export writing the same rows could pass (rocksdict's iteration plus the Parquet writing alone: the bound)."""
    if not results:
        return "Not measured in this run (`--profile`)."
    rounds = max(r.get("rounds", 1) for r in results)
    clock = ("CPU seconds of the process (`time.process_time`: other processes' load left out)"
             if all(r.get("clock") == "cpu" for r in results) else "wall-clock seconds")
    lines = ["The largest subtask of each operator, state by state, in a process pinned to one core: rocksdict "
             "iterating the state's column family, `export()` of that state alone (`--state`), and the Parquet alone, "
             f"one after the other state by state, in {rounds} rounds, the best round of each counting; times are "
             f"{clock}. The "
             "export's fixed cost (loading the snapshot, planning, opening the instance, publishing) is measured by "
             "exporting a state without entries and subtracted. **Parquet alone** rewrites the rows that export wrote "
             "(read back, row group by row group: the same row groups) with the export's own Parquet options to "
             "`/dev/null`: "
             "the cost of the output by itself, no reading, decoding or disk. **Bound** is rocksdict's time over "
             "rocksdict's plus Parquet alone: the best ratio an export could reach that reads the entries at "
             "rocksdict's speed and writes these rows through pyarrow, even if everything else cost nothing.", ""]
    lines += ["| operator | subtask | state | entries | bytes per entry (key + value) | rocksdict µs per entry | "
              "export µs per entry | export µs per entry, fixed cost subtracted | Parquet alone µs per entry (Snappy / none) | "
              "export vs rocksdict, fixed cost subtracted | bound vs rocksdict (Snappy / none) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        fixed = result.get("fixed_seconds")
        for s in result["states"]:
            entries, ours, theirs = s["entries"], s["export_seconds"], s["rocksdict_seconds"]
            net = ours - fixed if fixed is not None and ours > fixed else None
            parquet = s.get("parquet_seconds")
            net_text = "-" if net is None else f"{net / entries * 1e6:.2f}"
            ratio_text = "-" if net is None else f"{theirs / net:.2f}x"
            if parquet:
                alone = f"{parquet['snappy'] / entries * 1e6:.2f} / {parquet['none'] / entries * 1e6:.2f}"
                bound = f"{theirs / (theirs + parquet['snappy']):.2f}x / {theirs / (theirs + parquet['none']):.2f}x"
            else:
                alone = bound = "-"
            lines.append(f"| `{result['operator_id'][:8]}` | {result['subtask']} | `{s['state']}` | {entries:,} | "
                         f"{s['bytes'] / entries:,.0f} | {theirs / entries * 1e6:.2f} | {ours / entries * 1e6:.2f} | "
                         f"{net_text} | {alone} | {ratio_text} | {bound} |")
    fixed_costs = sorted({f"{r['fixed_seconds']:.2f}" for r in results if r.get("fixed_seconds") is not None})
    lines += ["", f"Fixed cost subtracted: {', '.join(fixed_costs) or 'not measured'} s per export."]
    ratios = output_bound_ratios(results)
    if ratios is not None:
        lines.append(
            f"All these states together (time summed, so weighted by entries and their size): export "
            f"**{ratios['export']:.2f}x** rocksdict; bound **{ratios['snappy']:.2f}x** with Snappy (the default), "
            f"{ratios['none']:.2f}x uncompressed; the export at **{ratios['export'] / ratios['snappy']:.2f}x of the bound** "
            "with Snappy. Where the bound is below 0.5x, no export of these rows through "
            "pyarrow with that codec can reach the goal of 0.5x, however fast its reading and decoding.")
    return "\n".join(lines)


def output_bound_ratios(results: list[dict] | None) -> dict[str, float] | None:
    """Over every state of :func:`per_state`'s ``results``, times summed: the export's ratio to rocksdict
    (fixed cost subtracted) and the bounds (rocksdict over rocksdict plus Parquet alone) per codec;
    None unless every state has them."""
    rocksdict = export = 0.0
    parquet = {"snappy": 0.0, "none": 0.0}
    for result in results or []:
        fixed = result.get("fixed_seconds")
        for s in result["states"]:
            if fixed is None or s["export_seconds"] <= fixed or not s.get("parquet_seconds"):
                return None
            rocksdict += s["rocksdict_seconds"]
            export += s["export_seconds"] - fixed
            for codec in parquet:
                parquet[codec] += s["parquet_seconds"][codec]
    if not rocksdict:
        return None
    return {"export": rocksdict / export, **{codec: rocksdict / (rocksdict + seconds) for codec, seconds in parquet.items()}}


def run_profile(checkpoint: str, instance: Instance, scratch: Path) -> dict:
    import shutil
    import subprocess

    entry = f"import sys; sys.path.insert(0, {str(BENCH)!r}); from export import worker_main; sys.exit(worker_main(sys.argv[1:]))"
    out = scratch / "profile"
    command = [*taskset("0"), sys.executable, "-c", entry, "--profile", checkpoint, "--operator", instance.operator_id,
               "--subtask", str(instance.subtask), "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    for suffix in ("-timed", "-uncompressed", "-profiled"):
        shutil.rmtree(f"{out}{suffix}", ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"profile: exit code {done.returncode}: {(done.stdout + done.stderr)[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- report --------------------------------------------------------------------------------------


HEADER = ["variant", "cores", "best wall s", "in-process s", "entries/s", "entries/s in-process", "rows/s",
          "per core vs rocksdict", "CPU s", "peak RSS MB (process / all)", "notes"]


def table_rows(variants: list[Variant], entries: int, rows: int) -> list[list[str]]:
    ceiling = _ceiling(variants, entries)
    out = []
    for v in variants:
        if v.best is None:
            out.append([v.name, v.cores, *["-"] * 8, f"skipped: {v.skipped or v.error}"])
            continue
        at = v.best_run
        inner = v.inner[at]
        rate = entries / (inner or v.best)
        spark = "--master" in " ".join(v.commands[0])
        out.append([
            v.name, v.cores, f"{v.best:.2f}", "-" if inner is None else f"{inner:.2f}",
            f"{entries / v.best:,.0f}", "-" if inner is None else f"{entries / inner:,.0f}",
            "-" if v.name.startswith("rocksdict") else f"{rows / v.best:,.0f}",
            f"{rate / int(v.cores) / ceiling:.2f}" if ceiling else "-",
            "n/a" if spark else f"{v.cpus[at]:.2f}",
            f"{v.max_rss_kb[at] / 1024:.0f} / {v.tree_rss_kb[at] / 1024:.0f}",
            f"{v.note}; runs: {', '.join(f'{w:.2f}' for w in v.walls)}",
        ])
    return out


def _ceiling(variants: list[Variant], entries: int) -> float | None:
    """rocksdict's entries per second of iteration, one core (best run)."""
    v = next((v for v in variants if v.name == "rocksdict iterate" and v.best), None)
    return entries / v.inner[v.best_run] if v is not None and v.inner[v.best_run] else None


def summary(variants: list[Variant], counts: dict, expect: Expectations, results: dict[str, list[dict]],
            per_state_results: list[dict] | None = None) -> str:
    """The ratios that answer the questions, in sentences (only for variants that ran)."""
    by_name = {v.name: v for v in variants if v.best}
    entries, rows = counts["entries"], counts["keyed_rows"]
    lines = []
    ceiling = _ceiling(variants, entries)
    inproc = by_name.get("export() in-process, workers=1")
    if ceiling and inproc is not None and inproc.inner[inproc.best_run]:
        seconds = inproc.inner[inproc.best_run]
        lines.append(f"- **Per core, same unit (RocksDB entries per second, both in-process)**: `export()` with one worker "
                     f"{entries / seconds:,.0f} entries/s ({rows / seconds:,.0f} rows/s) against rocksdict's iteration "
                     f"{ceiling:,.0f} entries/s: **{entries / seconds / ceiling:.2f}x** (goal: at least 0.5x).")
    ratios = output_bound_ratios(per_state_results)
    if ratios is not None:
        lines.append(f"- **The bound set by the output** (\"Entry size, state by state\" below): rocksdict's iteration plus "
                     f"pyarrow writing the export's own rows as Parquet, and nothing else, reach **{ratios['snappy']:.2f}x** "
                     f"rocksdict with Snappy (the default) and {ratios['none']:.2f}x uncompressed, over the states of the "
                     f"largest subtask of each operator (where the export reaches {ratios['export']:.2f}x: "
                     f"**{ratios['export'] / ratios['snappy']:.2f}x of the bound**, issue 38's goal 0.8x). "
                     + ("With Snappy, 0.5x is out of reach for any export that reads through RocksDB's iterator and "
                        "writes these columns (decoded values beside their raw bytes) through pyarrow."
                        if ratios["snappy"] < 0.5 else "The bound leaves room for 0.5x with Snappy."))
    for name, what in (("export() in-process, workers=1, compression none", "uncompressed Parquet (`--compression none`)"),
                       ("export() in-process, workers=1, engine python", "the Python LSM merge (`--engine python`)")):
        other = by_name.get(name)
        if ceiling and other is not None and other.inner[other.best_run]:
            seconds = other.inner[other.best_run]
            lines.append(f"- The same with {what}: {entries / seconds:,.0f} entries/s, **{entries / seconds / ceiling:.2f}x** "
                         "rocksdict per core.")
    cli, base = by_name.get("repair export --workers 1"), by_name.get("rocksdict iterate")
    if cli is not None and base is not None:
        lines.append(f"- Whole processes (start-up, open and everything included): `repair export --workers 1` "
                     f"{entries / cli.best:,.0f} entries/s ({rows / cli.best:,.0f} rows/s) against the rocksdict process's "
                     f"{entries / base.best:,.0f} entries/s: {base.best / cli.best:.2f}x.")
    if base is not None:
        at = base.best_run
        open_seconds = sum(r["open_seconds"] for r in results[base.name][at:at + 1])
        lines.append(f"- rocksdict: opening the {len(expect.baseline or {})} instances took "
                     f"{open_seconds:.2f} s, iterating them {base.inner[at]:.2f} s, the process {base.best:.2f} s.")
    for one, two in (("repair export --workers 1", "repair export --workers 2"),
                     ("repair export --workers 1", "repair export --master local[2]"),
                     ("rocksdict iterate", "rocksdict iterate x2")):
        if one in by_name and two in by_name:
            rates = f"{entries / by_name[two].best:,.0f} entries/s" + ("" if two.startswith("rocksdict") else f", {rows / by_name[two].best:,.0f} rows/s")
            lines.append(f"- `{two}` against `{one}`: speed-up **{by_name[one].best / by_name[two].best:.2f}x** ({rates}).")
    if SPARK_ONE in by_name and SPARK_TWO in by_name:  # the tasks alone: in-process times
        one, two = (by_name[name].inner[by_name[name].best_run] for name in (SPARK_ONE, SPARK_TWO))
        lines.append(f"- Spark tasks, start-up excluded: `{SPARK_TWO}` against `{SPARK_ONE}`: speed-up **{one / two:.2f}x** "
                     f"({entries / two:,.0f} against {entries / one:,.0f} entries/s, the export() call on a running session).")
    memory = [(v.name, v.max_rss_kb[v.best_run], v.tree_rss_kb[v.best_run]) for v in by_name.values() if not v.name.startswith("rocksdict")]
    if memory:
        lines.append("- Peak memory of the export (largest process / all processes of the variant): "
                     + "; ".join(f"`{name}` {one / 1024:.0f} / {tree / 1024:.0f} MB" for name, one, tree in memory)
                     + f", for {counts['sst_bytes'] / 1e9:.2f} GB of SSTs.")
    return "\n".join(lines)


def correctness_text(variants: list[Variant], expect: Expectations, counts: dict) -> str:
    ran = [v for v in variants if v.walls]
    lines = [f"- Every run exited with 0 and was checked: {sum(len(v.walls) for v in ran)} runs of {len(ran)} variants; "
             "every export run wrote the same rows, per state and subtask, and the same live keys as the first (whatever the engine and codec)."]
    mismatches = expect.entries_agree()
    if mismatches is None:
        lines.append("- rocksdict's entries were not compared with the export's (one of them did not run).")
    elif mismatches:
        lines.append("- **rocksdict's entries differ from the export's live keys**: " + "; ".join(mismatches[:10]))
    else:
        lines.append(f"- rocksdict's entries equal the export's live keys (`lsm.live`) in every state: "
                     f"{counts['entries']:,} RocksDB entries" + (
                         f" (of {counts['sst_entries']:,} SST entries the Python LSM merge read, older versions and "
                         "tombstones included)." if counts["sst_entries"] else "."))
    if expect.bytes_differ:
        lines.append(f"- The Parquet bytes per state differ from the first export run in: {', '.join(sorted(expect.bytes_differ))}.")
    elif expect.export is not None:
        lines.append("- The Parquet parts have the same size in bytes, state by state, in every export run.")
    failed = [v for v in variants if v.error]
    for v in failed:
        lines.append(f"- **{v.name} failed**: {v.error}")
    return "\n".join(lines)


def profile_text(profile: dict | None, instance: Instance | None, baseline: dict | None) -> str:
    """The stage times and top functions of :func:`profile_subtask`; ``baseline``: rocksdict's best run."""
    if profile is None or instance is None:
        return "Not measured in this run (`--profile`)."
    stages = profile["stages"]
    entries, rows = profile["counts"]["entries"], profile["counts"]["rows"]
    per = (baseline or {}).get("instances", {}).get(instance.directory.name)
    rocksdict = per["seconds"] if per else None
    lines = [f"Subtask {instance.subtask} of operator `{instance.operator_id}` ({instance.sst_files} SSTs, "
             f"{instance.sst_bytes / 1e6:.0f} MB, {entries:,} RocksDB entries, {rows:,} rows), one process pinned to "
             "one core, each stage timed once (CPU seconds of the process; the rocksdict row: wall-clock, the best run above):", "",
             "| stage | seconds | RocksDB entries/s | µs per entry |", "|---|---|---|---|"]
    if rocksdict:
        lines.append(f"| rocksdict iteration (best run above) | {rocksdict:.2f} | {entries / rocksdict:,.0f} | {rocksdict / entries * 1e6:.2f} |")
    for name, seconds in stages.items():
        lines.append(f"| {name} | {seconds:.2f} | {entries / seconds:,.0f} | {seconds / entries * 1e6:.2f} |")
    if all(name in stages for name in (STAGE_LSM, STAGE_ROWS, STAGE_EXPORT, STAGE_EXPORT_NONE)):
        read, decode, total = stages[STAGE_LSM], stages[STAGE_ROWS] - stages[STAGE_LSM], stages[STAGE_EXPORT]
        rest, codec = total - stages[STAGE_ROWS], total - stages[STAGE_EXPORT_NONE]
        lines += ["", f"Of the subtask's export ({total:.1f} s, {total / entries * 1e6:.1f} µs per entry), reading the "
                  f"entries takes {read:.1f} s ({read / total:.0%}), decoding them column-wise {decode:.1f} s "
                  f"({decode / total:.0%}), and the rest (Parquet encoding and Snappy compression, writing, planning, "
                  f"publishing) {rest:.1f} s ({rest / total:.0%}). With `--compression none` the export took "
                  f"{stages[STAGE_EXPORT_NONE]:.1f} s ({-codec:+.1f} s): no codec, but about three times the bytes "
                  f"to write and fsync."]
        if rocksdict:
            lines[-1] += (f" Reading through the rocksdb engine takes {read / rocksdict:.2f}x the time of rocksdict's bare "
                          f"iteration of the instance; the goal (0.5x rocksdict) leaves {2 * rocksdict / entries * 1e6:.1f} "
                          f"µs per entry for everything.")
    lines += ["", f"Top functions by own time under cProfile (the subtask's export; {profile['profiled_seconds']:.1f} s "
              "profiled, cProfile slows calls down, so compare shares, not seconds):", "",
              "| function | calls | own s | share | cumulative s |", "|---|---|---|---|---|"]
    for f in profile["top"][:15]:
        lines.append(f"| `{f['function']}` | {f['calls']:,} | {f['tottime']:.2f} | {f['tottime'] / profile['profiled_seconds']:.0%} | {f['cumtime']:.2f} |")
    return "\n".join(lines)


def write_doc(path: Path, *, rows, summary_text, correctness, profile, checkpoint_desc, counts, instances, mach, runs,
              load_before, load_after, started, spread_ratio, rocksdict_version, pyarrow_version, code, code_changed) -> None:
    one_each = "; every user appears once in this input, so each list holds one" if counts["list_rows"] == counts["list_entries"] else ""
    warning = ("\n\n**The code of `repair/` changed while the runs were made: they measured different versions, "
               "and the results are not valid.**" if code_changed else "")
    text = f"""# Benchmarks

## Export throughput: `repair export` against rocksdict

Run it yourself (some minutes; the first run also generates the checkpoint with real Flink):

```bash
.venv/bin/python bench/export.py --profile  # best of 3, rewrites this file
.venv/bin/python bench/export.py --help     # options (--runs, --no-doc, --skip-spark, --checkpoint, --results, --render)
.venv/bin/python bench/make_checkpoint.py   # only generate the checkpoint
```

### Method

- **Input**: {checkpoint_desc} Its {len(instances)} keyed RocksDB instances (one per keyed subtask;
  {counts['sst_files']} SSTs, {counts['sst_bytes'] / 1e9:.2f} GB) hold {counts['entries']:,} RocksDB entries
  ({f"{counts['sst_entries']:,}" if counts['sst_entries'] else "?"} SST entries before the LSM merge) and give {counts['keyed_rows']:,} rows; list state
  turns {counts['list_entries']:,} entries into {counts['list_rows']:,} rows (one per element{one_each}); map state has
  {counts['map_rows']:,} rows, one per RocksDB entry. Operator state adds {counts['rows'] - counts['keyed_rows']:,} rows.
- **The ceiling: rocksdict** ({rocksdict_version}, RocksDB's C++ iterator behind a Python binding). Every
  keyed instance is copied once, before timing, to a scratch directory: its SSTs, MANIFEST, CURRENT and
  OPTIONS, resolved through `repair`'s snapshot resolver (`repair.io.snapshot`, `repair.readers.rocksdb`;
  inline files written out). The copy is what rocksdict opens (read-only; it still writes a
  `rocksdict-config.json` and a LOG into the directory, so never on the input), with the OPTIONS file
  it holds: every column family, and Flink's merge operator `StringAppendTESTOperator`, which RocksDB
  knows by that name. It then iterates every key and value of every column family
  (`items()` with `fill_cache` off, checksums verified as by default), counting them. **List state**:
  with the merge operator, RocksDB returns each list as one value, the merge operands joined with `,`
  (the raw list, one entry); `repair export` resolves the operands the same way, then splits the value
  into one row per element. Without the merge operator (rocksdict's default options) RocksDB cannot
  read a key with unmerged operands: the iterator stops there with the status
  `Invalid argument: merge_operator_ must be set`, and `items()` ends silently, without raising,
  so a count taken that way is wrong without warning. Time: iteration only (opening reported apart).
- **Ours**: `repair export <checkpoint> --out <scratch>` with its defaults (`--engine auto`, which
  lets RocksDB resolve every instance here, and Snappy) as a command (`repair`, start-up included)
  with `--workers 1` (pinned to one core), `--workers 2` (process pool) and `--master local[2]`
  (pyspark's local mode; its JVM start-up included); and `repair.ops.export.job.export(..., workers=1)`
  called in a worker process pinned to one core, which times the call (planning, reading, decoding,
  Parquet writing and publishing; without interpreter start-up and imports), also with
  `compression="none"` and with `engine="python"` (the toolkit's own LSM merge); and `export(...,
  master="local[1]")` (pinned to one core) and `master="local[2]"` called on a SparkSession started
  before timing, its Python workers warmed up by a job of one task per core: the Spark job's tasks
  without the JVM start-up, for how the export scales with Spark tasks. Each run's output is
  deleted after it is checked. Every worker process (in-process variants, the profile, the states one
  by one, rocksdict) allocates as the `repair` command does: pyarrow's system pool and glibc's malloc
  keeping freed memory (`repair/cli/app.py`).
- **Units**: an *entry* is a live key of a column family after the LSM merge, what a RocksDB iterator
  yields: rocksdict's count, and `lsm.live` of `_export.json` (checked equal below). A *row* is a row of
  the Parquet output (keyed state only). entries/s and rows/s are per wall-clock second of the whole
  process; "entries/s in-process" per second the worker measured itself (rocksdict: iteration only;
  `export()`: the call). "per core vs rocksdict" is the variant's entries/s (in-process if measured, else
  wall) per core, over rocksdict's in-process entries/s on one core.
- **The bound set by the output** (`--profile`): for every state of the largest subtask of each
  operator, rocksdict's iteration of the state plus pyarrow writing the rows the export wrote for it
  (read back) as Parquet with the export's own options to `/dev/null`. An export that reads at
  rocksdict's speed and spends nothing on decoding, disk or anything else still pays both, so their
  ratio bounds what any export of these columns through pyarrow can reach.
- **Runs**: each variant runs as its own process, on a warm page cache, best of {runs} runs, round
  robin; all runs are listed. CPU s is user + system time of the processes of the best run (with the
  pool workers they waited for; not measured for Spark, whose JVM is not waited for). Peak RSS: the
  largest single process (exact, `wait4`; it includes the pool workers a process waited for) and all
  processes of the variant together (sampled every 0.1 s: pool workers, Spark's JVM and Python workers).
- **Noise**: this machine has 2 cores shared with other work (load average {load_before:.2f} before the
  runs, {load_after:.2f} after), so single runs vary (in this run by up to {spread_ratio:.1f}x between the runs
  of one variant); the best of {runs} is reported.

### Results

Machine: {mach['cpu']}, {mach['cores']} cores, {mach['system']}; Python {mach['python']}; {rocksdict_version};
pyarrow {pyarrow_version}. Run {started}, code: {code}.{warning}

{markdown_table(HEADER, rows)}

{summary_text}

### Checks

{correctness}

### Where the time goes (profile)

{profile}
"""
    path.write_text(text)


# -- main ----------------------------------------------------------------------------------------


def measure(args) -> dict:
    """Materialise the instances, run the variants (and the profile); returns everything measured, as JSON."""
    import dataclasses
    import datetime
    import shutil
    import tempfile

    if args.checkpoint:
        checkpoint, info = args.checkpoint, None
    else:
        import make_checkpoint

        kwargs = {} if args.records is None else {"records": args.records}
        root, info = make_checkpoint.ensure_checkpoint(args.dir, **kwargs)
        checkpoint = str(make_checkpoint.checkpoint_dir(root, info))  # chk-N: the root may keep a subsumed chk-M
    started = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    code_before = code_state()
    expect = Expectations()
    with tempfile.TemporaryDirectory(prefix="bench-export-", dir=args.scratch) as scratch_dir:
        scratch = Path(scratch_dir)
        metadata_uri, instances = materialise_instances(checkpoint, scratch / "db")
        if not instances:
            raise SystemExit(f"no keyed RocksDB instance (incremental handle) in {checkpoint}")
        print(f"{len(instances)} keyed RocksDB instances, {sum(i.sst_bytes for i in instances) / 1e6:.0f} MB of SSTs, from {metadata_uri}")
        warm_page_cache([p for i in instances for p in i.sources])
        compile_bytecode(Path(__file__).resolve())
        variants, outputs = build_variants(checkpoint, instances, scratch, expect, skip_spark=args.skip_spark)
        if args.only:
            variants = [v for v in variants if args.only in v.name]
        for v in variants:
            if v.skipped:
                print(f"skipped {v.name}: {v.skipped}")
        #: Per worker variant, per run: its workers' results (concurrent workers: the slowest one's
        #: open and iteration seconds, every instance's counts).
        results: dict[str, list[dict]] = {v.name: [] for v in variants}

        def after_run(variant: Variant, stdouts: list[str]) -> None:
            if variant.worker:
                each = [json.loads(out.strip().splitlines()[-1]) for out in stdouts]
                results[variant.name].append({
                    "instances": {k: i for r in each for k, i in r.get("instances", {}).items()},
                    "open_seconds": max(r.get("open_seconds", 0.0) for r in each),
                    "seconds": max(r["seconds"] for r in each),
                })
            if variant.name in outputs:
                shutil.rmtree(outputs[variant.name], ignore_errors=True)

        load_before, load_after = run_all(variants, args.runs, after_run=after_run)
        profile = largest = states = None
        if args.profile:
            largest = max(instances, key=lambda i: i.sst_bytes)
            try:
                profile = run_profile(checkpoint, largest, scratch)
                states = run_per_state(checkpoint, instances, scratch)
            except Exception as exc:  # report, and write the rest
                print(f"error in the profile: {exc}", file=sys.stderr)
    import pyarrow

    code_after = code_state()
    if code_after["hash"] != code_before["hash"]:
        print("error: the code of repair/ changed during the runs; they measured different code", file=sys.stderr)
    return {
        "code": code_before, "code_changed": code_after["hash"] != code_before["hash"],
        "checkpoint": checkpoint, "metadata_uri": metadata_uri, "info": info, "started": started, "runs": args.runs,
        "machine": machine(), "rocksdict": _version("rocksdict"), "pyarrow": pyarrow.__version__,
        "load_before": load_before, "load_after": load_after,
        "instances": [{**dataclasses.asdict(i), "directory": i.directory.name, "sources": []} for i in instances],
        "variants": [{f.name: getattr(v, f.name) for f in dataclasses.fields(v) if f.name != "check"} for v in variants],
        "worker_results": results, "profile": profile, "per_state": states, "profiled": None if largest is None else largest.directory.name,
        "expect": {"export": expect.export, "baseline": expect.baseline, "bytes_differ": sorted(expect.bytes_differ),
                   "sst_entries": expect.sst_entries},
    }


def report(measured: dict, doc: Path | None) -> int:
    """Print the table and the findings of ``measured``; write the page to ``doc`` unless None.
    Returns 1 when a variant failed or rocksdict's entries differ from the export's, else 0."""
    variants = [Variant(**{**v, "check": None}) for v in measured["variants"]]
    instances = [Instance(**{**i, "directory": Path(i["directory"])}) for i in measured["instances"]]
    expect = Expectations()
    expect.export, expect.baseline = measured["expect"]["export"], measured["expect"]["baseline"]
    expect.bytes_differ = set(measured["expect"]["bytes_differ"])
    expect.sst_entries = measured["expect"].get("sst_entries")
    results = measured["worker_results"]

    counts = totals(expect.export or {})
    counts["sst_entries"] = expect.sst_entries
    counts.update(sst_files=sum(i.sst_files for i in instances), sst_bytes=sum(i.sst_bytes for i in instances))
    if not counts["entries"] and expect.baseline:  # no export ran: rocksdict's count
        counts["entries"] = sum(sum(f.values()) for f in expect.baseline.values())
    rows = table_rows(variants, counts["entries"], counts["keyed_rows"])
    summary_text = summary(variants, counts, expect, results, measured.get("per_state"))
    correctness = correctness_text(variants, expect, counts)
    baseline = next((v for v in variants if v.name == "rocksdict iterate" and v.walls), None)
    profiled = next((i for i in instances if i.directory.name == measured["profiled"]), None)
    profile_md = profile_text(measured["profile"], profiled, results[baseline.name][baseline.best_run] if baseline else None)
    profile_md += "\n\n### Entry size, state by state\n\n" + per_state_text(measured.get("per_state"))
    print()
    print_table(HEADER, rows)
    print()
    print(summary_text)
    print(correctness)
    print()
    print(profile_md)
    if doc is not None:
        write_doc(doc, rows=rows, summary_text=summary_text, correctness=correctness, profile=profile_md,
                  checkpoint_desc=_describe_input(measured["info"], measured["checkpoint"], measured["metadata_uri"]),
                  counts=counts, instances=instances, mach=measured["machine"], runs=measured["runs"],
                  load_before=measured["load_before"], load_after=measured["load_after"], started=measured["started"],
                  spread_ratio=spread(variants), rocksdict_version=f"rocksdict {measured['rocksdict']}",
                  pyarrow_version=measured["pyarrow"],
                  code=describe_code(measured["code"]) if "code" in measured else "not recorded",
                  code_changed=measured.get("code_changed", False))
        print(f"\nwrote {doc}")
    failed = bool(expect.entries_agree()) or any(v.error for v in variants) or measured.get("code_changed", False)  # None: not compared
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs per variant; the best counts (default 3)")
    parser.add_argument("--checkpoint", default=None, help="any checkpoint (job root, chk-N, _metadata) instead of the generated one")
    parser.add_argument("--dir", type=Path, default=None, help="the generated checkpoint (default: the cache of make_checkpoint.py)")
    parser.add_argument("--records", type=int, default=None, help="input records when generating (see make_checkpoint.py)")
    parser.add_argument("--skip-spark", action="store_true", help="do not run the Spark variant")
    parser.add_argument("--only", default=None, help="run only variants whose name contains this text")
    parser.add_argument("--profile", action="store_true", help="also time the stages of the largest subtask's export and profile it")
    parser.add_argument("--no-doc", action="store_true", help=f"do not rewrite {DOC.relative_to(REPO)}")
    parser.add_argument("--doc", type=Path, default=DOC, help="where to write the results (default docs/benchmarks/export.md)")
    parser.add_argument("--scratch", type=Path, default=None, help="parent directory of the scratch space (default: the system's)")
    parser.add_argument("--results", type=Path, default=None, help="also save every measurement as JSON in this file")
    parser.add_argument("--render", type=Path, default=None, metavar="RESULTS",
                        help="run nothing: print and write the page from a file saved with --results")
    args = parser.parse_args(argv)

    if args.render is not None:
        measured = json.loads(args.render.read_text())
    else:
        measured = measure(args)
        if args.results is not None:
            args.results.write_text(json.dumps(measured, indent=1) + "\n")
            print(f"saved the measurements in {args.results}")
    return report(measured, None if args.no_doc else args.doc)


def _version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "?"


def _describe_input(info: dict | None, checkpoint: str, metadata_uri: str) -> str:
    if info is None:
        return f"the newest snapshot of `{checkpoint}` (`{metadata_uri}`)."
    return (f"a real Flink checkpoint generated (not committed) by `bench/make_checkpoint.py` into "
            f"`~/.cache/flink-checkpoint-repair/bench/`: Flink {info['flink_version']} (the PyPI jars, a local "
            f"MiniCluster), the fixture job of `fixtures/job` at parallelism {info['parallelism']}, incremental "
            f"RocksDB checkpoints with Flink's default compression (Snappy) and RocksDB's default block checksum "
            f"(CRC32C), {info['records']:,} generated records with long user names and tags; its newest checkpoint "
            f"`{info['checkpoint'].rsplit('/', 1)[-1]}`.")


if __name__ == "__main__":
    sys.exit(main())
