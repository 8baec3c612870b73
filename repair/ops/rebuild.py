"""``repair rebuild-manifest``: a new checkpoint whose broken MANIFESTs are rebuilt from the SSTs.

``MANIFEST-000006: No such file or directory``, a corrupt MANIFEST or CURRENT, or a MANIFEST that
does not match the checkpoint's SST list: RocksDB will not open, although every SST may be intact.
For each keyed subtask (RocksDB instance) with such a problem, a new MANIFEST and CURRENT are built
from the SSTs (:mod:`repair.formats.manifest_builder`): column families from the SST properties and
the backend meta data, key ranges and sequence numbers from the data, levels that FRocksDB 6.20
(Flink <= 1.20) and 8.10 (Flink 2.x) accept. They are stored inline in a new ``_metadata`` (same
format version), whose shared state points at the original SSTs (or copies with ``copy``), written
to a new root like ``repair relocate`` does. The input is never modified.

Instances whose SSTs are themselves missing or corrupt cannot be rebuilt this way; the result says
which, and nothing is written.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from repair import storage as st
from repair.errors import RepairError
from repair.formats.flink_backend_meta import decode_keyed_backend_meta
from repair.formats.flink_handles import ByteStreamHandle, ChangelogBackendHandle, IncrementalKeyedHandle, LocalFile
from repair.formats.manifest_builder import build_manifest, describe_sst
from repair.formats.random_access import BytesSource
from repair.formats.rocksdb_files import file_number
from repair.ops.relocate import RelocateResult, load_single_snapshot, write_snapshot
from repair.ops.verify import Finding, verify
from repair.snapshot import LoadedSnapshot, read_resolved

#: Finding kinds that a rebuilt MANIFEST and CURRENT repair (when they concern MANIFEST or CURRENT).
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

    def to_json(self) -> dict:
        return {
            "operator": self.operator, "subtask": self.subtask, "manifest": self.manifest_name,
            "sst_files": self.sst_files, "column_families": self.column_families, "levels": self.levels,
            "reasons": self.reasons,
        }


@dataclass
class RebuildResult:
    source: str
    rebuilt: list[RebuiltInstance] = field(default_factory=list)
    unrepairable: list[str] = field(default_factory=list)  # problems a MANIFEST rebuild cannot fix
    written: RelocateResult | None = None
    output_verified: bool | None = None

    @property
    def ok(self) -> bool:
        return not self.unrepairable and self.written is not None and self.written.ok and bool(self.output_verified)

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "source": self.source,
            "new_metadata": self.written.new_metadata if self.written else None,
            "rebuilt": [r.to_json() for r in self.rebuilt],
            "unrepairable": self.unrepairable,
            "output_verified": self.output_verified,
            "files": self.written.to_json() if self.written else None,
        }


def rebuild_manifest(path: str, out: str, *, copy: bool = False, storage: st.Storage | None = None) -> RebuildResult:
    """Rebuild the broken MANIFESTs of the checkpoint at ``path`` into a new checkpoint under ``out``."""
    storage = storage or st.default_storage()
    snapshot = load_single_snapshot(path, storage, "rebuild-manifest")
    report = verify(path, storage=storage)
    result = RebuildResult(snapshot.ref.metadata_uri)
    broken: dict[tuple[str, int], list[Finding]] = {}
    for finding in report.findings:
        ref = finding.reference
        if finding.severity != "error" and finding.kind != "sst_not_in_manifest":
            continue
        if _is_manifest_problem(finding):
            broken.setdefault((ref.operator, ref.subtask), []).append(finding)
        elif finding.severity == "error":
            result.unrepairable.append(finding.describe())
    if result.unrepairable:
        return result
    format_ = "frocksdb8" if snapshot.metadata.version >= 5 else "frocksdb6"
    for op in snapshot.metadata.operators:
        label = op.operator_uid or op.operator_name or op.operator_id
        for sub in op.subtasks:
            findings = broken.get((label, sub.index))
            handle = sub.managed_keyed_state
            if isinstance(handle, ChangelogBackendHandle):
                handle = next((h for h in handle.materialized if h is not None), None)
            if not findings or not isinstance(handle, IncrementalKeyedHandle):
                continue
            result.rebuilt.append(_rebuild_instance(snapshot, handle, label, sub.index, findings, format_, storage))
    result.written = write_snapshot(snapshot, out, copy=copy, storage=storage)
    if result.written.ok:
        result.output_verified = verify(result.written.new_metadata, storage=storage).ok
    return result


def _is_manifest_problem(finding: Finding) -> bool:
    name = finding.reference.local_name or ""
    return finding.kind in REPAIRABLE or name == "CURRENT" or name.startswith("MANIFEST-")


def _rebuild_instance(
    snapshot: LoadedSnapshot, handle: IncrementalKeyedHandle, label: str, subtask: int,
    findings: list[Finding], format_: str, storage: st.Storage,
) -> RebuiltInstance:
    ssts = []
    for entry in handle.shared:
        if not entry.local_path.endswith(".sst"):
            continue
        resolved = snapshot.resolver.resolve(entry.handle)
        try:
            if resolved.inline is not None:
                ssts.append(describe_sst(BytesSource(resolved.inline), entry.local_path))
            else:
                with storage.open_input(resolved.uri) as source:
                    ssts.append(describe_sst(source, entry.local_path))
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
    kept = [e for e in handle.private if not (e.local_path == "CURRENT" or e.local_path.startswith("MANIFEST-"))]
    existing = [n for n in (file_number(e.local_path) for e in kept) if n is not None]
    rebuilt = build_manifest(ssts, [(0, "default"), *extra], format=format_, existing_numbers=existing)
    prefix = f"repair-rebuild-manifest/{uuid.uuid4()}"
    handle.private = [
        *kept,
        LocalFile(rebuilt.manifest_name, ByteStreamHandle(f"{prefix}/{rebuilt.manifest_name}", rebuilt.manifest)),
        LocalFile("CURRENT", ByteStreamHandle(f"{prefix}/CURRENT", rebuilt.current)),
    ]
    levels = {s.local_name: rebuilt.levels[s.column_family_id].levels[s.number] for s in ssts}
    return RebuiltInstance(
        label, subtask, rebuilt.manifest_name, len(ssts), [name for _, name in rebuilt.column_families], levels,
        sorted({f"{f.reference.local_name or ''} {f.kind}".strip() for f in findings}),
    )
