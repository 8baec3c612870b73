#!/usr/bin/env python3
"""Start-up cost of the short commands: CPU seconds of ``repair verify|inspect|fallback --json`` on a small
fixture checkpoint, and what the imports of one run cost.

Usage::

    python bench/startup.py                       # fixtures/flink-1.20-default, 5 runs per command
    python bench/startup.py --runs 9 --root DIR   # another job root
    python bench/startup.py --imports 15          # the 15 costliest imports (default 12)
    python bench/startup.py --compare OLD         # also the code of checkout OLD (its repair/), runs alternated
    python bench/startup.py --phases              # where each command's CPU goes: start-up, the operation, the rest

Every run is its own process, ``python -m repair.cli COMMAND ROOT --json``, timed in CPU seconds (user +
system, from ``resource.getrusage(RUSAGE_CHILDREN)``), not wall time: the machine is shared, and CPU
seconds move far less with the load than wall seconds. The median of ``--runs`` counts; the load average
is printed beside it. Bytecode is compiled first and the runs may write it (``PYTHONDONTWRITEBYTECODE``
is removed from their environment), as in an installed package: compiling the sources on every run would
be a cost no user pays.

``--phases`` splits each command's CPU seconds (the minimum over ``--runs``, each phase on its own) at
three points of one run: the interpreter started (``site`` included), the CLI imported (``repair.cli.app``
and what it imports), the operation called (arguments parsed, its modules imported); the operation
itself (``verify()``, ``inspect()``, ``fallback()``: reading and planning, then the work of the
checkpoint) and what follows it (the JSON document, the exit) are the last two. Start-up is the sum of
the first three. Only the command's own process counts: on a checkpoint of more than 64 MB, verify hands
its files to a process pool whose workers are not counted.

``python -c pass`` is the interpreter's own share. The import table comes from one run with
``-X importtime`` (wall microseconds of that run, self time summed per top-level package, so it says
where the time goes rather than exactly how much).
"""

from __future__ import annotations

import argparse
import collections
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_ROOT = REPO / "fixtures" / "flink-1.20-default" / "checkpoints" / "6ec13444f9e820ae37839598353ab359"
COMMANDS = ("verify", "inspect", "fallback")
#: The operation each command calls: (its module, its function).
OPERATIONS = {"verify": ("repair.ops.verify.engine", "verify"), "inspect": ("repair.ops.inspect", "inspect"),
              "fallback": ("repair.ops.fallback", "fallback"), "size": ("repair.ops.size", "size")}

#: Run in the timed process: CPU seconds at the points named in the module docstring, printed as JSON on
#: stderr's last line. The operation is wrapped when the command imports its module (``from M import F``).
_PHASES = """
import resource
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
marks = {"interpreter": cpu()}
import builtins, contextlib, io, json, sys
module_name, function_name = sys.argv[1], sys.argv[2]
import_ = builtins.__import__
def timing_import(name, globals=None, locals=None, fromlist=(), level=0):
    module = import_(name, globals, locals, fromlist, level)
    if name == module_name and fromlist and function_name in fromlist and "operation" not in marks:
        function = getattr(module, function_name)
        def timed(*args, **kwargs):
            marks.setdefault("operation", cpu())
            try:
                return function(*args, **kwargs)
            finally:
                marks.setdefault("after operation", cpu())
        setattr(module, function_name, timed)
    return module
from repair.cli.app import main
marks["cli imported"] = cpu()
builtins.__import__ = timing_import
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[3:])
marks["end"] = cpu()
print(json.dumps(marks), file=sys.stderr)
"""
#: The phases printed: (label, the mark it starts at, the mark it ends at).
PHASES = (("interpreter", None, "interpreter"), ("CLI imports", "interpreter", "cli imported"),
          ("parse + op imports", "cli imported", "operation"), ("operation", "operation", "after operation"),
          ("output", "after operation", "end"))


def _environment(checkout: Path) -> dict[str, str]:
    """The environment of a run of ``checkout``'s code: its directory first on the path, bytecode written.
    The run's working directory is ``checkout`` too: ``python -m`` and ``-c`` put the working directory
    before ``PYTHONPATH`` (before this, ``--compare`` timed the working directory's code on both sides)."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(checkout), env.get("PYTHONPATH")]))
    return env


def cpu_seconds(argv: list[str], checkout: Path = REPO) -> float:
    """CPU seconds (user + system) of one run of ``argv``; its output is discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=_environment(checkout), cwd=checkout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median_cpu(argv: list[str], runs: int, checkouts: list[Path]) -> list[float]:
    """The median CPU seconds of ``argv`` with each checkout's code, their runs alternated (the load drifts)."""
    samples: list[list[float]] = [[] for _ in checkouts]
    for _ in range(runs):
        for checkout, times in zip(checkouts, samples):
            times.append(cpu_seconds(argv, checkout))
    return [statistics.median(times) for times in samples]


def import_costs(argv: list[str]) -> list[tuple[str, int]]:
    """Self time (microseconds) of one run's imports, summed per top-level package, costliest first."""
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], env=_environment(REPO), cwd=REPO, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)
    totals: collections.Counter[str] = collections.Counter()
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line[len("import time:"):].split("|")
        name = name.strip()
        package = ".".join(name.split(".")[:2]) if name.startswith("repair.") else name.split(".")[0]
        totals[package] += int(self_us)
    return totals.most_common()


def phase_seconds(python: str, command: str, root: Path, runs: int) -> dict[str, float]:
    """The minimum over ``runs`` of each phase's CPU seconds of ``repair COMMAND ROOT --json``."""
    module, function = OPERATIONS[command]
    samples: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(runs):
        done = subprocess.run([python, "-c", _PHASES, module, function, command, str(root), "--json"], env=_environment(REPO),
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
        marks = json.loads(done.stderr.strip().splitlines()[-1])
        for label, start, end in PHASES:
            samples[label].append(marks[end] - (marks[start] if start else 0.0))
    return {label: min(values) for label, values in samples.items()}


def print_phases(python: str, root: Path, runs: int) -> None:
    labels = [label for label, _, _ in PHASES]
    print(f"\nCPU s per phase, minimum of {runs} runs each (load {' '.join(f'{x:.1f}' for x in os.getloadavg())})")
    print(f"{'command':<26} " + " ".join(f"{label:>18}" for label in labels) + f" {'start-up':>10}")
    for command in COMMANDS:
        seconds = phase_seconds(python, command, root, runs)
        start_up = sum(seconds[label] for label in labels[:3])
        print(f"{'repair ' + command + ' --json':<26} " + " ".join(f"{seconds[label]:>18.3f}" for label in labels) + f" {start_up:>10.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="job checkpoint root to run the commands on")
    parser.add_argument("--runs", type=int, default=5, help="runs per command (the median counts)")
    parser.add_argument("--imports", type=int, default=12, help="how many import rows to print")
    parser.add_argument("--compare", type=Path, metavar="OLD", help="another checkout whose repair/ to time alongside")
    parser.add_argument("--phases", action="store_true", help="only the CPU seconds of each phase of a run (this checkout)")
    args = parser.parse_args()
    if args.phases:
        compileall.compile_dir(str(REPO / "repair"), quiet=1)
        print_phases(sys.executable, args.root, args.runs)
        return 0

    checkouts = [REPO] + ([args.compare.resolve()] if args.compare else [])
    for checkout in checkouts:
        compileall.compile_dir(str(checkout / "repair"), quiet=1)
    python = sys.executable
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    header = f"CPU s, median of {args.runs}"
    columns = [header] + ([f"{args.compare.name}: {header}", "this / old"] if args.compare else [])
    print(f"{'command':<26} " + " ".join(f"{column:>26}" for column in columns))
    for label, argv in [("python -c pass", [python, "-c", "pass"])] + [
        (f"repair {command} --json", [python, "-m", "repair.cli", command, str(args.root), "--json"]) for command in COMMANDS
    ]:
        medians = median_cpu(argv, args.runs, checkouts)
        cells = [f"{median:.3f}" for median in medians] + ([f"{medians[0] / medians[1]:.2f}x"] if args.compare else [])
        print(f"{label:<26} " + " ".join(f"{cell:>26}" for cell in cells))
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for command in COMMANDS:
        costs = import_costs([python, "-m", "repair.cli", command, str(args.root), "--json"])
        total = sum(us for _, us in costs)
        print(f"\nimports of repair {command} --json: {total / 1e3:.0f} ms in all (wall, one run); costliest:")
        for package, us in costs[: args.imports]:
            print(f"  {package:<30} {us / 1e3:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
