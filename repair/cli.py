"""The ``repair`` command line: parses arguments, calls an operation, renders its result.

No format or storage logic lives here; see ``repair.ops`` for the operations.
"""

from __future__ import annotations

import sys

import typer

from repair import __version__
from repair.errors import RepairError
from repair.output import print_error

app = typer.Typer(
    name="repair",
    help=(
        "Emergency toolkit for Apache Flink RocksDB checkpoints: inspect, verify, repair and export "
        "retained checkpoints and savepoints without a JVM. Inputs are only ever read."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"repair (flink-checkpoint-repair) {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Emergency toolkit for Apache Flink RocksDB checkpoints."""


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: run the app, turn typed errors into one line and exit code 2."""
    try:
        app(args=argv, prog_name="repair", standalone_mode=False)
    except RepairError as error:
        print_error(str(error))
        return error.exit_code
    except typer.Exit as done:
        return done.exit_code
    except (typer.Abort, KeyboardInterrupt):
        print_error("aborted")
        return 130
    except Exception as error:  # click usage errors
        import click

        if isinstance(error, click.ClickException):
            error.show()
            return 2
        raise
    return 0


def run() -> None:
    sys.exit(main())
