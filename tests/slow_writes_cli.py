"""``python -m tests.slow_writes_cli ARGS...``: the ``repair`` CLI with every file write slowed down, and
with announced phases at which a test can have a signal land.

``REPAIR_TEST_WRITE_DELAY`` seconds (default 0.1) are spent before and after each file an output
writes, so that a signal sent at a random moment of a run lands inside the writing of its output as
often as in its reading: tests/io/test_s3_write_faults.py's kill test uses it.

``REPAIR_TEST_SIGNAL_AT=PHASE:N:SIGNAL`` (with ``REPAIR_TEST_EVENTS``, a directory) sends ``SIGNAL``
to the run when phase ``PHASE`` is reached for the ``N``-th time, counted over all of the run's
processes (pool workers and Spark's Python workers too), as a terminal (SIGINT: to the process group)
or ``kill`` (SIGTERM: to the process; SIGKILL: to the process group) would. The signal lands at a known point of the run whatever
the machine's speed. The phases:

* ``import``: the entry point has begun importing the commands (typer, rich, ...);
* ``jvm``: Spark's JVM was just started (PySpark waits for it to listen);
* ``task``: a task of :func:`repair.ops.runner.run_tasks` begins (in whichever process runs it);
  ``spark-task`` too when it runs on Spark;
* ``write``: a file of an output is about to be written; ``written``: it just was (an output that is one
  file: under its temporary name, not yet renamed into place);
* ``publish`` / ``published``: an output directory is about to be renamed into place / just was;
* ``exit``: the command has returned, the interpreter is about to exit.

When the signal is sent, ``fired`` (the phase and the time) and ``processes`` (the pids of the run's descendant
processes then, one a line) are written into ``REPAIR_TEST_EVENTS``: the test checks that the phase
was reached and that none of those processes outlives the run. The library's code is otherwise
unchanged.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import time

_delay = float(os.environ.get("REPAIR_TEST_WRITE_DELAY", "0.1"))
_events = os.environ.get("REPAIR_TEST_EVENTS")
_phase, _nth, _signal_name = (os.environ.get("REPAIR_TEST_SIGNAL_AT") or "::").split(":")
#: The run's main process (the one the test started), named in the events directory for the workers.
RUN_PID_FILE = "run.pid"


def announce(phase: str) -> None:
    """Counts one more ``phase`` over all of the run's processes (in ``count-PHASE``, a dot each);
    sends the signal at the chosen one."""
    if not _events:
        return
    with open(os.path.join(_events, f"count-{phase}"), "a+") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        count = len(counter.read()) + 1
        counter.write(".")
        counter.flush()
        if phase != _phase or count != int(_nth):
            return
        with open(os.path.join(_events, RUN_PID_FILE)) as file:
            run_pid = int(file.read())
        with open(os.path.join(_events, "processes"), "w") as file:
            file.write("".join(f"{pid}\n" for pid in descendants(run_pid)))
        with open(os.path.join(_events, "fired"), "w") as file:
            file.write(f"{phase} {time.time()}")
        signum = signal.Signals[_signal_name]
        if signum in (signal.SIGINT, signal.SIGKILL):  # Ctrl-C: the terminal's foreground process group;
            # SIGKILL: every process of the run at once, so that none of them can clean up after the others
            os.killpg(os.getpgid(run_pid), signum)
        else:
            os.kill(run_pid, signum)


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as file:
                text = file.read()
        except (OSError, ValueError):
            continue
        children.setdefault(int(text[text.rindex(")") + 2:].split()[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class _AnnounceImport:
    """A meta path finder announcing ``import`` when the entry point imports the commands' module."""

    def find_spec(self, name, path=None, target=None):
        if name == "repair.cli.app":
            announce("import")
        return None


class _Announced:
    """A task function announcing ``phase`` first (picklable: pool workers and Spark run it)."""

    def __init__(self, func, phase: str = "task"):
        self.func, self.phase = func, phase

    def __call__(self, task):
        announce(self.phase)
        return self.func(task)


def _install() -> None:
    from repair.io import storage
    from repair.ops import runner

    write_file = storage.Storage._write_file
    rename_into_place = storage.DirectoryPublisher._rename_into_place
    run_tasks = runner.run_tasks
    run_on_spark = runner._run_on_spark
    launch_jvm = runner._launch_jvm

    def slow_write_file(location, fs, fs_path, data, uri, root=None):
        announce("write")
        time.sleep(_delay)
        written = write_file(location, fs, fs_path, data, uri, root)
        announce("written")
        time.sleep(_delay)
        return written

    def announced_rename(self):
        announce("publish")
        rename_into_place(self)
        announce("published")

    def announced_run_tasks(func, tasks, **options):
        return run_tasks(_Announced(func), tasks, **options)

    def announced_run_on_spark(func, tasks, *args, **options):
        return run_on_spark(_Announced(func, "spark-task"), tasks, *args, **options)

    def announced_launch_jvm(settings):
        from pyspark import java_gateway

        popen = java_gateway.Popen

        def announced_popen(*args, **kwargs):
            process = popen(*args, **kwargs)
            announce("jvm")
            return process

        java_gateway.Popen = announced_popen
        try:
            launch_jvm(settings)
        finally:
            java_gateway.Popen = popen

    storage.Storage._write_file = staticmethod(slow_write_file)
    storage.DirectoryPublisher._rename_into_place = announced_rename
    runner.run_tasks = announced_run_tasks
    runner._launch_jvm = announced_launch_jvm
    runner._run_on_spark = announced_run_on_spark
    for module in list(sys.modules.values()):  # the modules that imported run_tasks by name
        if getattr(module, "run_tasks", None) is run_tasks:
            module.run_tasks = announced_run_tasks


if __name__ == "__main__":
    if _events:
        with open(os.path.join(_events, RUN_PID_FILE), "w") as pid_file:
            pid_file.write(str(os.getpid()))
    import repair.ops.export.job  # noqa: F401  (the modules calling run_tasks, patched by _install)
    import repair.ops.verify.engine  # noqa: F401
    import repair.ops.write_savepoint.job  # noqa: F401
    from repair.cli import entry

    _install()
    sys.meta_path.insert(0, _AnnounceImport())  # the entry point imports repair.cli.app inside run()
    try:
        entry.run()
    finally:
        announce("exit")
