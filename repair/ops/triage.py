"""``repair triage``: every way back from a failing restore, ranked, with the exact commands.

The on-call runbook as one operation. Every retained checkpoint of a job root is verified (and every
savepoint under ``savepoints``), then each way back is listed:

- **restore** the newest valid checkpoint of each lineage (after ``repair relocate`` when it was
  moved: Flink opens the paths its ``_metadata`` records), and every valid savepoint;
- **relocate** a newer, broken checkpoint whose only problems are damaged paths in its ``_metadata``
  (a recorded path that disagrees with where its files were written, see :mod:`repair.io.layout`): a
  ``_metadata`` recording where each file is, nothing is lost;
- **rebuild-manifest** a newer, broken checkpoint whose only problems are MANIFEST, CURRENT or
  OPTIONS files (and damaged paths, which the rebuilt ``_metadata`` records where the files are):
  nothing is lost;
- **rebuild-manifest --older** a newer checkpoint whose damaged or missing SSTs an older source (``older``,
  and the native savepoints under ``savepoints``) holds intact copies of: each is replaced by its copy,
  nothing is lost (:mod:`repair.ops.rebuild.older`);
- **rebuild-manifest --salvage** a newer checkpoint whose SSTs are corrupt: each is replaced by the
  entries of its sound blocks, and exactly what is lost is said per file (entries, key groups, key
  bounds; nothing when only a metadata block is damaged), missing files dropped whole;
- **rebuild-manifest --drop-missing** a newer checkpoint whose SSTs are missing or corrupt: exactly
  what is lost is said per dropped file (state, key groups, key range), as the rebuild reports it.

What a rebuild would do is worked out in memory (:func:`~repair.ops.rebuild.checkpoint.plan_rebuild`),
nothing is written. Ways back are ranked lossless first, then by how recent the state is (for one
checkpoint, salvaging before dropping: it loses no more, usually less): by checkpoint id (a savepoint
takes its id from the job's checkpoint counter, so a savepoint taken after ``chk-5`` has
a larger id), then by time. So the first one replays the least input. ``_metadata`` holds no timestamp;
a snapshot's time is the newest creation time RocksDB recorded inside its SSTs, which copies keep, else
its ``_metadata``'s modification time as the store reports it (a copy made without keeping times shows
the time of the copy); each way says which (``age_source``). A checkpoint's time is taken as the latest
of its own and every older checkpoint's, so ages never grow with the checkpoint number.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field, replace

from repair.errors import RepairError, UsageError
from repair.io import storage as st
from repair.io.layout import DIRECTORY, JOB_ROOT, METADATA, SAVEPOINT, SAVEPOINTS_DIR, Layout, classify
from repair.ops.advice import (
    Command,
    commands_json,
    output_next_to,
    rebuild_command,
    relocate_command,
    repair_command,
    restore_commands,
)
from repair.ops.fallback import Lineage, judge, watched_files
from repair.ops.rebuild.checkpoint import plan_rebuild
from repair.ops.rebuild.losses import LostFile
from repair.ops.rebuild.older import OlderSources, Replacement, load_older
from repair.ops.rebuild.salvage import SalvagedFile
from repair.ops.renamed import renamed
from repair.ops.verify.engine import DAMAGED_PATH, SnapshotSummary, VerifyResult, verify
from repair.results import CommandResult

RESTORE = "restore"
RELOCATE = "relocate"
REBUILD = "rebuild-manifest"
REBUILD_DROPPING = "rebuild-manifest --drop-missing"
REBUILD_SALVAGING = "rebuild-manifest --salvage"
REBUILD_REPLACING = "rebuild-manifest --older"
#: Of two ways back from the same checkpoint, the one that loses less first.
_ACTION_ORDER = {RESTORE: 0, RELOCATE: 0, REBUILD: 0, REBUILD_REPLACING: 0, REBUILD_SALVAGING: 1, REBUILD_DROPPING: 2}


@dataclass
class WayBack:
    """One way to get the job running again, with what it costs."""

    action: str  # RESTORE | RELOCATE | REBUILD | REBUILD_SALVAGING | REBUILD_DROPPING
    snapshot: str  # chk-N or the savepoint's directory name
    kind: str  # checkpoint | savepoint
    path: str
    checkpoint_id: int | None
    lossless: bool
    #: When the snapshot was written (seconds since the epoch; see ``age_source``), and its age then.
    written_at: float | None
    age_seconds: float | None
    #: The steps in order: repairs, then the restore (for the newest Flink release that reads the snapshot).
    commands: list[Command]
    why: str
    lineage: int | None = None
    #: The restore step for older Flink releases, when they differ (``-restoreMode`` before Flink 1.20).
    alternatives: list[Command] = field(default_factory=list)
    #: With REBUILD_DROPPING (and REBUILD_SALVAGING, for files dropped whole): every SST left out and what it held.
    lost: list[LostFile] = field(default_factory=list)
    #: With REBUILD_SALVAGING: every SST replaced by its salvaged copy and what it lost.
    salvaged: list[SalvagedFile] = field(default_factory=list)
    #: With REBUILD_REPLACING: every SST replaced by its intact original from an older source.
    replaced: list[Replacement] = field(default_factory=list)
    #: Files recorded under another root and read where they are now (a copied or moved checkpoint).
    relocated_from: dict[str, str] = field(default_factory=dict)
    rank: int = 0
    #: Where ``written_at`` comes from: ``AGE_FROM_SST`` (inside the SSTs) or ``AGE_FROM_FILE_TIME`` (``_metadata``'s file time).
    age_source: str | None = None

    def loss_lines(self) -> list[str]:
        """What is lost, one line per dropped file."""
        lines = []
        for item in self.lost:
            groups = f" key groups {item.key_groups[0]}-{item.key_groups[1]}" if item.key_groups else ""
            state = item.column_family or "state unknown"
            lines.append(f"{item.operator}[{item.subtask}] {item.local_name} ({item.reason}): {state}{groups}"
                         + (f", {item.entries} entries" if item.entries is not None else ""))
        for item in self.salvaged:
            groups = f" key groups {item.key_groups[0]}-{item.key_groups[1]}" if item.key_groups else ""
            lost = "an unknown number of" if item.entries_lost is None else str(item.entries_lost)
            lines.append(f"{item.operator}[{item.subtask}] {item.local_name} (salvaged): {item.column_family}{groups}, "
                         f"{lost} entries lost, {item.entries_kept} kept")
        return lines

    def to_json(self) -> dict:
        commands, commands_argv = commands_json(self.commands)
        alternatives, alternatives_argv = commands_json(self.alternatives)
        return {
            "rank": self.rank, "action": self.action, "snapshot": self.snapshot, "kind": self.kind, "path": self.path,
            "checkpoint_id": self.checkpoint_id, "lineage": self.lineage, "lossless": self.lossless,
            "written_at": st.iso_utc(self.written_at), "age_seconds": round(self.age_seconds) if self.age_seconds is not None else None,
            "age_source": self.age_source,
            "why": self.why, "commands": commands, "commands_argv": commands_argv, "alternatives": alternatives,
            "alternatives_argv": alternatives_argv, "relocated_from": self.relocated_from,
            "lost": [item.to_json() for item in self.lost],
            "salvaged": [item.to_json() for item in self.salvaged],
            "replaced": [item.to_json() for item in self.replaced],
        }


@dataclass
class BeyondRepair:
    """A broken checkpoint newer than every way back that no repair recovers, and why."""

    snapshot: str
    path: str
    reasons: list[str]

    def to_json(self) -> dict:
        return {"snapshot": self.snapshot, "path": self.path, "reasons": self.reasons}


@dataclass
class TriageResult(CommandResult):
    root: str
    savepoints: str | None
    checked: dict[str, int]
    ways: list[WayBack]  # ranked, best first
    beyond_repair: list[BeyondRepair]
    #: Groups of checkpoints by job or deployment (see :mod:`repair.ops.fallback`), and the one chosen.
    lineages: list[Lineage]
    lineage: int | None
    message: str = ""
    #: Checkpoints newer than every restorable one whose verdict is unknown (a file they reference stayed
    #: unreadable): neither restored nor repaired from here, the retry may show them sound.
    unknown: list[str] = field(default_factory=list)
    #: Every finding of the retained checkpoints, as `repair verify` reports them.
    findings: list = field(default_factory=list)

    @property
    def undecided(self) -> bool:
        """Several jobs or deployments wrote here and none was chosen: no way is called best."""
        return len(self.lineages) > 1 and self.lineage is None

    @property
    def ok(self) -> bool:
        """A way back loses nothing (and it is clear which job's), and no newer checkpoint's verdict is
        unknown (then the exit code is 2: a retry may find a better way; ``ok`` is true exactly at exit 0)."""
        return not self.undecided and not self.unknown and any(way.lossless for way in self.ways)

    @property
    def best(self) -> WayBack | None:
        return self.ways[0] if self.ways and not self.undecided else None

    @property
    def source(self) -> str:
        return st.absolute(self.root)

    def document(self) -> dict:
        return {
            "source": self.source, "root": self.source, "savepoints": self.savepoints, "checked": self.checked,
            "message": self.message, "lineage": self.lineage, "lineages": [lineage.to_json() for lineage in self.lineages],
            "best": self.best.rank if self.best else None, "unknown": self.unknown,
            "ways": [way.to_json() for way in self.ways],
            "beyond_repair": [b.to_json() for b in self.beyond_repair],
            "findings": [f.to_json() for f in self.findings],
        }


@renamed(root="path")
def triage(
    path: str, *, savepoints: str | None = None, storage: st.Storage | None = None, workers: int | None = None,
    master: str | None = None, on_progress=None, now: float | None = None, lineage: int | None = None,
    state_dir: str | None = None, older: list[str] | tuple[str, ...] = (),
) -> TriageResult:
    """Verify every retained checkpoint of the job root ``path`` (and the savepoints under ``savepoints``); rank the ways back.

    With checkpoints of several jobs or deployments in ``root``, every lineage's ways are listed but none
    is called best (and the result is not ``ok``) until ``lineage`` chooses one. ``state_dir``: as for
    :func:`repair.ops.fallback.fallback` (a ``repair watch``'s verified SSTs not read again). ``older``: other
    sources of the job's state (native savepoints, the root of the job restored from, copies), read with
    ``savepoints`` for intact originals of damaged SSTs (:mod:`repair.ops.rebuild.older`).
    """
    storage = storage or st.default_storage()
    now = time.time() if now is None else now
    root = st.absolute(path)
    savepoints = st.absolute(savepoints) if savepoints else None
    layout = classify(root, storage)
    if layout.kind != JOB_ROOT:
        raise UsageError(f"triage needs a job checkpoint root (the directory holding chk-*/ and shared/), got a {layout.kind}", source=root)
    saved_layout = _savepoints_layout(savepoints, storage) if savepoints else None
    older_paths = tuple(st.absolute(p) for p in older) + ((savepoints,) if saved_layout is not None else ())
    sources = load_older(list(older_paths), storage) if older_paths else None
    report = verify(layout, storage=storage, workers=workers, master=master, on_progress=on_progress,
                    checked_files=watched_files(state_dir, storage))
    verdicts = judge(report, root)
    if lineage is not None and lineage not in {l.index for l in verdicts.lineages}:
        raise UsageError(f"no lineage {lineage}; this root has lineages {', '.join(str(l.index) for l in verdicts.lineages)}")
    summaries = {s.name: s for s in report.snapshots}
    times = _checkpoint_times(report.snapshots)
    ways: list[WayBack] = []
    beyond: list[BeyondRepair] = []
    unknown: list[str] = []
    for group in verdicts.lineages:
        if lineage is not None and group.index != lineage:
            continue
        members = [v for v in verdicts.checkpoints if v.lineage == group.index]  # newest first
        newest_valid = next((v for v in members if v.valid), None)
        label = group.index if len(verdicts.lineages) > 1 else None
        if newest_valid is not None:
            summary = summaries[newest_valid.name]
            ways.append(_restore(summary, root, times, now, label))
        for verdict in members:
            if verdict is newest_valid:
                break
            if verdict.verdict == "unknown":  # unread is not broken: no repair is planned from a storage fault
                unknown.append(verdict.name)
                continue
            repairs, reasons = _repair(verdict.name, report, root, storage, times, now, label, sources)
            ways += repairs
            if not repairs:
                beyond.append(BeyondRepair(verdict.name, verdict.path, reasons))
    saved = _savepoints(saved_layout, storage, workers, master, now) if saved_layout else []
    ways += [w for w in saved if isinstance(w, WayBack)]
    beyond += [b for b in saved if isinstance(b, BeyondRepair)]
    ways.sort(key=lambda w: (not w.lossless, -(w.checkpoint_id if w.checkpoint_id is not None else -1), _ACTION_ORDER[w.action],
                             -(w.written_at or 0.0)))
    for rank, way in enumerate(ways, 1):
        way.rank = rank
    checked = {"checkpoints": len(report.snapshots), "savepoints": len(saved), "files": report.files, "bytes": report.bytes}
    result = TriageResult(root, savepoints, checked, ways, beyond, verdicts.lineages, lineage, unknown=unknown,
                          findings=list(report.findings))
    result.message = _message(result)
    return result


def _steps(repairs: list[Command], restore_path: str, version: int) -> tuple[list[Command], list[Command]]:
    """The steps of a way back (``repairs``, then one restore) and the restore lines for older releases."""
    restores = restore_commands(restore_path, version)
    return [*repairs, restores[0]], restores[1:]


def _checkpoint_times(snapshots: list[SnapshotSummary]) -> dict[str, tuple[float | None, str | None]]:
    """A time (and its source) per checkpoint that never decreases with its number: the latest time of it
    and every older checkpoint (copies made without keeping times may reorder the files' own times)."""
    times: dict[str, tuple[float | None, str | None]] = {}
    latest: tuple[float | None, str | None] = (None, None)
    for snap in sorted(snapshots, key=lambda s: s.number if s.number is not None else -1):
        written, source = snap.time
        if written is not None and (latest[0] is None or written >= latest[0]):
            latest = (written, source)
        times[snap.name] = latest
    return times


def _age(written_at: float | None, now: float) -> float | None:
    return None if written_at is None else max(0.0, now - written_at)


def _restore(summary: SnapshotSummary, root: str, times: dict, now: float, lineage: int | None) -> WayBack:
    path = summary.path
    version = summary.metadata_version or 0
    if summary.relocated_from:
        target = output_next_to(root, "relocated", summary.name)
        commands, alternatives = _steps([relocate_command(path, target)], st.join(target, summary.name), version)
        why = (f"the newest valid checkpoint; it was written elsewhere ({', '.join(summary.relocated_from)}), so a "
               "_metadata pointing where its files are now is written first")
    else:
        commands, alternatives = _steps([], path, version)
        why = "the newest valid checkpoint"
    written, source = times.get(summary.name, (None, None))
    return WayBack(RESTORE, summary.name, "checkpoint", path, summary.checkpoint_id, True, written, _age(written, now),
                   commands, why, lineage, alternatives, relocated_from=dict(summary.relocated_from), age_source=source)


def _repair(
    name: str, report: VerifyResult, root: str, storage: st.Storage, times: dict,
    now: float, lineage: int | None, sources: OlderSources | None = None,
) -> tuple[list[WayBack], list[str]]:
    """The ways that bring the broken checkpoint ``name`` back (a relocate when only recorded paths are damaged,
    else rebuilds: salvaging, then dropping, when SSTs are damaged), or none and why there is none."""
    summary = next(s for s in report.snapshots if s.name == name)
    snapshot = report.loaded.get(name)
    if summary.metadata_version is None or snapshot is None:
        return [], [f"its {METADATA} cannot be read"]
    findings = [f for f in report.findings if f.reference.snapshot == name]
    damaged = [f for f in findings if f.kind == DAMAGED_PATH]
    if damaged and all(f.kind == DAMAGED_PATH for f in findings if f.severity == "error"):
        return [_relocate(summary, damaged, root, times, now, lineage)], []
    pristine = copy.deepcopy(snapshot.metadata)  # plan_rebuild edits the metadata in place: the salvage plan starts from this
    try:
        plan = plan_rebuild(snapshot, findings, drop_missing=True, storage=storage)
    except RepairError as error:
        return [], [str(error)]
    if plan.unrepairable:
        return [], plan.unrepairable
    target = output_next_to(root, "rebuilt", name)
    version = summary.metadata_version or 0
    written, source = times.get(name, (None, None))

    def way(action: str, lossless: bool, why: str, plan_) -> WayBack:
        older = tuple(sorted({item.source.given for item in plan_.replaced}))
        command = rebuild_command(summary.path, target, drop_missing=action == REBUILD_DROPPING, salvage=action == REBUILD_SALVAGING,
                                  older=older)
        commands, alternatives = _steps([command], st.join(target, name), version)
        return WayBack(action, name, "checkpoint", summary.path, summary.checkpoint_id, lossless, written, _age(written, now),
                       commands, why, lineage, alternatives, plan_.lost, salvaged=plan_.salvaged, replaced=plan_.replaced,
                       relocated_from=dict(summary.relocated_from), age_source=source)

    if not plan.lost:
        kinds = sorted({reason.rsplit(" ", 1)[-1] for instance in plan.rebuilt for reason in instance.reasons})
        return [way(REBUILD, True, f"newer than every valid checkpoint; only the MANIFEST, CURRENT or OPTIONS files of "
                    f"{len(plan.rebuilt)} RocksDB instance(s) are broken ({', '.join(kinds)}): rebuilt from their SSTs, "
                    "nothing is lost", plan)], []
    ways = []
    replacing = None
    if sources is not None and sources.snapshots:
        try:
            replacing = plan_rebuild(replace(snapshot, metadata=copy.deepcopy(pristine)), findings, drop_missing=False,
                                     older=sources, storage=storage)
        except RepairError:
            replacing = None
    if replacing is not None and replacing.replaced and not replacing.unrepairable:
        ways.append(way(REBUILD_REPLACING, True, (
            f"newer than every valid checkpoint; each of its {len(replacing.replaced)} damaged or missing SST file(s) is "
            f"replaced by its intact original from an older source ({', '.join(sorted({r.source.directory for r in replacing.replaced}))}): "
            "nothing is lost"), replacing))
    try:
        salvaged = plan_rebuild(replace(snapshot, metadata=pristine), findings, drop_missing=True, salvage=True, storage=storage)
    except RepairError:
        salvaged = None
    if salvaged is not None and salvaged.salvaged and not salvaged.unrepairable:
        lossless = not salvaged.lost and not salvaged.salvage_lost
        ways.append(way(REBUILD_SALVAGING, lossless, (
            f"newer than every valid checkpoint; {len(salvaged.salvaged)} damaged SST file(s) are salvaged block by block "
            + ("with every entry kept (only their metadata blocks are damaged)" if lossless else
               "and the entries of their damaged blocks are lost (below)")
            + (f"; {len(salvaged.lost)} other file(s) are dropped whole" if salvaged.lost else "")), salvaged))
    ways.append(way(REBUILD_DROPPING, False, (
        f"newer than every valid checkpoint; {len(plan.lost)} SST file(s) are missing or corrupt: rebuilt without "
        "them, their state is lost (below), and keys they last updated may come back with older values"), plan))
    return ways, []


def _relocate(summary: SnapshotSummary, damaged: list, root: str, times: dict, now: float, lineage: int | None) -> WayBack:
    """The lossless way back for a checkpoint whose only errors are damaged paths: a ``_metadata`` recording
    where each file is (``repair relocate``), then the restore of it."""
    target = output_next_to(root, "relocated", summary.name)
    commands, alternatives = _steps([relocate_command(summary.path, target)], st.join(target, summary.name),
                                    summary.metadata_version or 0)
    paths = sorted({f.found for f in damaged})
    why = (f"newer than every valid checkpoint; its _metadata records {len(paths)} path(s) where no file is, while each "
           f"file is where the checkpoint's other files were written (a damaged path, e.g. {paths[0]}): relocate writes "
           "a _metadata recording where each file is, nothing is lost")
    written, source = times.get(summary.name, (None, None))
    return WayBack(RELOCATE, summary.name, "checkpoint", summary.path, summary.checkpoint_id, True, written,
                   _age(written, now), commands, why, lineage, alternatives, age_source=source)


def _savepoints_layout(directory: str, storage: st.Storage) -> Layout | None:
    """``--savepoints``: one savepoint or a directory of them; None for a directory holding none (yet)."""
    layout = classify(directory, storage)
    if layout.kind == DIRECTORY:
        return None
    if layout.kind not in (SAVEPOINT, SAVEPOINTS_DIR):
        raise UsageError(f"--savepoints: a savepoint or a directory of savepoints, not a {layout.kind}", source=directory)
    return layout


def _savepoints(layout: Layout, storage: st.Storage, workers, master, now: float) -> list[WayBack | BeyondRepair]:
    """A restore for every valid savepoint of ``layout`` (a savepoint, or a directory of them), and why broken ones are not."""
    ways: list[WayBack | BeyondRepair] = []
    for ref in layout.snapshots:
        path = ref.directory
        report = verify(path, storage=storage, workers=workers, master=master)
        summary = report.snapshots[0]
        if not report.ok:
            errors = [f.describe(path) for f in report.findings if f.severity == "error"]
            ways.append(BeyondRepair(summary.name, path, errors))
            continue
        commands, alternatives = _steps([], path, summary.metadata_version or 0)
        written, source = summary.time
        ways.append(WayBack(RESTORE, summary.name, "savepoint", path, summary.checkpoint_id, True, written,
                            _age(written, now), commands, "a valid savepoint", None, alternatives, age_source=source))
    return ways


def _message(result: TriageResult) -> str:
    if result.unknown:
        return (f"the verdict of {', '.join(result.unknown)} is unknown: files could not be read (a storage fault, not "
                f"damage); retry when the store answers, e.g. "
                f"`{repair_command('--retry-budget', '600', 'triage', result.root)}`, before "
                "taking a way back that gives up newer state. " + _ranked(result))
    return _ranked(result)


def _ranked(result: TriageResult) -> str:
    if result.undecided:
        return (f"{len(result.lineages)} jobs or deployments wrote checkpoints into this directory; not choosing one for you. "
                "Pass --lineage N (see the lineages below) after checking which deployment you want to restore.")
    if result.best is None:
        return "no way back found: no retained checkpoint is valid or repairable" + (
            "" if result.savepoints else "; pass --savepoints DIR to consider savepoints")
    best = result.best
    cost = "nothing lost" if best.lossless else f"{len(best.lost)} SST file(s) of state lost"
    return f"best way back: {best.action} {best.snapshot} ({cost})"
