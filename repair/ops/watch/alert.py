"""``repair watch --on-bad CMD``: a command run for each bad checkpoint, its verdict as JSON on stdin.

``CMD`` is split as a shell splits words (:func:`shlex.split`) and run without a shell, so nothing in a
checkpoint's findings (paths, messages) is ever interpreted by one. What happened is returned, never
raised: a failing alert command must not stop the watch.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from typing import Any

#: How long the command may run before it is killed.
TIMEOUT_SECONDS = 60.0


def on_bad_argv(command: str) -> list[str]:
    """``command`` as the argv it runs; ValueError for an empty one or unbalanced quotes."""
    argv = shlex.split(command)
    if not argv:
        raise ValueError("the --on-bad command is empty")
    return argv


def run_on_bad(command: str, document: dict[str, Any], timeout: float = TIMEOUT_SECONDS) -> dict[str, Any]:
    """Run ``command`` with ``document`` as JSON on its standard input; ``{"argv", "exit_code", "error"}``."""
    argv = on_bad_argv(command)
    try:
        done = subprocess.run(argv, input=json.dumps(document).encode(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"argv": argv, "exit_code": None, "error": f"killed after {timeout:g} s"}
    except OSError as error:
        return {"argv": argv, "exit_code": None, "error": error.strerror or str(error)}
    error = done.stderr.decode(errors="replace").strip().splitlines()[-1:] if done.returncode else []
    return {"argv": argv, "exit_code": done.returncode, "error": error[0] if error else None}
