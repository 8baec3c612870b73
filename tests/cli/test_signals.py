"""The CLI's signal handlers (repair/cli/signals.py) in this process; the whole runs, signalled at each
phase, are in tests/io/test_write_faults.py."""

from __future__ import annotations

import gc
import os
import signal
import threading
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
    before = signal.getsignal(signal.SIGINT)  # Python's default, or a handler an earlier test's Spark installed
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
    assert signal.getsignal(signal.SIGINT) is before  # the handler found is put back


def test_a_signal_the_kernel_gives_another_thread_interrupts_the_main_threads_wait():
    """Python runs handlers in the main thread, and a signal delivered to another thread (a pool's
    manager, PySpark's servers) does not interrupt the main thread's blocking wait: without the relay
    the stop came only when the wait ended (here: when the fallback releases the lock)."""
    lock, released = threading.Lock(), []
    lock.acquire()

    def signal_this_thread_then_release():
        _until_waiting(threading.main_thread().native_id)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # the handler is due, no wait interrupted
        time.sleep(10)
        released.append(True)
        lock.release()

    restore = stop_cleanly_on_signals()
    try:
        with pytest.raises(Stopped):
            threading.Thread(target=signal_this_thread_then_release, daemon=True).start()
            lock.acquire()  # the main thread waits (for a task's result, for Spark's answer)
        assert not released, "the stop came only when the wait ended"
    finally:
        restore()


def _until_waiting(thread_id: int) -> None:
    """Until the thread has been asleep (in the kernel: its lock's futex) for ten looks in a row."""
    asleep = 0
    while asleep < 10:
        with open(f"/proc/self/task/{thread_id}/stat") as file:
            text = file.read()
        asleep = asleep + 1 if text[text.rindex(")") + 2] == "S" else 0
        time.sleep(0.01)
