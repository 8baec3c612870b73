"""Every write command, stopped at any phase of its writing, leaves its output absent or complete; a rerun succeeds.

Each command runs as its own process (``python -m tests.slow_writes_cli``, the CLI announcing the
phases of its run) with its own temporary directory (``TMPDIR``), and is

* killed (SIGKILL, the whole process group) at announced points of its writing: before its first file,
  before a seeded random one of its other files, just before its output is renamed into place and
  just after: the target is then absent (complete, with its commit file and exactly the files of an
  undisturbed run, after the rename), nothing but the target and its staging directory
  (``<target>.tmp-<host>-<pid>-<random>``) is left beside it, and a rerun succeeds, deletes the dead
  run's staging and scratch directories, and writes the same files. Between two announced points a
  run only reads or computes: a kill there leaves what a kill at the next point leaves;
* stopped by SIGINT (sent to the process group, as a terminal does) or SIGTERM (to the process) at
  each phase of a run that tests/slow_writes_cli.py announces (the imports, Spark's JVM starting, the
  first and the last task, the first and the last file written, just before and just after the output
  is renamed into place, the interpreter's exit), in process, with a pool of two workers and on Spark
  (``local[2]``: fewer points, see :func:`_spark_points`), every command that writes or runs tasks: it exits with 128 + the signal number soon
  after the signal, says so in one line on stderr, prints no traceback, leaves no scratch directory,
  no staging directory and no target (a complete one when the signal came after publishing) and no
  process (pool workers, Spark's JVM and its Python workers). The signal lands at an announced point,
  not after a guessed time: the sweep does not depend on the machine's speed.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.write_commands import COMMANDS, READING_COMMANDS, beside_target, files_below, start_cli


def _phase_counts(events: Path) -> dict[str, int]:
    """How often each phase came in a run announcing into ``events`` (over all of its processes)."""
    return {p.name[len("count-"):]: len(p.read_text()) for p in events.glob("count-*")}


def _kill_points(counts: dict[str, int], draw: random.Random) -> list[tuple[str, int]]:
    """Where a command is killed after its first file (see the test), from an undisturbed run's phase
    counts: before one of its other files drawn at random, just before the last rename (every file
    written, the output not published) and just after it (the process goes on to verify or exit). An
    output that is one file: just after its bytes are written under its temporary name, before the rename."""
    points = [("write", draw.randint(2, counts["write"]))] if counts["write"] > 1 else []
    if "publish" not in counts:
        return points + [("written", counts["written"])]
    return points + [("publish", counts["publish"]), ("published", counts["published"])]


def _killed_then_rerun(command, inputs: Path, expected: set[str], run: Path, phase: str, n: int) -> dict[str, int]:
    """A run killed (SIGKILL, its process group) when ``phase`` comes the ``n``-th time, its leftovers
    checked, and unless it had published, a rerun into the same target: the rerun's phase counts."""
    where = f"killed at {phase} #{n}"
    parent, scratch, events, rerun_events = run / "parent", run / "tmp", run / "events", run / "rerun-events"
    parent.mkdir(parents=True)
    events.mkdir()
    target = parent / "out"
    process = start_cli(command.args(inputs, target), scratch, REPAIR_TEST_EVENTS=str(events), REPAIR_TEST_SIGNAL_AT=f"{phase}:{n}:SIGKILL")
    process.communicate(timeout=120)
    assert (events / "fired").is_file() and process.returncode == -signal.SIGKILL, f"{where}: the phase never came"
    assert not beside_target(parent, target), f"{where}: files outside the staging area"
    if phase == "published":
        assert files_below(target) == expected and (target / command.commit_file).is_file(), f"{where}: a partial target"
        return {}  # complete before the kill: nothing to redo
    assert not target.exists(), f"{where}: a target before it was published"
    rerun_events.mkdir()
    rerun = start_cli(command.args(inputs, target), scratch, REPAIR_TEST_EVENTS=str(rerun_events))
    output, _ = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, f"the rerun after being {where} failed: {output}"
    assert files_below(target) == expected
    assert [p.name for p in parent.iterdir()] == ["out"], f"{where}: the dead run's staging directory is still there"
    assert not list(scratch.glob("repair-*")), f"{where}: the dead run's scratch directories are still there"
    return _phase_counts(rerun_events)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_killed_while_writing_the_target_is_absent_or_complete_and_a_rerun_succeeds(command, write_inputs, write_outputs, tmp_path):
    """Killed before its first file; then, from the rerun's phase counts, at the points of :func:`_kill_points`."""
    counts = _killed_then_rerun(command, write_inputs, write_outputs[command.name], tmp_path / "first", "write", 1)
    for phase, n in _kill_points(counts, random.Random(f"kill-{command.name}")):
        _killed_then_rerun(command, write_inputs, write_outputs[command.name], tmp_path / f"{phase}{n}", phase, n)


#: Phases every run has, the same for every command: swept with the first command of each way of running.
COMMON_PHASES = ("import", "exit")
#: How long a run may take to end after the signal (the acceptance: 2 s; Spark's JVM gets SIGTERM and
#: 1.5 s to run its shutdown hooks before SIGKILL, so a Spark run's bound is that plus the waiting).
STOP_SECONDS = {"in-process": 2.0, "workers": 2.0, "spark": 4.0}

#: What a run on Spark prints before its work (the CLI's own line, then the JVM's start-up lines that
#: reach stderr before its log configuration is read): not about the signal.
SPARK_START_LINES = ("starting Spark (master", "WARNING: Using incubator modules", 'Setting default log level to "WARN"',
                     "To adjust logging level use sc.setLogLevel")
_BY_NAME = {c.name: c for c in COMMANDS + READING_COMMANDS}
#: (command, way of running), in the order swept; the first of each way also sweeps COMMON_PHASES.
SWEPT = (
    [("verify", "in-process"), ("export", "in-process"), ("verify", "workers"), ("export", "workers")]
    + [pytest.param(name, "in-process", marks=pytest.mark.slow)
       for name in ("fallback", "triage", "write-savepoint", "rescale", "relocate", "rebuild-manifest", "rebuild-db", "edit",
                    "size-html")]
    + [pytest.param(name, "workers", marks=pytest.mark.slow) for name in ("fallback", "triage", "write-savepoint", "rescale")]
    + [pytest.param(name, "spark", marks=pytest.mark.slow) for name in ("verify", "fallback", "triage", "export", "write-savepoint", "rescale")]
)
_FIRST_OF_MODE = {"in-process": "verify", "workers": "verify", "spark": "verify"}


def _counted_run(command, mode, inputs, tmp: Path) -> dict[str, int]:
    """How often each phase comes in an undisturbed run of the command."""
    events = tmp / "count-events"
    events.mkdir()
    process = start_cli(command.args_in(mode, inputs, tmp / "count-out"), tmp / "count-tmp", REPAIR_TEST_EVENTS=str(events))
    output, _ = process.communicate(timeout=300)
    assert process.returncode in (0, 1), output  # verify of this checkpoint finds it was moved: 1
    return _phase_counts(events)


def _points(counts: dict[str, int], common: bool) -> list[tuple[str, int]]:
    """The announced points to stop at: the first and the last time of each phase (``jvm`` and the
    common phases only with the first command of a way of running: they are the same for all; ``written``
    only for an output that is one file, written under a temporary name and renamed, not published)."""
    points = []
    written = () if "publish" in counts else ("written",)
    for phase in ("import", "jvm", "task", "write", *written, "publish", "published", "exit"):
        if phase in COMMON_PHASES + ("jvm",) and not common or phase not in counts:
            continue
        points += [(phase, n) for n in sorted({1, counts[phase]})]
    return points


def _spark_points(command, common: bool) -> list[tuple[str, int]]:
    """On Spark (a run costs seconds of JVM): the first task on Spark and the publishing of an output;
    the JVM's start and the common phases with the first command. The driver reads, writes and
    publishes as in process: those phases are swept there."""
    points = [("import", 1), ("jvm", 1)] if common else []
    points.append(("spark-task", 1))
    if command.commit_file is not None:
        points.append(("publish", 1))
    return points + ([("exit", 1)] if common else [])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as file:
            text = file.read()
    except OSError:
        return False
    return text[text.rindex(")") + 2:].split()[0] != "Z"


def _left_in_session(sid: int) -> list[int]:
    """Live processes of the run's session (the test started the run as a session's leader)."""
    left = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as file:
                text = file.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            left.append(int(entry))
    return left


@pytest.mark.parametrize(("name", "mode"), SWEPT)
def test_stopped_by_a_signal_at_any_phase_it_exits_at_once_in_one_line_and_leaves_nothing(name, mode, write_inputs, write_outputs, tmp_path, request):
    command = _BY_NAME[name]
    common = _FIRST_OF_MODE[mode] == name
    if mode == "spark":
        request.getfixturevalue("spark_class_archive")
        counts, points = {}, _spark_points(command, common)
    else:
        counts = _counted_run(command, mode, write_inputs, tmp_path)
        points = _points(counts, common)
        publishes = {"write", "publish"} if command.commit_file else {"write", "written"}  # "": one file, renamed into place
        assert ("task" in counts) >= command.runs_tasks and (command.commit_file is None or publishes <= counts.keys()), counts
    for index, (phase, n) in enumerate(points):
        signum = (signal.SIGINT, signal.SIGTERM)[index % 2]
        where = f"{signal.Signals(signum).name} at {phase} #{n}"
        run = tmp_path / f"{phase}{n}"
        parent, scratch, events = run / "parent", run / "tmp", run / "events"
        parent.mkdir(parents=True)
        events.mkdir()
        target = parent / "out"
        process = start_cli(command.args_in(mode, write_inputs, target), scratch, stderr=subprocess.PIPE,
                            REPAIR_TEST_EVENTS=str(events), REPAIR_TEST_SIGNAL_AT=f"{phase}:{n}:{signal.Signals(signum).name}")
        stdout, stderr = process.communicate(timeout=120)
        ended = time.time()
        assert (events / "fired").is_file(), f"{where}: the phase never came ({stdout}{stderr})"
        fired_phase, fired_at = (events / "fired").read_text().split()
        assert fired_phase == phase
        assert process.returncode == 128 + signum, f"{where}: exit code {process.returncode}: {stderr}"
        lines = [line for line in stderr.splitlines() if not line.startswith(SPARK_START_LINES)]
        assert lines == [f"error: stopped by {signal.Signals(signum).name}; an output not yet complete was not published"], f"{where}: {stderr}"
        assert ended - float(fired_at) < STOP_SECONDS[mode], f"{where}: ended {ended - float(fired_at):.1f} s after the signal"
        processes = [int(pid) for pid in (events / "processes").read_text().split()]
        assert not [pid for pid in processes if _alive(pid)], f"{where}: processes of the run outlive it"
        assert not _left_in_session(process.pid), f"{where}: processes of the run's session outlive it"
        assert not list(scratch.glob("repair-*")), f"{where}: scratch directories left behind"
        if command.commit_file is None:
            continue
        complete = phase == "exit" or phase == "published" and n == counts[phase]  # (rescale publishes its
        # intermediate export, in scratch space, first)
        if complete or target.exists():  # stopped after publishing (rebuild-manifest verifies its output then)
            assert command.commit_file == "" or (events / "count-published").is_file(), f"{where}: a target before it was published"
            assert files_below(target) == write_outputs[name], where
            assert [p.name for p in parent.iterdir()] == ["out"], f"{where}: staging left behind"
        else:
            assert list(parent.iterdir()) == [], f"{where}: a partial output or its staging left behind"
