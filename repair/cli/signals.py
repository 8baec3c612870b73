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

import _thread
import os
import signal
import sys
import threading
import time
from typing import Callable

#: The signals the command stops on.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: The exit codes of a command stopped by one of them.
STOPPED_CODES = frozenset(128 + signum for signum in STOP_SIGNALS)
#: How long after a stop was swallowed by a finalizer it is raised again (a finalizer returns in far
#: less; one that swallows it again has it raised again).
AGAIN_AFTER_SECONDS = 0.02


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


def stop_cleanly_on_signals() -> Callable[[], None]:
    """Handlers raising :class:`Stopped` once (main thread only); returns what puts back the previous.

    A handler runs between any two bytecodes of the main thread, also inside a finalizer (``__del__``,
    a weakref callback), where Python prints an exception as "ignored" and goes on: the run would
    complete and publish its output. So :data:`sys.unraisablehook` has such a :class:`Stopped` raised
    again, where it unwinds the run."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    stopping = []

    def stop(signum, frame):
        if stopping:  # the clean-up of the first signal is running: let it finish
            return
        stopping.append(signum)
        raise Stopped(signum)

    def raise_again(unraisable):
        if not isinstance(unraisable.exc_value, Stopped):
            previous_hook(unraisable)
            return
        signum = unraisable.exc_value.signum

        def interrupt() -> None:  # from another thread, once the main thread has left this hook and the
            time.sleep(AGAIN_AFTER_SECONDS)  # finalizer (raised in either, it would be ignored again)
            stopping.clear()
            _thread.interrupt_main(signum)

        threading.Thread(target=interrupt, name="repair-stop-again", daemon=True).start()

    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    previous_hook, sys.unraisablehook = sys.unraisablehook, raise_again
    stop_relaying = _relay_to_the_main_thread()

    def restore() -> None:
        stop_relaying()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sys.unraisablehook = previous_hook

    return restore


#: The signal that wakes the main thread (its default action is to ignore it: a stray one is harmless).
WAKE_SIGNAL = signal.SIGURG


def _relay_to_the_main_thread() -> Callable[[], None]:
    """Makes a stop signal interrupt the main thread whichever thread the kernel delivered it to.

    Python runs handlers in the main thread only, between bytecodes: a signal the kernel gives to
    another thread (PySpark's and Py4J's servers, a pool's manager) only marks the handler as due, and a
    main thread blocked in a system call (waiting for Spark's answer on a socket, for a task on a lock)
    runs it when that call returns, seconds or minutes later. Python writes each signal's number to
    its wakeup file descriptor: a thread reading it sends :data:`WAKE_SIGNAL` to the main thread, whose
    blocked call then fails with EINTR, and Python runs the due handler. Returns what undoes it."""
    if not hasattr(signal, "pthread_kill") or not hasattr(signal, "pthread_sigmask"):
        return lambda: None
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    main = threading.main_thread().ident
    previous_wake = signal.signal(WAKE_SIGNAL, lambda signum, frame: None)  # a handler: the call is interrupted
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    wanted = {int(signum) for signum in STOP_SIGNALS}

    def relay() -> None:
        while True:
            try:
                numbers = os.read(read_end, 64)
            except OSError:
                return
            if not numbers:  # the write end closed: undone
                os.close(read_end)
                return
            if wanted.intersection(numbers):
                signal.pthread_kill(main, WAKE_SIGNAL)

    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # the relay never takes one itself
    try:
        threading.Thread(target=relay, name="repair-signal-relay", daemon=True).start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def undo() -> None:
        signal.set_wakeup_fd(previous_fd)
        os.close(write_end)
        signal.signal(WAKE_SIGNAL, previous_wake)

    return undo
