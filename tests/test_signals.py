"""The CLI's signal handlers (repair/cli/signals.py) in this process; the whole runs, signalled at each
phase, are in tests/test_write_faults.py."""

from __future__ import annotations

import gc
import os
import signal
import time

import pytest

from repair.cli.signals import Stopped, stop_cleanly_on_signals


class _SignalledWhileCollected:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs inside this finalizer
        sum(range(1000))


def test_a_signal_inside_a_finalizer_still_stops_the_run():
    """Python prints an exception raised in a finalizer as "ignored" and goes on: the run completed and
    published its output with exit code 0. The stop is raised again outside it."""
    restore = stop_cleanly_on_signals()
    try:
        with pytest.raises(Stopped) as stopped:
            _SignalledWhileCollected()
            gc.collect()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # the run going on; the stop must come
                time.sleep(0.01)
        assert stopped.value.signum == signal.SIGTERM
    finally:
        restore()


def test_a_second_signal_does_not_interrupt_the_clean_up_of_the_first():
    restore = stop_cleanly_on_signals()
    try:
        with pytest.raises(Stopped):
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
            finally:  # the clean-up: a second Ctrl-C is ignored
                os.kill(os.getpid(), signal.SIGINT)
                sum(range(1000))
    finally:
        restore()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
