"""The ``repair`` command line: help, version, exit codes, one-line errors, the --json contract."""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from repair import __version__
from repair.cli.app import app, main
from tests import damage
from tests.conftest import FIXTURES, REPO, fixture_info

ROOT_120 = FIXTURES / "flink-1.20-default" / "checkpoints" / fixture_info(FIXTURES / "flink-1.20-default")["job_id"]


def _commands() -> list[str]:
    return sorted(typer.main.get_command(app).commands)


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_console_script_lists_the_commands():
    done = subprocess.run([str(Path(sys.executable).parent / "repair"), "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    for command in _commands():
        assert command in done.stdout


@pytest.mark.parametrize("chosen, expected", [(None, "system"), ("jemalloc", "jemalloc")])
def test_the_command_line_makes_pyarrow_allocate_from_the_system_allocator_unless_told(chosen, expected):
    """The CLI picks pyarrow's allocator before anything imports pyarrow (mimalloc's retained memory
    raised export's peak RSS; docs/benchmarks/scale.md); a user's own choice is kept."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    env["PYTHONPATH"] = str(REPO)
    code = "import repair.cli.app, pyarrow; print(pyarrow.default_memory_pool().backend_name)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


_FAULTS_OF_BATCHES = """
import resource, repair.cli.app
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def batch():  # four 12 MB blocks at once, written, then freed: a batch of an export, roughly
    blocks = [b"x" * (12 << 20) for _ in range(4)]
    del blocks
batch(); batch()
before = faults()
for _ in range(8):
    batch()
print(faults() - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
@pytest.mark.parametrize("tuned_by_user", [False, True])
def test_the_command_line_keeps_freed_memory_for_the_next_batch_unless_malloc_was_tuned(tuned_by_user):
    """With glibc, the CLI makes malloc reuse the memory of one batch for the next (else every batch's
    pages are faulted in and zeroed again: docs/benchmarks/export.md); a user's own malloc tuning is kept."""
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES" and not (k.startswith("MALLOC_") and k.endswith("_"))}
    if tuned_by_user:
        env["GLIBC_TUNABLES"] = "glibc.malloc.perturb=0"  # glibc's default: malloc behaves as untuned
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", _FAULTS_OF_BATCHES], capture_output=True, text=True, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    pages = 8 * 4 * (12 << 20) // resource.getpagesize()  # what eight batches of fresh pages fault in
    faults = int(done.stdout)
    if tuned_by_user:
        assert faults > pages / 2
    else:
        assert faults < pages / 20


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and __version__ in out


@pytest.mark.parametrize("command", _commands())
def test_every_command_has_help_and_a_docs_page(capsys, command):
    code, out, _ = run(capsys, command, "--help")
    assert code == 0 and len(out.strip()) > 100
    page = REPO / "docs" / "commands" / f"{command}.md"
    assert page.is_file(), f"docs/commands/{command}.md is missing"
    assert f"repair {command}" in page.read_text()
    assert f"`repair {command}" in (REPO / "README.md").read_text(), "README's command overview is out of step"


@pytest.mark.parametrize("command", _commands())
def test_the_readme_row_of_a_command_names_the_options_its_help_lists(command):
    """The README's command table says how to call each command: every option --help shows is in its row's
    synopsis (the first cell), and the synopsis names no option the command does not have."""
    click_command = typer.main.get_command(app).commands[command]
    rows = [line for line in (REPO / "README.md").read_text().splitlines() if line.startswith(f"| `repair {command} ")]
    assert rows, f"README has no row for repair {command}"
    synopsis = rows[0].split("` |")[0]
    options = [p for p in click_command.params if p.param_type_name == "option" and not p.hidden and p.name != "help"]
    assert [p.opts[0] for p in options if not any(re.search(rf"{re.escape(o)}(?![\w-])", synopsis) for o in p.opts)] == []
    known = {o for p in click_command.params for o in p.opts}
    assert [o for o in re.findall(r"(?<![\w-])--[a-z][a-z-]*", synopsis) if o not in known] == []


@pytest.mark.parametrize("command", [None, *_commands()])
def test_help_names_arguments_and_flags_plainly(capsys, command, monkeypatch):
    """No ``<bool>`` beside a flag that takes no value, no ``<str>`` beside a path, no ``{path}`` in usage."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(capsys, *([command] if command else []), "--help")
    assert code == 0
    assert "<bool>" not in out and "<str>" not in out and "{" not in out.split("Usage:", 1)[1].split("\n", 1)[0]
    if command in ("verify", "inspect"):
        assert f"Usage: repair {command} [OPTIONS] PATH" in out


def test_export_help_names_every_input_it_reads(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    code, out, _ = run(capsys, "export", "--help")
    text = " ".join(out.split())
    assert code == 0 and "savepoint (native or canonical)" in text and "savepoint directory (native or canonical)" in text


def test_runbook_lists_each_name_with_its_title(capsys):
    code, out, _ = run(capsys, "runbook")
    listed = dict(line.split(None, 1) for line in out.strip().splitlines())
    assert code == 0 and listed["manifest-missing"] == "MANIFEST (or another checkpoint file) missing"
    assert listed["triage"].startswith("A job that will not restore")


def test_runbook_names_complete_in_the_shell():
    done = subprocess.run([str(Path(sys.executable).parent / "repair")], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "_REPAIR_COMPLETE": "complete_bash",
                               "COMP_WORDS": "repair runbook meta", "COMP_CWORD": "2"})
    assert done.stdout.split() == ["metadata-already-exists", "metadata-unreadable"]


def test_inspect_json_contract(capsys, read_only_guard):
    read_only_guard(ROOT_120)
    code, out, err = run(capsys, "inspect", str(ROOT_120), "--json")
    assert code == 0, err
    doc = json.loads(out)  # its fields: tests/cli/test_json_contracts.py; here, its values
    assert doc["checkpoint_id"] == max(doc["retained_checkpoints"]) and doc["kind"] == "checkpoint"
    op = doc["operators"][0]
    assert len(op["id"]) == 32 and int(op["id"], 16) >= 0
    sub = next(s for o in doc["operators"] for s in o["subtasks"] if s["key_group_range"])
    assert sub["states"] and sub["files"]


GROWTH_120 = damage.checkpoint_root(FIXTURES / "flink-1.20-growth")
UPGRADE_120 = next((FIXTURES / "flink-1.20-upgrade" / "savepoints").iterdir())
COMPAT_OLD = FIXTURES / "compat" / "flink-2.1" / "old"
COMPAT_NEW = FIXTURES / "compat" / "flink-2.1" / "state-renamed"


@pytest.mark.parametrize("argv", [
    ["watch", "{root}", "--once", "--state-dir", "{out}/state", "--textfile", "{out}/watch.prom"],
    ["size", "{root}", "--deep", "--ttl", "1s"], ["size", "{root}", "--history"], ["size", "{root}", "--html", "{out}/size.html"],
    ["diff", "{root}/chk-1", "{root}/chk-3"],
    ["upgrade", "{upgrade}", "--to", "2.1", "--out", "{out}/for-2.1", "--drop-state", "upgrade/profile"],
    ["upgrade", "{upgrade}", "--to", "2.3", "--check"],
    ["compat", "{compat_old}", "{compat_new}"]], ids=lambda argv: " ".join(a for a in argv if a.startswith("-"))[:40] or argv[0])
def test_the_new_commands_leave_their_input_as_it_was(capsys, tmp_path, read_only_guard, argv):
    """Every file below the inputs hashed before and after (read_only_guard), outputs outside them."""
    inputs = {"root": GROWTH_120, "upgrade": UPGRADE_120, "compat_old": COMPAT_OLD, "compat_new": COMPAT_NEW}
    for path in inputs.values():
        read_only_guard(path)
    assert main([a.format(out=tmp_path, **inputs) for a in argv]) in (0, 1)
    outputs = {a.split("/")[1] for a in argv if a.startswith("{out}/")}
    assert {p.name for p in tmp_path.iterdir()} >= outputs  # written where asked, nothing in the input (the guard)


def test_inspect_table(capsys):
    code, out, _ = run(capsys, "inspect", str(ROOT_120), "--uid", "per-user", "--files")
    assert code == 0
    assert "checkpoint 5" in out and "per-user" in out and "amount-by-tag (map: String -> Map<String," in out
    assert "relocated" in out and "MANIFEST-" in out


def test_missing_path_is_a_one_line_usage_error(capsys, tmp_path):
    code, out, err = run(capsys, "inspect", str(tmp_path / "nope"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "no such file or directory" in err and "Traceback" not in err


@pytest.mark.parametrize("mutation", ["truncated", "foreign", "flipped-magic"])
def test_broken_metadata_is_a_one_line_error_with_offset(capsys, tmp_path, mutation):
    copy = damage.copy_fixture("flink-1.20-default", tmp_path)
    root = damage.checkpoint_root(copy)
    newest = root / f"chk-{damage.checkpoint_ids(root)[-1]}"
    metadata = newest / "_metadata"
    if mutation == "truncated":
        damage.truncate_metadata(copy)
    elif mutation == "foreign":
        shutil.copy(copy / "records.tsv", metadata)
    else:
        data = bytearray(metadata.read_bytes())
        data[0] ^= 0x01
        metadata.write_bytes(bytes(data))
    code, out, err = run(capsys, "inspect", str(newest))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "_metadata" in err and "offset" in err


def test_usage_error_exit_code(capsys):
    code, _, _ = run(capsys, "inspect")
    assert code == 2


def _bad_invocations(tmp_path) -> list[list[str]]:
    missing = str(tmp_path / "nothing-here")
    readme = str(REPO / "README.md")
    metadata = str(ROOT_120 / "chk-5" / "_metadata")
    out = str(tmp_path / "out")
    calls = [[command, missing] for command in ("inspect", "verify", "fallback", "triage", "orphans", "size")]
    calls += [["diff", missing, missing], ["diff", str(ROOT_120), str(ROOT_120)]]
    calls += [[command, readme] for command in ("inspect", "fallback", "triage", "orphans", "size")]  # verify judges a file as an SST
    calls += [["relocate", missing, "--to", out], ["rebuild-manifest", missing, "--out", out], ["export", missing, "--out", out],
              ["relocate", readme, "--to", out], ["rebuild-manifest", readme, "--out", out], ["export", readme, "--out", out],
              ["verify", str(ROOT_120), "--master", "foo"], ["export", str(ROOT_120), "--out", out, "--master", "local[x]"],
              ["verify", str(ROOT_120), "--master", "spark://127.0.0.1:1"],
              ["doctor", readme], ["doctor", metadata], ["doctor", "-", "--flink", "0.9"], ["doctor", missing],
              ["diagnose", missing], ["inspect", str(ROOT_120), "--uid", "nosuch"], ["inspect", str(ROOT_120), "-c", "99"], ["size", str(ROOT_120), "-c", "99"],
              ["export", str(ROOT_120), "--out", out, "--operator", "nosuch"]]
    calls += _bad_new_options(tmp_path)
    return calls


def _bad_new_options(tmp_path) -> list[list[str]]:
    """Bad values of watch's and size --deep/--history/--html's options (a busy port: :func:`test_a_busy_metrics_port`)."""
    root, a_file = str(ROOT_120), str(REPO / "README.md")
    existing = tmp_path / "existing.html"
    existing.write_text("not ours\n")
    watch = ["watch", root, "--once", "--state-dir", str(tmp_path / "state")]
    return [[*watch, "--interval", "0"], [*watch, "--interval", "-1"], [*watch, "--metrics-port", "65536"],
            [*watch, "--metrics-port", "-1"], [*watch, "--workers", "0"], [*watch, "--on-bad", "'unclosed"],
            [*watch, "--textfile", str(ROOT_120 / "metrics.prom")], ["watch", root, "--once", "--state-dir", a_file],
            ["watch", root, "--once", "--state-dir", str(ROOT_120 / "state")], ["watch", a_file, "--once"],
            ["size", root, "--deep", "--now", "yesterday"], ["size", root, "--deep", "--ttl", "soon"],
            ["size", root, "--deep", "--ttl", "recent=-5s"], ["size", root, "--deep", "--ttl", "recent="], ["size", root, "--deep", "--ttl", "=1s"],
            ["size", root, "--deep", "--ttl", "no-such-state=1s"],
            ["size", root, "--now", "2026-01-01"], ["size", root, "--top", "0"], ["size", root, "--deep", "--top", "-1"],
            ["size", root, "--html", str(ROOT_120 / "page.html")], ["size", root, "--html", str(existing)],
            ["size", a_file, "--history"], ["diff", root, a_file]]


def test_no_command_answers_bad_input_with_a_traceback(tmp_path, capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("state.backend.type: rocksdb\n"))
    for argv in _bad_invocations(tmp_path):
        code = main(argv)  # an exception other than the toolkit's own would escape here
        out, err = capsys.readouterr()
        assert code == 2, (argv, code, out, err)
        assert "Traceback" not in out + err and err.startswith(("error: ", "Usage:")), (argv, err)
        if err.startswith("error: "):
            assert err.count("\n") == 1, (argv, err)  # one line


def test_watch_names_the_busy_port_the_state_dir_that_is_a_file_and_json_without_once(capsys, tmp_path, monkeypatch):
    import socket

    from repair.ops.watch import Watcher

    closed = []
    close = Watcher.close
    monkeypatch.setattr(Watcher, "close", lambda self: closed.append(self) or close(self))
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["watch", str(ROOT_120), "--once", "--metrics-port", str(port), "--state-dir", str(tmp_path / "s")]) == 2
    assert capsys.readouterr().err == f"error: watch: --metrics-port {port}: Address already in use\n"
    assert len(closed) == 1  # the state directory's database is closed, not left to the exit
    a_file = tmp_path / "state"
    a_file.write_text("")
    assert main(["watch", str(ROOT_120), "--once", "--state-dir", str(a_file)]) == 2
    assert capsys.readouterr().err == f"error: watch: {a_file}: --state-dir is a file, not a directory\n"
    # --json without --once: an error, not a run that never prints its document (a subprocess: it would not end)
    done = subprocess.run([sys.executable, "-m", "repair.cli", "watch", str(ROOT_120), "--json"], cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr == "error: watch: --json goes with --once (without it, each verdict is a JSON line already)\n"


def test_dash_h_is_help(capsys):
    assert main(["-h"]) == 0 and "Usage" in capsys.readouterr().out
    assert main(["verify", "-h"]) == 0 and "--retry-budget" not in capsys.readouterr().out  # a command's own help


def test_an_error_under_json_is_a_document_too(capsys, tmp_path):
    chk = tmp_path / "chk-1"
    chk.mkdir()
    (chk / "_metadata").write_bytes(b"garbage!")
    assert main(["inspect", str(chk), "--json"]) == 2
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert document["ok"] is False and document["command"] == "inspect" and document["schema_version"] == 1
    assert document["error"]["type"] == "FormatError" and document["error"]["offset"] == 0
    assert document["error"]["source"].endswith("_metadata") and err.startswith("error: inspect: ")


def test_every_document_has_the_envelope(capsys):
    for argv in (["inspect", str(ROOT_120)], ["verify", str(ROOT_120)], ["fallback", str(ROOT_120)], ["orphans", str(ROOT_120)],
                 ["size", str(ROOT_120)]):
        code = main([*argv, "--json"])
        document = json.loads(capsys.readouterr().out)
        assert list(document)[:2] == ["schema_version", "ok"] and document["ok"] == (code == 0), argv


def test_export_relocate_and_orphans_report_progress(tmp_path):
    from repair import export, orphans, relocate

    read: list[tuple[int, int]] = []
    listed = orphans(str(ROOT_120), on_progress=lambda done, total: read.append((done, total)))
    assert read == [(n, len(listed.retained_checkpoints)) for n in range(1, len(listed.retained_checkpoints) + 1)] and read

    calls: list[tuple[int, int]] = []
    result = export(str(ROOT_120), str(tmp_path / "out"), on_progress=lambda done, total: calls.append((done, total)), workers=1)
    subtasks = sum(len(op.subtasks) for op in result.operators)
    assert calls == [(n, calls[0][1]) for n in range(1, calls[0][1] + 1)] and calls[-1][0] >= subtasks > 0
    moved = tmp_path / "moved" / ROOT_120.name
    shutil.copytree(ROOT_120, moved)
    copies: list[tuple[int, int]] = []
    written = relocate(str(moved / "chk-5"), str(tmp_path / "relocated"), copy=True, on_progress=lambda d, t: copies.append((d, t)))
    assert copies and copies[-1] == (len(copies), len(copies)) == (sum(1 for f in written.files if f.copied),) * 2


def test_names_that_look_like_markup_print_as_they_are(tmp_path, capsys):
    """A uid, an operator name or a path is data: ``[/x]`` (rich's closing tag, which made rich raise)
    and ``[user]`` (a style name, which rich swallowed) print verbatim, in every table and line."""
    from repair import edit, inspect

    root = damage.checkpoint_root(damage.copy_fixture("flink-2.1-p3-external-xxh3-zstd", tmp_path))
    odd = "[/x]odd[user]"
    edit(str(root / "chk-5"), str(tmp_path / "edited"), rename_uids={"per-user": odd})
    renamed = next(op for op in inspect(str(tmp_path / "edited")).operators if op.uid == odd)
    sst = next(f.path for sub in renamed.subtasks for f in sub.files if f.path and (f.local_name or "").endswith(".sst"))
    Path(sst).unlink()  # so that verify, fallback and triage name the operator in their findings
    for command, expected_exit in (("inspect", 0), ("verify", 1), ("fallback", 1), ("triage", 1)):
        assert main([command, str(tmp_path / "edited")]) == expected_exit, command
        out, err = capsys.readouterr()
        assert odd in out and "Traceback" not in out + err, (command, out, err)


def test_write_savepoint_of_a_path_that_does_not_exist_says_so(capsys, tmp_path):
    missing = tmp_path / "nope"
    code, _, err = run(capsys, "write-savepoint", str(missing), "--out", str(tmp_path / "sp"))
    assert code == 2 and err.strip() == f"error: write-savepoint: {missing}: no such file or directory"
    code, _, err = run(capsys, "write-savepoint", str(tmp_path), "--out", str(tmp_path / "sp"))
    assert code == 2 and "is not an export: it has no _export.json" in err  # there, but not an export
