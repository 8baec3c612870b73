"""``repair fallback``: the newest retained checkpoint that will restore, why newer ones will not, and how.

Builds on :mod:`repair.ops.verify.engine`: every retained checkpoint of a job root is verified (each physical
file once, so the cost grows with unique bytes, not checkpoints x bytes). A checkpoint is valid when
no error finding references it. Incremental checkpoints share SST files, so one bad shared file breaks
every checkpoint that references it; the result says so explicitly.

A root can hold checkpoints of more than one job or deployment (several deployments sharing one
checkpoint directory with a fixed job id: the ``_metadata already exists`` incident). Checkpoints are
grouped into *lineages* by the operators they hold and the job their files belong to, and by whether
their stored id matches their ``chk-N`` directory. With more than one lineage no checkpoint is picked
silently: ``chosen`` is null until ``lineage`` selects one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from repair.errors import UsageError
from repair.findings import Problem, Severity
from repair.formats.flink.keygroups import operator_label
from repair.io import storage as st
from repair.ops.advice import (
    Command,
    commands_json,
    manifest_only,
    output_next_to,
    rebuild_command,
    relocate_command,
    repair_command,
    restore_commands,
)
from repair.ops.renamed import renamed
from repair.ops.verify.engine import DAMAGED_PATH, CheckpointFinding, SnapshotSummary, verify, verify_newest_first
from repair.results import CommandResult


@dataclass(frozen=True)
class Culprit(Problem):
    """Why a checkpoint is not valid: one problem in one file it references (a verify finding with fewer
    fields: no offset, expected or found)."""

    local_name: str | None = field(default=None, kw_only=True)
    path: str | None = field(default=None, kw_only=True)
    operator: str | None = field(default=None, kw_only=True)
    subtask: int | None = field(default=None, kw_only=True)
    column_family: str | None = field(default=None, kw_only=True)
    key_group_range: tuple[int, int] | None = field(default=None, kw_only=True)

    @classmethod
    def from_finding(cls, finding: CheckpointFinding) -> "Culprit":
        ref = finding.reference
        return cls(finding.kind, finding.message, severity=finding.severity, local_name=ref.local_name, path=finding.path,
                   operator=ref.operator, subtask=ref.subtask, column_family=finding.column_family, key_group_range=ref.key_groups)

    def context(self) -> tuple[tuple[str, Any], ...]:
        return (("local_name", self.local_name), ("path", self.path), ("operator", self.operator), ("subtask", self.subtask),
                ("column_family", self.column_family),
                ("key_group_range", list(self.key_group_range) if self.key_group_range else None))


@dataclass
class CheckpointVerdict:
    checkpoint_id: int | None
    name: str
    path: str
    #: None when not verified: older than the chosen checkpoint (use ``check_all`` to verify all).
    valid: bool | None
    lineage: int
    culprits: list[Culprit] = field(default_factory=list)
    #: When it was written (seconds since the epoch): the newest time RocksDB recorded in its SSTs, else its
    #: ``_metadata``'s modification time (``age_source`` says which); None when neither is known.
    written_at: float | None = None
    #: Files that stayed unreadable (storage faults): with no culprit, the checkpoint could not be judged.
    unreadable: list[Culprit] = field(default_factory=list)
    age_source: str | None = None

    @property
    def verdict(self) -> str:
        """``valid``, ``broken``, ``unknown`` (a file stayed unreadable) or ``not_checked``."""
        if self.culprits:
            return "broken"
        if self.unreadable:
            return "unknown"
        return "valid" if self.valid else "not_checked"

    def to_json(self) -> dict:
        return {
            "checkpoint_id": self.checkpoint_id,
            "name": self.name,
            "path": self.path,
            "valid": self.valid,
            "verdict": self.verdict,
            "lineage": self.lineage,
            "culprits": [c.to_json() for c in self.culprits],
            "unreadable": [c.to_json() for c in self.unreadable],
            "written_at": st.iso_utc(self.written_at),
            "age_source": self.age_source,
        }


@dataclass
class SharedDamage:
    """One bad file and every retained checkpoint that references it (newest first)."""

    culprit: Culprit
    parallelism: int | None
    checkpoints: list[str]

    @property
    def kind(self) -> str:
        return self.culprit.kind

    def explain(self) -> str:
        c = self.culprit
        who = _and_list(self.checkpoints)
        verb = "references" if len(self.checkpoints) == 1 else "all reference"
        owner = f" of {operator_label(c.operator)}[{c.subtask}/{self.parallelism}]" if c.operator is not None else ""
        return f"{who} {verb} {c.local_name or 'a file'}{owner}: {c.message}"

    def to_json(self) -> dict:
        return {**self.culprit.to_json(), "checkpoints": self.checkpoints, "explanation": self.explain()}


@dataclass
class Lineage:
    index: int
    checkpoints: list[str]  # newest first
    job_ids: list[str]
    operator_ids: list[str]
    reason: str  # what sets it apart, when there is more than one

    def to_json(self) -> dict:
        return {"index": self.index, "checkpoints": self.checkpoints, "job_ids": self.job_ids,
                "operators": len(self.operator_ids), "reason": self.reason}


@dataclass
class RestoreAdvice:
    path: str
    commands: list[Command]
    config: list[str]
    notes: list[str]

    def to_json(self) -> dict:
        lines, argvs = commands_json(self.commands)
        return {"path": self.path, "commands": lines, "commands_argv": argvs, "config": self.config, "notes": self.notes}


@dataclass
class FallbackResult(CommandResult):
    root: str
    checkpoints: list[CheckpointVerdict]  # newest first
    lineages: list[Lineage]
    damaged: list[SharedDamage]
    chosen: CheckpointVerdict | None
    restore: RestoreAdvice | None
    lost: list[str]  # when nothing is valid: what cannot be restored
    message: str
    #: Checkpoints newer than the chosen one (all, when none is chosen) whose verdict is unknown.
    unknown: list[str] = field(default_factory=list)
    #: Every finding of the checkpoints verified, as `repair verify` reports them.
    findings: list[CheckpointFinding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """A checkpoint to restore was chosen, and no newer one's verdict is unknown."""
        return self.chosen is not None and not self.unknown

    @property
    def source(self) -> str:
        return st.absolute(self.root)

    def document(self) -> dict:
        return {
            "source": self.source,
            "root": self.source,  # the same as source (named so before every command had source)
            "unknown": self.unknown,
            "chosen": {"checkpoint_id": self.chosen.checkpoint_id, "path": self.chosen.path} if self.chosen else None,
            "message": self.message,
            "restore": self.restore.to_json() if self.restore else None,
            "checkpoints": [c.to_json() for c in self.checkpoints],
            "damaged_files": [d.to_json() for d in self.damaged],
            "lineages": [lineage.to_json() for lineage in self.lineages],
            "lost": self.lost,
            "findings": [f.to_json() for f in self.findings],
        }


@renamed(root="path")
def fallback(
    path: str,
    *,
    lineage: int | None = None,
    check_all: bool = False,
    storage: st.Storage | None = None,
    workers: int | None = None,
    master: str | None = None,
    on_progress=None,
    state_dir: str | None = None,
) -> FallbackResult:
    """Verify every retained checkpoint under the job root ``path`` and pick the newest valid one (see module doc).

    ``state_dir``: a ``repair watch``'s state directory; the SSTs it verified and unchanged since are not
    read again (what changed since, and the newer checkpoints' own files, are)."""
    root = path
    checked = watched_files(state_dir, storage)
    if check_all:
        report = verify(root, storage=storage, workers=workers, master=master, on_progress=on_progress, checked_files=checked)
    else:
        report = verify_newest_first(
            root, storage=storage, workers=workers, master=master, on_progress=on_progress,
            enough=lambda partial: _every_lineage_has_a_valid_checkpoint(partial, lineage), checked_files=checked,
        )
    return judge(report, root, lineage=lineage)


def watched_files(state_dir: str | None, storage: st.Storage | None):
    """The files a ``repair watch`` verified (its ``state_dir``), for verify to skip when unchanged; or None."""
    if state_dir is None:
        return None
    from repair.ops.watch.state import files_verified_by_watch

    return files_verified_by_watch(state_dir, storage)


def judge(report, root: str, *, lineage: int | None = None) -> FallbackResult:
    """The fallback verdicts of a verify ``report`` of the job root ``root`` (see :func:`fallback`)."""
    if report.layout != "job-root":
        raise UsageError(f"fallback needs a job checkpoint root (the directory holding chk-*/ and shared/), got a {report.layout}", source=root)
    snapshots = sorted(report.snapshots, key=lambda s: s.number if s.number is not None else -1, reverse=True)
    lineages, lineage_of = _lineages(snapshots)
    errors = [f for f in report.findings if f.severity == Severity.ERROR]
    unreadable = [f for f in report.findings if f.severity == Severity.UNKNOWN]
    verdicts = []
    for snap in snapshots:
        culprits = [Culprit.from_finding(f) for f in errors if f.reference.snapshot == snap.name]
        unread = [Culprit.from_finding(f) for f in unreadable if f.reference.snapshot == snap.name]
        valid = False if culprits else None if unread or not snap.checked else True
        written, source = snap.time
        verdicts.append(CheckpointVerdict(snap.checkpoint_id, snap.name, snap.path, valid, lineage_of[snap.name], culprits,
                                          written, unread, source))
    damaged = _damaged_files(errors, [s.name for s in snapshots])

    if len(lineages) > 1 and lineage is None:
        candidates: list[CheckpointVerdict] = []
        message = (
            f"{len(lineages)} jobs or deployments wrote checkpoints into this directory; not choosing one for you. "
            "Pass --lineage N (see the lineages below) after checking which deployment you want to restore."
        )
    else:
        wanted = lineage if lineage is not None else 0
        if wanted not in {l.index for l in lineages}:
            raise UsageError(f"no lineage {wanted}; this root has lineages {', '.join(str(l.index) for l in lineages)}")
        candidates = [v for v in verdicts if v.lineage == wanted]
        message = ""
    chosen = next((v for v in candidates if v.valid), None)
    restore = _restore_advice(chosen, snapshots, root) if chosen else None
    lost: list[str] = []
    if chosen is None and candidates:
        lost = _what_is_lost(candidates[0]) + [_repair_hint(candidates[0])]
        message = f"no retained checkpoint is valid; the newest, {candidates[0].name}, cannot restore: " + "; ".join(lost[:-1])
    elif chosen is not None:
        newer = [v.name for v in candidates if v is not chosen and (v.checkpoint_id or 0) > (chosen.checkpoint_id or 0)
                 and v.verdict == "broken"]
        message = f"restore {chosen.name}" + (f" (newer {_and_list(newer)} {'is' if len(newer) == 1 else 'are'} broken)" if newer else "")
    unknown = [v.name for v in candidates if v.verdict == "unknown"
               and (chosen is None or (v.checkpoint_id or 0) > (chosen.checkpoint_id or 0))]
    if unknown:
        message = (f"the verdict of {_and_list(unknown)} is unknown: {'a file' if len(unknown) == 1 else 'files'} could not "
                   f"be read (a storage fault, not damage); retry when the store answers, e.g. "
                   f"`{repair_command('--retry-budget', '600', 'fallback', root)}`, before giving up newer state. ") + message
    return FallbackResult(root, verdicts, lineages, damaged, chosen, restore, lost, message, unknown, list(report.findings))


def _every_lineage_has_a_valid_checkpoint(report, wanted: int | None) -> bool:
    """Stop rule of the newest-first verification: the wanted lineage (or every one) has a checked valid checkpoint."""
    snapshots = sorted(report.snapshots, key=lambda s: s.number if s.number is not None else -1, reverse=True)
    lineages, lineage_of = _lineages(snapshots)
    targets = [wanted] if wanted is not None else [l.index for l in lineages]
    found = {lineage_of[s.name] for s in snapshots if s.checked and s.ok and not s.unknown}
    return all(t in found for t in targets)


def _lineages(snapshots: list[SnapshotSummary]) -> tuple[list[Lineage], dict[str, int]]:
    """Group checkpoints by (operators, job of their files, id matching its directory); newest group first."""
    groups: dict[tuple, list[SnapshotSummary]] = {}
    decodable = [snap for snap in snapshots if snap.metadata_version is not None]
    for snap in decodable:  # newest first
        own_id = snap.number is None or snap.checkpoint_id is None or snap.checkpoint_id == snap.number
        key = (tuple(sorted(snap.operator_ids)), tuple(snap.recorded_job_ids), own_id)
        groups.setdefault(key, []).append(snap)
    lineages, lineage_of = [], {}
    for index, (key, members) in enumerate(groups.items()):
        operators, job_ids, own_id = key
        reasons = []
        if len(groups) > 1:
            if not own_id:
                reasons.append("stored checkpoint ids differ from their chk-N directories")
            if job_ids:
                reasons.append(f"files written by job {', '.join(job_ids)}")
            reasons.append(f"{len(operators)} operators")
        lineages.append(Lineage(index, [m.name for m in members], list(job_ids), list(operators), "; ".join(reasons)))
        for member in members:
            lineage_of[member.name] = index
    # A checkpoint whose _metadata cannot be read joins the lineage of its nearest readable neighbour.
    for snap in snapshots:
        if snap.name not in lineage_of:
            nearest = min(decodable, key=lambda d: abs((d.number or 0) - (snap.number or 0)), default=None)
            index = lineage_of[nearest.name] if nearest else 0
            if not lineages:
                lineages.append(Lineage(0, [], [], [], ""))
            lineage_of[snap.name] = index
            lineages[index].checkpoints.append(snap.name)
            lineages[index].checkpoints.sort(key=lambda name: -int(name[4:]) if name[4:].isdigit() else 0)
    return lineages, lineage_of


def _damaged_files(errors: list[CheckpointFinding], order: list[str]) -> list[SharedDamage]:
    rank = {name: i for i, name in enumerate(order)}
    groups: dict[tuple, SharedDamage] = {}
    for finding in errors:
        ref = finding.reference
        key = (finding.kind, finding.path, ref.operator, ref.subtask, ref.local_name, finding.message)
        damage = groups.setdefault(key, SharedDamage(Culprit.from_finding(finding), ref.parallelism, []))
        if ref.snapshot not in damage.checkpoints:
            damage.checkpoints.append(ref.snapshot)
    for damage in groups.values():
        damage.checkpoints.sort(key=lambda name: rank.get(name, 0))
    return sorted(groups.values(), key=lambda d: (-len(d.checkpoints), rank.get(d.checkpoints[0], 0)))


def _what_is_lost(verdict: CheckpointVerdict) -> list[str]:
    """Per damaged operator subtask: its key groups and column families (states)."""
    lost: dict[tuple, set] = {}
    for culprit in verdict.culprits:
        key = (culprit.operator, culprit.subtask, culprit.key_group_range)
        lost.setdefault(key, set())
        if culprit.column_family:
            lost[key].add(culprit.column_family)
        elif culprit.local_name:
            lost[key].add(culprit.local_name)
    lines = []
    for (operator, subtask, key_groups), what in sorted(lost.items(), key=lambda item: str(item[0])):
        if operator is None:
            lines.append(f"{verdict.name}: {', '.join(sorted(what)) or 'its _metadata'} unreadable")
            continue
        groups = f" key groups {key_groups[0]}-{key_groups[1]}" if key_groups else ""
        lines.append(f"{operator_label(operator)} subtask {subtask}{groups}: {', '.join(sorted(what))}")
    return lines


def _new_root(verdict: CheckpointVerdict, what: str) -> str:
    """Where the repair (``what``: rebuilt, relocated) of a broken checkpoint is suggested to go: next to its job root."""
    return output_next_to(st.parent(verdict.path), what, verdict.name)


def _repair_hint(verdict: CheckpointVerdict) -> str:
    """Which repair could recover a broken checkpoint, from the kinds of its culprits."""
    if verdict.culprits and all(c.kind == DAMAGED_PATH for c in verdict.culprits):
        return (f"only paths in its _metadata are damaged (each file is where the checkpoint's other files are): "
                f"`{relocate_command(verdict.path, _new_root(verdict, 'relocated'))}` writes a _metadata recording where each file is")
    if verdict.culprits and all(manifest_only(c) for c in verdict.culprits):
        return (f"only MANIFEST or CURRENT files are broken: `{rebuild_command(verdict.path, _new_root(verdict, 'rebuilt'))}` "
                "rebuilds them from the SSTs into a new checkpoint")
    lost_ssts = verdict.culprits and all(
        (c.local_name or "").endswith(".sst") or manifest_only(c) for c in verdict.culprits
    )
    if lost_ssts:
        return ("SST files are lost or corrupt: the key groups and states above cannot be recovered from this "
                "checkpoint as it is; check older checkpoints, savepoints, or the TaskManagers' local recovery "
                "directories (`repair verify DIR` on a RocksDB dir) first. As a last resort, "
                f"`{rebuild_command(verdict.path, _new_root(verdict, 'rebuilt'), drop_missing=True)}` rebuilds it without the lost "
                "SSTs and reports exactly which states, key groups and key ranges are lost")
    return ("_metadata or files other than SSTs are lost or corrupt: the key groups and states above cannot be "
            "recovered from this checkpoint; check older checkpoints, savepoints, or the TaskManagers' local "
            "recovery directories (`repair verify DIR` on a RocksDB dir)")


def _restore_advice(chosen: CheckpointVerdict, snapshots: list[SnapshotSummary], root: str) -> RestoreAdvice:
    summary = next(s for s in snapshots if s.name == chosen.name)
    path = st.absolute(chosen.path)  # Flink needs an absolute path or a URI
    version = summary.metadata_version or 0
    commands, restore_path = [], path
    if summary.relocated_from:  # Flink would open the recorded paths: a _metadata pointing where the files are, first
        target = output_next_to(root, "relocated", chosen.name)
        restore_path = st.join(target, chosen.name)
        commands.append(relocate_command(path, target, note="first: a _metadata pointing where its files are now"))
    commands += restore_commands(restore_path, version)
    config = []
    if version >= 5 or version == 4:
        config += [f"execution.state-recovery.path: {restore_path}", "execution.state-recovery.claim-mode: NO_CLAIM   # Flink 1.20 and 2.x"]
    if version in (3, 4):
        config += [f"execution.savepoint.path: {restore_path}", "execution.savepoint-restore-mode: NO_CLAIM   # Flink 1.15 to 1.19"]
    notes = []
    for recorded, actual in summary.relocated_from.items():
        notes.append(
            f"This checkpoint was written at {recorded} and is read at {actual}: Flink opens the paths its _metadata "
            f"records, so the commands relocate it first (`repair relocate ... --copy` makes the new root "
            f"self-contained and movable), or restore it where {recorded} exists."
        )
    notes += [
        "Restore in NO_CLAIM mode (the default since Flink 1.15): the new job then never deletes files of the "
        "checkpoint it starts from, so this fallback stays available if the restore goes wrong.",
        f"_metadata format version {version}: "
        + {3: "written by Flink 1.11 to 1.15", 4: "written by Flink 1.16 to 1.20", 5: "written by Flink 2.0"}.get(version, "written by Flink 2.1 or newer"),
    ]
    return RestoreAdvice(path, commands, config, notes)



def _and_list(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
