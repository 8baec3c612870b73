"""Hand-built keyed-state metadata (serializer snapshots, state meta infos) and expected.json's shape for rows."""

from __future__ import annotations

from fixtures import state_model
from repair.formats.flink.backend_meta import KEYED_STATE_TYPE, StateMetaInfo
from repair.formats.flink.serializers import SerializerSnapshot
from tests.conftest import expected_shape, namespaced
from tests.flink_bytes import string_value

#: The event-time timer states of the fixture job: its process functions' and its window operators'.
TIMER_STATES = {f"_timer_state/event_{service}" for op in state_model.KEYED_OPERATORS.values() for service in op["timer_services"]}


def add_row(entry: dict, row: dict) -> None:
    """One decoded row into one key's entry, in expected.json's shape (state of a TimeWindow namespace
    and its timers by window: ``namespaced``)."""
    state, kind = row["state"], row["kind"]
    if state in TIMER_STATES:
        assert row["value_raw"] == b""
        holder, slot = namespaced(entry, "timers", row["namespace"])
        holder.setdefault(slot, []).append(row["timestamp"])
        return
    if kind == "priority-queue":
        raise AssertionError(f"unexpected timer state {state}")
    holder, slot = namespaced(entry, state, row["namespace"], row["namespace_raw"])
    if kind == "list":
        items = holder.setdefault(slot, [])
        assert row["list_index"] == len(items)
        items.append(expected_shape(row["value"]))
    elif kind == "map":
        holder.setdefault(slot, {})[str(row["user_key"])] = expected_shape(row["value"])
    else:
        assert slot not in holder
        holder[slot] = expected_shape(row["value"])


B = "org.apache.flink.api.common.typeutils.base."
STRING = SerializerSnapshot(B + "StringSerializer$StringSerializerSnapshot", 3)
LONG = SerializerSnapshot(B + "LongSerializer$LongSerializerSnapshot", 3)
VOID_NS = SerializerSnapshot("org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot", 3)
_string_value = string_value  # StringValue.writeString, written independently of the decoder


def state_meta_info(name: str, kind: str, value: SerializerSnapshot, namespace: SerializerSnapshot) -> StateMetaInfo:
    return StateMetaInfo(
        name, 0, options=[(KEYED_STATE_TYPE, kind)],
        serializers=[("NAMESPACE_SERIALIZER", namespace), ("VALUE_SERIALIZER", value)],
    )

