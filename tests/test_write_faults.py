"""Every write command, stopped at random moments, leaves its output absent or complete; a rerun succeeds.

Each command runs as its own process (``python -m tests.slow_writes_cli``, the CLI with each file
write slowed down so that random moments fall inside the writing as often as inside the reading)
with its own temporary directory (``TMPDIR``), and is

* killed (SIGKILL, the whole process group) after seeded random delays: the target is then absent or
  complete (its commit file and exactly the files of an undisturbed run), nothing but the target and
  its staging directory (``<target>.tmp-<host>-<pid>-<random>``) is left beside it, and a rerun
  succeeds, deletes the dead run's staging and scratch directories, and writes the same files;
* stopped by SIGINT (sent to the process group, as a terminal does) or SIGTERM (to the process) once
  it has begun: it exits with 128 + the signal number and says so, leaves no scratch directory, no
  staging directory and no target (or a complete one, when the signal came after publishing), and a
  rerun succeeds.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from tests.write_commands import COMMANDS, beside_target, files_below, run_cli, start_cli

KILLS_PER_COMMAND = 3


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_killed_at_random_moments_the_target_is_absent_or_complete_and_a_rerun_succeeds(command, write_inputs, write_references, tmp_path):
    expected, duration = write_references[command.name]
    draw = random.Random(f"kill-{command.name}")
    for attempt in range(KILLS_PER_COMMAND):
        parent, scratch = tmp_path / f"kill{attempt}", tmp_path / f"tmp{attempt}"
        parent.mkdir()
        target = parent / "out"
        process = start_cli(command.args(write_inputs, target), scratch)
        delay = draw.uniform(0.15, 0.95) * duration
        time.sleep(delay)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
        if target.exists():
            assert files_below(target) == expected, f"killed after {delay:.2f} s: a partial target"
            assert (target / command.commit_file).is_file()
        assert not beside_target(parent, target), f"killed after {delay:.2f} s: files outside the staging area"
        if target.exists():
            continue  # complete before the kill: nothing to redo
        code, output, _ = run_cli(command.args(write_inputs, target), scratch)
        assert code == 0, f"the rerun after a kill at {delay:.2f} s failed: {output}"
        assert files_below(target) == expected
        assert [p.name for p in parent.iterdir()] == ["out"], "the dead run's staging directory is still there"
        assert not list(scratch.glob("repair-*")), "the dead run's scratch directories are still there"


def _wait_until_writing(process, *places: Path, timeout: float = 120) -> None:
    """Until the run has something below one of ``places`` (its staging directory, target or scratch
    directory): a signal before that (during Python's imports) ends it by the default action, with
    nothing written."""
    deadline = time.monotonic() + timeout
    while not any(any(p.iterdir()) for p in places if p.exists()):
        assert process.poll() is None and time.monotonic() < deadline, "the run ended before it wrote anything"
        time.sleep(0.02)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_stopped_by_a_signal_it_exits_cleanly_and_leaves_nothing_partial(command, signum, write_inputs, write_references, tmp_path):
    expected, _ = write_references[command.name]
    parent, scratch = tmp_path / "parent", tmp_path / "tmp"
    parent.mkdir()
    target = parent / "out"
    process = start_cli(command.args(write_inputs, target), scratch)
    _wait_until_writing(process, parent, scratch)
    time.sleep(random.Random(f"{command.name}-{signum}").uniform(0.05, 0.5))
    if signum == signal.SIGINT:
        os.killpg(process.pid, signum)  # Ctrl-C reaches every process of the foreground group
    else:
        os.kill(process.pid, signum)
    output, _ = process.communicate(timeout=120)
    if process.returncode == 0:
        pytest.fail(f"the run ended before the signal; make REPAIR_TEST_WRITE_DELAY longer: {output}")
    assert process.returncode == 128 + signum, output
    assert f"stopped by {signal.Signals(signum).name}" in output and "Traceback" not in output, output
    assert not list(scratch.glob("repair-*")), "scratch directories left behind"
    if target.exists():  # stopped after publishing (rebuild-manifest verifies its output afterwards)
        assert files_below(target) == expected and [p.name for p in parent.iterdir()] == ["out"]
        return
    assert list(parent.iterdir()) == [], "staging left behind"
    code, output, _ = run_cli(command.args(write_inputs, target), scratch)
    assert code == 0, output
    assert files_below(target) == expected
