"""The next step after ``repair verify`` and ``repair fallback``: which command to run, from the facts found.

Each function returns plain sentences with the exact command (``NEW_ROOT`` for the output the user
chooses); the CLI prints them after the tables. Nothing here reads storage.
"""

from __future__ import annotations

from repair.io import storage as st
from repair.ops.fallback import FallbackResult, manifest_only
from repair.ops.rebuild.checkpoint import is_manifest_problem
from repair.ops.verify.engine import DAMAGED_PATH, SnapshotSummary, VerifyResult

_SNAPSHOT_KINDS = ("checkpoint", "savepoint")


def verify_next_steps(result: VerifyResult) -> list[str]:
    """What to do after a verification: rebuild, relocate (moved, or damaged paths), fall back or triage (empty when nothing is to do)."""
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
        steps.append(f"the newest _metadata ({newest.name}) cannot be read: `repair fallback {root}` picks the newest "
                     f"valid checkpoint, `repair inspect {root} -c N` reads an older one")
    elif errors.get(newest.name) and all(f.kind == DAMAGED_PATH for f in errors[newest.name]):
        steps.append(f"only paths in the _metadata of {newest.name} are damaged (each file is where its other files are): "
                     f"`repair relocate {newest.path} --to NEW_ROOT` writes a _metadata recording where each file is, "
                     "with nothing lost")
    elif errors.get(newest.name) and all(is_manifest_problem(f) for f in errors[newest.name]):
        steps.append(f"only MANIFEST, CURRENT or OPTIONS files of {newest.name} are broken: "
                      f"`repair rebuild-manifest {newest.path} --out NEW_ROOT` rebuilds it from its SSTs with nothing lost")
    if errors and root is not None:
        steps.append(f"`repair triage {root}` ranks every way back (an older checkpoint, a rebuild) with what each loses "
                     "and the commands")
    elif not errors.get(newest.name) and newest.relocated_from:
        steps.append(_relocate_step(newest))
    return steps


def fallback_next_steps(result: FallbackResult) -> list[str]:
    """After a fallback: a newer checkpoint that a MANIFEST rebuild recovers with nothing lost, or triage."""
    steps = []
    chosen_id = result.chosen.checkpoint_id if result.chosen is not None else None
    newer = [v for v in result.checkpoints if v.valid is False and (chosen_id is None or (v.checkpoint_id or 0) > chosen_id)]
    rebuildable = next((v for v in newer if v.culprits and all(manifest_only(c) for c in v.culprits)), None)
    if rebuildable is not None and result.chosen is not None:
        steps.append(f"{rebuildable.name} is newer than {result.chosen.name} and only its MANIFEST or CURRENT files are broken: "
                     f"`repair rebuild-manifest {rebuildable.path} --out NEW_ROOT` rebuilds it with nothing lost, "
                     "so less input is replayed")
    if newer:
        steps.append(f"`repair triage {result.root}` ranks every way back with what each loses and the commands")
    return steps


def _relocate_step(snapshot: SnapshotSummary) -> str:
    recorded = ", ".join(snapshot.relocated_from)
    return (f"{snapshot.name} was written at {recorded}: Flink opens the paths its _metadata records, so restore it after "
            f"`repair relocate {snapshot.path} --to NEW_ROOT` (a _metadata pointing where its files are now)")
