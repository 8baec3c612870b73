"""Runs the fuzz targets with atheris (coverage-guided, libFuzzer), each for a fixed time.

    nice -n 10 python -m fuzz.run --seconds 20                 # every target, 20 s each
    nice -n 10 python -m fuzz.run --seconds 600 sst manifest   # longer runs of some targets
    nice -n 10 python -m fuzz.run --seconds 15 --jobs 2        # two targets at a time (one core each)

Each target runs in its own process (libFuzzer runs once per process) over a copy of the seed corpus
(:mod:`fuzz.corpus`) in a temporary directory; inputs that add coverage are kept there. A crash
(any exception but :class:`repair.errors.RepairError`, a MemoryError past the address-space limit,
an input running longer than ``--timeout``) is saved to ``--crashes`` (``fuzz/crashes``) and the run
fails; turn each into a file under ``tests/data/fuzz_regressions/<target>/`` so the regression test
holds it. The address space of a run is limited (``--memory-mb``), so a length taken from the input
and allocated unchecked fails the run. The summary line per target gives the executions, the corpus
size and the crashes; ``--json`` writes them for docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _child(target: str, seconds: int, corpus: Path, crashes: Path, memory_mb: int, timeout: int, seed: int) -> None:
    """In the child process: instrument the project's decoders and hand ``target`` to libFuzzer."""
    import atheris

    limit = memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    with atheris.instrument_imports(include=["repair"]):
        from fuzz import targets
    target_fn = targets.TARGETS[target]
    typed = targets.RepairError

    def one_input(data: bytes) -> None:
        try:
            target_fn(data)
        except typed:
            pass

    crashes.mkdir(parents=True, exist_ok=True)
    argv = [sys.argv[0], str(corpus), f"-max_total_time={seconds}", f"-timeout={timeout}", f"-seed={seed}",
            f"-artifact_prefix={crashes}/{target}-", "-print_final_stats=1", "-max_len=262144", "-rss_limit_mb=0"]
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


def run_target(target: str, seconds: int, crashes: Path, memory_mb: int, timeout: int, seed: int) -> dict:
    """Runs ``target`` in a child process; returns ``{target, execs, corpus, crashes, ok}``."""
    from fuzz.corpus import write_corpus

    with tempfile.TemporaryDirectory(prefix=f"fuzz-{target}-") as work:
        corpus = write_corpus(Path(work))[target]
        seeds = len(list(corpus.iterdir()))
        before = set(crashes.glob(f"{target}-*")) if crashes.exists() else set()
        command = [sys.executable, "-m", "fuzz.run", "--child", target, "--seconds", str(seconds), "--corpus", str(corpus),
                   "--crashes", str(crashes), "--memory-mb", str(memory_mb), "--timeout", str(timeout), "--seed", str(seed)]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=seconds * 3 + 120)
        log = done.stdout + done.stderr
        execs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log)
        new = sorted(set(crashes.glob(f"{target}-*")) - before) if crashes.exists() else []
        return {
            "target": target,
            "seconds": seconds,
            "execs": int(execs[-1]) if execs else None,
            "seeds": seeds,
            "corpus": len(list(corpus.iterdir())),
            "crashes": [str(p.relative_to(REPO) if p.is_relative_to(REPO) else p) for p in new],
            "ok": done.returncode == 0 and not new,
            "log_tail": "" if done.returncode == 0 else log[-4000:],
        }


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 2 and sys.argv[1] == "--child":  # before the decoders are imported
        args = dict(zip(sys.argv[3::2], sys.argv[4::2]))
        _child(sys.argv[2], int(args["--seconds"]), Path(args["--corpus"]), Path(args["--crashes"]),
               int(args["--memory-mb"]), int(args["--timeout"]), int(args["--seed"]))
        return 0
    from fuzz.targets import TARGETS

    parser = argparse.ArgumentParser(prog="python -m fuzz.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", choices=[[], *TARGETS], help="targets to run (all by default)")
    parser.add_argument("--seconds", type=int, default=20, help="time per target")
    parser.add_argument("--crashes", type=Path, default=REPO / "fuzz" / "crashes")
    parser.add_argument("--memory-mb", type=int, default=2048, help="address-space limit of a run")
    parser.add_argument("--timeout", type=int, default=10, help="seconds one input may take")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the summary here")
    parser.add_argument("--jobs", type=int, default=1,
                        help="targets run at a time, each in its own process on its own core (libFuzzer uses one)")
    args = parser.parse_args(argv)
    results = []

    def run(target: str) -> dict:
        return run_target(target, args.seconds, args.crashes, args.memory_mb, args.timeout, args.seed)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:  # threads that each wait for one child
        for result in pool.map(run, args.targets or list(TARGETS)):  # in target order
            results.append(result)
            print(f"{result['target']:20} {result['execs']} execs in {args.seconds} s, corpus {result['seeds']} -> "
                  f"{result['corpus']}, crashes: {result['crashes'] or 'none'}", flush=True)
            if result["log_tail"]:
                print(result["log_tail"], file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
