"""Every failure of a ``--json`` run is one document on stdout that follows docs/schema/error.json, next
to one line on stderr: bad invocations generated for every command from its parameters (an unknown
option, a missing argument or option, a bad value, a missing file, a path that is not what the command
reads), and a signal."""

from __future__ import annotations

import json
import os
import signal
import typing

import pytest
import typer.main

from repair.cli.app import app, main
from tests.json_schemas import schema_problems

COMMANDS = {name: command for name, command in typer.main.get_command(app).commands.items()
            if any("--json" in param.opts for param in command.params)}
#: Commands whose argument is optional (they read standard input without one).
READS_STDIN = {"diagnose", "doctor"}
#: Commands that judge any file they are given (verify: "one SST or MANIFEST file", exit 1 when it is not).
JUDGES_ANY_FILE = {"verify"}


def _argument(command) -> str | None:
    return next((p.name for p in command.params if p.param_type_name == "argument" and p.required), None)


def _required_options(command, tmp_path) -> list[str]:
    return [arg for p in command.params if p.param_type_name == "option" and p.required
            for arg in (p.opts[0], str(tmp_path / f"new-{p.name}"))]


def _bad_values(command) -> list[list[str]]:
    """Per option that takes a number or a choice, values it refuses: not a number, below its minimum,
    not one of its choices."""
    bad = []
    for p in command.params:
        if p.param_type_name != "option" or p.is_flag:
            continue
        annotation = p.type_descriptor.annotation
        if annotation in (int, float):
            bad.append([p.opts[0], "not-a-number"])
            if p.min is not None:
                bad.append([p.opts[0], str(p.min - 1)])
        elif typing.get_origin(annotation) is typing.Literal:
            bad.append([p.opts[0], "no-such-choice"])
    return bad


def _bad_invocations(tmp_path) -> list[tuple[str, list[str]]]:
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a checkpoint\n")
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    cases = [("none", ["no-such-command"])]
    for name, command in COMMANDS.items():
        path = str(text_file) if name in READS_STDIN else str(empty_dir)
        options = _required_options(command, tmp_path)
        cases.append((name, [name, path, *options, "--no-such-option"]))
        cases.append((name, [name, str(tmp_path / "missing" / "chk-1"), *options]))
        cases += [(name, [name, path, *options, *bad]) for bad in _bad_values(command)]
        if _argument(command):
            cases.append((name, [name, *options]))
            if name not in JUDGES_ANY_FILE:
                cases.append((name, [name, str(text_file), *options]))
            cases.append((name, [name, str(empty_dir), *options]))
        if options:
            cases.append((name, [name, path]))
    return cases


def _one_failure(capsys, args: list[str]) -> tuple[int, dict, str]:
    exit_code = main([*args, "--json"])
    out, err = capsys.readouterr()
    return exit_code, json.loads(out), err  # json.loads: exactly one document, nothing else on stdout


@pytest.mark.parametrize("name", ["none", *COMMANDS])
def test_every_bad_invocation_prints_one_error_document(name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cases = [args for command, args in _bad_invocations(tmp_path) if command == name]
    assert cases
    for args in cases:
        exit_code, document, err = _one_failure(capsys, args)
        assert exit_code == 2, args
        assert schema_problems(document, "error") == [], args
        assert document["command"] == (None if name == "none" else name), args
        assert document["error"]["exit_code"] == 2
        assert len(err.strip().splitlines()) == 1, (args, err)
    assert not any(p.name.startswith("new-") for p in tmp_path.iterdir())  # nothing was written


def test_the_invocations_cover_each_kind_of_mistake(tmp_path):
    """The generator above makes every kind of bad invocation (it would pass on an empty list)."""
    cases = _bad_invocations(tmp_path)
    assert {name for name, _ in cases} == {"none", *COMMANDS}
    assert any("--workers" in args and "not-a-number" in args for _, args in cases)
    assert any("--engine" in args and "no-such-choice" in args for _, args in cases)
    assert ["relocate", str(tmp_path / "empty")] in [args for _, args in cases]  # --out missing


def test_usage_errors_without_json_are_not_documents(tmp_path, capsys):
    assert main(["verify", str(tmp_path), "--no-such-option"]) == 2
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_is_an_interrupted_document(signum, tmp_path, capsys, monkeypatch):
    """A run stopped by a signal ends with 128 + its number and says so in its document."""
    import repair.ops.orphans

    def stopped(*args, **kwargs):
        os.kill(os.getpid(), signum)  # the handler main() installed raises here, as for a real Ctrl-C

    def not_handled(*args):
        raise AssertionError("main() did not handle the signal")  # rather than SIGTERM ending pytest

    monkeypatch.setattr(repair.ops.orphans, "orphans", stopped)
    previous = signal.signal(signum, not_handled)  # main() installs its own handler over it while it runs
    try:
        exit_code, document, err = _one_failure(capsys, ["orphans", str(tmp_path)])
    finally:
        signal.signal(signum, previous)
    assert exit_code == 128 + signum
    assert schema_problems(document, "error") == []
    assert document["error"]["type"] == "Interrupted" and document["error"]["signal"] == signal.Signals(signum).name
    assert document["error"]["exit_code"] == 128 + signum and document["command"] == "orphans"
    assert len(err.strip().splitlines()) == 1
