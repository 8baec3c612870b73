"""Every command the toolkit prints pastes into bash and runs.

A real fixture checkpoint, its newest MANIFEST deleted, is copied under a directory whose name has spaces
and quotes. Every command triage, fallback, verify's advice and diagnose (a real Flink trace naming that
checkpoint) print, in text at a console 40 columns wide and in ``--json``, is pasted into ``bash -c`` and
run: ``repair`` as the CLI of this checkout, ``flink`` as a stand-in that checks what Flink checks first
(``run -s`` names a directory holding ``_metadata``). Each command must do its job or report what the
checkpoint holds (exit 0 or 1), never a usage error or a path split in two.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from repair.cli import render
from repair.ops.advice import Command, Placeholder, fallback_next_steps, verify_next_steps
from repair.ops.diagnose.incidents import diagnose
from repair.ops.fallback import fallback
from repair.ops.triage import triage
from repair.ops.verify.engine import verify
from tests import damage
from tests.conftest import REPO

TRACE = REPO / "tests" / "data" / "traces" / "flink-1.20-restore-missing-manifest.txt"
TRACE_ROOT = ("/tmp/capture/flink-1.20-p3-external-xxhash-lz4/staging/checkpoints/flink-1.20-p3-external-xxhash-lz4/"
              "7f725960ff6eb2ce5516f53d7277aa03")
AWKWARD = """from broken "cluster" it's"""
FIXTURE = "flink-1.20-p3-external-xxhash-lz4"

#: A stand-in for Flink's CLI: `flink run -s PATH [mode flags] ...` with PATH a directory holding _metadata.
FAKE_FLINK = """#!/bin/sh
[ "$1" = run ] && [ "$2" = -s ] || { echo "flink: expected run -s PATH, got: $*" >&2; exit 2; }
[ -f "$3/_metadata" ] || { echo "flink: no _metadata in '$3'" >&2; exit 2; }
echo "flink: would restore $3"
"""


def _narrow(render_function, result) -> str:
    """What ``render_function`` prints on a console 40 columns wide."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=40, color_system=None, highlight=False, markup=False)
    original = render.stdout
    render.stdout = lambda: console
    try:
        render_function(result)
    finally:
        render.stdout = original
    return buffer.getvalue()


_PREFIX = re.compile(r"^\s*(?:\d+\)|or|next:|also:|restore with:)?\s*((?:repair|flink) .*)$")


def _printed_commands(text: str) -> list[str]:
    """The commands in text output: lines that are one, and `spans` in sentences."""
    found = []
    for line in text.splitlines():
        match = _PREFIX.match(line)
        if match:
            found.append(match.group(1).rstrip())
        found += [span for span in re.findall(r"`([^`]+)`", line) if span.startswith(("repair ", "flink "))]
    return found


def _runnable(line: str) -> bool:
    """Whether a printed line is a whole command (not one with ``<placeholders>`` or a sentence's ``repair X ...``)."""
    argv = shlex.split(line, comments=True)
    return not any(arg.startswith("<") or (arg == "..." and argv[0] == "repair") or arg in ("DIR", "N", "NEW_ROOT")
                   for arg in argv)


def _json_lines(document, strings: str, argvs: str) -> list[tuple[str, list[str]]]:
    """Every (line, argv) pair of a --json document's command lists named ``strings`` and ``argvs``."""
    pairs = []
    if isinstance(document, dict):
        for key, value in document.items():
            if key == strings and argvs in document:
                lines = value if isinstance(value, list) else [value]
                lists = document[argvs] if isinstance(value, list) else [document[argvs]]
                pairs += list(zip(lines, lists, strict=True))
            else:
                pairs += _json_lines(value, strings, argvs)
    elif isinstance(document, list):
        for item in document:
            pairs += _json_lines(item, strings, argvs)
    return pairs


@pytest.fixture
def shell_env(tmp_path):
    """PATH with `repair` (this checkout's CLI) and the stand-in `flink` first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "repair").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m repair.cli "$@"\n')
    (bin_dir / "flink").write_text(FAKE_FLINK)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    import os

    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(REPO), "COLUMNS": "40"}


def _run(line: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_every_printed_command_pastes_into_bash_and_runs(tmp_path, shell_env):
    dmg = damage.damaged_copy(FIXTURE, tmp_path / AWKWARD, "missing_manifest")
    root = str(dmg.root)
    assert AWKWARD in root

    triaged = triage(root)
    fell_back = fallback(root)
    verified = verify(root)
    diagnosed = diagnose(TRACE.read_text().replace(TRACE_ROOT, root))
    assert diagnosed.incidents[0].checkpoint_root == root  # the path as the trace writes it, spaces and quotes kept

    texts = {"triage": _narrow(render.render_triage, triaged), "fallback": _narrow(render.render_fallback, fell_back),
             "verify": _narrow(render.render_verify, verified), "diagnose": _narrow(render.render_diagnose, diagnosed)}
    printed = {name: _printed_commands(text) for name, text in texts.items()}
    # the text shows the very lines the library builds (a wrapped or cropped line would differ)
    expected = {
        "triage": [c.to_shell() for way in triaged.ways for c in [*way.commands, *way.alternatives]],
        "fallback": [c.to_shell() for c in fell_back.restore.commands],
        "diagnose": [c.to_shell() for i in diagnosed.incidents for c in [i.next_command, *i.also]],
    }
    for name, lines in expected.items():
        assert set(lines) <= set(printed[name]), (name, texts[name])
    assert any(shlex.quote(root) in line for line in printed["verify"])  # the advice names the checkpoint, quoted
    assert any(shlex.quote(root) in step for step in verify_next_steps(verified) + fallback_next_steps(fell_back))

    # --json: each line beside its argv, the line being the argv quoted
    documents = [triaged.to_json(), fell_back.to_json(), diagnosed.to_json()]
    pairs = [pair for document in documents for names in (("commands", "commands_argv"), ("alternatives", "alternatives_argv"),
                                                           ("next_command", "next_argv"), ("also", "also_argv"))
             for pair in _json_lines(json.loads(json.dumps(document)), *names)]
    assert len(pairs) >= len(expected["triage"]) + len(expected["fallback"]) + len(expected["diagnose"])
    for line, argv in pairs:
        assert shlex.split(line, comments=True) == argv, line
        assert line in {text for lines in printed.values() for text in lines}, line

    ran, seen = [], set()
    for name in ("triage", "fallback", "verify", "diagnose"):  # in the order printed: a repair step before its restore
        for line in printed[name]:
            argv = tuple(shlex.split(line, comments=True))
            if argv in seen or not _runnable(line):  # one run per command (a note may differ): outputs must be new
                continue
            done = _run(line, shell_env, tmp_path)
            assert done.returncode in (0, 1), f"{name}: {line}\n{done.stderr}"
            assert "unexpected extra argument" not in done.stderr.lower() and "usage:" not in done.stderr.lower(), done.stderr
            ran.append(line)
            seen.add(argv)
    assert any(line.startswith("repair rebuild-manifest ") for line in ran)
    assert any(line.startswith("repair relocate ") for line in ran)
    assert any(line.startswith("flink run ") for line in ran)
    assert any(line.startswith("repair triage ") for line in ran)
    rebuilt = Path(f"{root}-rebuilt-chk-{max(dmg.checkpoints)}") / f"chk-{max(dmg.checkpoints)}" / "_metadata"
    assert rebuilt.is_file()  # the pasted rebuild wrote where the printed restore line looks


def test_a_command_is_quoted_argument_by_argument():
    command = Command(("repair", "relocate", "/mnt/from broken \"cluster\" it's/chk-3", "--out", "/x y"), "a note\nover lines")
    assert shlex.split(command.to_shell(), comments=True) == list(command.argv)
    assert "\n" not in command.to_shell() and command.to_shell().endswith("   # a note over lines")
    assert Command(("repair", "triage", Placeholder("<checkpoint-root>"))).to_shell() == "repair triage <checkpoint-root>"


@pytest.mark.parametrize("trace", sorted((REPO / "tests" / "data" / "traces").glob("flink-2.1-restore-*.txt")), ids=lambda p: p.stem)
def test_the_2x_wall_causes_print_the_commands_they_build(trace):
    """diagnose's causes of incompatible state and of the 2.0 wall (real Flink 2.1 traces): the text shows each
    command the library builds, --json each line beside its argv; what the trace does not name is a
    placeholder printed bare (``<checkpoint>``, ``<2.x>``) as triage's ``<checkpoint-root>`` is."""
    diagnosed = diagnose(trace.read_text())
    built = [c for i in diagnosed.incidents for c in [i.next_command, *i.also]]
    printed = _printed_commands(_narrow(render.render_diagnose, diagnosed))
    assert built and {c.to_shell() for c in built} <= set(printed)
    for command in built:
        assert all(isinstance(arg, Placeholder) for arg in command.argv if arg.startswith("<")), command.argv
        assert shlex.split(command.to_shell(), comments=True) == list(command.argv)
    pairs = [pair for names in (("next_command", "next_argv"), ("also", "also_argv"))
             for pair in _json_lines(json.loads(json.dumps(diagnosed.to_json())), *names)]
    assert sorted(line for line, _ in pairs) == sorted(c.to_shell() for c in built)
    for line, argv in pairs:
        assert shlex.split(line, comments=True) == argv, line
