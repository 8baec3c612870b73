"""``repair verify``: prove every SST, MANIFEST and reference of a checkpoint sound, or say what is not.

What is checked, for each retained checkpoint or savepoint under the given path:

- ``_metadata`` decodes;
- every referenced file exists and has the size ``_metadata`` records;
- every SST (external or inline) has a valid footer, and every block passes its checksum and
  decompresses; every MANIFEST record passes its CRC and decodes; CURRENT and OPTIONS parse; the keyed
  backend meta data decodes;
- per RocksDB instance (keyed subtask): CURRENT names a MANIFEST the checkpoint holds, and the
  MANIFEST's live files are exactly the checkpoint's SSTs, with the same sizes;
- with the changelog state backend, the materialized part as above, and every changelog (DSTL) file
  the checkpoint uses: every change set framed, every change's operation and every state's meta data
  decoded, and each offset the checkpoint records is where a change set starts.

Each physical file is read once however many checkpoints reference it (:mod:`file_checks`); its
problems are then reported for every reference. The same checks work on a bare RocksDB directory (a
TaskManager's working or local-recovery ``db/`` dir) and on single SST or MANIFEST files.
"""

from __future__ import annotations

import functools
from dataclasses import field, replace
from typing import Any, Callable, Protocol

from repair.errors import RepairError
from repair.findings import Problem, Severity
from repair.formats.flink.handles import (
    ChangelogBackendHandle,
    ChangelogStreamHandle,
    IncrementalKeyedHandle,
    InMemoryChangelogHandle,
    KeyGroupsHandle,
    OperatorStateHandle,
)
from repair.formats.flink.keygroups import operator_label
from repair.formats.flink.metadata import generation_of_metadata_version
from repair.formats.records import record
from repair.formats.rocksdb.files import FileKind, parse_file_name, table_file_name
from repair.io import storage as st
from repair.io.layout import FILE, JOB_ROOT, METADATA, ROCKSDB_DIR, SNAPSHOT_KINDS, Layout, classify
from repair.io.resolved import IN_FLIGHT
from repair.io.snapshot import LoadedSnapshot, load_snapshot
from repair.ops.runner import default_workers, run_tasks
from repair.ops.verify.file_checks import FileResult, FileTask, check_file, check_opened, kind_for_local_name, open_file
from repair.results import CommandResult

#: Below this many external bytes, a process pool costs more than it saves.
POOL_THRESHOLD_BYTES = 64 << 20


@record
class Reference:
    """Who references a file: which snapshot, operator, subtask, and under which local name."""

    snapshot: str  # chk-N, a savepoint directory name, or a RocksDB directory name
    checkpoint: int | None
    operator: str | None = None
    subtask: int | None = None
    parallelism: int | None = None
    local_name: str | None = None
    role: str | None = None
    key_groups: tuple[int, int] | None = None

    @property
    def where(self) -> str:
        """``chk-12 per-user[1/2] 000042.sst``: the prefix of a finding's message.

        The subtask is ``[index/parallelism]`` with the 0-based index of ``--json``'s ``subtask``;
        an operator known only by its id is shown by the id's first 8 hex characters.
        """
        parts = [self.snapshot]
        if self.operator is not None:
            parts.append(self.operator_label + (f"[{self.subtask}/{self.parallelism}]" if self.subtask is not None else ""))
        if self.local_name:
            parts.append(self.local_name)
        return " ".join(parts)

    @property
    def operator_label(self) -> str | None:
        return None if self.operator is None else operator_label(self.operator)


@record(frozen=True)
class CheckpointFinding(Problem):
    """A problem in a checkpoint: what (a :class:`~repair.findings.Problem`) and where (which snapshot,
    operator, subtask and file reference the bytes). Its JSON document has every field, null included."""

    reference: Reference = field(kw_only=True)
    path: str | None = field(default=None, kw_only=True)
    #: The RocksDB column family (= Flink state) of an SST, when its MANIFEST says so.
    column_family: str | None = field(default=None, kw_only=True)

    ALWAYS_COMPARED = True

    @classmethod
    def of(cls, problem: Problem, reference: Reference, **where: Any) -> "CheckpointFinding":
        """``problem`` (of a file, or of ``_metadata``) where ``reference`` says: ``path``, ``column_family``."""
        return cls(kind=problem.kind, message=problem.message, offset=problem.offset, expected=problem.expected,
                   found=problem.found, severity=problem.severity, details=problem.details, reference=reference, **where)

    def describe(self, root: str | None = None) -> str:
        """One line an on-call engineer can act on; ``path`` is shown relative to ``root``."""
        return f"{self.reference.where}{self._location(root)}: {self.message}"

    def _location(self, root: str | None) -> str:
        if not self.path:
            return ""
        path = self.path
        if root and path.startswith(root.rstrip("/") + "/"):
            path = path[len(root.rstrip("/")) + 1 :]
        return f" ({path})"

    def context(self) -> tuple[tuple[str, Any], ...]:
        ref = self.reference
        return (("checkpoint", ref.checkpoint), ("snapshot", ref.snapshot), ("operator", ref.operator), ("subtask", ref.subtask),
                ("local_name", ref.local_name), ("path", self.path), ("column_family", self.column_family),
                ("key_group_range", list(ref.key_groups) if ref.key_groups else None))

    def group_key(self) -> tuple:
        """Findings of one physical problem share this key (one per referencing checkpoint)."""
        ref = self.reference
        return (self.kind, self.path, self.offset, self.message, ref.operator, ref.subtask, ref.local_name)


@record
class SnapshotSummary:
    name: str
    checkpoint_id: int | None
    kind: str  # checkpoint | savepoint | rocksdb-dir | file
    path: str
    ok: bool = True
    #: N of the ``chk-N`` directory (None for savepoints, RocksDB dirs and files).
    number: int | None = None
    metadata_version: int | None = None
    operator_ids: list[str] = field(default_factory=list)
    #: Job ids that the absolute paths in ``_metadata`` name (which job wrote the files).
    recorded_job_ids: list[str] = field(default_factory=list)
    #: Modification time of ``_metadata`` (seconds since the epoch), when the store reports one.
    written_at: float | None = None
    #: The newest creation time RocksDB recorded in the SSTs this snapshot references (seconds since the
    #: epoch): when its newest state was flushed, which Flink does when it takes an incremental checkpoint.
    #: A copy keeps it; None without readable SSTs (heap, full snapshots) or when they were not checked.
    newest_sst_written_at: float | None = None
    #: Recorded job roots -> where they are read now, when the snapshot was copied or moved.
    relocated_from: dict[str, str] = field(default_factory=dict)
    #: False when verification stopped before this snapshot (``verify_newest_first``); ``ok`` then
    #: reflects only the problems found in files it shares with checked snapshots.
    checked: bool = True
    #: Some file it references stayed unreadable (and no error was found): it could not be judged.
    unknown: bool = False

    @property
    def time(self) -> tuple[float | None, str | None]:
        """``(seconds since the epoch, source)``: the time recorded inside the snapshot's files first
        (``AGE_FROM_SST``), else ``_metadata``'s modification time (``AGE_FROM_FILE_TIME``), else ``(None, None)``."""
        if self.newest_sst_written_at is not None:
            return self.newest_sst_written_at, AGE_FROM_SST
        if self.written_at is not None:
            return self.written_at, AGE_FROM_FILE_TIME
        return None, None

    @property
    def verdict(self) -> str:
        """``broken`` (an error), ``unknown`` (a file stayed unreadable), ``ok``, or ``not_checked``."""
        if not self.ok:
            return "broken"
        if self.unknown:
            return "unknown"
        return "ok" if self.checked else "not_checked"

    def to_json(self) -> dict:
        return {"name": self.name, "checkpoint_id": self.checkpoint_id, "kind": self.kind, "path": self.path, "ok": self.ok,
                "checked": self.checked, "verdict": self.verdict}


#: Where an age comes from (``age_source`` in --json). The creation time RocksDB records inside each SST
#: (``rocksdb.file.creation.time``): the newest of a snapshot's SSTs was written when Flink flushed for
#: that checkpoint (or, with no new state, for an earlier one: the state is as of then). It stays through
#: copies. Found in every SST of the fixtures of Flink 1.15.4, 1.20.3, 2.0.2, 2.1.1 and 2.3.0; ``_metadata``
#: records no time of any kind (versions 2 to 6).
AGE_FROM_SST = "newest-sst"
#: ... the ``_metadata`` file's modification time as the filesystem or object store reports it: reset by
#: a copy (``cp -r``, a fresh clone, ``aws s3 cp``), so the age of a copied checkpoint is the copy's.
AGE_FROM_FILE_TIME = "metadata-file-time"


@record
class VerifyResult(CommandResult):
    path: str
    layout: str
    snapshots: list[SnapshotSummary]
    findings: list[CheckpointFinding]
    files: int = 0
    bytes: int = 0
    blocks: int = 0
    #: Of ``bytes``, those no checksum covers (see :attr:`FileResult.bytes_without_checksum`).
    bytes_without_checksum: int = 0
    #: The snapshots whose ``_metadata`` decoded, by name, as verify loaded them: a caller planning a
    #: repair (triage) reuses them instead of decoding each ``_metadata`` again. Not part of ``to_json()``.
    loaded: dict[str, LoadedSnapshot] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Nothing is wrong, and nothing stayed unreadable."""
        return not any(f.severity in (Severity.ERROR, Severity.UNKNOWN) for f in self.findings)

    @property
    def unknown(self) -> bool:
        """Some file stayed unreadable: a verdict could not be reached (retry when the store recovers)."""
        return any(f.severity == Severity.UNKNOWN for f in self.findings)

    @property
    def source(self) -> str:
        return st.absolute(self.path)

    def document(self) -> dict:
        return {
            "source": self.source,
            "path": self.source,  # the same as source (named so before every command had source)
            "layout": self.layout,
            "checked": {
                "checkpoints": sum(1 for s in self.snapshots if s.kind in ("checkpoint", "savepoint")),
                "files": self.files,
                "bytes": self.bytes,
                "blocks": self.blocks,
                "bytes_without_checksum": self.bytes_without_checksum,
            },
            "snapshots": [s.to_json() for s in self.snapshots],
            "findings": [f.to_json() for f in self.findings],
        }


class CheckedFiles(Protocol):
    """Results of files checked by an earlier run (``repair watch``'s cache): a file whose bytes are known
    unchanged is not read again. ``lookup`` gives the earlier result of ``task`` or None; ``remember``
    is told every result this run read (it keeps only those it can tell unchanged later)."""

    def lookup(self, task: FileTask) -> FileResult | None: ...

    def remember(self, result: FileResult) -> None: ...


# -- planning ------------------------------------------------------------------------------------


@record
class _Instance:
    """One RocksDB instance to cross-check, by local name: its SSTs (shared by incremental checkpoints,
    private in full ones) and its other files (MANIFEST, CURRENT, OPTIONS)."""

    reference: Reference
    ssts: dict[str, FileTask] = field(default_factory=dict)
    others: dict[str, FileTask] = field(default_factory=dict)


@record
class _Plan:
    tasks: dict[tuple, FileTask] = field(default_factory=dict)
    references: dict[tuple, list[Reference]] = field(default_factory=dict)
    instances: list[_Instance] = field(default_factory=list)
    #: ``(task key, offset, reference)`` of every change set a checkpoint uses in a changelog file.
    change_sets: list[tuple[tuple, int, Reference]] = field(default_factory=list)
    #: Subtasks whose changelog is replayed once their snapshot is checked: ``(snapshot, handle, reference)``.
    changelogs: list[tuple[LoadedSnapshot, ChangelogBackendHandle, Reference]] = field(default_factory=list)
    findings: list[CheckpointFinding] = field(default_factory=list)
    snapshots: list[SnapshotSummary] = field(default_factory=list)
    #: Every snapshot whose ``_metadata`` decoded, by name (handed on in :attr:`VerifyResult.loaded`).
    loaded: dict[str, LoadedSnapshot] = field(default_factory=dict)
    decompress: bool = True
    #: Files an earlier run checked (:class:`CheckedFiles`), or None.
    checked_files: CheckedFiles | None = None

    def add(self, task: FileTask, reference: Reference) -> FileTask:
        if not self.decompress and task.kind == "sst":
            task = replace(task, decompress=False)
        key = task.key
        self.tasks.setdefault(key, task)
        self.references.setdefault(key, []).append(reference)
        return task


def verify(
    path: str | Layout,
    *,
    storage: st.Storage | None = None,
    workers: int | None = None,
    master: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    decompress: bool = True,
    checked_files: CheckedFiles | None = None,
) -> VerifyResult:
    """Verify everything under ``path``; see the module docstring. Raises only for unusable input.

    ``path`` may also be the :class:`~repair.io.layout.Layout` that :func:`~repair.io.layout.classify`
    returned for it, when the caller asked already (triage).

    ``decompress=False`` checks SST block checksums without decompressing blocks (as
    ``sst_dump --verify_checksum`` does): faster, but it does not prove that every block decompresses.

    ``checked_files``: results of an earlier run for files unchanged since (:class:`CheckedFiles`); those
    files are not read again (their problems are reported as found then).
    """
    storage = storage or st.default_storage()
    plan = _Plan(decompress=decompress, checked_files=checked_files)
    layout = _plan_path(path, storage, plan)
    results = _execute(plan, storage, workers, master, on_progress)
    _replay_changelogs(plan, storage, None)
    return _assemble(layout, plan, results)


def verify_newest_first(
    path: str | Layout,
    *,
    storage: st.Storage | None = None,
    workers: int | None = None,
    master: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    enough: Callable[[VerifyResult], bool] | None = None,
    decompress: bool = True,
    checked_files: CheckedFiles | None = None,
) -> VerifyResult:
    """Verify the retained checkpoints of a job root newest first, until ``enough(report)`` is true.

    The default ``enough`` stops at the first valid checkpoint. Each file is still read at most once;
    checkpoints after the stop are not checked (``SnapshotSummary.checked`` is False), except that
    problems already found in files they share are reported for them too. Anything that is not a job
    root is verified whole. ``checked_files`` as for :func:`verify`.
    """
    storage = storage or st.default_storage()
    plan = _Plan(decompress=decompress, checked_files=checked_files)
    layout = _plan_path(path, storage, plan)
    if layout.kind != JOB_ROOT:
        results = _execute(plan, storage, workers, master, on_progress)
        _replay_changelogs(plan, storage, None)
        return _assemble(layout, plan, results)
    results: dict[tuple, FileResult] = {}
    checked: set[str] = set()
    report = None
    for summary in sorted(plan.snapshots, key=lambda s: s.number if s.number is not None else -1, reverse=True):
        keys = [k for k, refs in plan.references.items() if k not in results and any(r.snapshot == summary.name for r in refs)]
        results.update(_execute(plan, storage, workers, master, on_progress, keys))
        _replay_changelogs(plan, storage, summary.name)
        checked.add(summary.name)
        report = _assemble(layout, plan, results, checked)
        if enough(report) if enough is not None else summary.ok:
            break
    return report


#: What verify reads: every snapshot kind, a bare RocksDB directory, one SST or MANIFEST file.
VERIFIABLE = SNAPSHOT_KINDS | {FILE, ROCKSDB_DIR}


def _plan_path(path: str | Layout, storage: st.Storage, plan: _Plan) -> Layout:
    layout = path if isinstance(path, Layout) else classify(path, storage, accept=VERIFIABLE)
    if layout.kind == FILE:
        _plan_single_file(layout.path, layout.size, plan)
        return layout
    if layout.kind == ROCKSDB_DIR:
        _plan_rocksdb_dir(layout.path, storage, plan)
        return layout
    for ref in layout.snapshots:
        try:
            snapshot = load_snapshot(ref, layout.root, storage)
        except RepairError as error:
            name = ref.name
            kind = "checkpoint" if ref.number is not None else "savepoint"
            info = storage.stat(ref.metadata_uri)  # unreadable, cut short: still a file with a time
            plan.snapshots.append(SnapshotSummary(name, ref.number, kind, ref.directory, ok=False, number=ref.number,
                                                  written_at=info.mtime if info else None))
            plan.findings.append(
                CheckpointFinding.from_error("metadata_undecodable", error, message=error.message,
                                             reference=Reference(name, ref.number, local_name=METADATA), path=ref.metadata_uri)
            )
            continue
        plan.loaded[ref.name] = snapshot
        _plan_snapshot(snapshot, plan)
        summary = plan.snapshots[-1]
        summary.recorded_job_ids = sorted(snapshot.resolver.recorded_job_ids)
        summary.relocated_from = dict(snapshot.resolver.moves)
        summary.written_at = ref.written_at
        if summary.written_at is None:  # not known from classify: asked
            info = storage.stat(ref.metadata_uri)
            summary.written_at = info.mtime if info else None
    return layout


#: The finding kind of a recorded path that disagrees with where the snapshot's files were written.
DAMAGED_PATH = "damaged_path"


def _damaged_path(resolved, reference: Reference) -> CheckpointFinding:
    """A handle whose recorded path disagrees with where the snapshot's other files were written (see
    :mod:`repair.io.layout`): Flink opens the recorded path and fails with ``FileNotFoundException``."""
    return CheckpointFinding(
        DAMAGED_PATH,
        f"_metadata records this file at {resolved.recorded}, where it is not; it is at {resolved.uri}, where the "
        "checkpoint's other files were written: a damaged path (Flink opens the recorded path and fails); "
        "`repair relocate` writes a _metadata recording where each file is",
        reference=reference, path=resolved.uri, expected=resolved.uri, found=resolved.recorded,
    )


def _plan_snapshot(snapshot: LoadedSnapshot, plan: _Plan) -> None:
    name = snapshot.ref.name
    checkpoint = snapshot.metadata.checkpoint_id
    plan.snapshots.append(
        SnapshotSummary(
            name, checkpoint, snapshot.kind, snapshot.ref.directory, number=snapshot.ref.number,
            metadata_version=snapshot.metadata.version,
            operator_ids=[op.operator_id for op in snapshot.metadata.operators],
        )
    )
    _check_trailer(snapshot, plan)
    _check_checkpoint_id(snapshot, plan)
    resolver = snapshot.resolver
    kryo_generation = generation_of_metadata_version(snapshot.metadata.version)

    def add(handle, reference: Reference, kind: str, **details) -> FileTask | None:
        try:
            resolved = resolver.resolve(handle)
        except RepairError as error:
            plan.findings.append(CheckpointFinding.from_error("unresolvable_path", error, message=error.message, reference=reference))
            return None
        if resolved is None:
            return None
        if resolved.misrecorded:
            plan.findings.append(_damaged_path(resolved, reference))
        task = FileTask(
            kind, resolved.size, uri=resolved.uri, start=resolved.start, inline=resolved.inline,
            whole_file=type(handle).__name__ != "SegmentFileHandle", kryo_generation=kryo_generation, **details,
        )
        return plan.add(task, reference)

    for op in snapshot.metadata.operators:
        label = op.label
        for sub in op.subtasks:
            if sub.finished:
                continue

            keyed_range = _key_group_range(sub.managed_keyed_state)

            def ref(local_name=None, role=None):
                return Reference(name, checkpoint, label, sub.index, op.parallelism, local_name, role, keyed_range)

            managed = sub.managed_operator_state
            if isinstance(managed, OperatorStateHandle):
                add(managed.delegate, ref(role="operator-state"), "operator-state", operator_states=tuple(managed.states))
            if isinstance(sub.raw_operator_state, OperatorStateHandle):  # the operator's own bytes
                add(sub.raw_operator_state.delegate, ref(role="operator-state"), "data")
            keyed = sub.managed_keyed_state
            materialized = [keyed]
            if isinstance(keyed, ChangelogBackendHandle):
                materialized = [h for h in keyed.materialized if h is not None]
                _plan_changelog(keyed, ref, add, plan)
                plan.changelogs.append((snapshot, keyed, ref(role="changelog")))
            for keyed in materialized:
                if isinstance(keyed, IncrementalKeyedHandle):
                    add(keyed.meta, ref(role="meta"), "backend-meta")
                    instance = _Instance(ref(role="instance"))
                    for role, entries in (("shared", keyed.shared), ("private", keyed.private)):
                        for entry in entries:
                            task = add(entry.handle, ref(entry.local_path, role), kind_for_local_name(entry.local_path, role))
                            if task is not None:
                                (instance.ssts if entry.local_path.endswith(".sst") else instance.others)[entry.local_path] = task
                    plan.instances.append(instance)
                elif isinstance(keyed, KeyGroupsHandle):
                    add(keyed.delegate, ref(role="key-groups"), "key-groups", key_groups=(keyed.key_groups.start, keyed.key_groups.count),
                        offsets=tuple(keyed.offsets), max_parallelism=op.max_parallelism)
            raw = sub.raw_keyed_state
            if isinstance(raw, KeyGroupsHandle):
                add(raw.delegate, ref(role="raw-keyed"), "raw-keyed", key_groups=(raw.key_groups.start, raw.key_groups.count),
                    offsets=tuple(raw.offsets), max_parallelism=op.max_parallelism)


def _check_trailer(snapshot: LoadedSnapshot, plan: _Plan) -> None:
    """A V4+ ``_metadata`` whose CheckpointProperties trailer Flink cannot load (``CheckpointMetadata.trailer_problem``)."""
    problem = snapshot.metadata.trailer_problem()
    if problem is None:
        return
    plan.findings.append(CheckpointFinding.of(
        problem, Reference(snapshot.ref.name, snapshot.metadata.checkpoint_id, local_name=METADATA), path=snapshot.ref.metadata_uri,
    ))


def _check_checkpoint_id(snapshot: LoadedSnapshot, plan: _Plan) -> None:
    """``chk-N/_metadata`` records checkpoint N. Another id means another checkpoint's ``_metadata`` (copied
    over, or written by another deployment sharing the directory): real Flink restores that checkpoint's
    state from it, not the state checkpoint N held."""
    number, recorded = snapshot.ref.number, snapshot.metadata.checkpoint_id
    if number is None or recorded == number:
        return
    plan.findings.append(CheckpointFinding(
        "checkpoint_id_mismatch",
        f"_metadata of {snapshot.ref.name} records checkpoint {recorded}: it is another checkpoint's _metadata, and Flink "
        f"would restore checkpoint {recorded}'s state from it",
        reference=Reference(snapshot.ref.name, recorded, local_name=METADATA), path=snapshot.ref.metadata_uri,
        expected=f"checkpoint id {number}", found=f"checkpoint id {recorded}",
    ))


def _plan_changelog(keyed: ChangelogBackendHandle, ref: Callable[..., Reference], add, plan: _Plan) -> None:
    """The changelog files of one subtask's non-materialized state, and the changes kept inline."""
    for handle in keyed.non_materialized:
        if isinstance(handle, ChangelogStreamHandle):
            if not handle.handles and handle.state_size > 0:
                # Flink writes the size of the change sets a handle lists; with none listed it replays nothing
                # and restores the materialized state alone: real Flink 2.1 restores other state from such a
                # handle (damage matrix: flink-2.1-heap-changelog/changelog-handle/missing).
                plan.findings.append(CheckpointFinding(
                    "bad_changelog",
                    f"a changelog handle records {handle.state_size} bytes of changes but points at no change set: "
                    "Flink would restore the materialized state without the changes logged since",
                    reference=ref(role="changelog"), offset=handle.offset, expected="one change set or more", found="none"))
            for piece in handle.handles:
                reference = ref(role="changelog")
                task = add(piece.handle, reference, "changelog")
                if task is not None:
                    plan.change_sets.append((task.key, piece.position, reference))
        elif isinstance(handle, InMemoryChangelogHandle):
            from repair.formats.flink.changelog.dstl import StateChange, decode_change  # changelog only: not at start-up

            for change in handle.changes:
                try:
                    decode_change(StateChange(change.key_group, change.data, 0))
                except RepairError as error:
                    plan.findings.append(CheckpointFinding.from_error("bad_changelog", error, message=f"a change kept in _metadata: {error}",
                                                                     reference=ref(role="changelog")))


def _replay_changelogs(plan: _Plan, storage: st.Storage, snapshot_name: str | None) -> None:
    """Decode every data change of the planned subtasks' changelogs (of one snapshot, or all)."""
    todo = [entry for entry in plan.changelogs if snapshot_name is None or entry[2].snapshot == snapshot_name]
    if not todo:
        return
    from repair.ops.verify.changelog_check import check_subtask_changelog  # its readers stack: changelog only

    checks = [check_subtask_changelog(snapshot, storage, keyed) for snapshot, keyed, _ in todo]
    # Every subtask of an operator has the same key serializer; not every one records it.
    key_serializers = {(ref.snapshot, ref.operator): check.key_serializer
                       for (_, _, ref), check in zip(todo, checks) if check.key_serializer is not None}
    for i, ((snapshot, keyed, reference), check) in enumerate(zip(todo, checks)):
        borrowed = key_serializers.get((reference.snapshot, reference.operator))
        if check.lacked_key_serializer and borrowed is not None:
            checks[i] = check_subtask_changelog(snapshot, storage, keyed, borrowed)
    for (snapshot, keyed, reference), check in zip(todo, checks):
        if check.error is not None:
            error = check.error
            plan.findings.append(CheckpointFinding.from_error("bad_changelog", error, message=f"replaying the changelog: {error}",
                                                              reference=reference, path=error.source))
        if check.unchecked:
            names = ", ".join(repr(name) for name in check.unchecked)
            first = next(iter(check.unchecked.values()))
            plan.findings.append(CheckpointFinding("not_fully_checked", f"changes of states not decoded: {names}; {first}",
                                                   severity=Severity.WARNING, reference=reference))


def _check_change_sets(plan: _Plan, results: dict[tuple, FileResult]) -> list[CheckpointFinding]:
    """Each change set a checkpoint points at in a readable changelog file, read as Flink reads it (at the
    offset, one change set): it must decode, and when the whole stream frames, start where a change set
    starts."""
    findings: list[CheckpointFinding] = []
    if not plan.change_sets:
        return findings
    from repair.formats.flink.changelog.dstl import decode_change, read_change_set  # changelog only

    for key, position, reference in plan.change_sets:
        result = results.get(key)
        if result is None or result.change_stream is None:
            continue  # missing or no stream at all: the file's own findings say so
        try:
            changes, _ = read_change_set(result.change_stream, position)
            for change in changes:
                decode_change(change)
        except RepairError as error:
            finding = CheckpointFinding.from_error(
                "bad_changelog", error, message=f"the change set at offset {position} that _metadata points at does not decode: {error}",
                reference=reference, path=result.task.uri)
            findings.append(finding if finding.offset is not None else replace(finding, offset=position))
            continue
        if result.change_sets_framed and position not in result.change_sets:
            findings.append(CheckpointFinding(
                "bad_changelog",
                f"_metadata points at offset {position} of this changelog file, where no change set starts: "
                "Flink would read other bytes as changes",
                reference=reference, path=result.task.uri, offset=position,
                expected="one of the change set offsets " + ", ".join(map(str, result.change_sets[:8])) + (" ..." if len(result.change_sets) > 8 else ""),
                found=position,
            ))
    return findings


def _key_group_range(handle) -> tuple[int, int] | None:
    key_groups = getattr(handle, "key_groups", None)
    return (key_groups.start, key_groups.end) if key_groups is not None else None


def _plan_rocksdb_dir(path: str, storage: st.Storage, plan: _Plan) -> None:
    name = st.basename(path.rstrip("/")) or path
    plan.snapshots.append(SnapshotSummary(name, None, "rocksdb-dir", path))
    instance = _Instance(Reference(name, None, role="instance"))
    for entry in storage.list_dir(path):
        if entry.is_dir:
            continue
        local = st.basename(entry.path)
        parsed = parse_file_name(local)
        if parsed is None or parsed.kind not in (FileKind.TABLE, FileKind.MANIFEST, FileKind.CURRENT, FileKind.OPTIONS):
            continue
        task = plan.add(FileTask(kind_for_local_name(local, "file"), entry.size, uri=entry.path), Reference(name, None, local_name=local))
        (instance.ssts if parsed.kind == FileKind.TABLE else instance.others)[local] = task
    plan.instances.append(instance)


def _plan_single_file(path: str, size: int, plan: _Plan) -> None:
    name = st.basename(path)
    kind = kind_for_local_name(name, "file")
    if kind == "data":
        kind = "manifest" if name.startswith("MANIFEST") else "sst"  # anything else is tried as an SST
    plan.snapshots.append(SnapshotSummary(name, None, "file", path))
    plan.add(FileTask(kind, size, uri=path), Reference(name, None, local_name=name))


# -- execution -----------------------------------------------------------------------------------


def _execute(
    plan: _Plan, storage: st.Storage, workers: int | None, master: str | None, on_progress, keys: list[tuple] | None = None
) -> dict[tuple, FileResult]:
    """Check the tasks of ``plan`` (only those of ``keys`` when given); results by task key. A file the
    plan's ``checked_files`` knows unchanged is not read: its earlier result is taken."""
    tasks = list(plan.tasks.values()) if keys is None else [plan.tasks[k] for k in keys]
    known: dict[tuple, FileResult] = {}
    if plan.checked_files is not None:
        for task in tasks:
            earlier = plan.checked_files.lookup(task)
            if earlier is not None:
                known[task.key] = earlier
        tasks = [task for task in tasks if task.key not in known]
    inline = [t for t in tasks if t.inline is not None]
    external = sorted((t for t in tasks if t.inline is None), key=lambda t: -t.size)  # big files first
    total = sum(t.size for t in tasks)
    done = [0]

    def progressed(task: FileTask, _result) -> None:
        done[0] += task.size
        if on_progress:
            on_progress(done[0], total)

    remote = [t.uri for t in external if st.parse_location(t.uri).kind != "local"]
    if workers is None:
        # From an object store one process already keeps both cores busy (threads fetch, one checks), and
        # a pool's forked workers cannot use obstore's runtime (they read through pyarrow): in one process
        # verify from S3 took 0.6-0.75x the wall time of a pool of two (docs/benchmarks/remote.md).
        pooled = sum(t.size for t in external) >= POOL_THRESHOLD_BYTES and not (remote and storage.object_store_serves(remote[0]))
        workers = default_workers() if pooled else 1
    check = functools.partial(check_file, storage=storage)
    results = run_tasks(check, inline, on_done=progressed)
    if remote:
        # a remote store's files are read several at once in threads (their requests mostly wait), and
        # checked one at a time as they arrive, within the read buffers' bytes (docs/benchmarks/remote.md)
        results += run_tasks(check_opened, external, workers=workers, master=master, on_done=progressed,
                             fetch=functools.partial(open_file, storage=storage), threads=IN_FLIGHT,
                             fetch_bytes=st.READ_BUFFERS.limit, held=_held_in_memory, cost=_task_size)
    else:
        results += run_tasks(check, external, workers=workers, master=master, on_done=progressed, cost=_task_size)
    if plan.checked_files is not None:
        for result in results:
            plan.checked_files.remember(result)
    return {**known, **{result.task.key: result for result in results}}


def _task_size(task: FileTask) -> int:
    return task.size


def _held_in_memory(task: FileTask) -> int:
    """The bytes a remote file fetched for checking holds until it is checked: a whole file that fits in
    the read buffers (:func:`~repair.ops.verify.file_checks.open_file`); one that does not is checked by
    the fetching thread, its reads going to the store as the scan asks."""
    fits = task.whole_file and not task.start and task.size <= min(st.SCAN_WHOLE_MAX, st.READ_BUFFERS.limit)
    return task.size if fits else 0


# -- assembly ------------------------------------------------------------------------------------


def _assemble(
    layout: Layout, plan: _Plan, results: dict[tuple, FileResult], checked: set[str] | None = None
) -> VerifyResult:
    """Findings for every reference of every checked file, plus cross-checks of the checked snapshots."""
    findings = list(plan.findings)
    column_families = _sst_column_families(plan, results)
    for key, result in results.items():
        task = result.task
        for problem in result.problems:
            for reference in plan.references[key]:
                cf = column_families.get((reference.snapshot, reference.operator, reference.subtask, reference.local_name))
                findings.append(CheckpointFinding.of(problem, reference, path=task.uri, column_family=cf))
    for instance in plan.instances:
        if checked is None or instance.reference.snapshot in checked:
            findings.extend(_cross_check(instance, results))
    findings.extend(_check_change_sets(plan, results))
    failed = {(f.reference.snapshot, f.reference.checkpoint) for f in findings if f.severity == "error"}
    unreadable = {(f.reference.snapshot, f.reference.checkpoint) for f in findings if f.severity == Severity.UNKNOWN}
    newest_sst = _newest_sst_times(plan, results)
    for summary in plan.snapshots:
        summary.ok = summary.ok and (summary.name, summary.checkpoint_id) not in failed
        summary.unknown = (summary.name, summary.checkpoint_id) in unreadable
        summary.checked = checked is None or summary.name in checked
        # of a snapshot not checked, only the SSTs it shares with checked ones were read: not its newest
        summary.newest_sst_written_at = newest_sst.get(summary.name) if summary.checked else None
    order = {s.name: i for i, s in enumerate(plan.snapshots)}
    findings.sort(key=lambda f: (order.get(f.reference.snapshot, 0), f.reference.operator or "", f.reference.subtask or 0, f.reference.local_name or ""))
    return VerifyResult(
        layout.path, layout.kind, plan.snapshots, findings,
        files=sum(1 for r in results.values() if r.task.inline is None),
        bytes=sum(r.bytes_checked for r in results.values()),
        blocks=sum(r.blocks_checked for r in results.values()),
        bytes_without_checksum=sum(r.bytes_without_checksum for r in results.values()),
        loaded=plan.loaded,
    )


def _newest_sst_times(plan: _Plan, results: dict[tuple, FileResult]) -> dict[str, float]:
    """Per snapshot name: the newest creation time RocksDB recorded in an SST it references."""
    newest: dict[str, float] = {}
    for key, result in results.items():
        if result.created_at is None:
            continue
        for reference in plan.references[key]:
            newest[reference.snapshot] = max(newest.get(reference.snapshot, 0.0), float(result.created_at))
    return newest


def _sst_column_families(plan: _Plan, results: dict[tuple, FileResult]) -> dict[tuple, str]:
    """``(snapshot, operator, subtask, local name) -> column family`` of every SST a readable MANIFEST lists."""
    names: dict[tuple, str] = {}
    for instance in plan.instances:
        ref = instance.reference
        for manifest_name, task in instance.others.items():
            result = results.get(task.key) if manifest_name.startswith("MANIFEST-") else None
            summary = result.manifest if result is not None else None
            for number, (_size, cf_name, _level) in (summary.live.items() if summary else ()):
                names[(ref.snapshot, ref.operator, ref.subtask, table_file_name(number))] = cf_name
    return names


def _cross_check(instance: _Instance, results: dict[tuple, FileResult]) -> list[CheckpointFinding]:
    """CURRENT -> MANIFEST -> SSTs of one RocksDB instance, as RocksDB checks them when it opens."""
    base = instance.reference
    findings: list[CheckpointFinding] = []

    def finding(kind: str, message: str, local_name: str | None = None, severity: str = "error", task: FileTask | None = None, **extra) -> None:
        reference = Reference(
            base.snapshot, base.checkpoint, base.operator, base.subtask, base.parallelism, local_name, "instance", base.key_groups
        )
        findings.append(CheckpointFinding(kind, message, severity=severity, reference=reference, path=task.uri if task else None, **extra))

    manifests = sorted(n for n in instance.others if n.startswith("MANIFEST-"))
    current_task = instance.others.get("CURRENT")
    target = None
    if current_task is None:
        finding("current_missing", "no CURRENT file: RocksDB cannot find its MANIFEST", "CURRENT", expected="CURRENT", found="none")
    else:
        target = results[current_task.key].current_target
        if target is not None and target not in instance.others:
            finding(
                "manifest_missing",
                f"CURRENT names {target}, which is not here: RocksDB fails with '{target}: No such file or directory'",
                target, task=current_task, expected=target, found=", ".join(manifests) or "no MANIFEST",
            )
            return findings
    if not manifests:
        if current_task is not None and target is None:
            finding("manifest_missing", "no MANIFEST file", expected="MANIFEST-<number>", found="none")
        return findings
    manifest_name = target or manifests[-1]
    manifest_task = instance.others[manifest_name]
    summary = results[manifest_task.key].manifest
    if summary is None:
        return findings  # the MANIFEST itself is missing or unreadable: reported as a file problem
    for number, (size, cf_name, level) in sorted(summary.live.items()):
        name = table_file_name(number)
        sst = instance.ssts.get(name)
        if sst is None:
            finding(
                "manifest_references_missing_sst",
                f"{manifest_name} lists {name} (column family {cf_name!r}, level {level}, {size} bytes), which is not here",
                name, task=manifest_task, expected=f"{name} of {size} bytes", found="no such file",
            )
        elif sst.size != size:
            finding(
                "sst_size_mismatch",
                f"{manifest_name} records {size} bytes for {name}, the file has {sst.size}",
                name, task=sst, expected=size, found=sst.size,
            )
    live_names = {table_file_name(n) for n in summary.live}
    for name in sorted(set(instance.ssts) - live_names):
        finding(
            "sst_not_in_manifest", f"{name} is not a live file of {manifest_name}; RocksDB ignores it",
            name, severity="warning", task=instance.ssts[name],
        )
    return findings
