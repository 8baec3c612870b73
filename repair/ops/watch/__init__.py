"""``repair watch``: verify each checkpoint as it completes, so damage is found before a restore needs it.

A pass lists the job root (:func:`repair.io.layout.classify`), takes every ``chk-N`` whose ``_metadata``
it has not judged yet (by the ``_metadata``'s size and time, :mod:`.state`) and verifies them together
with :func:`repair.ops.verify.engine.verify`, the SSTs it verified in earlier passes taken from the
cache (:mod:`.cache`): a pass reads about the bytes the new checkpoints added. Each checkpoint gets one
verdict:

* ``good``: nothing wrong; the newest good one is the state directory's ``last-good.json``;
* ``bad``: an error, as ``repair verify`` reports it (``--on-bad`` runs, the metrics count it);
* ``unknown``: a file stayed unreadable (a storage fault, retried within the retry budget): judged
  again next pass, never an alarm;
* ``unfinished``: its ``_metadata`` does not decode yet. Flink may still be writing it: it is judged
  (bad) only once a later pass finds the same ``_metadata`` (same size and time) still undecodable,
  or when it is older than :data:`SETTLED_AFTER_SECONDS`;
* ``deleted``: it went away while it was checked. Flink deletes a subsumed checkpoint (its
  ``_metadata`` first, then its files) at any moment: a checkpoint with a missing file is judged only
  after the root is listed again (after ``relist_after`` seconds), and one no longer listed is no damage.

The pass is :meth:`Watcher.run_pass`; :func:`watch` runs one (``--once``). Judged checkpoints are not
judged again (a file changed later under a judged checkpoint is found by the next checkpoint that
references it, or by ``repair fallback``/``triage --state-dir``, which read every changed file).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from repair.errors import UsageError
from repair.io import storage as st
from repair.io.layout import DIRECTORY, JOB_ROOT, Layout, SnapshotRef, classify
from repair.io.outputs import new_output
from repair.ops.verify.engine import CheckpointFinding, VerifyResult, verify
from repair.ops.watch.alert import run_on_bad
from repair.ops.watch.cache import CheckedFileCache
from repair.ops.watch.metrics import WatchMetrics
from repair.ops.watch.state import WatchState, connect
from repair.results import CommandResult

#: A ``_metadata`` that does not decode and is older than this is no checkpoint being written (Flink
#: writes one in well under a second): it is judged at once.
SETTLED_AFTER_SECONDS = 60.0
#: Finding kinds that may mean the checkpoint was deleted while it was checked (see the module doc).
GONE_KINDS = frozenset({"missing_file", "metadata_undecodable", "manifest_references_missing_sst"})
#: What a pass accepts as the root: a job root, or one whose checkpoints are all gone for a moment (it
#: starts on a job root only).
WATCHABLE = frozenset({JOB_ROOT, DIRECTORY})

GOOD, BAD, UNKNOWN, UNFINISHED, DELETED = "good", "bad", "unknown", "unfinished", "deleted"


@dataclass
class WatchResult(CommandResult):
    """One pass over a job root: the verdict of each checkpoint it judged (see the module doc)."""

    source: str
    state_dir: str | None
    #: One document per checkpoint looked at in this pass (see :func:`verdict_document`).
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    #: The newest checkpoint judged good, in this pass or before (its verdict document), or None.
    last_good: dict[str, Any] | None = None
    files_read: int = 0
    bytes_read: int = 0
    #: SSTs not read again: verified in an earlier pass and unchanged since.
    files_reused: int = 0
    findings: list[CheckpointFinding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(c["verdict"] == BAD for c in self.checkpoints)

    @property
    def unknown(self) -> bool:
        return any(c["verdict"] == UNKNOWN for c in self.checkpoints)

    def document(self) -> dict:
        return {
            "source": self.source,
            "state_dir": self.state_dir,
            "checkpoints": self.checkpoints,
            "last_good": self.last_good,
            "read": {"files": self.files_read, "bytes": self.bytes_read, "files_reused": self.files_reused},
            "findings": [f.to_json() for f in self.findings],
        }


def verdict_document(root: str, ref: SnapshotRef, verdict: str, completed_at: float | None, judged_at: float,
                     findings: list[CheckpointFinding]) -> dict[str, Any]:
    """What is logged, kept in the history and given to ``--on-bad`` for one checkpoint."""
    errors = [f for f in findings if f.severity in ("error", "unknown")]
    return {
        "root": root,
        "name": ref.name,
        "checkpoint": ref.number,
        "verdict": verdict,
        "completed_at": st.iso_utc(completed_at),
        "judged_at": st.iso_utc(judged_at),
        "lag_seconds": None if completed_at is None else round(max(judged_at - completed_at, 0.0), 3),
        "problems": dict(Counter(f.kind for f in errors)),
        "findings": [f.to_json() for f in findings],
    }


class Watcher:
    """Watches one job root (see the module doc). ``state_dir``: where verdicts and verified files are
    kept across runs (None: in memory, for this run). ``on_verdict(document)`` is called for each
    checkpoint judged (and for the ones found unfinished, unknown or deleted); ``on_bad`` is a command
    line run with a bad checkpoint's document on its standard input (:mod:`.alert`); ``metrics`` are
    kept up to date (:mod:`.metrics`), from the state directory's verdicts at the start."""

    def __init__(self, path: str, *, state_dir: str | None = None, storage: st.Storage | None = None,
                 workers: int | None = None, relist_after: float = 2.0, on_bad: str | None = None,
                 on_verdict: Callable[[dict[str, Any]], None] | None = None, metrics: WatchMetrics | None = None,
                 clock: Callable[[], float] = time.time):
        self.storage = storage or st.default_storage()
        layout = classify(path, self.storage, accept={JOB_ROOT})  # a typo'd root is an error, not an endless wait
        self._inputs = layout.inputs
        if state_dir is not None:
            if st.parse_location(state_dir).kind != "local":
                raise UsageError(f"the state directory is a local directory (SQLite), not {state_dir}", source=state_dir)
            self.check_output(state_dir)
        self.root = layout.path
        self.source = st.absolute(self.root)
        self.state_dir = state_dir
        self.state = WatchState(connect(state_dir), self.source, state_dir, self.storage)
        self.workers = workers
        self.relist_after = relist_after
        self.on_bad = on_bad
        self.on_verdict = on_verdict
        self.metrics = metrics
        self.clock = clock
        if metrics is not None:
            metrics.restore(self.state.last(), self.state.last(GOOD), self.state.last(BAD))

    def check_output(self, path: str) -> None:
        """Refuse ``path`` (the state directory, a metrics file) inside the watched root: usage error."""
        new_output(path, self._inputs, self.storage, existing=True)

    def close(self) -> None:
        self.state.db.close()

    def run_pass(self) -> WatchResult:
        """List the root, judge every checkpoint not judged yet, write the state; see the module doc."""
        layout = classify(self.root, self.storage, accept=WATCHABLE)
        candidates = []
        for ref in layout.snapshots:
            info = self.storage.stat(ref.metadata_uri)
            if info is not None and not self.state.judged(ref.name, info):
                candidates.append((ref, info))
        result = WatchResult(self.source, self.state_dir, last_good=self.state.last(GOOD))
        if candidates:
            self._judge(layout, candidates, result)
        if self.metrics is not None:
            self.metrics.pass_done(result.files_read, result.bytes_read)
        return result

    def _judge(self, layout: Layout, candidates: list[tuple[SnapshotRef, st.FileInfo]], result: WatchResult) -> None:
        """Verify the ``candidates`` together and conclude each one's verdict into ``result``."""
        cache = CheckedFileCache(self.state.db, self.storage)
        report = verify(Layout(JOB_ROOT, layout.path, layout.root, [ref for ref, _ in candidates]), storage=self.storage,
                        workers=self.workers, checked_files=cache)
        cache.save()
        result.files_read = cache.read.files + len(candidates)  # and each _metadata
        result.bytes_read = cache.read.bytes + sum(info.size for _, info in candidates)
        result.files_reused = cache.reused
        still_listed = None
        for ref, info in candidates:
            findings = [f for f in report.findings if f.reference.snapshot == ref.name]
            verdict = _verdict(report, ref.name)
            if verdict == BAD and any(f.kind in GONE_KINDS for f in findings if f.severity == "error"):
                if still_listed is None:
                    still_listed = self._relist()
                if still_listed.get(ref.name) != (info.size, info.mtime):
                    verdict = DELETED
                elif any(f.kind == "metadata_undecodable" for f in findings) and not self._settled(ref, info):
                    verdict = UNFINISHED
            self._conclude(result, ref, info, verdict, findings)
        result.last_good = self.state.last(GOOD)

    def _relist(self) -> dict[str, tuple[int, float | None]]:
        """The root's checkpoints listed again, after ``relist_after`` seconds: name -> ``_metadata``'s (size, time)."""
        if self.relist_after > 0:
            time.sleep(self.relist_after)
        listed = {}
        for ref in classify(self.root, self.storage, accept=WATCHABLE).snapshots:
            info = self.storage.stat(ref.metadata_uri)
            if info is not None:
                listed[ref.name] = (info.size, info.mtime)
        return listed

    def _settled(self, ref: SnapshotRef, info: st.FileInfo) -> bool:
        """Whether an undecodable ``_metadata`` is no longer one being written (see the module doc)."""
        old = info.mtime is not None and self.clock() - info.mtime > SETTLED_AFTER_SECONDS
        return self.state.seen_unfinished(ref.name, info) or old

    def _conclude(self, result: WatchResult, ref: SnapshotRef, info: st.FileInfo, verdict: str,
                  findings: list[CheckpointFinding]) -> None:
        document = verdict_document(self.source, ref, verdict, info.mtime, self.clock(), findings)
        if verdict in (GOOD, BAD):
            if verdict == BAD and self.on_bad:
                document["on_bad"] = run_on_bad(self.on_bad, document)
            self.state.record(ref.name, ref.number if ref.number is not None else -1, info, verdict, document, self.clock())
            self.state.publish()
        if verdict == BAD:
            result.findings.extend(findings)
        result.checkpoints.append(document)
        if self.metrics is not None:
            self.metrics.checkpoint(document)
        if self.on_verdict is not None:
            self.on_verdict(document)


def _verdict(report: VerifyResult, name: str) -> str:
    summary = next(s for s in report.snapshots if s.name == name)
    return {"ok": GOOD, "broken": BAD, "unknown": UNKNOWN}.get(summary.verdict, UNKNOWN)


def watch(path: str, *, state_dir: str | None = None, storage: st.Storage | None = None, workers: int | None = None,
          on_bad: str | None = None, relist_after: float = 2.0) -> WatchResult:
    """One pass of ``repair watch`` over the job root ``path`` (``--once``): every checkpoint completed and
    not judged before (in ``state_dir``) verified and judged. See :class:`Watcher` for more passes."""
    watcher = Watcher(path, state_dir=state_dir, storage=storage, workers=workers, on_bad=on_bad, relist_after=relist_after)
    try:
        return watcher.run_pass()
    finally:
        watcher.close()
