"""One output layer for every command: a rich table for people, JSON for scripts."""

from __future__ import annotations

import json
import sys
from typing import Any

from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

# Piped output is not cut at 80 columns: tables keep one line per row for grep and less.
_stdout = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
_stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def stdout() -> Console:
    return _stdout


@contextmanager
def progress_bar(description: str):
    """Yields ``on_progress(done, total)`` for long work; draws a bar on stderr only for a terminal."""
    if not _stderr.is_terminal:
        yield None
        return
    with Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
        console=_stderr, transient=True,
    ) as progress:
        task = progress.add_task(description, total=None)

        def on_progress(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield on_progress


def print_error(message: str) -> None:
    """A one-line error on stderr (no traceback)."""
    _stderr.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)


def print_json(document: Any) -> None:
    """A JSON document on stdout, exactly as documented in docs/ for each command."""
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False, default=_json_default))
    sys.stdout.write("\n")
    sys.stdout.flush()


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if hasattr(value, "to_json"):
        return value.to_json()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
