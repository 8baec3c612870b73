#!/usr/bin/env python3
"""``repair verify`` against ``sst_dump --verify_checksum`` and against its own bound, at several sizes.

Usage::

    python bench/verify_bound.py D1 D2 [--runs 3] [--results out.json] [--compare OLD_CHECKOUT] [--skip REGEX]

``D1``, ``D2`` ...: checkpoints written by ``bench/make_checkpoint.py`` (or ``bench/replicate_checkpoint.py``),
smallest first. Every variant is its own process pinned to core 0 (``taskset -c 0``), timed in CPU seconds
(user + system of the process and its children: the machine is shared, and CPU seconds move far less with
the load than wall seconds; wall seconds are given too), the runs alternated round robin over every variant
and checkpoint, page cache warm, bytecode compiled first. Per variant and checkpoint the median and the
minimum of ``--runs`` rounds count; the load average is printed before and after.

Variants, on the same SST files:

* ``sst_dump dir``: one ``sst_dump --file=DIR --command=verify --verify_checksum`` over a directory of
  ``.sst`` links to every SST (checksums only: it decompresses nothing, see docs/benchmarks/verify.md);
* ``sst_dump per file``: one ``sst_dump`` process per SST (the CPU and wall seconds of all of them);
* ``repair --checksums-only``: ``repair verify CHK --checksums-only --workers 1 --json`` (the command:
  ``_metadata``, MANIFESTs, OPTIONS, cross-checks, every SST block's checksum);
* ``repair (default)``: ``repair verify CHK --workers 1 --json``: also decompresses every block;
* ``bound``: the work any verifier with decompression has to do, in the tightest loop Python allows
  (``--bound``): each file read in one read, then per block (data, index, filter, meta, as the table
  lists them; found before the clock starts) one C call for the checksum over the block and its type byte,
  compared with the stored value (unmasked before the clock starts), and one C call decompressing it
  (cramjam's Snappy, LZ4 or ZSTD, the codecs ``repair verify`` uses). Its CPU seconds are those of the loop
  only (no interpreter start-up, imports or planning). ``bound, checksums only``: the same loop without
  decompression.

The slope between two sizes (the difference of their CPU seconds) is each tool's cost beyond its fixed
cost (start-up, and for ``repair`` the per-checkpoint work that does not grow with the bytes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))

#: The bound's worker (its own process): ``--bound FILES_LIST DECOMPRESS``; prints the loop's CPU seconds.
_BOUND = r'''
import sys, time, struct
from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.table.sst import open_table
from repair.formats.rocksdb.table.checksum import ChecksumType, block_checksum, unmask_crc, _crc32c
from repair.formats.rocksdb.table.compression import decompress_block
import cramjam
files = [line for line in open(sys.argv[1]).read().splitlines() if line]
decompress = sys.argv[2] == "1"
plans = []
for path in files:
    with open(path, "rb") as f:
        data = f.read()
    table = open_table(BytesSource(data))
    assert table.footer.base_context_checksum == 0, "format_version 6 context: not in this bound"
    kind, version = table.checksum_type, table.format_version
    blocks = []
    for info in table.iter_block_handles():
        o, s = info.handle
        stored = struct.unpack_from("<I", data, o + s + 1)[0]
        blocks.append((o, o + s + 1, unmask_crc(stored) if kind == ChecksumType.CRC32C else stored))
    plans.append((path, kind, version, blocks))
crc = _crc32c.crc32c
into = cramjam.snappy.decompress_raw_into
scratch = bytearray(64 << 20)
bad = 0
started = time.process_time()
for path, kind, version, blocks in plans:
    with open(path, "rb") as f:
        view = memoryview(f.read())
    if kind == ChecksumType.CRC32C:
        for start, stop, expected in blocks:
            if crc(view[start:stop]) != expected:
                bad += 1
    else:
        for start, stop, expected in blocks:
            if block_checksum(kind, view[start:stop - 1], view[stop - 1]) != expected:
                bad += 1
    if decompress:
        for start, stop, _ in blocks:
            codec = view[stop - 1]
            if codec == 1:
                into(view[start:stop - 1], scratch)
            elif codec:
                decompress_block(codec, view[start:stop - 1], version)
seconds = time.process_time() - started
print(seconds if not bad else -bad)
'''


def cpu_run(argv: list[str], cwd: Path = REPO) -> tuple[float, float, str]:
    """``(CPU seconds of the process and its children, wall seconds, stdout)`` of one run of ``argv``, with
    the code of the checkout ``cwd`` (``python -m`` puts the working directory first on the path)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(cwd), env.get("PYTHONPATH")]))
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{argv[:6]} exited {done.returncode}: {done.stderr[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall, done.stdout


class Checkpoint:
    def __init__(self, root: Path, scratch: Path):
        import make_checkpoint

        info = make_checkpoint.load(root)
        self.root = root
        self.chk = make_checkpoint.checkpoint_dir(root, info)
        self.files = make_checkpoint.sst_files(root)
        self.bytes = sum(p.stat().st_size for p in self.files)
        self.links = scratch / "links"
        self.links.mkdir(parents=True)
        for i, path in enumerate(self.files):
            os.symlink(path, self.links / f"{i:06d}.sst")
        self.file_list = scratch / "files.txt"
        self.file_list.write_text("".join(f"{p}\n" for p in self.files))

    @property
    def name(self) -> str:
        return f"{self.bytes / 1e6:,.0f} MB ({len(self.files)} SSTs)"


def variants(checkpoint: Checkpoint, python: str, compare: Path | None) -> dict[str, object]:
    pin = ["taskset", "-c", "0"]
    repair = [*pin, python, "-m", "repair.cli", "verify", str(checkpoint.chk), "--workers", "1", "--json"]

    def sst_dump(path: Path) -> list[str]:
        return [*pin, "sst_dump", f"--file={path}", "--command=verify", "--verify_checksum"]

    def per_file():
        cpu = wall = 0.0
        for link in sorted(checkpoint.links.iterdir()):
            c, w, out = cpu_run(sst_dump(link))
            if "The file is ok" not in out:
                raise RuntimeError(f"sst_dump: {link} not ok: {out[-300:]}")
            cpu, wall = cpu + c, wall + w
        return cpu, wall, None

    def bound(decompress: bool):
        def run():
            cpu, wall, out = cpu_run([*pin, python, "-c", _BOUND, str(checkpoint.file_list), "1" if decompress else "0"])
            loop = float(out.strip().splitlines()[-1])
            if loop < 0:
                raise RuntimeError(f"bound: {-loop} checksum mismatches")
            return loop, wall, None
        return run

    def command(argv: list[str], check, code: Path = REPO):
        def run():
            cpu, wall, out = cpu_run(argv, code)
            problem = check(out)
            if problem:
                raise RuntimeError(f"{argv[3:6]}: {problem}")
            return cpu, wall, out
        return run

    def sst_dump_ok(out: str) -> str | None:
        ok = out.count("The file is ok")
        return None if ok == len(checkpoint.files) else f"{ok} of {len(checkpoint.files)} files ok"

    def repair_ok(out: str) -> str | None:
        return None if json.loads(out).get("ok") else "repair verify found problems"

    runs = {
        "sst_dump dir": command(sst_dump(checkpoint.links), sst_dump_ok),
        "sst_dump per file": per_file,
        "repair --checksums-only": command([*repair, "--checksums-only"], repair_ok),
        "repair (default)": command(repair, repair_ok),
        "bound, checksums only": bound(False),
        "bound": bound(True),
    }
    if compare is not None:
        runs[f"repair --checksums-only, {compare.name}"] = command([*repair, "--checksums-only"], repair_ok, compare)
        runs[f"repair (default), {compare.name}"] = command(repair, repair_ok, compare)
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", type=Path, nargs="+", help="checkpoints of bench/make_checkpoint.py, smallest first")
    parser.add_argument("--runs", type=int, default=3, help="rounds (the median and minimum count)")
    parser.add_argument("--results", type=Path, help="write every run's seconds here (JSON)")
    parser.add_argument("--compare", type=Path, metavar="OLD", help="also time the repair/ of checkout OLD (its runs alternated)")
    parser.add_argument("--skip", metavar="REGEX", help="leave out the variants whose name matches (e.g. 'per file' at large sizes)")
    args = parser.parse_args()
    import compileall

    from common import warm_page_cache

    for code in filter(None, [REPO, args.compare]):
        compileall.compile_dir(str(code / "repair"), quiet=1)
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-verify-bound-") as scratch:
        checkpoints = [Checkpoint(root, Path(scratch) / str(i)) for i, root in enumerate(args.roots)]
        for checkpoint in checkpoints:
            warm_page_cache(checkpoint.files)
        runs = {c.name: variants(c, python, args.compare and args.compare.resolve()) for c in checkpoints}
        if args.skip:
            runs = {c: {v: run for v, run in vs.items() if not re.search(args.skip, v)} for c, vs in runs.items()}
        samples: dict[str, dict[str, list[tuple[float, float]]]] = {c: {v: [] for v in vs} for c, vs in runs.items()}
        load_before = os.getloadavg()
        for round_ in range(args.runs):
            for checkpoint, by_variant in runs.items():
                for name, run in by_variant.items():
                    cpu, wall, _ = run()
                    samples[checkpoint][name].append((cpu, wall))
                    print(f"round {round_ + 1} {checkpoint:<26} {name:<24} CPU {cpu:7.3f} s  wall {wall:7.3f} s", flush=True)
        load_after = os.getloadavg()
    print(f"\nload average before {' '.join(f'{x:.1f}' for x in load_before)}, after {' '.join(f'{x:.1f}' for x in load_after)}")
    report(samples, checkpoints)
    if args.results:
        args.results.write_text(json.dumps({"load_before": load_before, "load_after": load_after,
                                            "checkpoints": {c.name: {"bytes": c.bytes, "files": len(c.files)} for c in checkpoints},
                                            "samples": samples}, indent=1))
    return 0


def report(samples: dict, checkpoints: list[Checkpoint]) -> None:
    def median(checkpoint: str, name: str, wall: bool = False) -> float:
        return statistics.median(s[1 if wall else 0] for s in samples[checkpoint][name])

    def minimum(checkpoint: str, name: str) -> float:
        return min(s[0] for s in samples[checkpoint][name])

    names = list(next(iter(samples.values())))
    references = [name for name in ("sst_dump dir", "sst_dump per file") if name in names]
    print("\n| variant | " + " | ".join(f"{c.name}: CPU s median (min), wall s median" for c in checkpoints) + " |")
    print("|---|" + "---|" * len(checkpoints))
    for name in names:
        cells = [f"{median(c.name, name):.3f} ({minimum(c.name, name):.3f}), {median(c.name, name, True):.2f}" for c in checkpoints]
        print(f"| {name} | " + " | ".join(cells) + " |")

    def ratios(cost) -> str:
        """Each repair variant against the faster sst_dump, and the default one against the bound, by ``cost(name)``."""
        ref = min(cost(name) for name in references)
        parts = [f"{name} {ref / cost(name):.2f}x the faster sst_dump" for name in names if name.startswith("repair") and "default" not in name]
        if "bound" in names:
            parts += [f"{name} at {cost('bound') / cost(name):.2f}x of its bound" for name in names if name.startswith("repair (default)")]
        return "; ".join(parts)

    for c in checkpoints:
        print(f"\n{c.name} (CPU, medians, start-up included): {ratios(lambda name: median(c.name, name))}")
    for small, large in zip(checkpoints, checkpoints[1:]):
        def slope(name: str) -> float:
            return median(large.name, name) - median(small.name, name)

        print(f"\nslope {small.name} -> {large.name} (CPU s per extra {(large.bytes - small.bytes) / 1e9:.2f} GB): "
              + ", ".join(f"{name} {slope(name):.3f}" for name in names))
        print(f"  beyond start-up: {ratios(slope)}")


if __name__ == "__main__":
    sys.exit(main())
