"""What the benchmark scripts of ``bench/`` share: variants run as timed processes, the machine, tables.

A :class:`Variant` is one way of doing the measured work: one or more commands started together (each
its own process), timed from start to exit. :func:`run_all` runs every variant ``runs`` times, round
robin (so that a burst of other load on this shared machine does not hit one variant only), and keeps
every run: wall-clock seconds, CPU seconds, peak memory, and the seconds a bench worker measured
itself. The best run (shortest wall) counts.

Only light modules are imported at the top: bench workers import this module, and their start-up is
part of what is measured.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


# -- variants ------------------------------------------------------------------------------------


@dataclass
class Variant:
    name: str
    cores: str
    commands: list[list[str]]  # run concurrently
    #: Called with the stdout of every command of a run; returns a problem (the run then fails) or None.
    check: Callable[[list[str]], str | None]
    note: str = ""
    skipped: str | None = None
    #: Exit codes that are not a failure (``repair verify`` exits 1 when it finds a problem).
    ok_codes: tuple[int, ...] = (0,)
    #: The commands are bench workers: the last line of each stdout is JSON with ``seconds``, the time
    #: the worker measured itself (without interpreter start-up and imports); the slowest one's counts.
    worker: bool = False
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    inner: list[float | None] = field(default_factory=list)
    #: Peak resident set size of the largest single process of each run (kB), from ``wait4``: exact,
    #: and it includes the descendants each process waited for (a process pool's workers).
    max_rss_kb: list[int] = field(default_factory=list)
    #: Peak of the summed resident set sizes of all processes of each run (kB), sampled every 0.2 s:
    #: what the whole variant held at once (pool workers, Spark's JVM and Python workers together).
    tree_rss_kb: list[int] = field(default_factory=list)
    #: The 1-minute load average of the machine when each run started (``/proc/loadavg``).
    loads: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def best(self) -> float | None:
        return min(self.walls) if self.walls else None

    @property
    def best_run(self) -> int | None:
        return self.walls.index(self.best) if self.walls else None


def taskset(cores: str) -> list[str]:
    """The command prefix that pins a process to ``cores`` (nothing when ``taskset`` is missing)."""
    import shutil

    return ["taskset", "-c", cores] if shutil.which("taskset") else []


class _TreeMemory:
    """Samples the summed RSS of a set of processes and all their descendants, every ``interval`` s.

    Cheap beside the command it measures (it shares its cores): each process's parent is read once, when
    it first appears in ``/proc``; a sample then reads the ``stat`` of the tree's processes only (reading
    every process's each time cost about 0.1 CPU s per verify of 186 MB and 0.5 s per export). Measured
    idle beside a sleeping process at load 6-19: 0.19 CPU s per 10 s before, 0.06 s with the tree's reads
    only, 0.03 s sampling every 0.2 s instead of 0.1 s."""

    def __init__(self, pids: list[int], interval: float = 0.2):
        self.pids, self.interval, self.peak_kb = set(pids), interval, 0
        self._parents: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._page_kb = os.sysconf("SC_PAGE_SIZE") // 1024

    def __enter__(self) -> "_TreeMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak_kb = max(self.peak_kb, self._sample())

    @staticmethod
    def _stat(pid: int) -> list[bytes] | None:
        """The fields of ``/proc/<pid>/stat`` after the name (ppid first, rss in pages at 21), or None if gone."""
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[1].split()
        except OSError:
            return None

    def _sample(self) -> int:
        listed = {int(entry) for entry in os.listdir("/proc") if entry.isdigit()}
        for pid in self._parents.keys() - listed:  # gone (its number may come back for another process)
            del self._parents[pid]
        for pid in listed - self._parents.keys():
            fields = self._stat(pid)
            if fields is not None:
                self._parents[pid] = int(fields[1])
        tree, frontier = set(), set(self.pids)
        while frontier:
            tree |= frontier
            frontier = {pid for pid, ppid in self._parents.items() if ppid in frontier and pid not in tree}
        rss = (self._stat(pid) for pid in tree)
        return sum(int(fields[21]) for fields in rss if fields is not None) * self._page_kb


def run_variant(variant: Variant) -> list[str]:
    """Run the variant's commands once, concurrently; record the run; returns their stdouts.

    Raises :class:`RuntimeError` on an exit code not in ``ok_codes`` or when ``check`` finds a problem.
    """
    import subprocess

    load = os.getloadavg()[0]
    started = time.perf_counter()
    processes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        for command in variant.commands
    ]
    with _TreeMemory([p.pid for p in processes]) as memory:
        outputs = [_communicate(p) for p in processes]
    wall = time.perf_counter() - started
    for p, (out, err, _) in zip(processes, outputs):
        if p.returncode not in variant.ok_codes:
            raise RuntimeError(f"{variant.name}: exit code {p.returncode}: {(out + err)[-2000:]}")
    stdouts = [out for out, _, _ in outputs]
    problem = variant.check(stdouts)
    if problem:
        raise RuntimeError(f"{variant.name}: {problem}")
    variant.walls.append(wall)
    variant.cpus.append(sum(usage.ru_utime + usage.ru_stime for _, _, usage in outputs))
    variant.inner.append(max((worker_seconds(out) or 0.0 for out in stdouts), default=None) if variant.worker else None)
    variant.max_rss_kb.append(max(usage.ru_maxrss for _, _, usage in outputs))
    variant.tree_rss_kb.append(memory.peak_kb)
    variant.loads.append(load)
    return stdouts


def _communicate(process) -> tuple[str, str, object]:
    """``process.communicate()``, then reap it with ``wait4`` for its own resource usage."""
    out, err = _drain(process)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return out, err, usage


def _drain(process) -> tuple[str, str]:
    """Read stdout and stderr to the end without reaping the process (``communicate`` would wait for it)."""
    chunks: dict[str, list[str]] = {"out": [], "err": []}
    reader = threading.Thread(target=lambda: chunks["err"].append(process.stderr.read()), daemon=True)
    reader.start()
    chunks["out"].append(process.stdout.read())
    reader.join()
    process.stdout.close()
    process.stderr.close()
    return "".join(chunks["out"]), "".join(chunks["err"])


def worker_seconds(output: str) -> float | None:
    """``seconds`` from the one-line JSON result a bench worker prints last."""
    try:
        return json.loads(output.strip().splitlines()[-1])["seconds"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def run_all(variants: list[Variant], runs: int, *, after_run: Callable[[Variant, list[str]], None] | None = None) -> tuple[float, float]:
    """Run every variant ``runs`` times, round robin; a failing variant is reported and not run again.

    ``after_run(variant, stdouts)`` is called after each successful run (e.g. to delete its output).
    Returns the 1-minute load average before and after.
    """
    load_before = os.getloadavg()[0]
    for run in range(runs):
        for v in variants:
            if v.skipped or v.error:
                continue
            try:
                stdouts = run_variant(v)
                if after_run is not None:
                    after_run(v, stdouts)
            except Exception as exc:  # report and continue with the other variants
                v.error = str(exc).splitlines()[0][:300]
                print(f"error in {v.name}: {exc}", file=sys.stderr)
            else:
                print(f"run {run + 1}: {v.name}: {v.walls[-1]:.2f} s", flush=True)
    return load_before, os.getloadavg()[0]


def measured(variants: list[Variant], name: str) -> Variant | None:
    """The variant called ``name`` if it ran at least once."""
    return next((v for v in variants if v.name == name and v.walls), None)


def print_speedups(variants: list[Variant], pairs: list[tuple[str, str, str]]) -> dict[str, float]:
    """For each ``(label, baseline, other)`` whose variants both ran: print ``label = N.NNx``, the median
    wall time of ``baseline`` over that of ``other`` (how many times faster ``other`` is). Returns them."""
    import statistics

    found = {}
    for label, baseline, other in pairs:
        base, faster = measured(variants, baseline), measured(variants, other)
        if base and faster:
            found[label] = statistics.median(base.walls) / statistics.median(faster.walls)
            print(f"{label} = {found[label]:.2f}x")
    return found


def write_results(path: Path | None, results: dict) -> None:
    """Write a bench's results as JSON to ``path`` (nothing when None)."""
    if path is not None:
        path.write_text(json.dumps(results, indent=2) + "\n")


def spread(variants: list[Variant]) -> float:
    """The largest ratio of slowest to fastest run of one variant."""
    return max((max(v.walls) / min(v.walls) for v in variants if v.walls), default=1.0)


def split_in_two(items: list, size: Callable[[object], int]) -> tuple[list, list]:
    """Two groups of similar total ``size``: largest first, each to the smaller group."""
    groups: tuple[list, list] = ([], [])
    sizes = [0, 0]
    for item in sorted(items, key=lambda i: -size(i)):
        smaller = 0 if sizes[0] <= sizes[1] else 1
        groups[smaller].append(item)
        sizes[smaller] += size(item)
    return groups


# -- set-up --------------------------------------------------------------------------------------


def compile_bytecode(*scripts: Path) -> None:
    """Compile ``repair`` and the given bench modules to bytecode, as ``pip install`` does for an installed package.

    Without it every process of an editable install run with ``PYTHONDONTWRITEBYTECODE`` (as on our
    machines) compiles our modules again, some 30 ms of start-up that no installed ``repair`` pays.
    """
    import compileall

    compileall.compile_dir(str(REPO / "repair"), quiet=1)
    for script in (Path(__file__).resolve(), *scripts):
        compileall.compile_file(str(script), quiet=1)


def code_state(directory: Path = REPO / "repair") -> dict:
    """Which code is measured: the git commit, the files of ``directory`` changed since it, and a hash of
    the content of its ``.py`` files (compare two of these to know whether the code changed meanwhile)."""
    import hashlib
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO)
        return done.stdout.rstrip() if done.returncode == 0 else ""  # leading blanks are status columns

    digest = hashlib.sha256()
    for path in sorted(directory.rglob("*.py")):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    changed = [line[3:] for line in git("status", "--porcelain", "--", str(directory)).splitlines()]
    return {"commit": git("rev-parse", "--short", "HEAD").strip() or "?", "changed": changed, "hash": digest.hexdigest()[:12]}


def describe_code(state: dict) -> str:
    """``commit abc1234`` and, if any, the files changed since it (uncommitted), for a results page."""
    text = f"commit {state['commit']}"
    if state["changed"]:
        text += f" with uncommitted changes to {', '.join(f'`{name}`' for name in state['changed'])} (sources hash {state['hash']})"
    return text


def warm_page_cache(files: list[Path]) -> None:
    """Read every file once, so that the runs measure the work and not the disk."""
    for path in files:
        with open(path, "rb") as f:
            while f.read(16 << 20):
                pass


def json_document(ok_key: str | None = None) -> Callable[[list[str]], str | None]:
    """A variant check: the first command printed one JSON document (``repair ... --json``), and its
    ``ok_key`` (when given) is not false."""
    def check(stdouts: list[str]) -> str | None:
        try:
            document = json.loads(stdouts[0])
        except ValueError:
            return f"no JSON document: {stdouts[0][-300:]}"
        if ok_key is not None and not document.get(ok_key, True):
            return f"{ok_key} is false"
        return None
    return check


def repair_command(python: str = sys.executable) -> list[str]:
    """The ``repair`` CLI: the installed console script if there is one, else the same entry point via ``-c``."""
    script = Path(python).parent / "repair"
    if script.is_file():
        return [str(script)]
    return [python, "-c", "import sys; from repair.cli.app import run; sys.argv[0] = 'repair'; run()"]


def machine() -> dict:
    """CPU model, core count, Python and system."""
    import platform

    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
    }


# -- tables --------------------------------------------------------------------------------------


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
