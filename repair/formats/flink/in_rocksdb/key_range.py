"""Which Flink key groups and keys a RocksDB key range of keyed state covers.

Every key of a keyed state's column family starts with the key group as a 1- or 2-byte big-endian
prefix (1 byte when max parallelism <= 128; ``SerializedCompositeKeyBuilder``), then the serialized
Flink key (value, list, map, reducing, aggregating states) or, in timer column families
(``_timer_state/...``), the ``TimerSerializer`` bytes: timestamp, key, namespace. See
:mod:`repair.formats.flink.in_rocksdb.keyed_rows` for the whole layout.

:func:`describe_boundary` reads one boundary of a file's range (an encoded internal key, as a MANIFEST
records ``smallest``/``largest``) into its key group and, where the state's serializers are known, the
Flink key. :func:`key_group_span` gives the key groups between two boundaries. Pure: bytes in,
values out; a key that does not decode keeps its raw bytes and says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from repair.errors import FormatError
from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.in_rocksdb.keyed_rows import KeyedStateDecoder
from repair.formats.flink.keygroups import key_group_prefix_bytes
from repair.formats.rocksdb.table.block import MAX_SEQUENCE_NUMBER, InternalKey, ValueType, decode_internal_key


@dataclass
class BoundaryKey:
    """One end of a file's key range."""

    user_key: bytes
    seqno: int
    value_type: int
    #: The end of a range tombstone (``end@kMaxSequenceNumber``): keys before it, not itself, are covered.
    exclusive: bool
    key_group: int | None
    #: The Flink key, decoded with the key serializer (None when not decodable: ``error`` says why).
    key: Any = None
    #: Timer column families: the timer's timestamp (ms).
    timer_timestamp: int | None = None
    error: str | None = None

    @property
    def internal_key(self) -> InternalKey:
        return InternalKey(self.user_key, self.seqno, self.value_type)

    @property
    def value_type_name(self) -> str:
        try:
            return ValueType(self.value_type).name.lower()
        except ValueError:
            return f"0x{self.value_type:02x}"

    def to_json(self) -> dict[str, Any]:
        return {
            "user_key": self.user_key.hex(), "seqno": self.seqno, "type": self.value_type_name,
            "exclusive": self.exclusive, "key_group": self.key_group, "key": plain(self.key),
            "timer_timestamp": self.timer_timestamp, "key_error": self.error,
        }


def describe_boundary(
    internal_key: bytes, state: StateMetaInfo | None, key_serializer, max_parallelism: int
) -> BoundaryKey:
    """Key group and Flink key of one encoded internal key of ``state``'s column family.

    ``state`` None (a column family that is no registered state, e.g. ``default``) or a serializer this
    toolkit cannot decode gives the key group only, with ``error`` set. Raises :class:`FormatError`
    only for an internal key shorter than 8 bytes.
    """
    parsed = decode_internal_key(internal_key)
    prefix = key_group_prefix_bytes(max_parallelism)
    exclusive = parsed.value_type == ValueType.RANGE_DELETION and parsed.seqno == MAX_SEQUENCE_NUMBER
    boundary = BoundaryKey(parsed.user_key, parsed.seqno, parsed.value_type, exclusive, None)
    if len(parsed.user_key) < prefix:
        boundary.error = f"user key of {len(parsed.user_key)} bytes is shorter than the {prefix}-byte key-group prefix"
        return boundary
    boundary.key_group = int.from_bytes(parsed.user_key[:prefix], "big")
    if state is None:
        boundary.error = "no registered state has this column family's name: key not decoded"
        return boundary
    if key_serializer is None:
        boundary.error = "the backend meta data names no key serializer: key not decoded"
        return boundary
    if len(parsed.user_key) == prefix:
        boundary.error = "the key-group prefix alone (a range boundary): no key"
        return boundary
    try:
        decoder = KeyedStateDecoder(state, key_serializer, max_parallelism)
        if state.kind == "priority-queue":
            timer = decoder.timer.decode_all(parsed.user_key, prefix, "timer key")
            boundary.key, boundary.timer_timestamp = timer.key, timer.timestamp
        else:
            boundary.key, _end = decoder.key.decode(parsed.user_key, prefix)
    except FormatError as error:
        boundary.error = f"key not decoded: {error.message}"
    return boundary


def key_group_span(smallest: BoundaryKey, largest: BoundaryKey, max_parallelism: int) -> tuple[int, int] | None:
    """First and last key group (inclusive) between two boundaries; None when either has no key group.

    An exclusive end that is a bare key-group prefix (``deleteRange`` up to the next key group) ends
    before that key group.
    """
    if smallest.key_group is None or largest.key_group is None:
        return None
    last = largest.key_group
    if largest.exclusive and len(largest.user_key) == key_group_prefix_bytes(max_parallelism) and last > smallest.key_group:
        last -= 1
    return smallest.key_group, last


def plain(value: Any) -> Any:
    """A decoded key as plain JSON: bytes as hex, tuples as lists, other objects as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return str(value)
