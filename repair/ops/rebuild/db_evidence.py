"""What a bare RocksDB directory still tells about itself, for :mod:`repair.ops.rebuild.db`.

* :func:`read_current` and :func:`read_old_manifest`: the CURRENT file and the MANIFEST it names (or,
  without a usable CURRENT, the newest one). A MANIFEST that reads whole and replays
  without a problem is *intact*: its live files, column families and log numbers are authoritative.
  A damaged one still gives the edits before its first bad record: column families added, and files
  that compactions deleted (their numbers are left out of the rebuild).
* :func:`assign_column_family_ids`: ids from the SST properties (authoritative), then the old
  MANIFEST, then the order of the OPTIONS file's ``[CFOptions]`` sections (RocksDB writes them in
  creation order, and ids are handed out in creation order, so without dropped column families the
  n-th section has id n-1).
* :func:`choose_format`: the MANIFEST builder format (``frocksdb6`` / ``frocksdb8``) from the
  OPTIONS file's ``rocksdb_version``, epoch numbers in the old MANIFEST, and table properties FRocksDB
  6.20 does not write (:func:`rocksdb7_markers`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from repair.errors import FormatError, RepairError
from repair.findings import Problem
from repair.formats.rocksdb.files import FileKind, OptionsFile, decode_current, file_number, parse_file_name
from repair.formats.rocksdb.manifest import FileMetaData, LiveVersion, iter_version_edits, replay
from repair.formats.rocksdb.options_writer import ROCKSDB_VERSION_FOR_FORMAT
from repair.io import storage as st

_CURRENT_MAX_BYTES = 4096


def read_current(info: st.FileInfo | None, storage: st.Storage) -> tuple[str, str | None]:
    """``(state, MANIFEST name)``: state ``ok``, ``missing``, ``corrupt: ...`` or ``unreadable: ...``."""
    if info is None:
        return "missing", None
    try:
        return "ok", decode_current(storage.read_bytes(info.path, max_size=_CURRENT_MAX_BYTES))
    except FormatError as error:
        return f"corrupt: {error.message}", None
    except RepairError as error:
        return f"unreadable: {error.message}", None


@dataclass
class OldManifest:
    """The old MANIFEST as far as it reads. ``state``: ``intact``, ``damaged``, ``unreadable`` or ``absent``."""

    name: str | None
    state: str
    detail: str | None = None
    #: Replay of the edits that read (all of them when intact; those before the first bad record otherwise).
    version: LiveVersion | None = None
    #: File numbers deleted by those edits and not live at their end.
    deleted: set[int] = field(default_factory=set)
    edits_used: int = 0
    has_epoch_numbers: bool | None = None

    @property
    def intact(self) -> bool:
        return self.state == "intact"

    def live_files(self) -> dict[int, FileMetaData]:
        return {meta.number: meta for _, meta in self.version.live_files()} if self.version else {}

    def file(self, number: int) -> tuple[str, FileMetaData] | None:
        """``(column family name, metadata)`` of a live file, when the readable edits know it."""
        if self.version is None:
            return None
        return next(((cf.name, meta) for cf, meta in self.version.live_files() if meta.number == number), None)

    def column_families(self) -> dict[int, str]:
        return {cf.id: cf.name for cf in self.version.column_families.values()} if self.version else {}

    def last_sequence(self) -> int:
        """The last sequence number the readable edits record (0 when none)."""
        return (self.version.last_sequence or 0) if self.version else 0

    def min_log_number(self) -> int:
        """The oldest WAL RocksDB would replay (``MinLogNumberWithUnflushedData``)."""
        return min((cf.log_number for cf in self.version.column_families.values()), default=0) if self.version else 0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "detail": self.detail, "edits_used": self.edits_used,
                "live_files": len(self.live_files()) if self.version else None}


def read_old_manifest(files: Mapping[str, st.FileInfo], target: str | None, storage: st.Storage) -> OldManifest:
    """The MANIFEST CURRENT names when it is here, else the newest MANIFEST file.

    Never an older one: RocksDB deletes a MANIFEST once a newer one is in use, so an older file still
    here is a leftover whose live files are out of date.
    """
    if target is not None and target in files:
        return _read_manifest(target, files[target], storage)
    manifests = sorted((n for n in files if (p := parse_file_name(n)) and p.kind == FileKind.MANIFEST), key=file_number)
    if manifests:
        return _read_manifest(manifests[-1], files[manifests[-1]], storage)
    return OldManifest(None, "absent", f"CURRENT names {target}, which is missing" if target else "no MANIFEST file")


def _read_manifest(name: str, info: st.FileInfo, storage: st.Storage) -> OldManifest:
    findings: list[Problem] = []
    try:
        with storage.open_input(info.path) as source:
            edits = list(iter_version_edits(source, strict=False, findings=findings))
    except RepairError as error:
        return OldManifest(name, "unreadable", error.message)
    detail = None
    if findings:
        first_bad = min(f.offset for f in findings)
        edits = [e for e in edits if e.offset < first_bad]
        detail = f"{findings[0].message} (offset {first_bad}); the {len(edits)} edit(s) before it are used"
    version = replay(edits)
    deleted = {number for e in edits for _, number in e.deleted_files} - {meta.number for _, meta in version.live_files()}
    state = "intact"
    if findings:
        state = "damaged"
    elif version.findings:
        state, detail = "damaged", version.findings[0].message
    elif version.next_file_number is None or version.last_sequence is None:
        state, detail = "damaged", "no next-file-number or last-sequence record: RocksDB would not open it"
    epochs = [meta.epoch_number is not None for _, meta in version.live_files()]
    return OldManifest(name, state, detail, version, deleted, len(edits), any(epochs) if epochs else None)


# -- column family ids ---------------------------------------------------------------------------


@dataclass
class ColumnFamilyIds:
    #: id -> (name, where the id comes from).
    ids: dict[int, tuple[str, str]]
    warnings: list[str] = field(default_factory=list)

    def pairs(self) -> list[tuple[int, str]]:
        return sorted((i, name) for i, (name, _) in self.ids.items())

    def ordered_names(self) -> list[str]:
        return [name for _, name in self.pairs()]


def assign_column_family_ids(from_ssts: Sequence[tuple[int, str]], old: OldManifest,
                             options_names: Sequence[str]) -> ColumnFamilyIds:
    """Every known column family with an id: SSTs first, then the old MANIFEST, then the OPTIONS order."""
    result = ColumnFamilyIds({0: ("default", "RocksDB (always 0)")})
    by_name = {"default": 0}

    def add(cf_id: int, name: str, source: str) -> None:
        if name in by_name:
            if by_name[name] != cf_id:
                result.warnings.append(f"{source} gives column family {name!r} id {cf_id}, but it has id {by_name[name]}; kept {by_name[name]}")
            return
        if cf_id in result.ids:
            result.warnings.append(f"{source} gives id {cf_id} to {name!r}, but it belongs to {result.ids[cf_id][0]!r}; "
                                   f"{name!r} gets a new id")
            cf_id = max(result.ids) + 1
            source = "new id"
        result.ids[cf_id] = (name, source)
        by_name[name] = cf_id

    for cf_id, name in from_ssts:
        add(cf_id, name, "SST properties")
    for cf_id, name in sorted(old.column_families().items()):
        add(cf_id, name, old.name)
    unplaced = _ids_from_order(options_names, by_name)
    for name, cf_id in unplaced:
        if cf_id is None or cf_id in result.ids:
            add(max(result.ids) + 1, name, "new id")
        else:
            add(cf_id, name, "OPTIONS order")
    return result


def _ids_from_order(names: Sequence[str], known: Mapping[str, int]) -> list[tuple[str, int | None]]:
    """Ids for the names without one, from their position between names with known ids.

    A name gets ``previous id + 1`` when that stays below the next known id (ids grow in creation
    order); otherwise, or when the known ids do not grow along the order, ``None``.
    """
    out: list[tuple[str, int | None]] = []
    anchors = [known.get(n) for n in names]
    previous = -1
    for i, name in enumerate(names):
        if anchors[i] is not None:
            previous = anchors[i]
            continue
        following = next((a for a in anchors[i + 1:] if a is not None), None)
        candidate = previous + 1
        ok = following is None or candidate < following
        out.append((name, candidate if ok else None))
        if ok:
            previous = candidate
    return out


# -- MANIFEST format -----------------------------------------------------------------------------

def rocksdb7_markers(table) -> list[str]:
    """What in an SST says a RocksDB newer than FRocksDB 6.20 wrote it (Flink 2.x: FRocksDB 8.10)."""
    markers = []
    props = table.properties
    if table.format_version >= 6:
        markers.append(f"format_version {table.format_version}")
    if props is not None:
        if props.tail_start_offset is not None:
            markers.append("rocksdb.tail.start.offset")
        if props.orig_file_number is not None:
            markers.append("rocksdb.original.file.number")
        if props.compression_options and "use_zstd_dict_trainer" in props.compression_options:
            markers.append("use_zstd_dict_trainer in rocksdb.compression_options")
    return markers


def _format_for_version(version: str) -> str | None:
    try:
        major = int(version.split(".")[0])
    except ValueError:
        return None
    return "frocksdb6" if major <= 6 else "frocksdb8"


def choose_format(override: str | None, options: OptionsFile | None, options_name: str | None, old: OldManifest,
                  sst_markers: Sequence[tuple[str, list[str]]]) -> tuple[str, list[str], str | None]:
    """``(format, evidence lines, disagreement or None)``: override, else OPTIONS, else old MANIFEST, else SSTs."""
    votes: list[tuple[str, str]] = []
    version = options.rocksdb_version if options is not None else None
    if version and (fmt := _format_for_version(version)):
        votes.append((fmt, f"{options_name}: rocksdb_version={version}"))
    if old.has_epoch_numbers is not None:
        fmt = "frocksdb8" if old.has_epoch_numbers else "frocksdb6"
        votes.append((fmt, f"{old.name}: {'epoch numbers' if old.has_epoch_numbers else 'no epoch numbers'} on its files "
                           f"({'RocksDB >= 7.10' if old.has_epoch_numbers else 'RocksDB < 7.10'})"))
    marked = [(name, m) for name, m in sst_markers if m]
    if sst_markers:
        if marked:
            kinds = sorted({x for _, m in marked for x in m})
            votes.append(("frocksdb8", f"{len(marked)} of {len(sst_markers)} SST(s) carry what FRocksDB 6.20 does not write: {', '.join(kinds)}"))
        else:
            votes.append(("frocksdb6", f"none of {len(sst_markers)} SST(s) carries a property or footer newer than FRocksDB 6.20"))
    evidence = [f"{line} -> {fmt}" for fmt, line in votes]
    if override is not None:
        chosen = override
        evidence.insert(0, f"--format {override} (given)")
    else:
        chosen = votes[0][0] if votes else "frocksdb6"
        if not votes:
            evidence.append("no evidence: frocksdb6, which FRocksDB 8.10 reads too")
    others = sorted({fmt for fmt, _ in votes} - {chosen})
    disagreement = None
    if others:
        disagreement = (f"the evidence does not agree on the MANIFEST format ({'; '.join(evidence)}); wrote {chosen}. "
                        f"Both formats open in FRocksDB 6.20 and 8.10; --format overrides")
    chosen_version = ROCKSDB_VERSION_FOR_FORMAT[chosen]
    evidence.append(f"chosen: {chosen} (written as RocksDB {chosen_version} would)")
    return chosen, evidence, disagreement
