"""Every command line the toolkit prints, built in one place, and the next step after verify and fallback.

A :class:`Command` is an argv list; :meth:`Command.to_shell` gives the one line to paste: every argument
``shlex``-quoted (a path with spaces or quotes pastes as one argument), never wrapped, an optional note as
a shell comment after it. The builders here (restore in Flink, relocate, rebuild-manifest, a ``repair``
command) are what fallback, triage, verify's advice and diagnose print. Nothing here reads storage.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from repair.io import storage as st

if TYPE_CHECKING:  # the command builders stay cheap to import (orphans, inspect and the CLI use them)
    from repair.ops.verify.engine import SnapshotSummary, VerifyResult

_SNAPSHOT_KINDS = ("checkpoint", "savepoint")


class Placeholder(str):
    """A part of a command the user fills in (``<checkpoint-root>``, ``...`` for the job's own jar and
    arguments): printed as it is, never quoted."""


#: What stands for the job's jar and arguments in a ``flink run`` line.
JOB_ARGUMENTS = Placeholder("...")


@dataclass(frozen=True)
class Command:
    """One command line: its arguments as the program receives them, and a note printed after it."""

    argv: tuple[str, ...]
    note: str = ""

    def to_shell(self) -> str:
        """The line to paste into a POSIX shell: each argument quoted, the note a ``#`` comment; one line."""
        line = " ".join(arg if isinstance(arg, Placeholder) else shlex.quote(arg) for arg in self.argv)
        note = " ".join(self.note.split())  # a comment cannot span lines
        return f"{line}   # {note}" if note else line

    def __str__(self) -> str:
        return self.to_shell()


def repair_command(*args: str, note: str = "") -> Command:
    """``repair ARGS...``."""
    return Command(("repair", *args), note)


def runbook_command(runbook: str) -> Command:
    """``repair runbook NAME`` for a runbook's file (``runbooks/NAME.md``): the way to read it wherever
    repair is installed."""
    return repair_command("runbook", runbook.rsplit("/", 1)[-1].removesuffix(".md"))


def relocate_command(path: str, out: str, note: str = "") -> Command:
    return repair_command("relocate", path, "--out", out, note=note)


def rebuild_command(path: str, out: str, *, drop_missing: bool = False, salvage: bool = False, older: tuple[str, ...] = ()) -> Command:
    flags = ["--salvage"] if salvage else ["--drop-missing"] if drop_missing else []
    return repair_command("rebuild-manifest", path, "--out", out, *flags, *(arg for source in older for arg in ("--older", source)))


def restore_commands(path: str, version: int) -> list[Command]:
    """``flink run -s`` lines restoring the checkpoint or savepoint at ``path`` in NO_CLAIM mode, per Flink
    release that writes ``_metadata`` format ``version`` (newest release first; one plain line when the
    format is unknown)."""
    commands = []
    if version >= 5 or version == 4:
        commands.append(_flink_run(path, ["-claimMode", "NO_CLAIM"], "Flink 1.20 and 2.x"))
    if version in (3, 4):
        commands.append(_flink_run(path, ["-restoreMode", "NO_CLAIM"], "Flink 1.15 to 1.19"))
    if version == 3:
        commands.append(_flink_run(path, [], "Flink 1.11 to 1.14 (no restore modes: copy the checkpoint first)"))
    return commands or [_flink_run(path, [], "")]


def _flink_run(path: str, mode: list[str], note: str) -> Command:
    return Command(("flink", "run", "-s", path, *mode, JOB_ARGUMENTS), note)


def commands_json(commands: list[Command]) -> tuple[list[str], list[list[str]]]:
    """The ``--json`` form of a list of commands: the lines, and beside them each command's argv."""
    return [c.to_shell() for c in commands], [list(c.argv) for c in commands]


def output_next_to(root: str, what: str, name: str) -> str:
    """A suggested new root next to the job root, never inside it: ``<root>-<what>-<chk-N>`` (absolute)."""
    root = st.absolute(root).rstrip("/")
    return st.join(st.parent(root), f"{st.basename(root)}-{what}-{name}")


def manifest_only(culprit) -> bool:
    """Whether a rebuilt MANIFEST and CURRENT repair this culprit (a fallback ``Culprit``)."""
    from repair.ops.rebuild.checkpoint import REPAIRABLE

    name = culprit.local_name or ""
    return culprit.kind in REPAIRABLE or name == "CURRENT" or name.startswith("MANIFEST-")


def verify_next_steps(result: VerifyResult) -> list[str]:
    """What to do after a verification: rebuild, relocate (moved, or damaged paths), fall back or triage (empty when nothing is to do)."""
    from repair.ops.rebuild.checkpoint import is_manifest_problem
    from repair.ops.verify.engine import DAMAGED_PATH

    snapshots = [s for s in result.snapshots if s.kind in _SNAPSHOT_KINDS]
    if not snapshots:
        return []
    newest = max(snapshots, key=lambda s: s.number if s.number is not None else -1)
    root = result.path if result.layout == "job-root" else (st.parent(newest.path) if newest.number is not None else None)
    errors: dict[str, list] = {}
    for finding in result.findings:
        if finding.severity == "error":
            errors.setdefault(finding.reference.snapshot, []).append(finding)
    steps = []
    if newest.metadata_version is None and root is not None:
        steps.append(f"the newest _metadata ({newest.name}) cannot be read: `{repair_command('fallback', root)}` picks the newest "
                     f"valid checkpoint, `{repair_command('inspect', root, '-c', Placeholder('N'))}` reads an older one")
    elif errors.get(newest.name) and all(f.kind == DAMAGED_PATH for f in errors[newest.name]):
        out = output_next_to(root, "relocated", newest.name) if root is not None else Placeholder("NEW_ROOT")
        steps.append(f"only paths in the _metadata of {newest.name} are damaged (each file is where its other files are): "
                     f"`{relocate_command(newest.path, out)}` writes a _metadata recording where each file is, "
                     "with nothing lost")
    elif errors.get(newest.name) and all(is_manifest_problem(f) for f in errors[newest.name]):
        out = output_next_to(root, "rebuilt", newest.name) if root is not None else Placeholder("NEW_ROOT")
        steps.append(f"only MANIFEST, CURRENT or OPTIONS files of {newest.name} are broken: "
                     f"`{rebuild_command(newest.path, out)}` rebuilds it from its SSTs with nothing lost")
    if errors and root is not None:
        steps.append(f"`{repair_command('triage', root)}` ranks every way back (an older checkpoint, a rebuild) with what "
                     "each loses and the commands")
    elif not errors.get(newest.name) and newest.relocated_from:
        steps.append(_relocate_step(newest, root))
    return steps


def fallback_next_steps(result) -> list[str]:
    """After a fallback (a ``FallbackResult``): a newer checkpoint that a MANIFEST rebuild recovers with nothing
    lost, or triage."""
    steps = []
    chosen_id = result.chosen.checkpoint_id if result.chosen is not None else None
    newer = [v for v in result.checkpoints if v.valid is False and (chosen_id is None or (v.checkpoint_id or 0) > chosen_id)]
    rebuildable = next((v for v in newer if v.culprits and all(manifest_only(c) for c in v.culprits)), None)
    if rebuildable is not None and result.chosen is not None:
        command = rebuild_command(rebuildable.path, output_next_to(result.root, "rebuilt", rebuildable.name))
        steps.append(f"{rebuildable.name} is newer than {result.chosen.name} and only its MANIFEST or CURRENT files are broken: "
                     f"`{command}` rebuilds it with nothing lost, so less input is replayed")
    if newer:
        steps.append(f"`{repair_command('triage', result.root)}` ranks every way back with what each loses and the commands")
    return steps


def _relocate_step(snapshot: SnapshotSummary, root: str | None) -> str:
    recorded = ", ".join(snapshot.relocated_from)
    out = output_next_to(root, "relocated", snapshot.name) if root is not None else Placeholder("NEW_ROOT")
    return (f"{snapshot.name} was written at {recorded}: Flink opens the paths its _metadata records, so restore it after "
            f"`{relocate_command(snapshot.path, out)}` (a _metadata pointing where its files are now)")
