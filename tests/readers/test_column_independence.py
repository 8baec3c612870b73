"""One undecodable column never hides another: real Flink bytes decoded with the key serializer made unknown.

The fixture job's keyed operators, as real Flink 1.20 and 2.1 wrote them, are read twice: with the key
serializer snapshot Flink recorded, and with it replaced by the opaque snapshot of a custom serializer
class this toolkit cannot know (what a user's own ``TypeSerializer`` gives). Every row must keep every
other column (namespace, user key, value, list index, TTL and timer timestamps) exactly, the key's own
bytes in ``key_raw`` and the reason in ``error``.
"""

from __future__ import annotations

import copy
import os

import pytest

from repair.formats.flink.in_rocksdb.keyed_rows import KeyedStateDecoder
from repair.formats.flink.keygroups import operator_id_for_uid
from repair.formats.flink.serializers import UnknownSerializerSnapshotError, opaque_snapshot
from repair.formats.flink.values import decoder_for
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.snapshot import load_snapshot
from repair.readers.rocksdb import iter_incremental_handle
from tests.conftest import FIXTURES

CUSTOM = "com.example.MyKeySerializer$MyKeySerializerSnapshot"
#: Keyed operators of the fixture job: a String key (value, list, map, reducing, TTL, timers), a Long key
#: (POJO, tuple accumulators), an Integer key (one state per built-in serializer) and windows (TimeWindow
#: and GlobalWindow namespaces, window timers).
UIDS = ("per-user", "per-account", "per-type", "per-account-window", "per-user-count-window")


def _entries(name: str):
    storage = st.default_storage()
    root = FIXTURES / name / "checkpoints"
    layout = discover(str(root / next(iter(os.listdir(root)))), storage)
    snapshot = load_snapshot(layout.snapshots[-1], layout.root, storage)
    for uid in UIDS:
        op = snapshot.metadata.operator(operator_id_for_uid(uid))
        for sub in op.subtasks:
            for stream in iter_incremental_handle(snapshot, storage, sub.managed_keyed_state, op.max_parallelism):
                for keys, values in stream.entries.batches:
                    yield uid, stream.meta, stream.entries.key_serializer, op.max_parallelism, keys, values


def _with_custom_timer_key(state, custom):
    """``state`` with the key inside its ``TimerSerializer`` made custom too (a timer state nests the key
    serializer: both come from the same user serializer)."""
    if state.kind != "priority-queue":
        return state
    state = copy.deepcopy(state)
    timer = state.serializer("VALUE_SERIALIZER")
    timer.nested[0] = custom
    return state


@pytest.mark.parametrize("name", ["flink-1.20-default", "flink-2.1-default"])
def test_only_the_key_is_undecodable(name):
    custom = opaque_snapshot(UnknownSerializerSnapshotError(CUSTOM, 9))
    rows = 0
    states = set()
    for uid, state, key_serializer, max_parallelism, keys, values in _entries(name):
        known = KeyedStateDecoder(state, key_serializer, max_parallelism)
        unknown = KeyedStateDecoder(_with_custom_timer_key(state, custom), custom, max_parallelism)
        timers = state.kind == "priority-queue"
        for key, value in zip(keys.to_pylist(), values.to_pylist()):
            expected_rows = known.rows(key, value)
            found_rows = unknown.rows(key, value)
            assert len(found_rows) == len(expected_rows)
            for expected, found in zip(expected_rows, found_rows):
                assert expected["error"] is None
                assert found["key"] is None and found["key_raw"] == expected["key_raw"], (uid, state.name)
                assert found["error"].startswith("key: ") and CUSTOM in found["error"]
                if not timers:  # a timer's key_raw is the whole timer (timestamp, key, namespace)
                    assert decoder_for(key_serializer).decode_all(found["key_raw"]) == expected["key"]
                for column in ("namespace", "user_key", "value", "list_index", "ttl_timestamp", "timestamp",
                               "namespace_raw", "user_key_raw", "value_raw", "key_group"):
                    assert found[column] == expected[column], (uid, state.name, column)
                rows += 1
                states.add((uid, state.name))
    assert rows > 1000
    # every kind of state took part: map, list, value with TTL, window namespaces, timers
    assert {("per-user", "amount-by-tag"), ("per-user", "tags"), ("per-user", "recent-tag"),
            ("per-account-window", "window-contents"), ("per-user", "_timer_state/event_user-timers")} <= states
