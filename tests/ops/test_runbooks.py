"""The runbooks ``repair runbook`` prints: their commands paste, and triage comes first.

Placeholders (``<checkpoint-root>``, ``chk-N``) are for the reader to fill in; everything else in a code
block is a command line as bash reads it. During an incident ``repair triage`` is the first command: it
ranks every way back (a lossless rebuild before an older checkpoint), so a runbook that proposes
``repair fallback`` proposes triage before it.
"""

from __future__ import annotations

import io
import re
import shlex
import sys
from unittest import mock

import pytest
from rich.console import Console

from repair import runbooks
from repair.cli import output

PAGES = [name for name in runbooks.names() if name != "README"]
FENCE = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _command_lines(name: str) -> list[str]:
    return [line for block in FENCE.findall(runbooks.text(name)) for line in block.splitlines() if line.strip()]


@pytest.mark.parametrize("name", PAGES)
def test_every_command_line_of_a_runbook_is_one_whole_command(name):
    for line in _command_lines(name):
        assert not line.rstrip().endswith("\\"), line  # no continuation: each line pastes alone
        argv = shlex.split(line, comments=True)  # balanced quotes: bash reads it as written
        assert argv and argv[0] in {"repair", "flink", "kubectl", "ls", "df", "mount", "grep"}, line


@pytest.mark.parametrize("name", PAGES)
def test_a_runbook_leads_with_triage_before_fallback(name):
    text = runbooks.text(name)
    fallback = text.find("repair fallback")
    if name == "triage" or fallback < 0:
        return
    triage = text.find("repair triage")
    assert 0 <= triage < fallback, f"{name}: `repair fallback` before `repair triage`"
    for line in _command_lines(name):  # in a code block, a fallback line follows a triage line of its block
        if line.startswith("repair fallback"):
            block = next(b for b in FENCE.findall(text) if line in b)
            assert "repair triage" in block[: block.index(line)], (name, line)


def test_a_runbook_on_a_narrow_terminal_keeps_each_command_on_one_line():
    buffer = io.StringIO()
    console = Console(file=buffer, width=40, color_system=None, highlight=False, markup=False)
    with mock.patch.object(output, "stdout", lambda: console), mock.patch.object(sys.stdout, "isatty", lambda: True):
        output.print_markdown(runbooks.text("manifest-missing"))
    printed = buffer.getvalue().splitlines()
    for line in _command_lines("manifest-missing"):
        assert line in printed, line
