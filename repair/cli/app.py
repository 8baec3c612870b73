"""The ``repair`` command line: parses arguments, calls an operation, renders its result.

No format or storage logic lives here; see ``repair.ops`` for the operations.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import List, Literal, Optional

import typer
from typer.core import TyperGroup

from repair import __version__
from repair.cli.help_format import use_plain_names
from repair.cli.output import error_document, failure_document, print_error, print_json
from repair.cli.plain_values import use_plain_values
from repair.cli.signals import STOPPED_CODES, Stopped, exit_at_once_on_signals, stop_cleanly_on_signals, stopped_message
from repair.errors import RepairError, UsageError
from repair.ops.runner import spark_started, stop_spark

#: The environment variable StorageOptions.from_env reads the retry budget from.
RETRY_BUDGET_VARIABLE = "REPAIR_RETRY_BUDGET"
#: The environment variable pyarrow reads its allocator from, once, when it is imported.
ARROW_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def _choose_arrow_allocator() -> None:
    """pyarrow allocates from the system allocator (glibc's malloc) unless the user chose one: with
    pyarrow's default on Linux, mimalloc, an export's peak RSS is 16-40 MB higher and grows more with
    the number of subtasks exported (213 -> 265 MB from 10 to 240 subtasks; the system allocator
    197 -> 225 MB), for about 5% more CPU (docs/benchmarks/scale.md, "Export memory per subtask": a
    trade). Set here, before any command imports pyarrow; pool workers and local Spark workers inherit it."""
    os.environ.setdefault(ARROW_POOL_VARIABLE, "system")
    if os.environ[ARROW_POOL_VARIABLE] == "system":
        keep_freed_memory()


#: glibc's ``mallopt`` parameters (malloc.h) and the values :func:`keep_freed_memory` sets.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest
TRIM_THRESHOLD = 64 << 20


def keep_freed_memory() -> bool:
    """Make glibc's malloc reuse the memory of one batch for the next: blocks up to 32 MB come from the
    heap (by default, from 128 KB up, from fresh mappings until a freed one raises the threshold) and up
    to 64 MB of freed heap is kept (by default twice the threshold). Else every batch of an export takes
    fresh pages the kernel faults in and zeroes: 60-69k page faults for a subtask of 100k 1 KB entries,
    17-18k with these, the same peak RSS (docs/benchmarks/export.md). Left as it is when the user tuned
    malloc (``GLIBC_TUNABLES``, ``MALLOC_*_``) or the C library has no ``mallopt`` (not glibc). Returns
    whether it set both."""
    if "GLIBC_TUNABLES" in os.environ or any(name.startswith("MALLOC_") and name.endswith("_") for name in os.environ):
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1


_choose_arrow_allocator()
use_plain_names()
use_plain_values()

def _retry_budget_first(args: list[str]) -> list[str]:
    """``args`` with ``--retry-budget SECONDS`` (an option of ``repair`` itself) moved before the command
    name, so that ``repair verify PATH --retry-budget 5`` works as ``repair --retry-budget 5 verify PATH``."""
    front: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":  # what follows is arguments, never options
            rest += args[index:]
            break
        if arg == "--retry-budget" and index + 1 < len(args):
            front += args[index : index + 2]
            index += 2
            continue
        (front if arg.startswith("--retry-budget=") else rest).append(arg)
        index += 1
    return front + rest


class _RepairGroup(TyperGroup):
    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _retry_budget_first(args))


try:  # typer 0.2x runs its own copy of click; older releases run click itself
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover
    from click import ClickException

app = typer.Typer(
    cls=_RepairGroup,
    name="repair",
    help=(
        "Emergency toolkit for Apache Flink RocksDB checkpoints: inspect, verify, repair and export "
        "retained checkpoints and savepoints without a JVM. Inputs are only ever read."
    ),
    no_args_is_help=True,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"repair (flink-checkpoint-repair) {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", metavar="", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    retry_budget: Optional[float] = typer.Option(
        None, "--retry-budget", min=0, metavar="SECONDS",
        help="How long a read that failed transiently (throttling, a reset, a timeout) is retried (default 60; "
             "also REPAIR_RETRY_BUDGET; before or after the command). A file still unreadable then makes its verdict unknown, never broken.",
    ),
) -> None:
    """Emergency toolkit for Apache Flink RocksDB checkpoints."""
    if retry_budget is not None:  # storage options come from the environment (main() restores it)
        os.environ[RETRY_BUDGET_VARIABLE] = str(retry_budget)


def _renderer(name: str, **options):
    """``repair.cli.render``'s function ``name`` (with ``options``), imported when a result is printed for
    people: a ``--json`` run never imports rich's tables."""

    def render(result) -> None:
        from repair.cli import render as renderers

        getattr(renderers, name)(result, **options)

    return render


def _show(result, json_output: bool, render) -> None:
    """Print ``result`` as its documented JSON document or through ``render``; then exit with its exit code."""
    if json_output:
        print_json(result.to_json())
    else:
        render(result)
    raise typer.Exit(result.exit_code)


@app.command()
def inspect(
    path: str = typer.Argument(..., help="Job checkpoint root, chk-N directory, savepoint directory or _metadata file (local path or URI)."),
    checkpoint: Optional[int] = typer.Option(None, "--checkpoint", "-c", metavar="N", help="In a job root: inspect chk-N instead of the newest."),
    operator: Optional[List[str]] = typer.Option(None, "--operator", metavar="UID|HASH|NAME", help="Show only this operator: its uid (hashed as Flink does, for checkpoints that store only ids), operator id or name. Repeatable."),
    uid: Optional[List[str]] = typer.Option(None, "--uid", hidden=True, help="Old name of --operator."),
    subtasks: bool = typer.Option(False, "--subtasks", metavar="", help="Also list every subtask: key groups, handle, states, files."),
    files: bool = typer.Option(False, "--files", metavar="", help="Also list every file and inline stream."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of tables."),
) -> None:
    """Show what a checkpoint or savepoint holds: operators, subtasks, key groups, states and files."""
    from repair.ops.inspect import inspect as run_inspect

    result = run_inspect(path, checkpoint=checkpoint, operators=[*(operator or []), *(uid or [])] or None)
    if result.unmatched_uids:
        print_error(f"inspect: no operator with uid {', '.join(map(repr, result.unmatched_uids))} in {result.metadata_path}")
    _show(result, json_output, _renderer("render_inspect", show_files=files, show_subtasks=subtasks))


@app.command()
def verify(
    path: str = typer.Argument(..., help="Job checkpoint root (all retained checkpoints), chk-N directory, savepoint, _metadata file, RocksDB directory, or one SST or MANIFEST file (local path or URI)."),
    master: Optional[str] = typer.Option(None, "--master", metavar="URL", help="Run the file checks as a Spark job on this master (local[*], spark://host:port)."),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N", min=1, help="Processes for in-process verification (default: one per core when there is enough data)."),
    checksums_only: bool = typer.Option(False, "--checksums-only", metavar="", help="Check SST block checksums without decompressing blocks, like sst_dump --verify_checksum: about twice as fast, but does not prove that blocks decompress."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON report instead of tables."),
) -> None:
    """Verify every SST block checksum, MANIFEST record, file size and reference. Exit 1 when a problem is found."""
    from repair.cli.output import progress_bar
    from repair.ops.verify.engine import verify as run_verify

    _say_spark(master)
    with progress_bar("verifying") as on_progress:
        result = run_verify(path, master=master, workers=workers, on_progress=on_progress, decompress=not checksums_only)
    _show(result, json_output, _renderer("render_verify"))


@app.command()
def fallback(
    path: str = typer.Argument(..., metavar="ROOT", help="Job checkpoint root: the directory holding chk-*/ and shared/ (local path or URI)."),
    lineage: Optional[int] = typer.Option(None, "--lineage", metavar="N", help="When the root holds checkpoints of several jobs or deployments: choose within this lineage."),
    check_all: bool = typer.Option(False, "--all", metavar="", help="Verify every retained checkpoint, not only down to the newest valid one."),
    master: Optional[str] = typer.Option(None, "--master", metavar="URL", help="Run the file checks as a Spark job on this master."),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N", min=1, help="Processes for in-process verification."),
    state_dir: Optional[str] = typer.Option(None, "--state-dir", metavar="DIR", help="A repair watch's state directory: the SSTs it verified, unchanged since, are not read again."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of tables."),
) -> None:
    """Find the newest retained checkpoint that is entirely valid and say how to restore it. Exit 1 when none is."""
    from repair.cli.output import progress_bar
    from repair.ops.fallback import fallback as run_fallback

    _say_spark(master)
    with progress_bar("verifying") as on_progress:
        result = run_fallback(path, lineage=lineage, check_all=check_all, master=master, workers=workers, on_progress=on_progress,
                              state_dir=state_dir)
    _show(result, json_output, _renderer("render_fallback"))


@app.command()
def triage(
    path: str = typer.Argument(..., metavar="ROOT", help="Job checkpoint root: the directory holding chk-*/ and shared/ (local path or URI)."),
    savepoints: Optional[str] = typer.Option(None, "--savepoints", metavar="DIR", help="Also consider the savepoints in this directory (or this one savepoint)."),
    older: Optional[list[str]] = typer.Option(None, "--older", metavar="PATH", help="Another source of the job's state (the root of the job restored from, a native savepoint, a copy); repeatable: a damaged SST it holds an intact copy of is replaced, nothing lost."),
    lineage: Optional[int] = typer.Option(None, "--lineage", metavar="N", help="When the root holds checkpoints of several jobs or deployments: the ways back of this lineage only."),
    master: Optional[str] = typer.Option(None, "--master", metavar="URL", help="Run the file checks as a Spark job on this master."),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N", min=1, help="Processes for in-process verification."),
    state_dir: Optional[str] = typer.Option(None, "--state-dir", metavar="DIR", help="A repair watch's state directory: the SSTs it verified, unchanged since, are not read again."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of text."),
) -> None:
    """Verify every retained checkpoint and rank every way back (restore, rebuild, rebuild dropping lost files) with its age, loss and exact commands. Exit 0 when a way back loses nothing, 1 otherwise."""
    from repair.cli.output import progress_bar
    from repair.ops.triage import triage as run_triage

    _say_spark(master)
    with progress_bar("verifying") as on_progress:
        result = run_triage(path, savepoints=savepoints, older=older or (), lineage=lineage, master=master, workers=workers, on_progress=on_progress,
                            state_dir=state_dir)
    _show(result, json_output, _renderer("render_triage"))


@app.command()
def orphans(
    path: str = typer.Argument(..., metavar="ROOT", help="Job checkpoint root: the directory holding chk-*/, shared/ and taskowned/ (local path or URI)."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of tables."),
) -> None:
    """List the files in shared/ and taskowned/ that no retained checkpoint references. Read-only: deletes nothing."""
    from repair.cli.output import progress_bar
    from repair.ops.orphans import orphans as run_orphans

    with progress_bar("reading retained checkpoints", counting="checkpoints") as on_progress:
        result = run_orphans(path, on_progress=on_progress)
    _show(result, json_output, _renderer("render_orphans"))


@app.command()
def size(
    path: str = typer.Argument(..., help="Job checkpoint root (each retained checkpoint), chk-N directory, savepoint directory or _metadata file (local path or URI)."),
    by: Literal["state", "operator", "subtask", "key-group", "file"] = typer.Option("state", "--by", help="Group the bytes by state (column family), operator, subtask, key-group range or file."),
    top: Optional[int] = typer.Option(None, "--top", metavar="N", min=1, help="Only the N largest groups (default: all in --json, 15 on a terminal)."),
    checkpoint: Optional[int] = typer.Option(None, "--checkpoint", "-c", metavar="N", help="In a job root: only chk-N."),
    deep: bool = typer.Option(False, "--deep", help="Also read the keyed state of the newest (or -c) checkpoint: expired TTL entries, what a compaction would reclaim, key-group skew, largest keys and values, value sizes."),
    now: Optional[str] = typer.Option(None, "--now", metavar="TIME", help="With --deep: judge TTL expiry at TIME (epoch ms or ISO 8601; default: now)."),
    ttl: Optional[list[str]] = typer.Option(None, "--ttl", metavar="[STATE=]DURATION", help="With --deep: the TTL of STATE (or of every TTL state), e.g. recent=1s, 7d; Flink does not store it in the checkpoint. Repeatable."),
    history: bool = typer.Option(False, "--history", help="The growth over the retained checkpoints of a job root (of a chk-N: up to it), per state and step."),
    html: Optional[str] = typer.Option(None, "--html", metavar="FILE", help="Also write a self-contained page (no server, no network) of the state sizes and the growth over the retained checkpoints to FILE (a new file, not inside PATH)."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of tables."),
) -> None:
    """Where a checkpoint's bytes are: per state, operator, subtask, key-group range or file, from SST properties only (--deep: from the data too). Exit 1 when a file is missing or damaged."""
    from repair.cli.output import progress_bar
    from repair.ops.size import size as run_size
    from repair.ops.size_history import size_history

    with progress_bar("reading", counting="checkpoints") as on_progress:
        if history or html is not None:
            result = size_history(path, by=by, top=top, checkpoint=checkpoint, on_progress=on_progress, deep=deep, now=now,
                                  ttl=ttl, html=html, show_history=history)
        else:
            result = run_size(path, by=by, top=top, checkpoint=checkpoint, on_progress=on_progress, deep=deep, now=now, ttl=ttl)
    _show(result, json_output, _renderer("render_size"))


@app.command()
def diff(
    old: str = typer.Argument(..., help="The older checkpoint: a chk-N directory, savepoint directory or _metadata file (local path or URI)."),
    new: str = typer.Argument(..., help="The newer checkpoint of the same job."),
    top: Optional[int] = typer.Option(None, "--top", metavar="N", min=1, help="Only the N states that changed most (default: all in --json, 15 on a terminal)."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of tables."),
) -> None:
    """What grew between two checkpoints: files added, removed and shared; per state the growth in bytes and entries. Exit 1 when a file is missing or damaged."""
    from repair.ops.diff import diff as run_diff

    result = run_diff(old, new, top=top)
    _show(result, json_output, _renderer("render_diff"))


@app.command()
def watch(
    path: str = typer.Argument(..., metavar="ROOT", help="Job checkpoint root to watch: the directory Flink writes chk-*/ and shared/ into (local path or URI)."),
    interval: float = typer.Option(30.0, "--interval", metavar="SECONDS", min=0.1, help="Seconds between two passes over the root."),
    state_dir: Optional[str] = typer.Option(None, "--state-dir", metavar="DIR", help="Local directory keeping verdicts, verified files, last-good.json and history.json across restarts (never inside ROOT); without it, state lasts for this run."),
    metrics_port: Optional[int] = typer.Option(None, "--metrics-port", metavar="N", min=0, max=65535, help="Serve Prometheus metrics over HTTP on this port."),
    textfile: Optional[str] = typer.Option(None, "--textfile", metavar="FILE", help="Write Prometheus metrics to FILE (node-exporter's textfile collector) after each pass, atomically."),
    on_bad: Optional[str] = typer.Option(None, "--on-bad", metavar="CMD", help="Run CMD (split into words like a shell, run without one) for each bad checkpoint, its verdict as JSON on stdin."),
    once: bool = typer.Option(False, "--once", metavar="", help="One pass, then exit: 0 when no new checkpoint is bad, 1 when one is, 2 when one could not be read."),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N", min=1, help="Processes verifying (default: one per core when there is enough data)."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="With --once: print the documented JSON document instead of text."),
) -> None:
    """Verify each checkpoint as it completes (only the files it added): verdicts as JSON lines on stderr, Prometheus metrics, --on-bad alerts. Runs until stopped."""
    import time

    from repair.cli.output import print_log_line
    from repair.ops.watch import Watcher
    from repair.ops.watch.alert import on_bad_argv
    from repair.ops.watch.metrics import WatchMetrics

    if json_output and not once:
        raise UsageError("--json goes with --once (without it, each verdict is a JSON line already)")
    if on_bad is not None:
        try:
            on_bad_argv(on_bad)
        except ValueError as error:
            raise UsageError(f"--on-bad: {error}") from None
    metrics = WatchMetrics()
    watcher = Watcher(path, state_dir=state_dir, workers=workers, on_bad=on_bad, on_verdict=print_log_line, metrics=metrics)
    try:  # the state directory's SQLite file is closed however the watch ends (a busy port, a bad --textfile)
        if textfile is not None:
            watcher.check_output(textfile)
        if metrics_port is not None:
            port = metrics.serve(metrics_port)
            typer.echo(f"metrics on http://0.0.0.0:{port}/metrics", err=True)
        while True:
            result = watcher.run_pass()
            if textfile is not None:
                metrics.write_textfile(textfile, watcher.storage)
            if once:
                _show(result, json_output, _renderer("render_watch"))
            time.sleep(interval)
    finally:
        watcher.close()


@app.command()
def compat(
    old: str = typer.Argument(..., help="The running job's checkpoint or savepoint: a chk-N directory, savepoint directory or _metadata file (local path or URI)."),
    new: str = typer.Argument(..., help="A checkpoint or savepoint of a short staging run of the new job version."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of tables."),
) -> None:
    """Will the new job version restore OLD? Per operator and state: compatible (as is, reconfigured, after migration), state lost, or incompatible, with the remedy. Exit 1 when it will not restore with its state."""
    from repair.ops.compat import compat as run_compat

    result = run_compat(old, new)
    _show(result, json_output, _renderer("render_compat"))


@app.command()
def relocate(
    path: str = typer.Argument(..., metavar="CHECKPOINT", help="The moved checkpoint: a chk-N directory, savepoint directory or _metadata file (local path or URI)."),
    out: Optional[str] = typer.Option(None, "--out", metavar="DIR", help="New job root to create (must not exist or be empty); receives <chk-N>/_metadata."),
    to: Optional[str] = typer.Option(None, "--to", hidden=True, help="Old name of --out."),
    copy: bool = typer.Option(False, "--copy", metavar="", help="Also copy every referenced file under the new root (a self-contained checkpoint)."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of text."),
) -> None:
    """Write a new _metadata whose paths point to where the files of a moved checkpoint are now. Exit 1 if files are missing."""
    from repair.cli.output import progress_bar
    from repair.ops.relocate import relocate as run_relocate

    with progress_bar("copying", counting="files") as on_progress:
        result = run_relocate(path, _output(out, to), copy=copy, on_progress=on_progress)
    _show(result, json_output, _renderer("render_relocate"))


@app.command("rebuild-manifest")
def rebuild_manifest(
    path: str = typer.Argument(..., metavar="CHECKPOINT|DB_DIR", help="The checkpoint (chk-N directory or _metadata file), or a bare RocksDB directory (a TaskManager's db/), whose MANIFEST or CURRENT is missing or broken."),
    out: Optional[str] = typer.Option(None, "--out", metavar="DIR", help="New job root to create; receives <chk-N>/_metadata with the rebuilt MANIFESTs. For a RocksDB directory: the new DB directory."),
    to: Optional[str] = typer.Option(None, "--to", hidden=True, help="Old name of --out."),
    copy: bool = typer.Option(False, "--copy", metavar="", help="Also copy every referenced file under the new root."),
    drop_missing: bool = typer.Option(
        False, "--drop-missing", metavar="",
        help="Rebuild without SSTs that are missing or corrupt for good, reporting the state, key groups and key range each held (their data is lost; exit 1).",
    ),
    salvage: bool = typer.Option(
        False, "--salvage", metavar="",
        help="Like --drop-missing, but corrupt or truncated SSTs are salvaged block by block: replaced by a new SST (under the output) holding every entry of their sound blocks; reports the entries, key groups and key bounds lost (exit 1 if any).",
    ),
    list_lost_keys: bool = typer.Option(
        False, "--list-lost-keys", metavar="",
        help="With --drop-missing or --salvage: list the decoded keys whose entries were lost, where the damaged file still tells them, and what each key shows after the restore (lost, an older value back, a newer version kept).",
    ),
    older: Optional[list[str]] = typer.Option(
        None, "--older", metavar="PATH",
        help="Another source of the same job's state (a native savepoint, a directory of savepoints, a job root, a checkpoint, a copy); repeatable. A damaged or missing SST whose intact original it holds is replaced by that copy (nothing lost); each lost key says whether a source holds the lost value (recoverable from it) or an older one. Implies --list-lost-keys.",
    ),
    manifest_format: Optional[Literal["frocksdb6", "frocksdb8"]] = typer.Option(
        None, "--format", help="RocksDB directory only: write the MANIFEST for frocksdb6 (Flink <= 1.20) or frocksdb8 (Flink 2.x) instead of the format the evidence points to.",
    ),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of text."),
) -> None:
    """Rebuild missing or broken MANIFEST and CURRENT files from the SSTs into a new checkpoint (or DB directory). Exit 1 if it cannot, or if --drop-missing or --salvage lost data."""
    from repair.ops.rebuild import rebuild_manifest as run_rebuild
    from repair.ops.rebuild.db import RebuildDbResult

    result = run_rebuild(path, _output(out, to), copy=copy, drop_missing=drop_missing, salvage=salvage, format=manifest_format,
                         list_lost_keys=list_lost_keys, older=older or ())
    _show(result, json_output, _renderer("render_rebuild_db" if isinstance(result, RebuildDbResult) else "render_rebuild"))


@app.command()
def diagnose(
    file: Optional[str] = typer.Argument(None, help="A JobManager/TaskManager log or a saved stack trace; '-' or nothing reads standard input."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of text."),
) -> None:
    """From a Flink log or stack trace to the incident, its runbook, the evidence and the next repair command. Exit 1 when no known incident is found."""
    from repair.io.textinput import read_text
    from repair.ops.diagnose.incidents import diagnose as run_diagnose

    _hint_if_terminal(file, "a log or a stack trace")
    text, source = read_text(file)
    result = run_diagnose(text, source=source)
    _show(result, json_output, _renderer("render_diagnose"))


@app.command()
def doctor(
    config: Optional[str] = typer.Argument(None, help="flink-conf.yaml, config.yaml, a FlinkDeployment or -D key=value lines; '-' or nothing reads standard input."),
    flink: Optional[str] = typer.Option(None, "--flink", metavar="VERSION", help="Flink version the configuration is for (1.15, 1.20, 2.1): judge key names for it."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of text."),
) -> None:
    """Lint a Flink configuration for the hazards behind checkpoint incidents. Exit 1 when a finding is an error."""
    from repair.io.textinput import read_text
    from repair.ops.doctor.lint import doctor as run_doctor

    _hint_if_terminal(config, "a Flink configuration")
    text, source = read_text(config)
    result = run_doctor(text, flink_version=flink, source=source)
    _show(result, json_output, _renderer("render_doctor"))


@app.command()
def export(
    path: str = typer.Argument(..., metavar="CHECKPOINT", help="chk-N directory, savepoint directory (native or canonical), _metadata file, or job root (its newest checkpoint); local path or URI."),
    out: str = typer.Option(..., "--out", metavar="DIR", help="New directory to create (must not exist or be empty); receives Hive-partitioned Parquet and _export.json."),
    operator: Optional[List[str]] = typer.Option(None, "--operator", metavar="UID|HASH|NAME", help="Export only this operator: uid, operator id (hash) or name. Repeatable."),
    uid: Optional[List[str]] = typer.Option(None, "--uid", hidden=True, help="Old name of --operator."),
    state: Optional[List[str]] = typer.Option(None, "--state", metavar="NAME", help="Export only the state with this name. Repeatable."),
    master: Optional[str] = typer.Option(None, "--master", metavar="URL", help="Decode the subtasks as a Spark job on this master (local[*], spark://host:port)."),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N", min=1, help="Processes for in-process decoding (default: one per core when there are several subtasks)."),
    engine: Literal["auto", "rocksdb", "python"] = typer.Option("auto", "--engine", help="Who resolves RocksDB's LSM trees: rocksdb (RocksDB itself via rocksdict, on a scratch copy; fast), python (this toolkit's merge; reads without MANIFEST or OPTIONS), auto (rocksdb where RocksDB can open the instance as _metadata describes it, else python)."),
    compression: Literal["snappy", "zstd", "lz4", "none"] = typer.Option("snappy", "--compression", help="Parquet codec: snappy, zstd (smaller, slower), lz4 or none (least CPU, largest files)."),
    columns: Literal["both", "decoded", "raw"] = typer.Option("both", "--columns", help="What is written of each key and value: both (decoded columns beside their raw bytes), decoded (raw bytes only where decoding failed), raw (the bytes only; decoded columns null)."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document (also written to OUT/_export.json) instead of tables."),
) -> None:
    """Export the keyed and operator state of a checkpoint or savepoint (native or canonical) to Parquet (one file per operator, state and subtask)."""
    from repair.cli.output import progress_bar
    from repair.ops.export.job import export as run_export

    _say_spark(master)
    with progress_bar("exporting", counting="subtasks") as on_progress:
        result = run_export(path, out, operators=[*(operator or []), *(uid or [])] or None, states=state or None, master=master, workers=workers,
                            engine=engine, compression=compression, columns=columns, on_progress=on_progress)
    _show(result, json_output, _renderer("render_export"))


@app.command("write-savepoint")
def write_savepoint(
    path: str = typer.Argument(..., metavar="EXPORT_DIR", help="An export's directory (its _export.json and Parquet parts, possibly changed); local path or URI."),
    out: str = typer.Option(..., "--out", metavar="DIR", help="New savepoint directory to create (must not exist or be empty)."),
    max_parallelism: Optional[int] = typer.Option(None, "--max-parallelism", metavar="N", min=1, max=32768, help="Max parallelism of the savepoint (default: the source's); key groups are recomputed from the keys."),
    parallelism: Optional[int] = typer.Option(None, "--parallelism", metavar="N", min=1, max=32768, help="Subtasks of every keyed operator (default: the source's)."),
    source: Optional[str] = typer.Option(None, "--source", metavar="CHECKPOINT", help="The checkpoint the export was made from, when it is no longer where _export.json says."),
    drop_state: Optional[List[str]] = typer.Option(None, "--drop-state", metavar="UID/STATE", help="UID/STATE: leave this keyed state out (its meta data too). Repeatable."),
    master: Optional[str] = typer.Option(None, "--master", metavar="URL", help="Write the keyed state as a Spark job on this master (local[*], spark://host:port)."),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N", min=1, help="Processes writing the keyed state when not on Spark (default: one per core)."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of text."),
) -> None:
    """Write an export back as a canonical savepoint (the format every state backend restores), _metadata last."""
    from repair.ops.write_savepoint import write_savepoint as run_write_savepoint

    _say_spark(master)
    result = run_write_savepoint(path, out, max_parallelism=max_parallelism, parallelism=parallelism, source=source,
                                 drop_states=drop_state or [], master=master, workers=workers)
    _show(result, json_output, _renderer("render_write_savepoint"))


@app.command()
def rescale(
    path: str = typer.Argument(..., metavar="CHECKPOINT", help="chk-N directory, savepoint directory, _metadata file, or job root (its newest checkpoint); local path or URI."),
    out: str = typer.Option(..., "--out", metavar="DIR", help="New savepoint directory to create (must not exist or be empty)."),
    max_parallelism: Optional[int] = typer.Option(None, "--max-parallelism", metavar="N", min=1, max=32768, help="The new max parallelism; key groups are recomputed from the keys."),
    parallelism: Optional[int] = typer.Option(None, "--parallelism", metavar="N", min=1, max=32768, help="Subtasks of every keyed operator (default: the checkpoint's)."),
    master: Optional[str] = typer.Option(None, "--master", metavar="URL", help="Export and write back as Spark jobs on this master (local[*], spark://host:port)."),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N", min=1, help="Processes exporting and writing back when not on Spark (default: one per core)."),
    scratch: Optional[str] = typer.Option(None, "--scratch", metavar="DIR", help="Where the intermediate export goes (default: local scratch space); on a Spark cluster, a directory every executor reads (s3://, hdfs://)."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of text."),
) -> None:
    """A checkpoint as a canonical savepoint with a new max parallelism: export and write-savepoint in one, no Parquet kept."""
    from repair.ops.write_savepoint import rescale as run_rescale

    _say_spark(master)
    result = run_rescale(path, out, max_parallelism=max_parallelism, parallelism=parallelism, master=master, workers=workers,
                         scratch=scratch)
    _show(result, json_output, _renderer("render_write_savepoint"))


@app.command()
def edit(
    path: str = typer.Argument(..., metavar="CHECKPOINT", help="A chk-N directory, savepoint directory or _metadata file (local path or URI)."),
    out: str = typer.Option(..., "--out", metavar="DIR", help="New root to create (must not exist or be empty); receives <chk-N or savepoint name>/_metadata."),
    rename_uid: Optional[List[str]] = typer.Option(None, "--rename-uid", metavar="OLD=NEW", help="OLD=NEW: the operator with uid (or operator id) OLD gets uid NEW's operator id. Repeatable."),
    drop_operator: Optional[List[str]] = typer.Option(None, "--drop-operator", metavar="UID|HASH|NAME", help="Remove this operator's state (uid, name or operator id). Repeatable."),
    drop_state: Optional[List[str]] = typer.Option(None, "--drop-state", metavar="UID/STATE", help="UID/STATE: remove this operator state (list, union, broadcast) of the operator. Repeatable."),
    copy: bool = typer.Option(False, "--copy", metavar="", help="Also copy every referenced file under the new root (a self-contained snapshot)."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of text."),
) -> None:
    """Rename operator uids, drop operators or operator states: a new _metadata, every kept byte unchanged."""
    from repair.ops.edit import edit as run_edit

    renames = {}
    for value in rename_uid or []:
        old, equals, new = value.partition("=")
        if not equals or not old or not new:
            raise UsageError(f"--rename-uid takes OLD=NEW, not {value!r}")
        renames[old] = new
    result = run_edit(path, out, rename_uids=renames, drop_operators=drop_operator or [], drop_states=drop_state or [], copy=copy)
    _show(result, json_output, _renderer("render_edit"))


@app.command()
def upgrade(
    path: str = typer.Argument(..., metavar="CHECKPOINT", help="A Flink 1.x chk-N directory, savepoint directory, _metadata file, or job root (its newest); local path or URI."),
    to: str = typer.Option(..., "--to", metavar="2.0|2.1|2.2|2.3", help="The Flink 2.x release the savepoint is for."),
    out: Optional[str] = typer.Option(None, "--out", metavar="DIR", help="New savepoint directory to create (must not exist or be empty)."),
    check: bool = typer.Option(False, "--check", metavar="", help="Write nothing: say per state what a restore in that release does today (same values, different values, fails). Exit 1 unless every state restores the same."),
    drop_state: Optional[List[str]] = typer.Option(None, "--drop-state", metavar="UID/STATE", help="Leave this keyed state out (e.g. one that cannot be converted). Repeatable."),
    master: Optional[str] = typer.Option(None, "--master", metavar="URL", help="Read the rows (--check too), export and write back as Spark jobs on this master (local[*], spark://host:port)."),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N", min=1, help="Processes reading the rows (--check too), exporting and writing back when not on Spark (default: one per core)."),
    json_output: bool = typer.Option(False, "--json", metavar="", help="Print the documented JSON document instead of text."),
) -> None:
    """A Flink 1.x checkpoint as a canonical savepoint Flink 2.x restores with the same state (Kryo 2.24 values rewritten as Kryo 5 writes them), or with --check what a restore does today. Exit 1 when a state is refused (nothing written)."""
    from repair.ops.upgrade import upgrade as run_upgrade

    if not check and out is None:
        raise UsageError("upgrade writes a new savepoint: give --out DIR (or --check to write nothing)")
    _say_spark(master)
    result = run_upgrade(path, to, out, check=check, drop_states=drop_state or [], workers=workers, master=master)
    _show(result, json_output, _renderer("render_upgrade"))


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: run the app; typed errors become one line and their exit code.

    Usage errors are reported as typer reports them (usage text, exit code 2); a :class:`RepairError`
    from an operation is printed as one line, never as a traceback. With ``--json`` every failure (a
    usage error, a typed error, a signal) is also one document on stdout (docs/schema/error.json).
    SIGINT and SIGTERM stop the command (:mod:`repair.cli.signals`), also while an error is reported or
    Spark is stopped at its end.
    """
    saved_budget = os.environ.get(RETRY_BUDGET_VARIABLE)
    restore_handlers = stop_cleanly_on_signals()
    spark_before = spark_started()  # a caller's (in-process use of main) is not this command's to end
    args = sys.argv[1:] if argv is None else argv
    json_output = "--json" in args  # every failure of a --json run is a document on stdout too
    try:
        try:
            code = _run_app(argv, args, json_output)
        except (KeyboardInterrupt, Stopped) as stop:
            code = _report_stop(stop, args, json_output)
        if spark_started() is not spark_before:  # the Spark this command started ends with it
            try:
                stop_spark(graceful=code not in STOPPED_CODES)
            except (KeyboardInterrupt, Stopped) as stop:  # a signal while it stopped gracefully
                code = _report_stop(stop, args, json_output)
                stop_spark(graceful=False)
        return code
    finally:
        restore_handlers()
        if saved_budget is None:
            os.environ.pop(RETRY_BUDGET_VARIABLE, None)
        else:
            os.environ[RETRY_BUDGET_VARIABLE] = saved_budget


def _run_app(argv: list[str] | None, args: list[str], json_output: bool) -> int:
    try:
        done = app(args=argv, prog_name="repair", standalone_mode=False)
        return done if isinstance(done, int) else 0
    except ClickException as error:  # arguments click refused: a usage error, exit code 2
        return _usage_error(error, _command_in(args), json_output)
    except RepairError as error:  # the library's words, prefixed with the command that ran into it
        command = _command_in(args)
        print_error(f"{command}: {error}" if command else str(error))
        if json_output:
            print_json(error_document(command, error))
        return error.exit_code
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except OSError as error:  # the machine's own trouble (a full disk, a quota) where no layer named it
        command = _command_in(args)
        where = f"{error.filename}: " if error.filename else ""
        print_error(f"{command + ': ' if command else ''}{where}{error.strerror or error}")
        if json_output:
            print_json(failure_document(command, "StorageError", f"{where}{error.strerror or error}", 2,
                                        source=os.fsdecode(error.filename) if error.filename else None))
        return 2


def _report_stop(stop: BaseException, args: list[str], json_output: bool) -> int:
    """The one line of a stopped command (and with ``--json`` its ``Interrupted`` document); its exit
    code, 128 + the signal number."""
    signum = stop.signum if isinstance(stop, Stopped) else signal.SIGINT
    message = stopped_message(signum)
    print_error(message)
    if json_output:
        print_json(failure_document(_command_in(args), "Interrupted", message, 128 + signum,
                                    signal=signal.Signals(signum).name))
    return 128 + signum


def _usage_error(error: ClickException, command: str | None, json_output: bool) -> int:
    """Arguments click refused (an unknown option, a missing argument, a bad value): typer's usage box;
    with ``--json`` one line on stderr and a ``UsageError`` document on stdout instead."""
    if type(error).__name__ == "NoArgsIsHelpError":  # `repair` alone: typer printed the help when raising it
        return error.exit_code
    if not json_output:
        from typer import rich_utils

        rich_utils.rich_format_error(error)  # typer's usage box (standalone_mode=False leaves it to us)
        return error.exit_code
    message = " ".join(error.format_message().split())
    print_error(f"{command}: {message}" if command else message)
    print_json(failure_document(command, "UsageError", message, error.exit_code))
    return error.exit_code


def _complete_runbook(incomplete: str) -> list[tuple[str, str]]:
    """The runbook names starting with ``incomplete``, each with its title (shell completion)."""
    from repair import runbooks

    return [(name, runbooks.title(name)) for name in runbooks.names() if name.startswith(incomplete)]


@app.command()
def runbook(
    name: Optional[str] = typer.Argument(None, help="The runbook to print, e.g. manifest-missing (as diagnose and doctor name it); none lists them.",
                                         autocompletion=_complete_runbook),
) -> None:
    """Print a runbook: what an incident means, how to confirm it, and the commands that get the job back."""
    from repair import runbooks

    if name is None:
        width = max(map(len, runbooks.names()))
        typer.echo("\n".join(f"{name:<{width}}  {runbooks.title(name)}" for name in runbooks.names()))
        raise typer.Exit(0)
    from repair.cli.output import print_markdown

    print_markdown(runbooks.text(name))
    raise typer.Exit(0)


def _output(out: str | None, to: str | None) -> str:
    """``--out``, also accepted under its old name ``--to`` (hidden); one of them is required."""
    if out is not None and to is not None and out != to:
        raise UsageError("--to is the old name of --out: give one of them")
    if out is None and to is None:
        raise UsageError("missing option --out DIR: the new directory to write")
    return out if out is not None else to


def _say_spark(master: str | None) -> None:
    """One line before Spark's JVM starts (seconds of silence otherwise)."""
    if master:
        from repair.ops.runner import check_master

        check_master(master)  # a master Spark would refuse is a usage error before anything starts
        typer.echo(f"starting Spark (master {master}); REPAIR_SPARK_LOG=verbose shows its log", err=True)


def _hint_if_terminal(path: str | None, what: str) -> None:
    """Say how to end the input when standard input is a terminal (else the command seems to hang)."""
    if path in (None, "-") and sys.stdin.isatty():
        typer.echo(f"Paste {what}, then press Ctrl-D on a new line (or pass a file name).", err=True)


def _command_in(argv: list[str]) -> str | None:
    """The ``repair`` command ``argv`` runs (its first word that names one), or None."""
    commands = {command.name or command.callback.__name__.replace("_", "-") for command in app.registered_commands}
    return next((arg for arg in argv if arg in commands), None)


def run() -> None:
    """Runs the command and exits with its code (:mod:`repair.cli.entry` calls it once the signal
    handlers for the imports are in place; console scripts installed before that module call it
    directly). After the command, a signal ends the interpreter's exit at once, in one line."""
    code = main()
    exit_at_once_on_signals()  # main() put back the handlers it found
    if code in STOPPED_CODES:  # cleaned up already: the interpreter's own teardown (finalizing modules,
        sys.stdout.flush()  # freeing every object) only delays the exit the user asked for
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
