"""``repair rebuild-manifest``: a new checkpoint whose broken MANIFESTs are rebuilt from the SSTs.

``MANIFEST-000006: No such file or directory``, a corrupt MANIFEST or CURRENT, or a MANIFEST that
does not match the checkpoint's SST list: RocksDB will not open, although every SST may be intact.
For each keyed subtask (RocksDB instance) with such a problem, a new MANIFEST and CURRENT are built
from the SSTs (:mod:`repair.formats.rocksdb.manifest_builder`): column families from the SST properties and
the backend meta data, key ranges and sequence numbers from the data, levels that FRocksDB 6.20
(Flink <= 1.20) and 8.10 (Flink 2.x) accept. They are stored inline in a new ``_metadata`` (same
format version), whose shared state points at the original SSTs (or copies with ``copy``), written
to a new root like ``repair relocate`` does. The input is never modified.

Instances whose SSTs are themselves missing or corrupt cannot be rebuilt this way; the result says
which, and nothing is written. Unless ``drop_missing``: then missing, truncated, corrupt or unreadable
SSTs are left out of their instance's rebuilt MANIFEST (and of the new ``_metadata``), and
:attr:`RebuildResult.lost` says per dropped file which state, key groups and key range were lost and
which remaining files may bring older values back (:mod:`repair.ops.rebuild.losses`). Such a result
is written but not ``ok``: data was lost. With ``salvage``, corrupt and truncated SSTs are salvaged
block by block instead (:mod:`repair.ops.rebuild.salvage`): each is replaced by a new SST under the
output holding every entry of its sound blocks (:attr:`RebuildResult.salvaged` says what each lost);
missing and unreadable files, and files nothing of which can be salvaged, are still dropped whole.
With ``older`` sources of the same job's state (:mod:`repair.ops.rebuild.older`), a damaged or missing
SST whose intact original one of them holds is replaced by that copy (:attr:`RebuildResult.replaced`:
nothing lost, and an instance whose only problems were such files keeps its MANIFEST), and each listed
lost key says whether a source holds the same entry (recoverable from there) or an older version.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from repair.errors import RepairError
from repair.formats.bytes.random_access import BytesSource
from repair.formats.flink.backend_meta import KeyedBackendMeta, decode_keyed_backend_meta
from repair.formats.flink.handles import ByteStreamHandle, ChangelogBackendHandle, IncrementalKeyedHandle, LocalFile, RelativeFileHandle
from repair.formats.rocksdb.files import file_number
from repair.formats.rocksdb.manifest_builder import build_manifest, describe_sst
from repair.io import storage as st
from repair.io.layout import Layout
from repair.io.outputs import new_output
from repair.io.resolved import close, open_resolved, read_resolved
from repair.io.snapshot import LoadedSnapshot, load_snapshot
from repair.ops.rebuild.losses import LostFile, add_overlaps, describe_lost_files, is_sst_file_finding, loss_reason, overlapping
from repair.ops.rebuild.lost_keys import add_lost_keys
from repair.ops.rebuild.older import OlderSources, Replacement, add_older_versions, find_replacements, load_older
from repair.ops.rebuild.options import instance_options, is_options_name, options_file_name, options_number_if_missing
from repair.ops.rebuild.salvage import SalvagedFile, check_salvaged, lost_ranges, new_file_name, salvage_file
from repair.ops.relocate import RelocateResult, single_snapshot, write_snapshot
from repair.ops.verify.engine import DAMAGED_PATH, CheckpointFinding, verify
from repair.results import CommandResult

#: CheckpointFinding kinds that a rebuilt MANIFEST and CURRENT repair (when they concern MANIFEST or CURRENT).
REPAIRABLE = {
    "manifest_missing", "current_missing", "bad_current", "manifest_references_missing_sst", "sst_size_mismatch",
    "sst_not_in_manifest",
}


@dataclass
class RebuiltInstance:
    operator: str
    subtask: int
    manifest_name: str
    sst_files: int
    column_families: list[str]
    levels: dict[str, int]  # local SST name -> level
    reasons: list[str]  # the findings that made it necessary
    dropped: list[str] = field(default_factory=list)  # local SST names left out (--drop-missing)
    #: What the rebuild read of each remaining SST (not in the JSON document).
    summaries: list = field(default_factory=list, repr=False)
    #: Name of the OPTIONS file written from the SSTs because the instance had none (or a broken one).
    options_written: str | None = None

    def to_json(self) -> dict:
        return {
            "operator": self.operator, "subtask": self.subtask, "manifest": self.manifest_name,
            "sst_files": self.sst_files, "column_families": self.column_families, "levels": self.levels,
            "reasons": self.reasons, "dropped": self.dropped, "options_written": self.options_written,
        }


@dataclass
class RebuildResult(CommandResult):
    source: str
    rebuilt: list[RebuiltInstance] = field(default_factory=list)
    unrepairable: list[str] = field(default_factory=list)  # problems a MANIFEST rebuild cannot fix
    written: RelocateResult | None = None
    output_verified: bool | None = None
    #: SSTs left out of the rebuilt MANIFESTs (``drop_missing``) and what they held.
    lost: list[LostFile] = field(default_factory=list)
    #: What to do about ``unrepairable`` SSTs (``--drop-missing`` and its cost), when that applies.
    hint: str | None = None
    #: Where the new checkpoint goes (``out``).
    out: str | None = None
    #: SSTs replaced by their salvaged copy (``salvage``) and what each lost.
    salvaged: list[SalvagedFile] = field(default_factory=list)
    #: What `repair verify` found in the source checkpoint: what made the rebuild necessary.
    findings: list[CheckpointFinding] = field(default_factory=list)
    #: SSTs replaced by their intact original from an ``older`` source (nothing lost).
    replaced: list[Replacement] = field(default_factory=list)
    #: The ``older`` sources read (None without any), and the snapshots among them that could not be used.
    older: OlderSources | None = None

    @property
    def written_clean(self) -> bool:
        return not self.unrepairable and self.written is not None and self.written.ok and bool(self.output_verified)

    @property
    def salvage_lost(self) -> bool:
        """Whether a salvaged file lost (or may have lost) entries or range deletions."""
        return any(f.entries_lost != 0 or f.range_deletions_lost != 0 for f in self.salvaged)

    @property
    def ok(self) -> bool:
        """Rebuilt, written and clean, and nothing was lost."""
        return self.written_clean and not self.lost and not self.salvage_lost

    @property
    def status(self) -> str:
        """``rebuilt``, ``rebuilt_with_losses``, ``not_clean`` (written, but verify finds problems) or ``not_rebuilt``."""
        if self.written_clean:
            return "rebuilt_with_losses" if self.lost or self.salvage_lost else "rebuilt"
        return "not_clean" if self.written is not None and self.written.new_metadata else "not_rebuilt"

    def document(self) -> dict:
        return {
            "status": self.status,
            "source": self.source,
            "out": self.out,
            "new_metadata": self.written.new_metadata if self.written else None,
            "rebuilt": [r.to_json() for r in self.rebuilt],
            "lost": [item.to_json() for item in self.lost],
            "salvaged": [item.to_json() for item in self.salvaged],
            "replaced": [item.to_json() for item in self.replaced],
            "older_sources": [s.to_json() for s in self.older.snapshots] if self.older is not None else None,
            "older_notes": self.older.notes if self.older is not None else [],
            "unrepairable": self.unrepairable,
            "hint": self.hint,
            "output_verified": self.output_verified,
            "files": self.written.to_json() if self.written else None,
            "findings": [f.to_json() for f in self.findings],
        }


def rebuild_checkpoint(
    path: str | Layout, out: str, *, copy: bool = False, drop_missing: bool = False, salvage: bool = False,
    list_lost_keys: bool = False, older: list[str] | tuple[str, ...] = (), storage: st.Storage | None = None,
) -> RebuildResult:
    """Rebuild the broken MANIFESTs of the checkpoint at ``path`` into a new checkpoint under ``out``.

    ``drop_missing`` leaves missing, truncated, corrupt or unreadable SSTs out and reports what they held;
    ``salvage`` replaces corrupt and truncated ones by what their sound blocks hold (and drops the rest).
    ``older``: paths of other sources of the same job's state (native savepoints, job roots, checkpoints,
    copies): a damaged SST whose intact original one holds is replaced by it, and the lost keys (listed
    as with ``list_lost_keys``) say what the sources hold of each.
    ``path`` may be the :class:`~repair.io.layout.Layout` :func:`~repair.io.layout.classify` gave for it.
    The checkpoint's ``_metadata`` is decoded once, by the verification the rebuild starts from.
    """
    storage = storage or st.default_storage()
    layout = single_snapshot(path, storage, out=out)
    ref = layout.snapshots[0]
    sources = load_older(list(older), storage, exclude=ref.metadata_uri) if older else None
    if sources is not None:
        new_output(out, sources.inputs, storage)
    report = verify(layout, storage=storage)
    snapshot = report.loaded.get(ref.name) or load_snapshot(ref, layout.root, storage)  # undecodable: its error
    findings = report.findings
    result = plan_rebuild(snapshot, findings, drop_missing=drop_missing, salvage=salvage, list_lost_keys=list_lost_keys,
                          storage=storage, older=sources)
    result.out, result.findings = st.absolute(out), findings
    if result.unrepairable:
        return result
    result.written = write_snapshot(snapshot, out, copy=copy, storage=storage,
                                    new_files={item.new_file: item.data for item in [*result.salvaged, *result.replaced]})
    if result.written.ok:
        result.output_verified = verify(result.written.new_metadata, storage=storage).ok
    return result


def plan_rebuild(
    snapshot: LoadedSnapshot, findings: list[CheckpointFinding], *, drop_missing: bool, storage: st.Storage,
    salvage: bool = False, list_lost_keys: bool = False, older: OlderSources | None = None,
) -> RebuildResult:
    """Everything :func:`rebuild_checkpoint` does short of writing: ``snapshot``'s metadata edited in place
    (MANIFESTs rebuilt, with ``drop_missing`` lost SSTs left out), what was rebuilt, lost or cannot be.

    ``findings`` are verify's findings about this snapshot. :mod:`repair.ops.triage` uses it to say
    what a rebuild would lose without writing anything.
    """
    result = RebuildResult(st.absolute(snapshot.ref.metadata_uri), older=older)
    broken, dropped = _classify(findings, drop_missing or salvage or older is not None, result)
    if result.unrepairable:
        return result
    format_ = "frocksdb8" if snapshot.metadata.version >= 5 else "frocksdb6"
    for op in snapshot.metadata.operators:
        label = op.label
        for sub in op.subtasks:
            drops = dropped.get((label, sub.index), {})
            instance_findings = broken.get((label, sub.index), []) + [f for fs in drops.values() for f in fs]
            handle = sub.managed_keyed_state
            if isinstance(handle, ChangelogBackendHandle):
                handle = next((h for h in handle.materialized if h is not None), None)
            if not instance_findings or not isinstance(handle, IncrementalKeyedHandle):
                continue
            lost = describe_lost_files(snapshot, op, sub.index, handle, drops, storage) if drops else []
            copies: dict[str, bytes] = {}  # local name -> the bytes of its intact original (older sources)
            if older is not None and lost:
                replaced_here = find_replacements(older, label, op.operator_id, sub.index, handle, lost, storage)
                for item in replaced_here:
                    _point_at(handle, item.local_name, RelativeFileHandle(item.new_file, item.size))
                result.replaced.extend(replaced_here)
                copies = {item.local_name: item.data for item in replaced_here}
                gone = {item.local_name for item in replaced_here}
                lost = [item for item in lost if item.local_name not in gone]
                drops = {name: fs for name, fs in drops.items() if name not in gone}
                instance_findings = broken.get((label, sub.index), []) + [f for fs in drops.values() for f in fs]
                if not instance_findings:  # only replaced files were damaged: the instance's MANIFEST lists them as they are
                    continue
                if drops and not (drop_missing or salvage):  # --older alone loses nothing: the rest stays unrepairable
                    result.unrepairable.extend(
                        f"{f.describe()} [no --older source holds its intact original; --salvage or --drop-missing can rebuild without it]"
                        for fs in drops.values() for f in fs)
                    continue
            meta = _backend_meta(snapshot, handle, storage) if lost else None
            salvaged: list[SalvagedFile] = []
            if salvage and lost:
                salvaged = _salvage_instance(snapshot, op, label, sub.index, handle, lost, meta, storage)
                result.salvaged.extend(salvaged)
            replaced = {**copies, **{item.local_name: item.data for item in salvaged}}
            damaged = {item.local_name: item for item in lost}
            lost = [item for item in lost if item.local_name not in replaced]
            drops = {name: fs for name, fs in drops.items() if name not in replaced}
            instance = _rebuild_instance(snapshot, handle, label, sub.index, instance_findings, format_, storage, drop=set(drops),
                                         replaced=replaced)
            add_overlaps(lost, instance.summaries, instance.levels)
            for item in salvaged:
                _add_salvaged_overlaps(item, damaged[item.local_name], instance)
            if list_lost_keys or older is not None:
                add_lost_keys(snapshot, handle, lost, salvaged, replaced, meta, op.max_parallelism, storage)
            if older is not None:
                add_older_versions([*lost, *salvaged], older, op.operator_id, handle, meta, op.max_parallelism, storage)
            result.rebuilt.append(instance)
            result.lost.extend(lost)
    return result


def _classify(
    findings: list[CheckpointFinding], drop_missing: bool, result: RebuildResult,
) -> tuple[dict[tuple[str, int], list[CheckpointFinding]], dict[tuple[str, int], dict[str, list[CheckpointFinding]]]]:
    """Split verify's findings into MANIFEST problems and dropped SSTs, per instance; the rest become unrepairable."""
    broken: dict[tuple[str, int], list[CheckpointFinding]] = {}
    ssts: dict[tuple[str, int, str], list[CheckpointFinding]] = {}
    for finding in findings:
        ref = finding.reference
        # Warnings need no repair to restore; a broken OPTIONS file (a warning: Flink does not read it) and an
        # SST the MANIFEST does not list are still mended when the instance is rebuilt.
        if finding.severity != "error" and finding.kind != "sst_not_in_manifest" and not is_options_name(ref.local_name or ""):
            continue
        if finding.kind == DAMAGED_PATH:  # the rebuilt _metadata records where each file is (write_snapshot)
            continue
        if is_manifest_problem(finding):
            broken.setdefault((ref.operator, ref.subtask), []).append(finding)
        elif finding.severity == "error" and is_sst_file_finding(finding):
            ssts.setdefault((ref.operator, ref.subtask, ref.local_name), []).append(finding)
        elif finding.severity == "error":
            result.unrepairable.append(finding.describe())
    dropped: dict[tuple[str, int], dict[str, list[CheckpointFinding]]] = {}
    droppable = 0
    for (operator, subtask, name), problems in ssts.items():
        reason = loss_reason(problems)
        if reason is not None and drop_missing:
            dropped.setdefault((operator, subtask), {})[name] = problems
            continue
        droppable += reason is not None
        suffix = " [--drop-missing can rebuild without it]" if reason is not None else ""
        result.unrepairable.extend(f.describe() + suffix for f in problems)
    if droppable:
        result.hint = (
            f"{droppable} SST file(s) are missing or corrupt. Restore an older checkpoint if one is sound "
            "(repair fallback). Otherwise --drop-missing rebuilds without them: the state they hold is lost (reported per file: "
            "state, key groups, key range), and keys they last updated may come back with older values from other files."
        )
    return broken, dropped


def is_manifest_problem(finding: CheckpointFinding) -> bool:
    """Whether a rebuilt MANIFEST, CURRENT and OPTIONS repair this finding (no SST's bytes are involved)."""
    name = finding.reference.local_name or ""
    return finding.kind in REPAIRABLE or name == "CURRENT" or name.startswith("MANIFEST-") or is_options_name(name)


def _rebuild_instance(
    snapshot: LoadedSnapshot, handle: IncrementalKeyedHandle, label: str, subtask: int,
    findings: list[CheckpointFinding], format_: str, storage: st.Storage, drop: set[str] = frozenset(),
    replaced: dict[str, bytes] | None = None,
) -> RebuiltInstance:
    """Replace ``handle``'s MANIFEST and CURRENT by ones built from its SSTs, leaving out (and unlisting) ``drop``;
    ``replaced`` SSTs (local name -> bytes of their salvaged copy) are described from those bytes."""
    replaced = replaced or {}
    handle.shared = [e for e in handle.shared if e.local_path not in drop]
    handle.private = [e for e in handle.private if e.local_path not in drop]
    ssts = []
    for entry in handle.sst_files:
        if entry.local_path in replaced:
            ssts.append(describe_sst(BytesSource(replaced[entry.local_path]), entry.local_path))
            continue
        resolved = snapshot.resolver.resolve(entry.handle)
        try:
            source = open_resolved(storage, resolved)
            try:
                ssts.append(describe_sst(source, entry.local_path))
            finally:
                close(source)
        except RepairError as error:
            raise error.in_source(resolved.uri or f"{label}[{subtask}] {entry.local_path}") from None
    # Every state of the backend becomes a column family, even without files (Flink opens them by name).
    state_names = []
    if handle.meta is not None:
        meta = decode_keyed_backend_meta(read_resolved(storage, snapshot.resolver.resolve(handle.meta)))
        state_names = [state.name for state in meta.states]
    known = {s.column_family_name for s in ssts} | {"default"}
    used_ids = {s.column_family_id for s in ssts} | {0}
    extra = []
    next_id = max(used_ids) + 1
    for name in state_names:
        if name not in known:
            extra.append((next_id, name))
            known.add(name)
            next_id += 1
    broken_options = {f.reference.local_name for f in findings if is_options_name(f.reference.local_name or "")}
    kept = [e for e in handle.private if not (e.local_path == "CURRENT" or e.local_path.startswith("MANIFEST-")
                                              or e.local_path in broken_options)]
    existing = [n for n in (file_number(e.local_path) for e in kept) if n is not None]
    options_number = options_number_if_missing([e.local_path for e in kept], existing + [s.number for s in ssts])
    rebuilt = build_manifest(ssts, [(0, "default"), *extra], format=format_,
                             existing_numbers=existing + ([options_number] if options_number else []))
    prefix = f"repair-rebuild-manifest/{uuid.uuid4()}"
    handle.private = [
        *kept,
        LocalFile(rebuilt.manifest_name, ByteStreamHandle(f"{prefix}/{rebuilt.manifest_name}", rebuilt.manifest)),
        LocalFile("CURRENT", ByteStreamHandle(f"{prefix}/CURRENT", rebuilt.current)),
    ]
    options_name = options_file_name(options_number) if options_number else None
    if options_name:  # the instance has no usable OPTIONS file: one written from its SSTs
        options = instance_options(snapshot, handle, rebuilt.column_families, format_, storage)
        handle.private.append(LocalFile(options_name, ByteStreamHandle(f"{prefix}/{options_name}", options)))
    levels = {s.local_name: rebuilt.levels[s.column_family_id].levels[s.number] for s in ssts}
    return RebuiltInstance(
        label, subtask, rebuilt.manifest_name, len(ssts), [name for _, name in rebuilt.column_families], levels,
        sorted({f"{f.reference.local_name or ''} {f.kind}".strip() for f in findings}), sorted(drop), ssts, options_name,
    )


def _backend_meta(snapshot: LoadedSnapshot, handle: IncrementalKeyedHandle, storage: st.Storage) -> KeyedBackendMeta | None:
    """The instance's backend meta data (key serializer, states), None when it does not read."""
    if handle.meta is None:
        return None
    try:
        return decode_keyed_backend_meta(read_resolved(storage, snapshot.resolver.resolve(handle.meta)))
    except RepairError:
        return None


def _add_salvaged_overlaps(item: SalvagedFile, record: LostFile, instance: RebuiltInstance) -> None:
    """The remaining files of the salvaged file's state that overlap its lost blocks' keys (bounded by
    the blocks' neighbours, else by the file's range in its MANIFEST record)."""
    if not item.lost or record.smallest is None or record.smallest_seqno is None:
        return
    low = min(r.after.user_key if r.after is not None else record.smallest.user_key for r in item.lost)
    high = max(r.up_to.user_key if r.up_to is not None else record.largest.user_key for r in item.lost)
    item.overlaps = overlapping(item.column_family, low, high, (record.smallest_seqno, record.largest_seqno),
                                instance.summaries, instance.levels, exclude=item.local_name)


def _salvage_instance(
    snapshot: LoadedSnapshot, op, label: str, subtask: int, handle: IncrementalKeyedHandle, lost: list[LostFile],
    meta: KeyedBackendMeta | None, storage: st.Storage,
) -> list[SalvagedFile]:
    """Salvage the corrupt and truncated SSTs of one instance; each salvaged one is pointed at its new copy.

    A file is salvaged when its copy passes our verify and sst_dump (where installed); otherwise, or
    when none of its data blocks is sound, it stays in ``lost`` and is dropped whole.
    """
    entries = {e.local_path: e for e in handle.sst_files}
    key_groups = (handle.key_groups.start, handle.key_groups.end)
    out = []
    for item in lost:
        if item.reason not in ("corrupt", "truncated"):
            continue
        resolved = snapshot.resolver.resolve(entries[item.local_name].handle)
        hint = ((item.column_family_id, item.column_family) if item.column_family_id is not None and item.column_family
                else _column_family_hint(snapshot, handle, item.column_family, {f.local_name for f in lost}, storage))
        try:
            salvage, data, (_, cf_name) = salvage_file(storage, resolved, column_family=hint)
        except RepairError as error:
            item.problems.append(f"not salvaged: {error.message}")
            continue
        if item.largest is not None:
            salvage = salvage.ending_at(item.largest.internal_key)
        if not salvage.entries and not salvage.range_tombstones:  # nothing sound: dropped whole, its loss now counted
            item.problems.append("not salvaged: no data block of it is sound")
            item.salvage = salvage
            if item.entries is None and salvage.entries_lost is not None and salvage.range_deletions_lost == 0:
                item.entries = salvage.entries_lost
            continue
        ours, theirs, detail = check_salvaged(data)
        if not ours or theirs is False:
            item.problems.append(f"not salvaged: the salvaged copy does not verify ({detail})")
            continue
        name = new_file_name()
        _point_at(handle, item.local_name, RelativeFileHandle(name, len(data)))
        out.append(SalvagedFile(
            snapshot.metadata.checkpoint_id, label, op.operator_id, subtask, item.local_name, item.path, cf_name,
            salvage.method, len(salvage.entries), salvage.entries_lost, salvage.range_deletions_lost,
            lost_ranges(salvage, cf_name, meta, op.max_parallelism, key_groups), salvage.damaged_metadata,
            name, len(data), ours, theirs, detail, data, salvage,
        ))
    return out


def _column_family_hint(
    snapshot: LoadedSnapshot, handle: IncrementalKeyedHandle, name: str | None, damaged: set[str], storage: st.Storage,
) -> tuple[int, str] | None:
    """The (id, name) of column family ``name`` (from the MANIFEST's record of a damaged file), from a sound
    SST of the same instance; None when no sound file of that column family is left."""
    if name is None:
        return None
    for entry in handle.sst_files:
        if entry.local_path in damaged:
            continue
        try:
            source = open_resolved(storage, snapshot.resolver.resolve(entry.handle))
            try:
                summary = describe_sst(source, entry.local_path)
            finally:
                close(source)
        except RepairError:
            continue
        if summary.column_family_name == name:
            return summary.column_family_id, name
    return None


def _point_at(handle: IncrementalKeyedHandle, local_name: str, new: RelativeFileHandle) -> None:
    handle.shared = [LocalFile(e.local_path, new) if e.local_path == local_name else e for e in handle.shared]
    handle.private = [LocalFile(e.local_path, new) if e.local_path == local_name else e for e in handle.private]
