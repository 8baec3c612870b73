"""``python -m tests.slow_writes_cli ARGS...``: the ``repair`` CLI with every file write slowed down.

``REPAIR_TEST_WRITE_DELAY`` seconds (default 0.1) are spent before and after each file an output
writes, so that a signal sent at a random moment of a run lands inside the writing of its output as
often as in its reading: the signal and kill tests of tests/test_write_faults.py use it. The library's
code is otherwise unchanged.
"""

from __future__ import annotations

import os
import time

from repair.io import storage

_delay = float(os.environ.get("REPAIR_TEST_WRITE_DELAY", "0.1"))
_write_file = storage.Storage._write_file


def _slow_write_file(location, fs, fs_path, data, uri, root=None):
    time.sleep(_delay)
    written = _write_file(location, fs, fs_path, data, uri, root)
    time.sleep(_delay)
    return written


storage.Storage._write_file = staticmethod(_slow_write_file)

if __name__ == "__main__":
    from repair.cli.app import run

    run()
