"""``repair watch``'s Prometheus metrics, with the standard client library (``prometheus_client``).

Served over HTTP (``--metrics-port``) or written for node-exporter's textfile collector (``--textfile``,
atomically: a temporary name renamed into place, as the collector asks). Every metric is in its own
registry (no process or platform metrics of the library's default registry). The ages are computed
when the metrics are collected, from the checkpoint's completion time (its ``_metadata``'s time).

| metric | type | what |
|---|---|---|
| ``repair_watch_last_verified_checkpoint_id`` | gauge | the newest checkpoint judged (good or bad) |
| ``repair_watch_last_verified_age_seconds`` | gauge | how long ago it completed |
| ``repair_watch_last_good_checkpoint_id`` | gauge | the newest checkpoint judged good (-1: none yet) |
| ``repair_watch_last_good_age_seconds`` | gauge | how long ago it completed (absent: none yet) |
| ``repair_watch_last_bad_checkpoint_id`` | gauge | the newest checkpoint judged bad (-1: none yet) |
| ``repair_watch_verification_lag_seconds`` | gauge | from the completion of the last checkpoint judged to its verdict |
| ``repair_watch_checkpoints_total{verdict}`` | counter | checkpoints looked at, by verdict (good, bad, unknown, unfinished, deleted) |
| ``repair_watch_problems_total{kind}`` | counter | problems (errors, unreadable files) of the checkpoints looked at, by kind |
| ``repair_watch_files_verified_total``, ``repair_watch_bytes_verified_total`` | counter | files and bytes read |
| ``repair_watch_last_pass_timestamp_seconds`` | gauge | when the last pass ended (the watch is alive) |
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest, start_http_server

from repair.errors import UsageError
from repair.io import storage as st


def _seconds(iso: str | None) -> float | None:
    return None if iso is None else datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


class WatchMetrics:
    """The metrics of one watch (see the module doc)."""

    def __init__(self, clock=time.time):
        self.registry = CollectorRegistry(auto_describe=True)
        self._clock = clock
        self._verified_at: float | None = None
        self._good_at: float | None = None
        self._ids = {"verified": -1, "good": -1, "bad": -1}
        r = self.registry
        self.last_verified = Gauge("repair_watch_last_verified_checkpoint_id", "The newest checkpoint judged (good or bad).", registry=r)
        self.last_good = Gauge("repair_watch_last_good_checkpoint_id", "The newest checkpoint judged good (-1: none yet).", registry=r)
        self.last_bad = Gauge("repair_watch_last_bad_checkpoint_id", "The newest checkpoint judged bad (-1: none yet).", registry=r)
        self.lag = Gauge("repair_watch_verification_lag_seconds", "From the completion of the last checkpoint judged to its verdict.", registry=r)
        self.checkpoints = Counter("repair_watch_checkpoints", "Checkpoints looked at, by verdict.", ["verdict"], registry=r)
        self.problems = Counter("repair_watch_problems", "Problems of the checkpoints looked at, by kind.", ["kind"], registry=r)
        self.files = Counter("repair_watch_files_verified", "Files read.", registry=r)
        self.bytes = Counter("repair_watch_bytes_verified", "Bytes read.", registry=r)
        self.last_pass = Gauge("repair_watch_last_pass_timestamp_seconds", "When the last pass ended.", registry=r)
        Gauge("repair_watch_last_verified_age_seconds", "How long ago the newest checkpoint judged completed.",
              registry=r).set_function(lambda: self._age(self._verified_at))
        Gauge("repair_watch_last_good_age_seconds", "How long ago the newest checkpoint judged good completed.",
              registry=r).set_function(lambda: self._age(self._good_at))
        for gauge in (self.last_verified, self.last_good, self.last_bad):
            gauge.set(-1)

    def _newest(self, which: str, gauge: Gauge, checkpoint: int) -> bool:
        """Set ``gauge`` to ``checkpoint`` when it is the newest of its kind; whether it was."""
        if checkpoint < self._ids[which]:
            return False
        self._ids[which] = checkpoint
        gauge.set(checkpoint)
        return True

    def _age(self, completed_at: float | None) -> float:
        return float("nan") if completed_at is None else max(self._clock() - completed_at, 0.0)

    def restore(self, last_verified: dict[str, Any] | None, last_good: dict[str, Any] | None, last_bad: dict[str, Any] | None) -> None:
        """The gauges as a watch before this one left them (its state directory's verdicts)."""
        if last_verified is not None and self._newest("verified", self.last_verified, last_verified["checkpoint"]):
            self._verified_at = _seconds(last_verified["completed_at"])
        if last_good is not None and self._newest("good", self.last_good, last_good["checkpoint"]):
            self._good_at = _seconds(last_good["completed_at"])
        if last_bad is not None:
            self._newest("bad", self.last_bad, last_bad["checkpoint"])

    def checkpoint(self, document: dict[str, Any]) -> None:
        """One checkpoint's verdict document (:func:`repair.ops.watch.verdict_document`)."""
        verdict = document["verdict"]
        self.checkpoints.labels(verdict).inc()
        for kind, count in document["problems"].items():
            self.problems.labels(kind).inc(count)
        if verdict not in ("good", "bad"):
            return
        if self._newest("verified", self.last_verified, document["checkpoint"]):
            self._verified_at = _seconds(document["completed_at"])
            if document["lag_seconds"] is not None:
                self.lag.set(document["lag_seconds"])
        if verdict == "good" and self._newest("good", self.last_good, document["checkpoint"]):
            self._good_at = _seconds(document["completed_at"])
        elif verdict == "bad":
            self._newest("bad", self.last_bad, document["checkpoint"])

    def pass_done(self, files: int, bytes_read: int) -> None:
        self.files.inc(files)
        self.bytes.inc(bytes_read)
        self.last_pass.set(self._clock())

    def text(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)

    def write_textfile(self, path: str, storage: st.Storage) -> None:
        """The metrics written to ``path`` for node-exporter's textfile collector, atomically."""
        storage.write_atomic(path, self.text(), overwrite=True)

    def serve(self, port: int, address: str = "0.0.0.0") -> int:
        """Serve the metrics over HTTP on ``port`` (0: any free port) in a background thread; the port."""
        try:
            server, _thread = start_http_server(port, addr=address, registry=self.registry)
        except OSError as error:  # the port taken, or not ours to bind
            raise UsageError(f"--metrics-port {port}: {error.strerror or error}") from None
        return server.server_port
