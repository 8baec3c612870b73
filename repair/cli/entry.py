"""The ``repair`` console script's entry point (and ``python -m repair.cli``).

It installs the signal handlers before anything else is imported: a Ctrl-C during the imports (about
half a second: typer, rich, the commands) ends the process with one line and exit code 130, not a
``KeyboardInterrupt`` traceback.
"""

from __future__ import annotations

from repair.cli.signals import exit_at_once_on_signals


def run() -> None:
    exit_at_once_on_signals()
    from repair.cli.app import run as run_command

    run_command()
