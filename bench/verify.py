#!/usr/bin/env python3
"""Benchmark SST verification: ``repair`` against ``sst_dump --verify_checksum``, one core each.

Usage::

    python bench/verify.py                 # generate (or reuse) the 1 GB checkpoint, run, write docs/benchmarks/verify.md
    python bench/verify.py --runs 5        # best of 5 instead of 3
    python bench/verify.py --no-doc        # print the table only
    python bench/verify.py --skip-spark    # no Spark variant

The checkpoint comes from ``bench/make_checkpoint.py`` (real Flink 1.20.3, parallelism 2, incremental
RocksDB, Snappy and CRC32C: the defaults), cached in ``~/.cache/flink-checkpoint-repair/bench/``. Its
SSTs (the files of ``shared/`` ending with the block-based table magic) are symlinked with a ``.sst``
suffix into a scratch directory, because ``sst_dump`` only opens ``*.sst`` files. All files are read
once before timing (warm page cache): this measures verification, not the disk.

Every variant runs as its own process (``taskset -c 0`` pins the one-core variants to the same core)
and is timed from start to exit, interpreter start-up included; the best of ``--runs`` runs counts.
MB/s is SST bytes (10^6) per wall-clock second. Variants:

* ``sst_dump``: ``sst_dump --file=<dir> --command=verify --verify_checksum``, one process; it checks
  every block's checksum but decompresses nothing (``BlockBasedTable::VerifyChecksumInBlocks``).
* ``sst_dump x2``: the files split in two halves by size, two ``sst_dump`` processes, one per core.
* ``verify_table``: ``repair.formats.rocksdb.table.sst.verify_table`` on each file in one process: every checksum,
  every compressed block decompressed (what ``repair verify`` does).
* ``verify_table, decompress=False``: checksums only, like for like with ``sst_dump``.
* ``... pool 2``: the same with a process pool of 2 workers (files largest first).
* ``repair verify``: the command on the checkpoint (``--workers 1`` pinned to one core, ``--workers 2``,
  and ``--master local[2]`` on Spark), which also decodes ``_metadata``, MANIFESTs and cross-checks;
  skipped (and said so) when this checkout has no ``repair verify``.
"""

from __future__ import annotations

# Only what the worker needs is imported here: the worker's start-up counts in the timed variants.
# The harness imports the rest where it uses it.
import json
import os
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))

from common import (  # noqa: E402
    Variant,
    compile_bytecode,
    markdown_table,
    print_table,
    repair_command,
    run_all,
    split_in_two,
    spread,
    taskset,
    warm_page_cache,
)

DOC = REPO / "docs" / "benchmarks" / "verify.md"


# -- worker: runs in its own process -------------------------------------------------------------


def _verify_one(task: tuple[str, bool]) -> tuple[int, bool, int]:
    from repair.formats.rocksdb.table.sst import verify_table
    from repair.io.storage import default_storage

    path, decompress = task
    with default_storage().open_input(path) as source:
        report = verify_table(source, decompress=decompress)
    return source.size, report.ok, report.blocks_checked


def worker(files: list[str], jobs: int, decompress: bool) -> dict:
    import repair.formats.rocksdb.table.sst  # noqa: F401 - imports are not part of the measured time
    import repair.io.storage  # noqa: F401

    started = time.perf_counter()
    tasks = [(path, decompress) for path in files]
    if jobs <= 1:
        results = [_verify_one(t) for t in tasks]
    else:
        from concurrent.futures import ProcessPoolExecutor

        tasks.sort(key=lambda t: -os.path.getsize(t[0]))  # largest first
        with ProcessPoolExecutor(jobs) as pool:
            results = list(pool.map(_verify_one, tasks, chunksize=1))
    return {
        "files": len(results),
        "bytes": sum(r[0] for r in results),
        "ok": sum(r[1] for r in results),
        "blocks": sum(r[2] for r in results),
        "seconds": time.perf_counter() - started,
    }


def worker_main(argv: list[str]) -> int:
    """The worker process: ``--jobs N --decompress 0|1 --files-from FILE``; prints its result as JSON."""
    options = dict(zip(argv[0::2], argv[1::2]))
    files = [line for line in Path(options["--files-from"]).read_text().splitlines() if line]
    print(json.dumps(worker(files, int(options.get("--jobs", 1)), bool(int(options.get("--decompress", 1))))))
    return 0


# -- variants ------------------------------------------------------------------------------------


def check_sst_dump(expected_files: int):
    def check(outputs: list[str]) -> str | None:
        ok = sum(out.count("The file is ok") for out in outputs)
        return None if ok == expected_files else f"sst_dump reported {ok} of {expected_files} files ok"

    return check


def check_worker(expected_files: int):
    def check(outputs: list[str]) -> str | None:
        result = json.loads(outputs[0].strip().splitlines()[-1])
        return None if result["ok"] == expected_files else f"{result['ok']} of {expected_files} files ok"

    return check


def check_repair(outputs: list[str]) -> str | None:
    result = json.loads(outputs[0])
    return None if result.get("ok") else f"repair verify found problems: {json.dumps(result.get('findings'))[:500]}"


def repair_verify_available() -> str | None:
    """Why ``repair verify`` cannot be benchmarked here, or ``None`` when it can."""
    import importlib.util
    if importlib.util.find_spec("repair.ops.verify.engine") is None:
        return "repair/ops/verify/engine.py does not exist yet"
    import inspect

    from repair.ops.verify import engine as verify_module

    function = getattr(verify_module, "verify", None)
    if function is None:
        return "repair/ops/verify/engine.py has no verify() function yet"
    if "master" not in inspect.signature(function).parameters:
        return "repair.ops.verify.engine.verify() has no master parameter yet"
    return None


def build_variants(files: list[Path], scratch: Path, checkpoint: Path, *, skip_spark: bool) -> list[Variant]:
    import shutil

    n = len(files)
    python = sys.executable
    links = scratch / "all"
    halves = [scratch / "half-a", scratch / "half-b"]
    file_list = scratch / "files.txt"

    sst_dump = shutil.which("sst_dump")
    variants: list[Variant] = []
    if sst_dump:
        variants.append(Variant("sst_dump --verify_checksum", "1", [
            [*taskset("0"), sst_dump, f"--file={links}", "--command=verify", "--verify_checksum"]
        ], check_sst_dump(n), "checksums only"))
        variants.append(Variant("sst_dump --verify_checksum x2", "2", [
            [*taskset(str(core)), sst_dump, f"--file={half}", "--command=verify", "--verify_checksum"]
            for core, half in enumerate(halves)
        ], check_sst_dump(n), "files split in two halves by size"))
    else:
        variants.append(Variant("sst_dump --verify_checksum", "1", [], check_sst_dump(n), skipped="sst_dump is not installed"))

    def ours(jobs: int, decompress: bool, cores: str) -> list[str]:
        pin = taskset(cores) if jobs == 1 else []
        # Imported as a module (its compiled bytecode is reused) rather than run as a script (compiled
        # on every start); the worker parses its few arguments without argparse.
        entry = f"import sys; sys.path.insert(0, {str(BENCH)!r}); from verify import worker_main; sys.exit(worker_main(sys.argv[1:]))"
        return [*pin, python, "-c", entry, "--jobs", str(jobs), "--decompress", str(int(decompress)), "--files-from", str(file_list)]

    variants += [
        Variant("verify_table", "1", [ours(1, True, "0")], check_worker(n), "checksums + decompression", worker=True),
        Variant("verify_table, decompress=False", "1", [ours(1, False, "0")], check_worker(n), "checksums only", worker=True),
        Variant("verify_table, pool 2", "2", [ours(2, True, "0,1")], check_worker(n), "checksums + decompression", worker=True),
        Variant("verify_table, decompress=False, pool 2", "2", [ours(2, False, "0,1")], check_worker(n), "checksums only", worker=True),
    ]

    why_not = repair_verify_available()
    repair_cmd = [*repair_command(python), "verify", str(checkpoint), "--json"]
    problems_ok = (0, 1)  # repair verify exits 1 when it finds a problem; check_repair reports it
    variants.append(Variant("repair verify --workers 1", "1", [[*taskset("0"), *repair_cmd, "--workers", "1"]], check_repair,
                            "whole checkpoint, in-process", skipped=why_not, ok_codes=problems_ok))
    variants.append(Variant("repair verify --checksums-only --workers 1", "1",
                            [[*taskset("0"), *repair_cmd, "--checksums-only", "--workers", "1"]], check_repair,
                            "whole checkpoint, in-process, checksums only (like sst_dump)", skipped=why_not, ok_codes=problems_ok))
    variants.append(Variant("repair verify --workers 2", "2", [[*repair_cmd, "--workers", "2"]], check_repair,
                            "whole checkpoint, process pool", skipped=why_not, ok_codes=problems_ok))
    spark_skip = why_not or ("--skip-spark" if skip_spark else None) or (None if shutil.which("java") else "no java for Spark")
    variants.append(Variant("repair verify --master local[2]", "2", [[*repair_cmd, "--master", "local[2]"]], check_repair,
                            "whole checkpoint, Spark (JVM start-up included)", skipped=spark_skip, ok_codes=problems_ok))
    return variants


# -- the checkpoint ------------------------------------------------------------------------------


def prepare_scratch(files: list[Path], scratch: Path) -> None:
    """Symlinks ``NNNNNN.sst`` to every SST (all, and in two halves), and the file list for the worker."""
    (scratch / "all").mkdir(parents=True)
    for i, path in enumerate(files):
        os.symlink(path, scratch / "all" / f"{i:06d}.sst")
    for name, half in zip(("half-a", "half-b"), split_in_two(files, lambda p: p.stat().st_size)):
        (scratch / name).mkdir()
        for path in half:
            os.symlink(path, scratch / name / f"{files.index(path):06d}.sst")
    (scratch / "files.txt").write_text("".join(f"{p}\n" for p in files))


def describe_tables(files: list[Path]) -> dict:
    """Format version, checksum, compression and the raw/stored ratio of the data blocks."""
    from repair.formats.rocksdb.table.checksum import ChecksumType
    from repair.formats.rocksdb.table.sst import open_table
    from repair.io.storage import default_storage

    raw = stored = blocks = 0
    kinds: set[tuple] = set()
    storage = default_storage()
    for path in files:
        with storage.open_input(str(path)) as source:
            table = open_table(source)
            props = table.properties
            kinds.add((table.format_version, ChecksumType(table.checksum_type).name.lower(), props.compression if props else None))
            if props is not None:
                raw += (props.raw_key_size or 0) + (props.raw_value_size or 0)
                stored += props.data_size or 0
                blocks += props.num_data_blocks or 0
    return {
        "kinds": sorted(kinds, key=str),
        "raw_over_stored": raw / stored if stored else None,
        "data_blocks": blocks,
        "mean_data_block": stored / blocks if blocks else None,
    }


def machine() -> dict:
    import shutil
    import subprocess

    import common
    sst_dump_version = "not installed"
    if shutil.which("sst_dump"):
        done = subprocess.run(["sst_dump", "--version"], capture_output=True, text=True)
        sst_dump_version = (done.stdout or done.stderr).strip().splitlines()[0]
    import cramjam
    import crc32c

    return {
        **common.machine(),
        "sst_dump": sst_dump_version,
        "cramjam": cramjam.__version__,
        "crc32c": f"{getattr(crc32c, '__version__', '?')} (hardware: {crc32c.hardware_based})",
    }


# -- report --------------------------------------------------------------------------------------


def table_rows(variants: list[Variant], total_bytes: int) -> list[list[str]]:
    reference = next((v.best for v in variants if v.name == "sst_dump --verify_checksum" and v.best), None)
    rows = []
    for v in variants:
        if v.best is None:
            rows.append([v.name, v.cores, "-", "-", "-", "-", "-", f"skipped: {v.skipped or v.error}"])
            continue
        best = v.best
        at = v.walls.index(best)
        # Spark's JVM and its Python workers are not all waited for by our child: no CPU figure.
        cpu = "n/a" if "--master" in v.commands[0] else f"{v.cpus[at]:.2f}"
        inner = v.inner[at]
        ratio = f"{reference / best:.2f}" if reference else "-"
        rows.append([v.name, v.cores, f"{best:.2f}", f"{total_bytes / 1e6 / best:.0f}", ratio, cpu,
                     "-" if inner is None else f"{inner:.2f}",
                     f"{v.note}; runs: {', '.join(f'{w:.2f}' for w in v.walls)}"])
    return rows


HEADER = ["variant", "cores", "best wall s", "MB/s", "vs sst_dump", "CPU s", "in-process s", "notes"]


def summary(variants: list[Variant], total_bytes: int, data_blocks: int) -> str:
    """The ratios that answer the questions, in sentences (only for variants that ran)."""
    best = {v.name: v.best for v in variants if v.best}

    def rate(name: str) -> str:
        return f"{total_bytes / 1e6 / best[name]:.0f} MB/s"

    def ratio(a: str, b: str) -> str:
        return f"{best[b] / best[a]:.2f}x"

    lines = []
    ref = "sst_dump --verify_checksum"
    if ref in best and "verify_table, decompress=False" in best:
        lines.append(f"- Per core, checksums only (like for like): `verify_table(decompress=False)` "
                     f"{rate('verify_table, decompress=False')} against `sst_dump` {rate(ref)}: "
                     f"**{ratio('verify_table, decompress=False', ref)}** sst_dump's throughput.")
    if ref in best and "verify_table" in best:
        lines.append(f"- Per core, checksums and decompression (what `repair verify` does): `verify_table` "
                     f"{rate('verify_table')}: **{ratio('verify_table', ref)}** sst_dump's throughput.")
    if "verify_table" in best and "verify_table, decompress=False" in best and data_blocks:
        extra = best["verify_table"] - best["verify_table, decompress=False"]
        lines.append(f"- Decompression costs {extra:.2f} s of the {best['verify_table']:.2f} s, "
                     f"{extra / data_blocks * 1e6:.1f} µs per data block.")
    for one, two in (("verify_table", "verify_table, pool 2"),
                     ("verify_table, decompress=False", "verify_table, decompress=False, pool 2"),
                     (ref, "sst_dump --verify_checksum x2"),
                     ("repair verify --workers 1", "repair verify --workers 2"),
                     ("repair verify --workers 1", "repair verify --master local[2]")):
        if one in best and two in best:
            lines.append(f"- `{two}` against `{one}`: speed-up {ratio(two, one)} ({rate(two)}).")
    quick = next((v for v in variants if v.name == "verify_table, decompress=False" and v.best), None)
    if quick is not None and ref in best:
        inner = quick.inner[quick.walls.index(quick.best)]
        if inner:
            lines.append(f"- Without Python's start-up and imports ({quick.best - inner:.2f} s, against a few ms for "
                         f"`sst_dump`), `verify_table(decompress=False)` verifies {total_bytes / 1e6 / inner:.0f} MB/s: "
                         f"**{best[ref] / inner:.2f}x** sst_dump's throughput per core.")
    for command in ("repair verify --checksums-only --workers 1", "repair verify --workers 1"):
        if command in best and ref in best:
            lines.append(f"- `{command}` on the whole checkpoint (start-up, `_metadata`, MANIFESTs and cross-checks "
                         f"included): {rate(command)}, **{ratio(command, ref)}** sst_dump's throughput.")
    return "\n".join(lines)


def write_doc(path: Path, *, rows, summary_text, info, files, tables, mach, runs, load_before, load_after, started,
              spread: float = 1.0) -> None:
    import statistics
    sizes = sorted(p.stat().st_size for p in files)
    total = sum(sizes)
    kinds = ", ".join(f"format_version {fv}, {ck}, {comp}" for fv, ck, comp in tables["kinds"])
    text = f"""# Benchmarks

## Verification throughput: `repair` against `sst_dump`

Run it yourself (a few minutes; the first run also generates the checkpoint with real Flink):

```bash
.venv/bin/python bench/verify.py            # best of 3, rewrites this file
.venv/bin/python bench/verify.py --help     # options (--runs, --no-doc, --skip-spark, --records)
.venv/bin/python bench/make_checkpoint.py   # only generate the checkpoint
```

### Method

- **Input**: a real Flink checkpoint of {total / 1e9:.2f} GB of SSTs, generated (not committed) by
  `bench/make_checkpoint.py` into `~/.cache/flink-checkpoint-repair/bench/`: Flink {info['flink_version']}
  (the PyPI jars, a local MiniCluster), the fixture job of `fixtures/job` at parallelism
  {info['parallelism']}, incremental RocksDB checkpoints with **Flink's default compression (Snappy) and
  RocksDB's default block checksum (CRC32C)**, {info['records']:,} generated records with long user names
  and tags so every state grows; only the newest checkpoint is retained, so every file in `shared/`
  belongs to it. Generation took {info['generation_seconds']:.0f} s.
- **Files**: {len(files)} SSTs ({kinds}); sizes {sizes[0] / 1e6:.2f} MB to {sizes[-1] / 1e6:.1f} MB,
  median {statistics.median(sizes) / 1e6:.1f} MB; {tables['data_blocks']:,} data blocks of
  {tables['mean_data_block']:.0f} bytes on average as stored (RocksDB's default block size of 4 KiB,
  then compressed); the data blocks hold {tables['raw_over_stored']:.2f}x their stored size in keys
  and values.
- **Variants**: each runs as its own process, timed from start to exit (interpreter or JVM start-up
  included), on a warm page cache (all files read once before), best of {runs} runs. One-core variants
  are pinned with `taskset -c 0`. MB/s is SST bytes (10^6) per wall-clock second; "vs sst_dump" is
  the speed relative to one `sst_dump` process (higher is faster); CPU s is user + system time of all
  processes of the best run; in-process s is the time our worker measured itself, from the first file
  opened to the last result (without interpreter start-up and imports).
  - `sst_dump --command=verify --verify_checksum` over a directory of `.sst` symlinks to the files.
  - `verify_table`: `repair.formats.rocksdb.table.sst.verify_table(source)` on every file in one process (what
    `repair verify` runs per SST): every block's checksum, and every compressed block decompressed.
  - `verify_table, decompress=False`: checksums only, the same work as `sst_dump` (see below).
  - `pool 2`: a process pool of 2 (files largest first); `sst_dump x2`: two `sst_dump` processes,
    one per core, on the files split in two halves by size.
  - `repair verify <job root>`: the command, which also decodes `_metadata`, the MANIFESTs and
    cross-checks them with the SSTs, `--workers 1` (pinned to one core), `--workers 2`, and Spark
    with `--master local[2]` (pyspark's local mode; its JVM start-up is included).
- **Noise**: this machine has 2 cores shared with other work (load average {load_before:.2f} before the
  runs, {load_after:.2f} after), so single runs vary by 20 % and more (in this run by up to
  {spread:.1f}x between the runs of one variant); the best of {runs} is reported and all runs are listed.

### What `sst_dump --verify_checksum` checks

`sst_dump --command=verify` calls `SstFileDumper::VerifyChecksum` (`table/sst_file_dumper.cc`), that is
`BlockBasedTable::VerifyChecksum` (`table/block_based/block_based_table_reader.cc`): it reads the
metaindex and every meta block, then every data block through the index, in
`BlockBasedTable::VerifyChecksumInBlocks`, each with a `BlockFetcher` built with
`false /* decompress */` (and `maybe_compressed = false`): **it checks every block's checksum but
decompresses nothing** (facebook/rocksdb, read at v7.8.3, the version installed here, and at the
current main branch, where it is unchanged). `repair verify` also decompresses every block, because
a block with a valid checksum can still fail to decompress (a writer bug, or a corruption before the
checksum was computed) and RocksDB would then fail to read it. So the like-for-like comparison is
`verify_table(..., decompress=False)`. With decompression, Snappy (`cramjam`'s, the fastest codec
binding among our dependencies) costs more than everything else together: see the results.

### Results

Machine: {mach['cpu']}, {mach['cores']} cores, {mach['system']}; Python {mach['python']}; {mach['sst_dump']}
(Debian rocksdb-tools); cramjam {mach['cramjam']}; crc32c {mach['crc32c']}. Run {started}.

{markdown_table(HEADER, rows)}

{summary_text}

### What makes `verify_table` fast

`Table.verify` reads each file in sequential chunks (1 MiB for local files, which stay in the CPU
cache while their blocks are checked; 16 MiB ranged reads on object stores) and never creates an
object per block:

- **Index**: RocksDB writes index blocks with a restart point at every entry, so the restart array
  says where each entry starts; `sst_block.bulk_index_arrays` gathers each field of all entries at
  once with `pyarrow`'s `take` and decodes the varints with vectorised integer operations (about
  80 array operations per index block instead of some 40 Python operations per entry). Anything it
  does not decode exactly (another restart interval, longer varints, bytes that do not fit) falls
  back to the sequential decoder.
- **Checksums**: `checksum.mismatched_blocks` checks all blocks of a chunk together: per block one
  C call for the hash over a memoryview slice of the block and its type byte (adjacent in the
  chunk), a few integer operations for RocksDB's masking (and the format version 6 context), one C
  call for the stored value; then one list comparison for the chunk.
- **Decompression**: Snappy blocks are decompressed in one C call each into a reused buffer. Data
  blocks' entries are not parsed.
- **Start-up**: the benchmark's worker imports only what it needs, and our modules are compiled to
  bytecode first, as `pip install` does (this machine sets `PYTHONDONTWRITEBYTECODE`, so without it
  every run compiles them again).

Anything unusual (a checksum mismatch, another codec, an odd size or layout) goes through the
general code, which produces exactly the findings it always did; `tests/formats/rocksdb/test_rocksdb_verify_paths.py`
and `tests/formats/rocksdb/test_rocksdb_verify_bulk.py` check that the fast and general paths agree on thousands of
damaged tables and index blocks. History, measured on this machine: about 150 MB/s of one core
before the first of these changes (commit 3de0efa); before the bulk index and checksum paths
(commit 4402e85), 270 MB/s with decompression and 640 MB/s without, 2.6 to 2.8 µs per data block
in-process for the checksums alone, of which about 0.9 µs went to decoding the index entry.
"""
    # The page's section on bench/verify_bound.py's results (from KEPT_SECTIONS on) stays as it was.
    old = path.read_text() if path.exists() else ""
    kept = old.find(KEPT_SECTIONS)
    path.write_text(text + ("\n" + old[kept:] if kept >= 0 else ""))


#: Where the part of the page this script does not write begins (bench/verify_bound.py's results).
KEPT_SECTIONS = "## At two sizes: sst_dump and the bound"


# -- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    import argparse
    import datetime
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs per variant; the best counts (default 3)")
    parser.add_argument("--dir", type=Path, default=None, help="the generated checkpoint (default: the cache of make_checkpoint.py)")
    parser.add_argument("--records", type=int, default=None, help="input records when generating (see make_checkpoint.py)")
    parser.add_argument("--skip-spark", action="store_true", help="do not run the Spark variant")
    parser.add_argument("--only", default=None, help="run only variants whose name contains this text")
    parser.add_argument("--no-doc", action="store_true", help=f"do not rewrite {DOC.relative_to(REPO)}")
    parser.add_argument("--doc", type=Path, default=DOC, help="where to write the results (default docs/benchmarks/verify.md)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--decompress", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--files-from", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        return worker_main(["--jobs", str(args.jobs), "--decompress", str(args.decompress), "--files-from", str(args.files_from)])

    import make_checkpoint

    kwargs = {} if args.records is None else {"records": args.records}
    root, info = make_checkpoint.ensure_checkpoint(args.dir, **kwargs)
    files = make_checkpoint.sst_files(root)
    total = sum(p.stat().st_size for p in files)
    measured = make_checkpoint.checkpoint_dir(root, info)  # chk-N: not the root, which may keep a subsumed chk-M
    print(f"{len(files)} SST files, {total / 1e6:.0f} MB, in {root}")
    started = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    mach = machine()
    tables = describe_tables(files)
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as scratch_dir:
        scratch = Path(scratch_dir)
        prepare_scratch(files, scratch)
        warm_page_cache(files)
        compile_bytecode(Path(__file__).resolve())
        variants = build_variants(files, scratch, measured, skip_spark=args.skip_spark)
        if args.only:
            variants = [v for v in variants if args.only in v.name]
        for v in variants:
            if v.skipped:
                print(f"skipped {v.name}: {v.skipped}")
        load_before, load_after = run_all(variants, args.runs)
    rows = table_rows(variants, total)
    print()
    print_table(HEADER, rows)
    print()
    print(summary(variants, total, tables["data_blocks"]))
    if not args.no_doc:
        write_doc(args.doc, rows=rows, summary_text=summary(variants, total, tables["data_blocks"]), info=info, files=files, tables=tables, mach=mach, runs=args.runs,
                  load_before=load_before, load_after=load_after, started=started,
                  spread=spread(variants))
        print(f"\nwrote {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
