"""``repair size --deep``: what a checkpoint's keyed state holds, read entry by entry.

The default ``repair size`` reads SST footers and properties only. ``--deep`` reads the data of one
checkpoint (the newest of a job root, or ``-c N``) through export's readers
(:data:`repair.ops.export.sources.SOURCES`: incremental RocksDB and ForSt instances resolved by the
Python LSM merge, full snapshots, changelogs) and says per operator and state:

* **live entries** and their key and value bytes (for RocksDB, a live key-value pair; for full snapshots
  and changelogs, a decoded row);
* **what a compaction would reclaim** (RocksDB): the entries stored beside the live ones (older versions,
  merge operands folded into a live value, tombstones, entries under a range tombstone), counted by the
  LSM merge, and their bytes as the raw (uncompressed) key and value bytes the SSTs' properties record
  minus those of the live entries as a compaction writes them (key + 8-byte sequence and type, value);
* **TTL**: the rows whose value carries a TTL timestamp (the last access, as Flink's ``TtlSerializer``
  writes it), the oldest and newest, and with a TTL for the state (``--ttl``: Flink does not store it in
  the checkpoint) the rows expired at ``now``: last access + TTL <= now, as Flink's ``TtlUtils.expired``
  decides; their bytes are the entry's (key and value) when every row of the entry has expired, else the
  expired list elements' bytes;
* **key-group skew**: entries per key group (how many key groups hold entries, the fullest one, the mean);
* the **largest keys and values** (the decoded key shown) and a **histogram of value sizes** (powers of two).

Entries outside the subtask's key-group range (left by a rescale) are not state and are skipped, as
export skips them. A subtask with a file the default mode found missing, damaged or unreadable is not
read (``skipped``); corrupt data found while reading is an error. Returns a :class:`DeepSize`, part of :class:`~repair.ops.size.SizeResult`.
"""

from __future__ import annotations

import heapq
import itertools
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator

from repair.errors import UsageError
from repair.formats.flink.arrow import json_text
from repair.io import storage as st
from repair.io.snapshot import LoadedSnapshot
from repair.ops.export.sources import source_for

#: Largest keys and values listed per state unless ``--top`` says.
LARGEST = 5
_UNITS_MS = {"ms": 1, "s": 1000, "sec": 1000, "min": 60_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|sec|min|m|h|d)\s*$")


def parse_duration_ms(text: str) -> int:
    """``1000ms``, ``1 s``, ``15 min``, ``2h``, ``3650 d`` in milliseconds."""
    match = _DURATION.match(text)
    if match is None:
        raise UsageError(f"--ttl {text!r}: expected a duration such as 500ms, 30s, 15min, 2h or 7d")
    return int(match.group(1)) * _UNITS_MS[match.group(2)]


def parse_ttls(values: list[str] | None) -> dict[str | None, int]:
    """``--ttl`` values: ``STATE=DURATION`` for one state (by name), ``DURATION`` for every TTL state
    (key None)."""
    ttls: dict[str | None, int] = {}
    for value in values or []:
        name, equals, duration = value.rpartition("=")
        if equals and not name:
            raise UsageError(f"--ttl {value!r}: expected STATE=DURATION or DURATION, found no state name before '='")
        ttls[name or None] = parse_duration_ms(duration)
    return ttls


def parse_time_ms(text: str | None) -> int:
    """``--now``: epoch milliseconds, or an ISO 8601 time (UTC unless it says); None: the current time."""
    if text is None:
        return int(datetime.now(timezone.utc).timestamp() * 1000)
    if text.strip().lstrip("-").isdigit():
        return int(text)
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--now {text!r}: expected epoch milliseconds or an ISO 8601 time (2026-11-28T05:00:00Z)") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return int(parsed.timestamp() * 1000)


def _size_bucket(size: int) -> int:
    """The histogram bucket of a size: 0 for 0 bytes, else ``b`` for ``[2**(b-1), 2**b)``."""
    return size.bit_length()


@dataclass
class Largest:
    """One of a state's largest keys or values."""

    bytes: int
    subtask: int
    key_group: int
    key: str | None  # the decoded key as JSON text (the raw bytes in hex where it does not decode)
    user_key: str | None  # map state: the map key, as JSON text

    def to_json(self) -> dict:
        return {"bytes": self.bytes, "subtask": self.subtask, "key_group": self.key_group, "key": self.key,
                "user_key": self.user_key}


@dataclass
class StateDepth:
    """What one state of one operator holds, over every subtask."""

    operator: str | None
    state: str
    kind: str
    #: ``None`` for full snapshots and changelogs (no LSM tree): then only live rows are known.
    lsm: dict[str, int] | None = None
    live_entries: int = 0
    rows: int = 0
    key_bytes: int = 0
    value_bytes: int = 0
    #: Raw (uncompressed) key and value bytes of every stored entry, from the SSTs' properties (RocksDB).
    stored_raw_bytes: int | None = None
    ttl_rows: int = 0
    oldest_access: int | None = None
    newest_access: int | None = None
    ttl_ms: int | None = None
    expired_rows: int | None = None
    expired_bytes: int | None = None
    outside_key_groups: int = 0
    _per_key_group: dict[int, int] = field(default_factory=dict, repr=False)
    _largest_keys: list = field(default_factory=list, repr=False)
    _largest_values: list = field(default_factory=list, repr=False)
    _histogram: dict[int, int] = field(default_factory=dict, repr=False)
    _ties: Iterator[int] = field(default_factory=itertools.count, repr=False)

    @property
    def reclaimable_entries(self) -> int | None:
        if self.lsm is None:
            return None
        return self.lsm["entries"] - self.lsm["live"]

    @property
    def reclaimable_bytes(self) -> int | None:
        """Raw bytes of the stored entries a full compaction would drop (never below 0: a live list value's
        delimiters are not stored)."""
        if self.stored_raw_bytes is None:
            return None
        return max(0, self.stored_raw_bytes - (self.key_bytes + 8 * self.live_entries + self.value_bytes))

    def keep_largest(self, heap: list, size: int, item: Largest, top: int) -> None:
        entry = (size, -next(self._ties), item)
        if len(heap) < top:
            heapq.heappush(heap, entry)
        elif entry > heap[0]:
            heapq.heapreplace(heap, entry)

    def skew(self) -> dict:
        counts = self._per_key_group
        if not counts:
            return {"key_groups": 0, "max_entries": 0, "max_key_group": None, "mean_entries": 0.0}
        fullest = max(sorted(counts), key=counts.__getitem__)
        return {"key_groups": len(counts), "max_entries": counts[fullest], "max_key_group": fullest,
                "mean_entries": round(sum(counts.values()) / len(counts), 2)}

    def histogram(self) -> list[dict]:
        return [{"from": 0 if b == 0 else 1 << (b - 1), "to": 0 if b == 0 else (1 << b) - 1, "entries": n}
                for b, n in sorted(self._histogram.items())]

    def to_json(self) -> dict:
        def largest(heap: list) -> list[dict]:
            return [item.to_json() for _, _, item in sorted(heap, key=lambda e: (-e[0], -e[1]))]

        return {
            "operator": self.operator, "state": self.state, "kind": self.kind,
            "live_entries": self.live_entries, "rows": self.rows, "key_bytes": self.key_bytes, "value_bytes": self.value_bytes,
            "lsm": self.lsm, "stored_raw_bytes": self.stored_raw_bytes,
            "reclaimable_entries": self.reclaimable_entries, "reclaimable_bytes": self.reclaimable_bytes,
            "ttl": {"rows": self.ttl_rows, "oldest_access": self.oldest_access, "newest_access": self.newest_access,
                    "ttl_ms": self.ttl_ms, "expired_rows": self.expired_rows, "expired_bytes": self.expired_bytes},
            "skew": self.skew(),
            "largest_keys": largest(self._largest_keys),
            "largest_values": largest(self._largest_values),
            "value_sizes": self.histogram(),
            "outside_key_groups": self.outside_key_groups,
        }


@dataclass
class DeepSize:
    """``--deep``: what the keyed state of one checkpoint holds, per state (largest live bytes first)."""

    checkpoint_id: int
    now: int
    states: list[StateDepth]
    #: Subtasks not read because a file of theirs is missing, damaged or unreadable (the default mode's
    #: findings say which): ``(operator, subtask, the files' status)``.
    skipped: list[tuple[str | None, int, str]] = field(default_factory=list)

    def to_arrow(self):
        """One row per state as a ``pyarrow.Table``: its counts and bytes, the TTL figures and the skew
        (flattened: ``ttl_expired_rows``, ``skew_max_entries`` ...); the lists stay in :meth:`to_json`."""
        import pyarrow as pa

        rows = []
        for state in self.states:
            row = state.to_json()
            flat = {k: v for k, v in row.items() if not isinstance(v, (dict, list))}
            for group in ("lsm", "ttl", "skew"):
                for name, value in (row[group] or {}).items():
                    flat[f"{group}_{name}"] = value
            rows.append(flat)
        return pa.Table.from_pylist(rows)

    def to_json(self) -> dict:
        return {"checkpoint_id": self.checkpoint_id, "now": self.now, "states": [s.to_json() for s in self.states],
                "skipped": [{"operator": operator, "subtask": subtask, "reason": reason}
                            for operator, subtask, reason in self.skipped]}


class _Reader:
    """The states of one checkpoint as they are read, subtask after subtask."""

    def __init__(self, now: int, ttls: dict[str | None, int], top: int):
        self.now, self.ttls, self.top = now, ttls, top
        self.states: dict[tuple, StateDepth] = {}

    def state(self, operator: str | None, name: str, kind: str) -> StateDepth:
        depth = self.states.get((operator, name))
        if depth is None:
            depth = self.states[(operator, name)] = StateDepth(operator, name, kind)
        return depth

    def entry(self, depth: StateDepth, subtask: int, key_group: int, key_bytes: int, value_bytes: int,
              rows: list[dict[str, Any]], entry_bytes: int) -> None:
        """One live entry (RocksDB: a key-value pair; else one row) and the rows it decodes to."""
        depth.live_entries += 1
        depth.rows += len(rows)
        depth.key_bytes += key_bytes
        depth.value_bytes += value_bytes
        depth._per_key_group[key_group] = depth._per_key_group.get(key_group, 0) + 1
        bucket = _size_bucket(value_bytes)
        depth._histogram[bucket] = depth._histogram.get(bucket, 0) + 1
        first = rows[0] if rows else {}
        if len(depth._largest_keys) < self.top or key_bytes > depth._largest_keys[0][0] \
                or len(depth._largest_values) < self.top or value_bytes > depth._largest_values[0][0]:
            item = Largest(0, subtask, key_group, _shown(first, "key"), _shown(first, "user_key") if depth.kind == "map" else None)
            depth.keep_largest(depth._largest_keys, key_bytes, _with_bytes(item, key_bytes), self.top)
            depth.keep_largest(depth._largest_values, value_bytes, _with_bytes(item, value_bytes), self.top)
        self._ttl(depth, rows, entry_bytes)

    def _ttl(self, depth: StateDepth, rows: list[dict[str, Any]], entry_bytes: int) -> None:
        stamps = [row["ttl_timestamp"] for row in rows if row.get("ttl_timestamp") is not None]
        if not stamps:
            return
        depth.ttl_rows += len(stamps)
        oldest, newest = min(stamps), max(stamps)
        depth.oldest_access = oldest if depth.oldest_access is None else min(depth.oldest_access, oldest)
        depth.newest_access = newest if depth.newest_access is None else max(depth.newest_access, newest)
        ttl = self.ttls.get(depth.state, self.ttls.get(None))
        if ttl is None:
            return
        depth.ttl_ms = ttl
        expired = [row for row in rows if row.get("ttl_timestamp") is not None and _expired(row["ttl_timestamp"], ttl, self.now)]
        depth.expired_rows = (depth.expired_rows or 0) + len(expired)
        depth.expired_bytes = (depth.expired_bytes or 0) + (
            entry_bytes if len(expired) == len(rows) else sum(len(row.get("value_raw") or b"") + 1 for row in expired))


def _expired(last_access: int, ttl: int, now: int) -> bool:
    """Flink's ``TtlUtils.expired``: the expiration time (last access + TTL, saturating at Long.MAX_VALUE) <= now."""
    return min(last_access + ttl, (1 << 63) - 1) <= now


def _with_bytes(item: Largest, size: int) -> Largest:
    return Largest(size, item.subtask, item.key_group, item.key, item.user_key)


def _shown(row: dict[str, Any], column: str) -> str | None:
    """A decoded key (or map key) as JSON text; its raw bytes in hex where it did not decode."""
    value = row.get(column)
    if value is None and row.get(f"{column}_raw") is not None:
        return bytes(row[f"{column}_raw"]).hex()
    return None if value is None else json_text(value)


def _row_bytes(row: dict[str, Any]) -> tuple[int, int]:
    """A row's key bytes (key, namespace, map key) and value bytes, from its raw columns."""
    key = sum(len(row.get(name) or b"") for name in ("key_raw", "namespace_raw", "user_key_raw"))
    return key, len(row.get("value_raw") or b"")


def deep_size(snapshot: LoadedSnapshot, storage: st.Storage, pieces: list, *, now: int,
              ttls: dict[str | None, int], top: int | None = None) -> DeepSize:
    """Read the keyed state of ``snapshot`` (its :class:`~repair.ops.size.Piece` rows ``pieces`` give the
    SSTs' raw bytes per state); ``ttls`` by state name (None: every TTL state)."""
    reader = _Reader(now, ttls, top or LARGEST)
    unsound = {}  # (operator id, subtask) -> the status of a file of it that is not ok
    for piece in pieces:
        if piece.status != "ok":
            unsound.setdefault((piece.operator_id, piece.subtask), piece.status)
    skipped = []
    for op in snapshot.metadata.operators:
        operator = op.operator_uid or op.operator_name or op.operator_id
        for sub in op.subtasks:
            handle = sub.managed_keyed_state
            source = None if sub.finished or handle is None else source_for("managed_keyed_state", handle)
            if source is None:
                continue
            if (op.operator_id, sub.index) in unsound:
                skipped.append((operator, sub.index, f"a file of it is {unsound[(op.operator_id, sub.index)]}"))
                continue
            for stream in source.streams(snapshot, storage, op, sub, None, engine="python"):
                _read_stream(reader, reader.state(operator, stream.name, stream.kind), sub.index, stream)
    for (operator, name), depth in reader.states.items():
        ssts = [p for p in pieces if p.kind == "sst" and p.operator == operator and p.state == name]
        if ssts and all(p.raw_key_bytes is not None for p in ssts):
            depth.stored_raw_bytes = sum(p.raw_key_bytes + p.raw_value_bytes for p in ssts)
    read = {depth.state for depth in reader.states.values()} | {p.state for p in pieces if p.state}  # (skipped subtasks' too)
    unknown = sorted(name for name in ttls if name is not None and name not in read)
    if unknown:  # a typo'd name would judge nothing expired, silently
        raise UsageError(f"--ttl {unknown[0]}=...: checkpoint {snapshot.metadata.checkpoint_id} has no keyed state named "
                         f"{unknown[0]!r} (its states: {', '.join(sorted(read)) or 'none'})")
    states = sorted(reader.states.values(), key=lambda s: (-(s.key_bytes + s.value_bytes), str(s.operator), s.state))
    return DeepSize(snapshot.metadata.checkpoint_id, now, states, skipped)


def _read_stream(reader: _Reader, depth: StateDepth, subtask: int, stream) -> None:
    entries = stream.entries
    if entries is not None:  # RocksDB: key-value pairs, each decoded to its rows
        first, last = entries.key_groups.start, entries.key_groups.end
        decoder = entries.decoder
        for keys, values in entries.batches:
            for key, value in zip(keys.to_pylist(), values.to_pylist()):
                group = decoder.key_group(key)
                if not first <= group <= last:
                    depth.outside_key_groups += 1
                    continue
                reader.entry(depth, subtask, group, len(key), len(value), decoder.rows(key, value, group), len(key) + len(value))
    else:  # full snapshots and changelogs: decoded rows
        for row in stream.rows:
            key_bytes, value_bytes = _row_bytes(row)
            reader.entry(depth, subtask, row["key_group"], key_bytes, value_bytes, [row], key_bytes + value_bytes)
    if stream.stats is not None:
        if depth.lsm is None:
            depth.lsm = dict.fromkeys(stream.stats.to_json(), 0)
        for name, count in stream.stats.to_json().items():
            depth.lsm[name] += count
