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
cannot decode (:class:`~repair.formats.flink.values.UnsupportedSerializerError`) gives rows with raw
bytes, None for what it would have decoded and ``error`` set (``"value: cannot decode ..."``): an
undecodable value, map key or list element leaves the key and namespace decoded; an undecodable key or
namespace leaves the whole key (after the key-group prefix) in ``key_raw``, except that an undecodable
key is delimited by what follows it (a namespace that decodes to exactly the rest, or to the map user
key; Flink's length suffixes where both may be variable-length; a timer's namespace): namespace, user
key, value and timestamp are then decoded, ``key_raw`` holds the key's own bytes and ``error`` says
``key: cannot decode ...``. Corrupt bytes of a known serializer raise.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader
from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.keygroups import key_group_prefix_bytes
from repair.formats.flink.values import (
    FAST_MISSES,
    Decoder,
    FastMiss,
    Timer,
    TtlValue,
    UnsupportedSerializerError,
    decoder_for,
)

ROW_FIELDS = (
    "state", "kind", "key_group", "key", "namespace", "user_key", "value", "list_index", "ttl_timestamp",
    "timestamp", "key_raw", "namespace_raw", "user_key_raw", "value_raw", "error",
)
LIST_DELIMITER = 0x2C


def row_template(state: StateMetaInfo) -> dict[str, Any]:
    """A row of ``state`` with every field None but ``state`` and ``kind`` (copy it per row)."""
    row = dict.fromkeys(ROW_FIELDS)
    row.update(state=state.name, kind=state.kind)
    return row


def split_ttl(value: Any) -> tuple[Any, int | None]:
    """``(value, TTL timestamp or None)`` of a decoded value that may be a :class:`TtlValue`."""
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
        self._template = row_template(state)
        self.prefix_bytes = key_group_prefix_bytes(max_parallelism)
        self.key = decoder_for(key_serializer)
        self.kind = state.kind
        value = state.serializer("VALUE_SERIALIZER")
        if state.kind == "priority-queue":
            self.timer = decoder_for(value)
            # TimerSerializer(key, namespace): the namespace delimits a key of an unknown serializer
            timer_nested = value.nested if value is not None and len(value.nested) == 2 else None
            self._timer_parts = [decoder_for(n) for n in timer_nested] if timer_nested else None
            self._fast = self._fast_rows()
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
        self._fast = self._fast_rows()

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
    def _row(self, key_group: int, **fields: Any) -> dict[str, Any]:
        row = self._template.copy()
        row["key_group"] = key_group
        row.update(fields)
        return row

    def rows(self, key: bytes, value: bytes, key_group: int | None = None) -> list[dict[str, Any]]:
        """The rows of one live RocksDB entry (a list entry gives one row per element); ``key_group``
        is the key's (from :meth:`key_group`) when the caller has it already."""
        if key_group is None:
            key_group = self.key_group(key)
        if self._fast is not None and type(key) is bytes and type(value) is bytes:
            try:
                return self._fast(key, value, key_group)
            except FAST_MISSES:
                pass  # unusual or corrupt bytes: the exact path below decodes them or says what is wrong
        try:
            if self.kind == "priority-queue":
                return [self._timer_row(key, value, key_group)]
            return self._kv_rows(key, value, key_group)
        except UnsupportedSerializerError as error:  # the key or namespace
            if not self.key.supported:
                known = self._unknown_key_timer_row if self.kind == "priority-queue" else self._unknown_key_rows
                rows = known(key, value, key_group, str(error))
                if rows is not None:
                    return rows
            return [self._row(key_group, key_raw=key[self.prefix_bytes :], value_raw=value, error=str(error))]
        except FormatError as error:
            error.message = f"state {self.state.name!r}, key {key.hex()}: {error.message}"
            raise

    def _timer_row(self, key: bytes, value: bytes, key_group: int) -> dict[str, Any]:
        if value:
            raise FormatError("timer value", 0, "an empty value", f"{len(value)} bytes")
        timer: Timer = self.timer.decode_all(key, self.prefix_bytes, "timer key")
        return self._row(
            key_group, key=timer.key, namespace=timer.namespace, timestamp=timer.timestamp,
            key_raw=key[self.prefix_bytes :], value_raw=value,
        )

    def _kv_rows(self, key: bytes, value: bytes, key_group: int) -> list[dict[str, Any]]:
        r = ByteReader(key, self.prefix_bytes)
        row = self._template.copy()
        row["key_group"] = key_group
        row["key"], row["key_raw"] = self._part(self.key, r, "key")
        row["namespace"], row["namespace_raw"] = self._part(self.namespace, r, "namespace")
        if self.kind != "map" and not r.at_end():
            raise FormatError("key", r.offset, "the end of the key", f"{r.remaining} more bytes")
        return self._value_rows(row, key, r.pos, value, [])

    def _value_rows(self, row: dict[str, Any], key: bytes, user_key_at: int, value: bytes, errors: list[str]) -> list[dict[str, Any]]:
        """``row`` (key and namespace done) completed with the user key at ``user_key_at`` of ``key`` (map
        state) and the value; an undecodable user key or value is named in ``error``, its raw bytes kept."""
        row["value_raw"] = value
        kind = self.kind
        if kind == "map":
            row["user_key_raw"] = bytes(key[user_key_at:])
            try:
                row["user_key"] = self.user_key.decode_all(key, user_key_at, "map user key")
            except UnsupportedSerializerError as error:
                errors.append(f"user_key: {error}")
            try:
                row["value"], row["ttl_timestamp"] = self._map_value(value)
            except UnsupportedSerializerError as error:
                errors.append(f"value: {error}")
            row["error"] = "; ".join(errors) or None
            return [row]
        try:
            if kind == "list":
                rows = []
                for i, (element, ttl, raw) in enumerate(self._elements(value)):
                    item = row.copy()
                    item["value"], item["ttl_timestamp"], item["list_index"], item["value_raw"] = element, ttl, i, raw
                    item["error"] = "; ".join(errors) or None
                    rows.append(item)
                return rows
            row["value"], row["ttl_timestamp"] = split_ttl(self.value.decode_all(value))
        except UnsupportedSerializerError as error:  # the value only: the key stays decoded
            errors.append(f"value: {error}")
        row["error"] = "; ".join(errors) or None
        return [row]

    # -- an undecodable key, delimited by its neighbours ---------------------------------------------
    def _unknown_key_rows(self, key: bytes, value: bytes, key_group: int, reason: str) -> list[dict[str, Any]] | None:
        """The rows of an entry whose key serializer is unknown while the namespace (and user key) are
        known: the key's bytes end where the namespace that decodes to exactly the rest begins (with
        Flink's length suffixes where both could be variable-length). None when that is not one place."""
        start = self.prefix_bytes
        user_key = self.user_key if self.kind == "map" else None
        found = _delimit_unknown_key(key, start, self.namespace, user_key, suffixes=self.namespace.is_variable_length)
        if len(found) != 1:
            return None
        key_end, namespace_at, namespace_end, user_key_at, namespace = found[0]
        row = self._template.copy()
        row["key_group"], row["key_raw"] = key_group, bytes(key[start:key_end])
        row["namespace"], row["namespace_raw"] = namespace, bytes(key[namespace_at:namespace_end])
        return self._value_rows(row, key, user_key_at, value, [f"key: {reason}"])

    def _unknown_key_timer_row(self, key: bytes, value: bytes, key_group: int, reason: str) -> list[dict[str, Any]] | None:
        """A timer whose key serializer is unknown: timestamp first, the namespace decoding to the end."""
        parts = self._timer_parts
        if parts is None or value:
            return None
        start = self.prefix_bytes + 8
        found = _delimit_unknown_key(key, start, parts[1], None, suffixes=False)
        if len(found) != 1 or len(key) < start:
            return None
        key_end, _, _, _, namespace = found[0]
        flipped = int.from_bytes(key[self.prefix_bytes:start], "big") ^ (1 << 63)
        timestamp = flipped - (1 << 64) if flipped >= 1 << 63 else flipped
        return [self._row(key_group, namespace=namespace, timestamp=timestamp, key_raw=key[self.prefix_bytes:],
                          value_raw=value, error=f"key: {reason}")]

    # -- fast rows ---------------------------------------------------------------------------------
    def _fast_rows(self):
        """``rows(key, value, key_group)`` over the decoders' fast paths (same rows as the exact path
        for well-formed bytes; raises one of ``FAST_MISSES`` for anything else), or None when a
        decoder has no fast path."""
        template, prefix, kind = self._template, self.prefix_bytes, self.kind
        if kind == "priority-queue":
            timer = self.timer.fast
            if timer is None:
                return None

            def timer_rows(key: bytes, value: bytes, key_group: int) -> list[dict[str, Any]]:
                decoded, end = timer(key, prefix)
                if value or end != len(key):
                    raise FastMiss
                row = template.copy()
                row["key_group"], row["key"], row["namespace"], row["timestamp"] = key_group, decoded.key, decoded.namespace, decoded.timestamp
                row["key_raw"], row["value_raw"] = key[prefix:], value
                return [row]

            return timer_rows
        key_fast, namespace_fast = self.key.fast, self.namespace.fast
        if key_fast is None or namespace_fast is None:
            return None
        suffixes = self.suffixes

        def key_row(key: bytes, value: bytes, key_group: int) -> tuple[dict[str, Any], int]:
            decoded_key, end = key_fast(key, prefix)
            key_raw = key[prefix:end]
            if suffixes:
                end = _fast_suffix(key, end, len(key_raw))
            namespace, namespace_end = namespace_fast(key, end)
            row = template.copy()
            row["key_group"], row["key"], row["key_raw"] = key_group, decoded_key, key_raw
            row["namespace"], row["namespace_raw"], row["value_raw"] = namespace, key[end:namespace_end], value
            if suffixes:
                namespace_end = _fast_suffix(key, namespace_end, namespace_end - end)
            return row, namespace_end

        def whole_key_row(key: bytes, value: bytes, key_group: int) -> dict[str, Any]:
            row, end = key_row(key, value, key_group)
            if end != len(key):  # no user key but in map state
                raise FastMiss
            return row

        if kind == "map":
            user_key_fast, user_value_fast = self.user_key.fast, self.user_value.fast
            if user_key_fast is None or user_value_fast is None:
                return None

            def map_rows(key: bytes, value: bytes, key_group: int) -> list[dict[str, Any]]:
                row, end = key_row(key, value, key_group)
                row["user_key_raw"] = key[end:]
                user_key, end = user_key_fast(key, end)
                if end != len(key):
                    raise FastMiss
                row["user_key"] = user_key
                if value[0]:  # the null flag
                    if value[0] != 1 or len(value) != 1:
                        raise FastMiss
                    return [row]
                _fill_value(row, _fast_whole(user_value_fast, value, 1))
                return [row]

            return map_rows
        if kind == "list":
            element_fast = self.element.fast
            if element_fast is None:
                return None

            def list_rows(key: bytes, value: bytes, key_group: int) -> list[dict[str, Any]]:
                row = whole_key_row(key, value, key_group)
                rows = []
                size, start = len(value), 0
                while True:
                    decoded, end = element_fast(value, start)
                    item = row.copy()
                    _fill_value(item, decoded)
                    item["list_index"], item["value_raw"] = len(rows), value[start:end]
                    rows.append(item)
                    if end >= size:
                        return rows
                    if value[end] != LIST_DELIMITER:
                        raise FastMiss
                    start = end + 1

            return list_rows
        value_fast = self.value.fast
        if value_fast is None:
            return None

        def value_rows(key: bytes, value: bytes, key_group: int) -> list[dict[str, Any]]:
            row = whole_key_row(key, value, key_group)
            _fill_value(row, _fast_whole(value_fast, value, 0))
            return [row]

        return value_rows

    def _map_value(self, value: bytes) -> tuple[Any, int | None]:
        vr = ByteReader(value)
        if vr.bool("map value is null"):
            if not vr.at_end():
                raise FormatError("map value", vr.offset, "no bytes after the null flag", f"{vr.remaining} bytes")
            return None, None
        return split_ttl(self.user_value.decode_all(value, 1, "map value"))

    def _elements(self, value: bytes) -> Iterator[tuple[Any, int | None, bytes]]:
        r = ByteReader(value)
        while True:
            start = r.pos
            element, ttl = split_ttl(self.element.read(r))
            yield element, ttl, bytes(value[start : r.pos])
            if r.at_end():
                return
            at = r.offset
            if r.u8("list delimiter") != LIST_DELIMITER:
                raise FormatError("list delimiter", at, "',' (0x2c) or the end of the value", f"0x{value[at]:02x}")


def _delimit_unknown_key(key: bytes, start: int, namespace: Decoder, user_key: Decoder | None, *,
                         suffixes: bool) -> list[tuple[int, int, int, int, Any]]:
    """Where the bytes of an undecodable key (from ``start``) may end: every ``(key end, namespace start,
    namespace end, user key start, namespace)`` whose namespace decodes and is followed by exactly a user
    key (``user_key``) or by nothing. With ``suffixes``, the layout with Flink's length suffixes (written
    when key and namespace are both variable-length) is tried too. Stops at the second candidate."""
    found: list[tuple[int, int, int, int, Any]] = []
    size = len(key)
    for key_end in range(size, start, -1):
        for suffixed in (False, True) if suffixes else (False,):
            at = key_end
            if suffixed:
                at = _suffix_end(key, at, key_end - start)
                if at < 0:
                    continue
            try:
                namespace_value, namespace_end = namespace.decode(key, at)
            except FormatError:
                continue
            end = _suffix_end(key, namespace_end, namespace_end - at) if suffixed else namespace_end
            if end < 0:
                continue
            if user_key is None:
                if end != size:
                    continue
            else:
                try:
                    user_key.decode_all(key, end)
                except FormatError:
                    continue
            found.append((key_end, at, namespace_end, end, namespace_value))
            if len(found) > 1:
                return found
    return found


def _suffix_end(key: bytes, pos: int, length: int) -> int:
    """The position after the length suffix ``length`` at ``pos``, or -1 if it is not there."""
    end = pos + _variable_int_size(length)
    return end if end <= len(key) and int.from_bytes(key[pos:end], "little") == length else -1


def _fast_whole(fast, data: bytes, pos: int) -> Any:
    """The value filling ``data[pos:]`` exactly, by a fast path (``FastMiss`` if bytes are left over)."""
    value, end = fast(data, pos)
    if end != len(data):
        raise FastMiss
    return value


def _fill_value(row: dict[str, Any], decoded: Any) -> None:
    """``value`` (and ``ttl_timestamp`` of a TTL value) of ``row``."""
    if type(decoded) is TtlValue:
        row["value"], row["ttl_timestamp"] = decoded.value, decoded.timestamp
    else:
        row["value"] = decoded


def _fast_suffix(key: bytes, pos: int, length: int) -> int:
    """The position after the length suffix ``length`` written at ``pos`` (``FastMiss`` if it is not there)."""
    end = pos + _variable_int_size(length)
    if end > len(key) or int.from_bytes(key[pos:end], "little") != length:
        raise FastMiss
    return end


def decode_state_rows(
    state: StateMetaInfo, key_serializer, max_parallelism: int, items: Iterable[tuple[bytes, bytes]]
) -> Iterator[dict[str, Any]]:
    """Rows of ``items`` (live ``(key, value)`` pairs of ``state``'s column family)."""
    decoder = KeyedStateDecoder(state, key_serializer, max_parallelism)
    for key, value in items:
        yield from decoder.rows(key, value)
