"""One output layer for every command: a rich table for people, JSON for scripts."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from repair.results import SCHEMA_VERSION

if TYPE_CHECKING:  # rich is imported on first use: `--json` runs and scripts do not pay for it
    from rich.console import Console


@lru_cache(maxsize=None)
def _console(stderr: bool) -> "Console":
    from rich.console import Console

    if stderr:
        return Console(stderr=True, highlight=False, soft_wrap=True)
    # Piped output is not cut at 80 columns: tables keep one line per row for grep and less. Markup only
    # where a line asks for it (markup=True, data escaped): names and paths are data (cli/render.py).
    return Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 160)


#: The variables with which rich treats a stream that is no terminal as one (rich.console.Console.is_terminal).
_TERMINAL_VARIABLES = ("FORCE_COLOR", "TTY_COMPATIBLE")


def _may_be_terminal(stream) -> bool:
    """False only where rich's console would surely find ``stream`` no terminal: not a TTY, and none of the
    variables that make rich treat it as one set."""
    if any(name in os.environ for name in _TERMINAL_VARIABLES):
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream: rich says no terminal too
        return False


def stdout() -> "Console":
    return _console(False)


@contextmanager
def progress_bar(description: str, *, counting: str = "bytes"):
    """Yields ``on_progress(done, total)`` for long work; draws a bar on stderr only for a terminal.
    ``counting`` is what done and total count: ``bytes`` (shown with speed) or items (``"subtasks"``)."""
    if not _may_be_terminal(sys.stderr):  # decided without importing rich (scripts and --json runs)
        yield None
        return
    stderr = _console(True)
    if not stderr.is_terminal:
        yield None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    amounts = [DownloadColumn(), TransferSpeedColumn()] if counting == "bytes" else [MofNCompleteColumn(), TextColumn(counting)]
    with Progress(
        TextColumn("{task.description}"), BarColumn(), *amounts, TimeRemainingColumn(), console=stderr, transient=True,
    ) as progress:
        task = progress.add_task(description, total=None)

        def on_progress(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield on_progress


def print_error(message: str) -> None:
    """A one-line error on stderr (no traceback)."""
    from rich.markup import escape  # a message is text: "[spark]" in it is no markup tag

    _console(True).print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)


def print_markdown(text: str) -> None:
    """Markdown on stdout: rendered on a terminal, as it is when piped (to a file, a pager, a ticket). On a
    terminal the code blocks are printed as they are, never wrapped or cropped: a command pastes as one line."""
    if not sys.stdout.isatty():
        sys.stdout.write(text)
        return
    import re

    from rich.markdown import Markdown

    console = stdout()
    # split() with one group: prose, code, prose, code, ... (a fence's info string, e.g. "bash", dropped)
    for index, part in enumerate(re.split(r"^```[^\n]*\n(.*?)^```[ \t]*$", text, flags=re.MULTILINE | re.DOTALL)):
        if index % 2:
            console.print("\n" + part.rstrip("\n") + "\n", soft_wrap=True, highlight=False, markup=False)
        elif part.strip():
            console.print(Markdown(part))


def error_document(command: str | None, error: Any) -> dict:
    """What ``--json`` prints when a command stops at a :class:`~repair.errors.RepairError` (exit 2):
    its type, message and source; where and what for a ``FormatError`` (docs/json-contracts.md#errors)."""
    where = {name: getattr(error, name) for name in ("offset", "field", "expected", "found") if getattr(error, name, None) is not None}
    return failure_document(command, _documented_type(error), error.message, error.exit_code, source=error.source, **where)


def _documented_type(error: Any) -> str:
    """The documented error type ``error`` is one of (a ``TableFormatError`` is a ``FormatError``)."""
    from repair.errors import FormatError, StorageError, TruncatedError, UsageError

    for documented in (TruncatedError, FormatError, StorageError, UsageError):
        if isinstance(error, documented):
            return documented.__name__
    return "RepairError"


def failure_document(command: str | None, error_type: str, message: str, exit_code: int, *, source: str | None = None,
                     **details: Any) -> dict:
    """The one document ``--json`` prints for a run that failed (docs/schema/error.json): a typed error,
    a usage error (``UsageError``), a signal (``Interrupted``, exit code 128 + its number)."""
    return {"schema_version": SCHEMA_VERSION, "ok": False, "command": command,
            "error": {"type": error_type, "message": message, "source": source, "exit_code": exit_code, **details}}


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


def print_log_line(document: Any) -> None:
    """One structured log line (a compact JSON object) on stderr: ``repair watch``'s verdict per checkpoint."""
    sys.stderr.write(json.dumps(document, separators=(",", ":"), default=_json_default) + "\n")
    sys.stderr.flush()
