"""``python -m repair.cli``: the ``repair`` command (for a venv whose scripts are not on PATH)."""

from repair.cli.entry import run

run()
