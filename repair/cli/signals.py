"""How the ``repair`` command stops on SIGINT (Ctrl-C) and SIGTERM: exit code 128 + the signal number,
one line on stderr, no traceback, nothing published.

Two kinds of handler, one for each part of a run:

* before the command has begun (Python's imports) and after it has ended (interpreter exit), there
  is nothing to clean up: :func:`exit_at_once_on_signals` prints the line and ends the process;
* while a command runs, :func:`stop_cleanly_on_signals` raises :class:`Stopped` in the main thread,
  which unwinds every ``with`` block (a staging directory is deleted, pool workers and Spark are
  stopped). A second signal while that clean-up runs is ignored: interrupting the clean-up would
  leave what it was removing.

Nothing here imports more than the standard library: the console script installs the first kind
before it imports typer and the commands.
"""

from __future__ import annotations

import os
import signal
import threading

#: The signals the command stops on.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(BaseException):
    """Raised in the main thread on SIGINT or SIGTERM. A BaseException, so that no ``except Exception``
    swallows it and click does not turn it into "Aborted!" with exit code 1: it unwinds every ``with``
    block and ends the run with exit code 128 + the signal number, as a shell reports a signal."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def stopped_message(signum: int) -> str:
    return f"stopped by {signal.Signals(signum).name}; an output not yet complete was not published"


def exit_at_once_on_signals() -> None:
    """Handlers that write the one line and end the process at once (main thread only): for the
    moments when nothing is being written, so there is nothing to clean up."""
    if threading.current_thread() is not threading.main_thread():
        return

    def exit_now(signum, frame):
        os.write(2, f"error: {stopped_message(signum)}\n".encode())
        os._exit(128 + signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, exit_now)


def stop_cleanly_on_signals() -> dict[int, object]:
    """Handlers raising :class:`Stopped` once (main thread only); returns the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    stopping = []

    def stop(signum, frame):
        if stopping:  # the clean-up of the first signal is running: let it finish
            return
        stopping.append(signum)
        raise Stopped(signum)

    return {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
