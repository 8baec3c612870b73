"""Every write command on a full disk: a typed error (exit 2, "No space left on device"), nothing left
behind (no target, no staging directory, no scratch directory), and a rerun succeeds once there is room.

Two ways to fill the disk:

* a real one: a small tmpfs mounted for the test (needs the right to mount, as root in a container
  has; skipped otherwise), holding the output and the temporary directory (``TMPDIR``), so that both
  the output and the scratch space (rescale's export, write-savepoint's spill files) run out, at several
  amounts of free space;
* everywhere: the local write path of :mod:`repair.io.storage` given an ``open`` whose files raise
  ``ENOSPC`` after a byte budget, at several budgets (first byte, middle, near the end).
"""

from __future__ import annotations

import builtins
import errno
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from repair.cli.app import main
from repair.io import storage as st
from tests.write_commands import COMMANDS, files_below, remove_output

# -- a real full disk ---------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    """A file taking all of ``disk`` but ``leave`` bytes."""
    filler = disk / "filler"
    free = shutil.disk_usage(disk).free
    with open(filler, "wb") as out:
        out.truncate(0)
        out.write(b"\0" * max(0, free - leave))
    return filler


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_a_full_disk_fails_cleanly_and_a_rerun_succeeds(command, write_inputs, write_outputs, small_disk, monkeypatch, capsys):
    """In this process (the CLI's ``main``, as a process would run it): the disk, not the process, is
    what the test is about. The scratch space is the small disk's, as ``TMPDIR`` would make it."""
    expected = write_outputs[command.name]
    scratch = small_disk / "tmp"
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # gettempdir() reads TMPDIR once per process
    for leave in (0, 48 * 1024, 400 * 1024):
        filler = _fill(small_disk, leave)
        scratch.mkdir(exist_ok=True)
        target = small_disk / "out"
        capsys.readouterr()
        code = main(command.args(write_inputs, target))
        output = "".join(capsys.readouterr())
        if code == 0:  # it fitted: complete
            assert files_below(target) == expected
            remove_output(target)
        else:
            assert code == 2 and "No space left on device" in output and "Traceback" not in output, output
            assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "tmp"], f"{leave} bytes free: left behind"
            assert not list(scratch.iterdir()), f"{leave} bytes free: scratch left behind"
        filler.unlink()
        rerun = main(command.args(write_inputs, target))
        assert rerun == 0, "".join(capsys.readouterr())
        assert files_below(target) == expected
        remove_output(target)


# -- ENOSPC injected into the write path ----------------------------------------------------------


class _FullDisk:
    """``open`` for the storage module: files opened for writing fail with ENOSPC once ``budget`` bytes
    were written in all."""

    def __init__(self, budget: int):
        self.budget = budget
        self.failed = False

    def __call__(self, path, mode="r", *args, **kwargs):
        file = builtins.open(path, mode, *args, **kwargs)
        if "w" not in mode and "x" not in mode and "a" not in mode:
            return file
        disk = self

        class Limited:
            def __getattr__(self, name):
                return getattr(file, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc_info):
                file.close()

            def write(self, data):
                if len(data) > disk.budget:
                    disk.failed = True
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
                disk.budget -= len(data)
                return file.write(data)

        return Limited()


@pytest.mark.parametrize("budget", [0, 64 * 1024, 500 * 1024])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_enospc_in_the_write_path_leaves_nothing_and_a_rerun_succeeds(command, budget, write_inputs, write_outputs, tmp_path,
                                                                       monkeypatch, capsys):
    expected = write_outputs[command.name]
    target = tmp_path / "out"
    disk = _FullDisk(budget)
    monkeypatch.setattr(st, "open", disk, raising=False)
    code = main(command.args(write_inputs, target))
    monkeypatch.delattr(st, "open")
    output = capsys.readouterr()
    if not disk.failed:
        assert code == 0 and files_below(target) == expected
        return
    assert code == 2 and "No space left on device" in output.err, output
    assert [p.name for p in tmp_path.iterdir()] == [], "partial output or staging left behind"
    assert main(command.args(write_inputs, target)) == 0
    assert files_below(target) == expected
