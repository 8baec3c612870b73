"""``repair inspect``: what a checkpoint or savepoint holds, operator by operator.

Returns an :class:`InspectResult`; its ``to_json()`` is the documented ``--json`` contract
(docs/json-contracts.md). Nothing is verified here beyond decoding: ``repair verify`` does that.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from repair.errors import RepairError, StorageError
from repair.findings import Problem, Severity
from repair.formats.flink.backend_meta import decode_keyed_backend_meta
from repair.formats.flink.handles import (
    ChangelogBackendHandle,
    IncrementalKeyedHandle,
    KeyGroupsHandle,
    OperatorStateHandle,
    SegmentFileHandle,
)
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.operator_selection import select_operators
from repair.formats.flink.serializers import describe
from repair.io import storage as st
from repair.io.layout import JOB_ROOT, discover
from repair.io.resolved import read_resolved
from repair.io.snapshot import LoadedSnapshot, load_snapshot
from repair.ops.advice import repair_command
from repair.ops.renamed import renamed
from repair.ops.verify.engine import AGE_FROM_FILE_TIME
from repair.results import CommandResult


@dataclass
class FileEntry:
    """One file (or inline byte stream) behind a subtask's state."""

    local_name: str | None  # RocksDB file name (000042.sst, MANIFEST-000006, ...) where there is one
    role: str  # shared | private | meta | key-groups | operator-state | raw-keyed | raw-operator
    inline: bool
    size: int
    path: str | None  # where the bytes are read now (None when inline)
    recorded: str | None = None  # the path as _metadata records it
    relocated: bool = False
    #: Byte offset of the state inside ``path`` for file-merging segments (1.20+), else None.
    segment_start: int | None = None

    def to_json(self) -> dict:
        return {
            "local_name": self.local_name,
            "role": self.role,
            "inline": self.inline,
            "size": self.size,
            "path": self.path,
            "segment_start": self.segment_start,
            "recorded_path": self.recorded,
            "relocated": self.relocated,
        }


@dataclass
class StateEntry:
    name: str
    kind: str
    #: The key's and the value's types from the serializer snapshots (e.g. ``ROW<STRING>``,
    #: ``TTL<ROW<BIGINT, STRING>>``, ``Map<String, Long>``); None where the meta data does not say.
    key_type: str | None = None
    value_type: str | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "key_type": self.key_type, "value_type": self.value_type}

    def describe(self) -> str:
        """``kind``, or ``kind: key -> value`` where the types are known."""
        if self.value_type is None:
            return self.kind
        return f"{self.kind}: {self.key_type} -> {self.value_type}" if self.key_type else f"{self.kind}: {self.value_type}"


@dataclass
class SubtaskInfo:
    index: int
    finished: bool = False
    key_group_range: tuple[int, int] | None = None
    handle: str | None = None  # the keyed handle's type, e.g. "incremental-rocksdb"
    backend_id: str | None = None
    states: list[StateEntry] = field(default_factory=list)
    files: list[FileEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: The same problems as findings (kind, severity, where), for the document's ``findings``.
    findings: list[Problem] = field(default_factory=list)

    def report(self, kind: str, what: str, error: RepairError) -> None:
        """A part of this subtask that does not decode (``kind`` as `repair verify` names it) or stayed unreadable."""
        message = f"{what}: {error}"
        self.problems.append(message)
        unreadable = isinstance(error, StorageError)
        self.findings.append(Problem.from_error(
            "unreadable" if unreadable else kind, error, message=message,
            severity=Severity.UNKNOWN if unreadable else Severity.ERROR, details=(("path", error.source),),
        ))

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "finished": self.finished,
            "key_group_range": list(self.key_group_range) if self.key_group_range else None,
            "handle": self.handle,
            "backend_id": self.backend_id,
            "states": [s.to_json() for s in self.states],
            "files": [f.to_json() for f in self.files],
            "problems": self.problems,
        }


@dataclass
class OperatorInfo:
    id: str
    uid: str | None
    name: str | None
    parallelism: int
    max_parallelism: int
    fully_finished: bool = False
    uid_from_argument: bool = False  # the uid is known because --uid hashed to this id
    has_coordinator_state: bool = False
    subtasks: list[SubtaskInfo] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.uid or self.name or self.id

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "uid": self.uid,
            "name": self.name,
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
            "fully_finished": self.fully_finished,
            "uid_from_argument": self.uid_from_argument,
            "has_coordinator_state": self.has_coordinator_state,
            "subtasks": [s.to_json() for s in self.subtasks],
        }


@dataclass
class InspectResult(CommandResult):
    path: str
    layout: str  # job-root | checkpoint | savepoint | metadata-file
    metadata_path: str
    checkpoint_id: int
    metadata_version: int
    kind: str  # checkpoint | savepoint
    savepoint_format: str | None
    snapshot_type: str | None  # e.g. "Checkpoint", "Savepoint" (from the V4+ properties)
    operators: list[OperatorInfo]
    metadata_bytes: int
    relocated_from: dict[str, str]  # recorded job root -> where it is read now
    retained_checkpoints: list[int] = field(default_factory=list)
    unmatched_uids: list[str] = field(default_factory=list)
    #: Modification time of ``_metadata`` (seconds since the epoch; ``_metadata`` records no timestamp), when the store reports one.
    written_at: float | None = None
    #: Problems of the ``_metadata`` file itself (a CheckpointProperties trailer Flink cannot load), as verify judges them.
    metadata_findings: list[Problem] = field(default_factory=list)

    @property
    def inline_bytes(self) -> int:
        return sum(f.size for f in self._files() if f.inline)

    @property
    def external_bytes(self) -> int:
        return sum(f.size for f in self._files() if not f.inline)

    def _files(self):
        for op in self.operators:
            for sub in op.subtasks:
                yield from sub.files

    @property
    def ok(self) -> bool:
        """Every operator asked for (``uids``) was found, and Flink can load the ``_metadata`` (no error
        finding of the file itself); what inspect finds in a subtask's meta data does not fail it."""
        return not self.unmatched_uids and not any(finding.severity == Severity.ERROR for finding in self.metadata_findings)

    @property
    def exit_code(self) -> int:
        """2 when an operator asked for is not there (a usage error, as in export); 1 when Flink cannot
        load the ``_metadata``."""
        return 2 if self.unmatched_uids else 0 if self.ok else 1

    @property
    def source(self) -> str:
        return st.absolute(self.path)

    @property
    def findings(self) -> list[Problem]:
        """The problems of the ``_metadata`` file itself (with its path), then those of every subtask, each
        with its operator (uid, name or id) and subtask."""
        return [replace(finding, details=(*finding.details, ("path", self.metadata_path), ("operator", None), ("subtask", None)))
                for finding in self.metadata_findings] + [replace(finding, details=(*finding.details, ("operator", op.label), ("subtask", sub.index)))
                for op in self.operators for sub in op.subtasks for finding in sub.findings]

    def document(self) -> dict:
        files = list(self._files())
        return {
            "source": self.source,
            "path": self.source,  # the same as source (named so before every command had source)
            "layout": self.layout,
            "metadata_path": self.metadata_path,
            "checkpoint_id": self.checkpoint_id,
            "metadata_version": self.metadata_version,
            "kind": self.kind,
            "savepoint_format": self.savepoint_format,
            "snapshot_type": self.snapshot_type,
            "retained_checkpoints": self.retained_checkpoints,
            "written_at": st.iso_utc(self.written_at),
            "age_source": None if self.written_at is None else AGE_FROM_FILE_TIME,
            "relocated": [{"recorded": k, "actual": v} for k, v in self.relocated_from.items()],
            "totals": {
                "operators": len(self.operators),
                "files": sum(1 for f in files if not f.inline),
                "inline_streams": sum(1 for f in files if f.inline),
                "inline_bytes": self.inline_bytes,
                "external_bytes": self.external_bytes,
                "metadata_bytes": self.metadata_bytes,
            },
            "unmatched_uids": self.unmatched_uids,
            "operators": [op.to_json() for op in self.operators],
            "findings": [finding.to_json() for finding in self.findings],
        }


def _mtime(storage: st.Storage, uri: str) -> float | None:
    info = storage.stat(uri)
    return info.mtime if info is not None else None


@renamed(uids="operators")
def inspect(path: str, *, checkpoint: int | None = None, operators: list[str] | None = None, storage: st.Storage | None = None) -> InspectResult:
    """Inspect the snapshot at ``path`` (for a job root: the newest checkpoint, or ``checkpoint``); with
    ``operators`` (uids, operator ids or names), only the operators they name."""
    uids = operators
    storage = storage or st.default_storage()
    layout = discover(path, storage)
    refs = layout.snapshots
    if checkpoint is not None:
        refs = [r for r in refs if r.number == checkpoint]
        if not refs:
            available = ", ".join(str(r.number) for r in layout.snapshots)
            raise RepairError(f"no chk-{checkpoint} here (retained: {available})", source=path)
    try:
        snapshot = load_snapshot(refs[-1], layout.root, storage)
    except RepairError as error:
        if layout.kind == JOB_ROOT and checkpoint is None and len(refs) > 1:
            older, fallback = repair_command("inspect", path, "-c", str(refs[-2].number)), repair_command("fallback", path)
            error.message += (f"; the newest checkpoint's _metadata cannot be read: `{older}` reads an older one, "
                              f"`{fallback}` picks the newest valid one")
        raise
    uid_by_id = {operator_id_for_uid(uid): uid for uid in uids or []}
    operators = [_operator(snapshot, op, uid_by_id, storage) for op in snapshot.metadata.operators]
    unmatched: list[str] = []
    if uids:  # every operator a selector names, as in export (select_operators' rule); unmatched ones are listed
        selected = select_operators(snapshot.metadata.operators, uids)
        unmatched = [value for value, ops in selected.items() if not ops]
        names = {op.operator_id for ops in selected.values() for op in ops}
        operators = [op for op in operators if op.id in names]
    props = snapshot.metadata.properties
    return InspectResult(
        path=path,
        layout=layout.kind,
        metadata_path=snapshot.ref.metadata_uri,
        checkpoint_id=snapshot.metadata.checkpoint_id,
        metadata_version=snapshot.metadata.version,
        kind=snapshot.kind,
        savepoint_format=snapshot.savepoint_format,
        snapshot_type=props.checkpoint_type if props else None,
        operators=operators,
        metadata_bytes=snapshot.metadata_size,
        relocated_from=dict(snapshot.resolver.moves),
        written_at=snapshot.ref.written_at or _mtime(storage, snapshot.ref.metadata_uri),
        retained_checkpoints=[r.number for r in layout.snapshots if r.number is not None],
        unmatched_uids=unmatched,
        metadata_findings=[problem for problem in (snapshot.metadata.trailer_problem(),) if problem is not None],
    )


def _operator(snapshot: LoadedSnapshot, op, uid_by_id: dict[str, str], storage: st.Storage) -> OperatorInfo:
    info = OperatorInfo(
        id=op.operator_id,
        uid=op.operator_uid or uid_by_id.get(op.operator_id),
        name=op.operator_name,
        parallelism=op.parallelism,
        max_parallelism=op.max_parallelism,
        fully_finished=op.fully_finished,
        uid_from_argument=not op.operator_uid and op.operator_id in uid_by_id,
        has_coordinator_state=op.coordinator_state is not None,
    )
    for sub in op.subtasks:
        info.subtasks.append(_subtask(snapshot, sub, storage))
    return info


def _subtask(snapshot: LoadedSnapshot, sub, storage: st.Storage) -> SubtaskInfo:
    info = SubtaskInfo(index=sub.index, finished=sub.finished)
    if sub.finished:
        return info
    resolver = snapshot.resolver

    def add(handle, role: str, local_name: str | None = None) -> None:
        resolved = resolver.resolve(handle)
        if resolved is None:
            return
        segment = resolved.start if isinstance(handle, SegmentFileHandle) else None
        info.files.append(
            FileEntry(local_name, role, resolved.is_inline, resolved.size, resolved.uri, resolved.recorded, resolved.relocated, segment)
        )

    for slot, role in (("managed_operator_state", "operator-state"), ("raw_operator_state", "raw-operator")):
        handle = getattr(sub, slot)
        if isinstance(handle, OperatorStateHandle):
            for entry in handle.states:
                info.states.append(StateEntry(entry.name, _OPERATOR_KINDS.get(entry.mode_name, entry.mode_name.lower())))
            add(handle.delegate, role)

    keyed = sub.managed_keyed_state
    changelog = isinstance(keyed, ChangelogBackendHandle)
    if changelog:
        _changelog(snapshot, keyed, storage, info, add)
        keyed = next((h for h in keyed.materialized if h is not None), None)
    if isinstance(keyed, IncrementalKeyedHandle):
        info.handle = "incremental-rocksdb"
        info.backend_id = keyed.backend_id
        info.key_group_range = (keyed.key_groups.start, keyed.key_groups.end)
        add(keyed.meta, "meta")
        for entry in keyed.shared:
            add(entry.handle, "shared", entry.local_path)
        for entry in keyed.private:
            add(entry.handle, "private", entry.local_path)
        if keyed.meta is not None:
            info.states.extend(_keyed_states(snapshot, keyed.meta, storage, info))
    elif isinstance(keyed, KeyGroupsHandle):
        info.handle = "key-groups" if keyed.type_code != 7 else "savepoint-key-groups"
        info.key_group_range = (keyed.key_groups.start, keyed.key_groups.end)
        add(keyed.delegate, "key-groups")
        if keyed.delegate is not None:
            # The meta data is the head of the delegate, before the first key group's data.
            starts = [offset for offset in keyed.offsets if offset > 0]
            head = min(starts) if starts else None
            info.states.extend(_keyed_states(snapshot, keyed.delegate, storage, info, length=head))
    raw = sub.raw_keyed_state
    if isinstance(raw, KeyGroupsHandle):
        add(raw.delegate, "raw-keyed")
        info.states.extend(_raw_timer_states(snapshot, raw, storage, info))
    if changelog:
        info.handle = "changelog"  # over its materialized part's handle, if any
    # A changelog registers again the states its materialized part holds: each name once.
    unique: dict[str, StateEntry] = {}
    for state in info.states:
        unique.setdefault(state.name, state)
    info.states = list(unique.values())
    return info


def _changelog(snapshot: LoadedSnapshot, keyed: ChangelogBackendHandle, storage: st.Storage, info: SubtaskInfo, add) -> None:
    """The changelog files of a subtask (each once) and the states its changes register."""
    from repair.readers.changelog import changelog_pieces, changelog_states  # its readers stack: changelog only

    info.key_group_range = (keyed.key_groups.start, keyed.key_groups.end)
    seen = set()
    for handle, _offset in changelog_pieces(keyed):
        name = getattr(handle, "path", None) or id(handle)  # a file holds several change sets
        if name not in seen:
            seen.add(name)
            add(handle, "changelog")
    try:
        info.states.extend(StateEntry(state.name, state.kind, value_type=state.describe_value())
                           for state in changelog_states(snapshot, storage, keyed))
    except RepairError as error:
        info.report("bad_changelog", "changelog", error)


def _raw_timer_states(snapshot: LoadedSnapshot, raw: KeyGroupsHandle, storage: st.Storage, info: SubtaskInfo) -> list[StateEntry]:
    """The timer states a raw keyed state holds (RocksDB with timers on the heap); none for other raw state."""
    from repair.readers.raw_timers import raw_timer_states, read_raw_timer_services, timers_or_reason  # raw state only

    try:
        if timers_or_reason(snapshot, storage, raw) is not None:
            return []
        return [StateEntry(state.name, state.kind) for state in raw_timer_states(read_raw_timer_services(snapshot, storage, raw))]
    except RepairError as error:
        info.report("bad_raw_timers", "raw keyed state (timers)", error)
        return []


_OPERATOR_KINDS = {"SPLIT_DISTRIBUTE": "operator-list", "UNION": "union-list", "BROADCAST": "broadcast"}


def _keyed_states(
    snapshot: LoadedSnapshot, handle, storage: st.Storage, info: SubtaskInfo, length: int | None = None
) -> list[StateEntry]:
    """State names and kinds from the keyed backend meta data (the head of ``handle``'s bytes)."""
    resolved = snapshot.resolver.resolve(handle)
    try:
        data = read_resolved(storage, resolved, length=length)
        meta = decode_keyed_backend_meta(data)
    except RepairError as error:
        where = resolved.uri or "inline meta data"
        info.report("bad_backend_meta", f"backend meta data ({where})", error)
        return []
    key_type = describe(meta.key_serializer) if meta.key_serializer is not None else None
    return [StateEntry(state.name, state.kind, None if state.kind == "priority-queue" else key_type, state.describe_value())
            for state in meta.states]
