"""Rows of Flink keyed state from resolved RocksDB key/value pairs of one column family.

Key layout (``SerializedCompositeKeyBuilder``)::

    [key-group prefix: 1 byte if max parallelism <= 128, else 2][key][key length?][namespace][ns length?][user key]

The length suffixes are written only when the key and the namespace serializers are both variable
length (``writeVariableIntBytes``: the length, lowest byte first, at least one byte). The user key
follows for map state only. Timer column families (``_timer_state/...``) hold ``[prefix][TimerSerializer
bytes]`` keys with empty values.

Values: value/reducing/aggregating state is the value serializer's bytes; list state is elements joined
by ``,`` (boundaries found by decoding each element); map state is ``bool isNull`` + the user value.
TTL states wrap each value in ``long lastAccess`` + value.

Every row is a dict with :data:`ROW_FIELDS`; the raw bytes are always kept. A serializer this toolkit
cannot decode (:class:`~repair.formats.flink_values.UnsupportedSerializerError`) gives rows with raw
bytes, None values and ``error`` set; corrupt bytes of a known serializer raise.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from repair.errors import FormatError
from repair.formats.binary import ByteReader
from repair.formats.flink_backend_meta import StateMetaInfo
from repair.formats.flink_values import Decoder, Timer, TtlValue, UnsupportedSerializerError, decoder_for
from repair.keygroups import key_group_prefix_bytes

ROW_FIELDS = (
    "state", "kind", "key_group", "key", "namespace", "user_key", "value", "list_index", "ttl_timestamp",
    "timestamp", "key_raw", "namespace_raw", "user_key_raw", "value_raw", "error",
)
LIST_DELIMITER = 0x2C


def _row(state: StateMetaInfo, key_group: int, **fields: Any) -> dict[str, Any]:
    row = dict.fromkeys(ROW_FIELDS)
    row.update(state=state.name, kind=state.kind, key_group=key_group, **fields)
    return row


def _split_ttl(value: Any) -> tuple[Any, int | None]:
    return (value.value, value.timestamp) if isinstance(value, TtlValue) else (value, None)


def _variable_int_size(value: int) -> int:
    size = 1
    while value >= 256:
        value >>= 8
        size += 1
    return size


class KeyedStateDecoder:
    """Decodes the resolved entries of one keyed state (one column family) into rows."""

    def __init__(self, state: StateMetaInfo, key_serializer, max_parallelism: int):
        self.state = state
        self.prefix_bytes = key_group_prefix_bytes(max_parallelism)
        self.key = decoder_for(key_serializer)
        self.kind = state.kind
        value = state.serializer("VALUE_SERIALIZER")
        if state.kind == "priority-queue":
            self.timer = decoder_for(value)
            return
        self.namespace = decoder_for(state.serializer("NAMESPACE_SERIALIZER"))
        self.suffixes = self.key.is_variable_length and self.namespace.is_variable_length
        nested = value.nested if value is not None else []
        if state.kind == "list":
            self.element = decoder_for(nested[0]) if len(nested) == 1 else decoder_for(None)
        elif state.kind == "map":
            self.user_key = decoder_for(nested[0]) if len(nested) == 2 else decoder_for(None)
            self.user_value = decoder_for(nested[1]) if len(nested) == 2 else decoder_for(None)
        else:
            self.value = decoder_for(value)

    # -- keys --------------------------------------------------------------------------------------
    def key_group(self, key: bytes) -> int:
        if len(key) < self.prefix_bytes:
            raise FormatError("key-group prefix", 0, f"{self.prefix_bytes} bytes", f"{len(key)} bytes")
        return int.from_bytes(key[: self.prefix_bytes], "big")

    def _suffix(self, r: ByteReader, length: int, field: str) -> None:
        at = r.offset
        size = _variable_int_size(length)
        found = int.from_bytes(r.raw(size, field), "little")
        if found != length:
            raise FormatError(field, at, length, found)

    def _part(self, decoder: Decoder, r: ByteReader, field: str) -> tuple[Any, bytes]:
        start = r.pos
        value = decoder.read(r)
        raw = bytes(r.data[start : r.pos])
        if self.suffixes:
            self._suffix(r, len(raw), field + " length suffix")
        return value, raw

    # -- rows --------------------------------------------------------------------------------------
    def rows(self, key: bytes, value: bytes) -> list[dict[str, Any]]:
        """The rows of one live RocksDB entry (a list entry gives one row per element)."""
        key_group = self.key_group(key)
        try:
            if self.kind == "priority-queue":
                return [self._timer_row(key, value, key_group)]
            return self._kv_rows(key, value, key_group)
        except UnsupportedSerializerError as error:
            return [_row(self.state, key_group, key_raw=key[self.prefix_bytes :], value_raw=value, error=str(error))]
        except FormatError as error:
            error.message = f"state {self.state.name!r}, key {key.hex()}: {error.message}"
            raise

    def _timer_row(self, key: bytes, value: bytes, key_group: int) -> dict[str, Any]:
        if value:
            raise FormatError("timer value", 0, "an empty value", f"{len(value)} bytes")
        timer: Timer = self.timer.decode_all(key, self.prefix_bytes, "timer key")
        return _row(
            self.state, key_group, key=timer.key, namespace=timer.namespace, timestamp=timer.timestamp,
            key_raw=key[self.prefix_bytes :], value_raw=value,
        )

    def _kv_rows(self, key: bytes, value: bytes, key_group: int) -> list[dict[str, Any]]:
        r = ByteReader(key, self.prefix_bytes)
        user_key, key_raw = self._part(self.key, r, "key")
        namespace, namespace_raw = self._part(self.namespace, r, "namespace")
        common = dict(key=user_key, key_raw=key_raw, namespace=namespace, namespace_raw=namespace_raw)
        if self.kind == "map":
            common["user_key_raw"] = bytes(key[r.pos :])
            common["user_key"] = self.user_key.decode_all(key, r.pos, "map user key")
            vr = ByteReader(value)
            if vr.bool("map value is null"):
                decoded, ttl = None, None
                if not vr.at_end():
                    raise FormatError("map value", vr.offset, "no bytes after the null flag", f"{vr.remaining} bytes")
            else:
                decoded, ttl = _split_ttl(self.user_value.decode_all(value, 1, "map value"))
            return [_row(self.state, key_group, value=decoded, ttl_timestamp=ttl, value_raw=value, **common)]
        if not r.at_end():
            raise FormatError("key", r.offset, "the end of the key", f"{r.remaining} more bytes")
        if self.kind == "list":
            return [
                _row(self.state, key_group, value=v, ttl_timestamp=ttl, list_index=i, value_raw=raw, **common)
                for i, (v, ttl, raw) in enumerate(self._elements(value))
            ]
        decoded, ttl = _split_ttl(self.value.decode_all(value))
        return [_row(self.state, key_group, value=decoded, ttl_timestamp=ttl, value_raw=value, **common)]

    def _elements(self, value: bytes) -> Iterator[tuple[Any, int | None, bytes]]:
        r = ByteReader(value)
        while True:
            start = r.pos
            element, ttl = _split_ttl(self.element.read(r))
            yield element, ttl, bytes(value[start : r.pos])
            if r.at_end():
                return
            at = r.offset
            if r.u8("list delimiter") != LIST_DELIMITER:
                raise FormatError("list delimiter", at, "',' (0x2c) or the end of the value", f"0x{value[at]:02x}")


def decode_state_rows(
    state: StateMetaInfo, key_serializer, max_parallelism: int, items: Iterable[tuple[bytes, bytes]]
) -> Iterator[dict[str, Any]]:
    """Rows of ``items`` (live ``(key, value)`` pairs of ``state``'s column family)."""
    decoder = KeyedStateDecoder(state, key_serializer, max_parallelism)
    for key, value in items:
        yield from decoder.rows(key, value)
