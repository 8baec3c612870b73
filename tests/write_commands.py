"""The write commands of the toolkit, as the fault tests run them: arguments, commit files, and
session fixtures with their inputs (an export, a RocksDB directory without CURRENT) and undisturbed runs.

Used by tests/io/test_write_faults.py (kills and signals) and tests/io/test_disk_full.py (ENOSPC).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tests._flink_state_files import FIXTURES, REPO

CHECKPOINT = next((FIXTURES / "flink-1.20-default" / "checkpoints").glob("*/chk-5"))
#: A Flink 1.20 checkpoint of Kryo values that ``upgrade`` rewrites for Flink 2.x (smaller than CHECKPOINT).
UPGRADE_SOURCE = next((FIXTURES / "flink-1.20-upgrade" / "checkpoints").glob("*/chk-5"))


#: How a command that runs tasks can run them: the arguments selecting each way.
MODES = {"in-process": ["--workers", "1"], "workers": ["--workers", "2"], "spark": ["--master", "local[2]"]}


@dataclass(frozen=True)
class Command:
    name: str
    args: Callable[[Path, Path], list[str]]  # (inputs directory, target) -> CLI arguments
    commit_file: str | None  # relative to the target: present only when the output is complete (None: writes nothing;
    # "": the target is a single file, written atomically)
    needs: str | None = None  # an input made first: "export" or "rocksdb"
    runs_tasks: bool = False  # takes --workers and --master

    def args_in(self, mode: str, inputs: Path, target: Path) -> list[str]:
        """The arguments running the command's tasks the ``MODES`` way (its own way if it runs none)."""
        args = self.args(inputs, target)
        if not self.runs_tasks:
            assert mode == "in-process", f"{self.name} runs no tasks"
            return args
        if "--workers" in args:
            del args[args.index("--workers"):args.index("--workers") + 2]
        return args + MODES[mode]


COMMANDS = [
    Command("relocate", lambda i, out: ["relocate", str(CHECKPOINT), "--out", str(out), "--copy"], "chk-5/_metadata"),
    Command("rebuild-manifest", lambda i, out: ["rebuild-manifest", str(CHECKPOINT), "--out", str(out), "--copy"], "chk-5/_metadata"),
    Command("rebuild-db", lambda i, out: ["rebuild-manifest", str(i / "db"), "--out", str(out)], "CURRENT", needs="rocksdb"),
    Command("export", lambda i, out: ["export", str(CHECKPOINT), "--out", str(out), "--workers", "1"], "_export.json", runs_tasks=True),
    Command("write-savepoint", lambda i, out: ["write-savepoint", str(i / "export"), "--out", str(out)], "_metadata", needs="export", runs_tasks=True),
    Command("rescale", lambda i, out: ["rescale", str(CHECKPOINT), "--out", str(out), "--max-parallelism", "256", "--workers", "1"], "_metadata", runs_tasks=True),
    Command("edit", lambda i, out: ["edit", str(CHECKPOINT), "--out", str(out), "--rename-uid", "per-type=x", "--copy"], "chk-5/_metadata"),
    Command("upgrade", lambda i, out: ["upgrade", str(UPGRADE_SOURCE), "--to", "2.1", "--out", str(out), "--workers", "1"], "_metadata", runs_tasks=True),
    Command("size-html", lambda i, out: ["size", str(CHECKPOINT), "--html", str(out)], ""),
]
#: Commands that write nothing but run tasks (in a pool, on Spark).
READING_COMMANDS = [
    Command("verify", lambda i, out: ["verify", str(CHECKPOINT)], None, runs_tasks=True),
    Command("fallback", lambda i, out: ["fallback", str(CHECKPOINT.parent)], None, runs_tasks=True),
    Command("triage", lambda i, out: ["triage", str(CHECKPOINT.parent)], None, runs_tasks=True),
]


def start_cli(args: list[str], scratch: Path, *, stderr=subprocess.STDOUT, **extra: str) -> subprocess.Popen:
    """The CLI with announced phases (tests/slow_writes_cli.py; its writes not slowed down) in a session
    of its own, ``scratch`` its ``TMPDIR``; ``extra``: more environment."""
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(scratch), "REPAIR_TEST_WRITE_DELAY": "0", **extra}
    return subprocess.Popen([sys.executable, "-m", "tests.slow_writes_cli", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True)


def files_below(directory: Path) -> set[str]:
    """The files of an output directory (``{"."}`` for an output that is one file)."""
    if directory.is_file():
        return {"."}
    return {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()}


def remove_output(path: Path) -> None:
    """An output directory, or an output that is one file, removed."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()


def beside_target(parent: Path, target: Path) -> set[str]:
    """Names beside the target other than the target itself and its staging directories."""
    return {p.name for p in parent.iterdir() if p.name != target.name and not p.name.startswith(target.name + ".tmp-")}


def run_in_process(args: list[str]) -> None:
    """An undisturbed run of the CLI in this process (its ``main``): the same files as a CLI process
    writes, without starting one."""
    from repair.cli.app import main

    assert main(args) == 0, args


@pytest.fixture(scope="session")
def write_inputs(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("inputs")
    run_in_process(["export", str(CHECKPOINT), "--out", str(directory / "export"), "--workers", "1"])
    from tests.rocksdb_testlib import make_rocksdict_db

    make_rocksdict_db(directory / "db", keys=300)
    (directory / "db" / "CURRENT").unlink()  # what rebuild-manifest of a bare RocksDB directory is for
    return directory


@pytest.fixture(scope="session")
def write_outputs(write_inputs, tmp_path_factory) -> dict[str, set[str]]:
    """Per command: the files of an undisturbed run."""
    out = {}
    for command in COMMANDS:
        base = tmp_path_factory.mktemp(f"out-{command.name}")
        run_in_process(command.args(write_inputs, base / "out"))
        out[command.name] = files_below(base / "out")
    return out
