"""The raw columns of an exported keyed state's rows, decoded and encoded: which serializer writes each
of ``key_raw``, ``namespace_raw``, ``user_key_raw`` and ``value_raw`` of a state, and how the value it
holds is made of the row's decoded columns.

* ``key_raw``: the key serializer's bytes; a timer's ``key_raw`` is the whole timer
  (:class:`~repair.formats.flink.values.Timer` of the columns ``timestamp``, ``key``, ``namespace``);
* ``namespace_raw``: the namespace serializer's;
* ``user_key_raw`` (map state): the map's key serializer's;
* ``value_raw``: the value serializer's (value, reducing, aggregating state), a list element's, or a map
  entry's ``bool isNull`` + value. With TTL the value is a
  :class:`~repair.formats.flink.values.TtlValue` of ``ttl_timestamp`` and ``value``.

A column's ``encode`` is None where :mod:`repair.formats.flink.value_encoders` cannot write the
serializer: such values are written from their raw bytes only. Kryo columns (exported as JSON text) have
``encode_like`` instead: the value written in the Java classes of the raw bytes it replaces
(:mod:`repair.formats.flink.kryo_encoder`).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any, Callable

from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.kryo import Registrations
from repair.formats.flink.kryo_encoder import KryoEncodeError, encode_like
from repair.formats.flink.serializers import (
    COMPOSITE_SNAPSHOTS,
    KRYO_GENERATION,
    KRYO_SNAPSHOT,
    TTL_AWARE_SNAPSHOT,
    SerializerSnapshot,
)
from repair.formats.flink.value_encoders import Encode, EncodeError, encoder_for
from repair.formats.flink.values import Timer, TtlValue, decoder_for

#: The raw columns, each with the decoded column it is the bytes of.
RAW_OF = {"key": "key_raw", "namespace": "namespace_raw", "user_key": "user_key_raw", "value": "value_raw"}


@dataclass(frozen=True)
class RowColumn:
    """One raw column of a state: ``decode(raw)`` gives the value, ``encode(value)`` the bytes (None:
    no encoder), ``compose(row)`` the value as the row's decoded columns give it (None: not given);
    ``encode_like(value, raw, row)`` the bytes of a user value given as JSON text, in the classes of the
    ``raw`` bytes it replaces (None: no such encoder; Kryo only)."""

    raw: str
    decode: Callable[[bytes], Any]
    encode: Encode | None
    compose: Callable[[dict], Any]
    encode_like: Callable[[Any, bytes | None, dict], bytes] | None = None


def _unwrap(snapshot: SerializerSnapshot | None) -> SerializerSnapshot | None:
    while snapshot is not None and snapshot.class_name == TTL_AWARE_SNAPSHOT and len(snapshot.nested) == 1:
        snapshot = snapshot.nested[0]
    return snapshot


def _is_ttl(snapshot: SerializerSnapshot | None) -> bool:
    snapshot = _unwrap(snapshot)
    return snapshot is not None and COMPOSITE_SNAPSHOTS.get(snapshot.class_name, ("",))[0] == "TTL"


def _plain(raw: str, snapshot: SerializerSnapshot | None, compose: Callable[[dict], Any]) -> RowColumn:
    decoder = decoder_for(snapshot)
    return RowColumn(raw, lambda data: decoder.decode_all(data, 0, raw), encoder_for(snapshot), compose, kryo_like(snapshot))


KryoLike = Callable[[Any, "bytes | None", dict], bytes]


def kryo_like(snapshot: SerializerSnapshot | None) -> KryoLike | None:
    """The ``encode_like`` of a Kryo value, alone or under TTL (its last-access time from the row's
    ``ttl_timestamp``, else the one in the raw bytes)."""
    snapshot = _unwrap(snapshot)
    if snapshot is None:
        return None
    if snapshot.class_name == KRYO_SNAPSHOT:
        attributes = snapshot.attributes
        registrations = Registrations(attributes.get("kryo_registrations"), attributes.get("kryo_registration_serializers"))

        def encode(value: Any, raw: bytes | None, row: dict) -> bytes:
            try:
                return encode_like(value, raw, attributes.get(KRYO_GENERATION), attributes.get("type_class"), registrations)
            except KryoEncodeError as error:
                raise EncodeError(str(error)) from None

        return encode
    if _is_ttl(snapshot) and snapshot.nested:
        inner = kryo_like(snapshot.nested[-1])
        if inner is None:
            return None

        def encode_ttl(value: Any, raw: bytes | None, row: dict) -> bytes:
            timestamp = row.get("ttl_timestamp")
            if timestamp is None:
                if raw is None or len(raw) < 8:
                    raise EncodeError("a TTL value needs its ttl_timestamp")
                return raw[:8] + inner(value, raw[8:], row)
            return struct.pack(">q", timestamp) + inner(value, raw[8:] if raw is not None else None, row)

        return encode_ttl
    return None


def _column(name: str) -> Callable[[dict], Any]:
    return lambda row: row.get(name)


def _with_ttl(snapshot: SerializerSnapshot | None) -> Callable[[dict], Any]:
    if not _is_ttl(snapshot):
        return _column("value")

    def compose(row: dict) -> Any:
        value, timestamp = row.get("value"), row.get("ttl_timestamp")
        return None if value is None or timestamp is None else TtlValue(timestamp, value)

    return compose


def _map_value(snapshot: SerializerSnapshot | None) -> RowColumn:
    """``bool isNull`` + the user value (a null entry is the flag alone)."""
    decoder, encode = decoder_for(snapshot), encoder_for(snapshot)
    compose = _with_ttl(snapshot)

    def decode(data: bytes) -> Any:
        return None if data[:1] == b"\x01" and len(data) == 1 else decoder.decode_all(data, 1, "map value")

    def encode_entry(value: Any) -> bytes:
        return b"\x01" if value is None else b"\x00" + encode(value)

    like = kryo_like(snapshot)

    def encode_entry_like(value: Any, raw: bytes | None, row: dict) -> bytes:
        if value is None:
            return b"\x01"
        return b"\x00" + like(value, raw[1:] if raw is not None and raw[:1] == b"\x00" else None, row)  # type: ignore[misc]

    return RowColumn("value_raw", decode, encode_entry if encode is not None else None, compose,
                     encode_entry_like if like is not None else None)


def _timer_compose(row: dict) -> Any:
    if row.get("timestamp") is None or row.get("key") is None:
        return None
    return Timer(row["timestamp"], row["key"], row.get("namespace"))


def row_columns(state: StateMetaInfo, key_serializer: SerializerSnapshot | None) -> dict[str, RowColumn]:
    """The raw columns ``state``'s rows carry, by decoded column name (``key``, ``namespace``,
    ``user_key``, ``value``)."""
    value = state.serializer("VALUE_SERIALIZER")
    if state.kind == "priority-queue":
        return {"key": _plain("key_raw", value, _timer_compose)}
    columns = {"key": _plain("key_raw", key_serializer, _column("key")),
               "namespace": _plain("namespace_raw", state.serializer("NAMESPACE_SERIALIZER"), _column("namespace"))}
    nested = _unwrap(value).nested if _unwrap(value) is not None else []
    if state.kind == "list":
        element = nested[0] if len(nested) == 1 else None
        columns["value"] = _plain("value_raw", element, _with_ttl(element))
    elif state.kind == "map":
        user_key, user_value = (nested[0], nested[1]) if len(nested) == 2 else (None, None)
        columns["user_key"] = _plain("user_key_raw", user_key, _column("user_key"))
        columns["value"] = _map_value(user_value)
    else:
        columns["value"] = _plain("value_raw", value, _with_ttl(value))
    return columns


def _tuple_fields(value: dict) -> list | None:
    """A Tuple's Parquet struct ``{"f0": ..., "f1": ...}`` as the list the decoder gives, else None."""
    if list(value) != [f"f{i}" for i in range(len(value))]:
        return None
    return list(value.values())


def same_value(a: Any, b: Any) -> bool:
    """``a == b``, NaN equal to NaN (also inside TTL values, timers, lists and dicts), and a Tuple as its
    Parquet struct (``{"f0": ..., ...}``) equal to the list of its fields."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is dict and type(b) is list:
        a = _tuple_fields(a)
    elif type(a) is list and type(b) is dict:
        b = _tuple_fields(b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and type(a) is type(b) and len(a) == len(b):
        return all(same_value(x, y) for x, y in zip(a, b))
    if type(a) is dict and type(b) is dict and a.keys() == b.keys():
        return all(same_value(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b or (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                              and not isinstance(a, bool) and not isinstance(b, bool) and a == b)
