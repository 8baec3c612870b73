"""``python -m repair``: the same as the ``repair`` command."""

from repair.cli.app import run

run()
