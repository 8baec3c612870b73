#!/usr/bin/env python3
"""Benchmark the Parquet data page size of ``repair export``'s parts: write time per row and file size.

Usage::

    python bench/parquet_pages.py            # the checkpoint of make_checkpoint.py; writes docs/benchmarks/parquet-pages.md
    python bench/parquet_pages.py --no-doc   # print the table only
    python bench/parquet_pages.py --runs 7   # best of 7 instead of 5

**What is timed.** For a few states of the checkpoint's newest snapshot, chosen by entry size (1 KB
keys; 1 KB keys with 200-byte values; 200-byte list elements; one-byte values), the export's own
pipeline decodes every entry of one subtask into the record batches it would write (RocksDB reads
them, :class:`~repair.formats.flink.in_rocksdb.keyed_columns.ColumnarStateDecoder` decodes them), once, before
timing. Then each page size writes those batches with the export's Parquet options
(:func:`repair.ops.export.parts.parquet_writer_options`: Snappy, the same dictionaries and statistics)
into memory: Parquet encoding and compression only, no disk. Page sizes take turns, best of ``--runs``,
in one process pinned to one core.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))

from common import code_state, describe_code, machine, markdown_table, print_table  # noqa: E402

DOC = REPO / "docs" / "benchmarks" / "parquet-pages.md"
#: (operator uid, state) of the fixture job, from large entries to small ones.
STATES = [("per-user", "count"), ("per-user", "tags"), ("per-type", "checks"), ("per-type", "tiny")]
#: Page sizes compared, in bytes; 1 MiB is pyarrow's default.
SIZES = [32 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20]


def decoded_batches(checkpoint: str, uid: str, state: str):
    """``(record batches, schema, entries, bytes per entry)`` of ``state`` in the largest subtask of ``uid``."""
    import pyarrow.compute as pc

    from repair.formats.flink.arrow import keyed_state_columns
    from repair.formats.flink.in_rocksdb.keyed_columns import ColumnarStateDecoder
    from repair.formats.flink.keygroups import operator_id_for_uid
    from repair.io import storage as st
    from repair.io.layout import discover
    from repair.io.snapshot import load_snapshot
    from repair.ops.export.parts import PartStats, _BatchWriter
    from repair.readers.rocksdb import iter_incremental_handle

    storage = st.default_storage()
    layout = discover(checkpoint, storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    op = snapshot.metadata.operator(operator_id_for_uid(uid))
    handle = max((sub.managed_keyed_state for sub in op.subtasks), key=lambda h: sum(e.handle.size for e in h.sst_files))
    for stream in iter_incremental_handle(snapshot, storage, handle, op.max_parallelism, engine="rocksdb", states={state}):
        keyed = stream.entries
        columns = keyed_state_columns(stream.meta, keyed.key_serializer)
        decoder = ColumnarStateDecoder(stream.meta, keyed.key_serializer, keyed.max_parallelism, columns)
        writer = _BatchWriter(columns, PartStats(state))
        batches, entries, size = [], 0, 0
        for keys, values in keyed.batches:
            decoded, _ = decoder.decode(keys, values, keyed.key_groups.start, keyed.key_groups.end)
            batches.append(writer.columnar_batch(decoded))
            entries += len(keys)
            size += sum(pc.sum(pc.binary_length(column)).as_py() or 0 for column in (keys, values))  # binary arrays
        return batches, writer.schema, entries, size / max(entries, 1)
    raise LookupError(f"no state {state!r} in operator {uid!r}")


def write_seconds(batches, schema, page_size: int) -> tuple[float, int]:
    """Seconds to write ``batches`` as one part with the export's options, and the part's bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from repair.ops.export.parts import COMPRESSION, parquet_writer_options

    sink = pa.BufferOutputStream()
    started = time.perf_counter()
    with pq.ParquetWriter(sink, schema, **parquet_writer_options(COMPRESSION, data_page_size=page_size)) as parquet:
        for batch in batches:
            parquet.write_batch(batch)
    return time.perf_counter() - started, sink.getvalue().size


def measure(checkpoint: str, runs: int) -> list[dict]:
    results = []
    for uid, state in STATES:
        batches, schema, entries, entry_bytes = decoded_batches(checkpoint, uid, state)
        rows = sum(batch.num_rows for batch in batches)
        best = {size: (float("inf"), 0) for size in SIZES}
        for _ in range(runs):
            for size in SIZES:
                seconds, nbytes = write_seconds(batches, schema, size)
                best[size] = (min(best[size][0], seconds), nbytes)
        results.append({"uid": uid, "state": state, "entries": entries, "rows": rows, "entry_bytes": entry_bytes,
                        "seconds": {size: s for size, (s, _) in best.items()}, "bytes": {size: b for size, (_, b) in best.items()}})
        print(f"{uid}/{state}: " + ", ".join(f"{size >> 10} KiB {s / rows * 1e6:.2f} µs" for size, (s, _) in best.items()), flush=True)
    return results


def table(results: list[dict]) -> tuple[list[str], list[list[str]]]:
    default = SIZES[-1]
    header = ["state", "rows", "bytes per entry"] + [f"{size >> 10} KiB: µs per row (vs 1 MiB)" for size in SIZES] + ["file size vs 1 MiB (128 KiB)"]
    rows = []
    for r in results:
        base = r["seconds"][default]
        cells = [f"`{r['uid']}` `{r['state']}`", f"{r['rows']:,}", f"{r['entry_bytes']:,.0f}"]
        cells += [f"{r['seconds'][size] / r['rows'] * 1e6:.2f} ({r['seconds'][size] / base:.2f}x)" for size in SIZES]
        cells.append(f"{r['bytes'][128 << 10] / r['bytes'][default]:.3f}x")
        rows.append(cells)
    return header, rows


def write_doc(path: Path, results: list[dict], *, started: str, code: str, runs: int, checkpoint: str) -> None:
    import pyarrow

    mach = machine()
    header, rows = table(results)
    path.write_text(f"""# Benchmarks

## Parquet page size of `repair export`'s parts

Run it yourself (a few minutes; the first run of any export benchmark generates the checkpoint):

```bash
.venv/bin/python bench/parquet_pages.py          # best of 5, rewrites this file
.venv/bin/python bench/parquet_pages.py --no-doc
```

### Method

- **Input**: the checkpoint of `bench/make_checkpoint.py` (`{checkpoint}`), its newest snapshot. For each
  state below, the largest subtask of its operator: its entries read by RocksDB and decoded column-wise
  by the export's own pipeline into the record batches the export writes, once, before timing.
- **Timed**: writing those batches as one Parquet part with the export's options (Snappy, dictionaries
  and statistics as `repair.ops.export.parts.parquet_writer_options`) into memory, for each data page
  size; encoding and compression only, no disk. Page sizes take turns; best of {runs}; one process
  pinned to one core.

### Results

Machine: {mach['cpu']}, {mach['cores']} cores, {mach['system']}; Python {mach['python']}; pyarrow {pyarrow.__version__}.
Run {started}, code: {code}.

{markdown_table(header, rows)}

The export writes pages of 128 KiB (`DATA_PAGE_SIZE` in `repair/ops/export/parts.py`): smaller pages keep
the codec's working set in the CPU cache. Pages much smaller than that add page headers and give
readers more pages to skip through for little gain here.
""")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-doc", action="store_true", help="print the table, do not rewrite the page")
    parser.add_argument("--doc", type=Path, default=DOC)
    parser.add_argument("--dir", type=Path, default=None, help="the make_checkpoint.py directory (default: its cache)")
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    import make_checkpoint

    root, info = make_checkpoint.ensure_checkpoint(args.dir)
    checkpoint = str(make_checkpoint.checkpoint_dir(root, info))
    started = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    code = describe_code(code_state())
    results = measure(checkpoint, args.runs)
    header, rows = table(results)
    print_table(header, rows)
    if not args.no_doc:
        write_doc(args.doc, results, started=started, code=code, runs=args.runs,
                  checkpoint=f"~/.cache/flink-checkpoint-repair/bench/{root.name}")
        print(f"wrote {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
