"""``hashCode()`` of a decoded Flink key, by the key serializer that wrote it, and its key group.

Flink assigns a key to key group ``murmurHash(key.hashCode()) % maxParallelism``
(:mod:`repair.formats.flink.keygroups`). The hash of a key is known here only for the boxed Java types
whose ``hashCode`` the JDK defines (``String``, ``Long``, ``Integer``, ``Short``, ``Byte``,
``Boolean``, ``Character``, ``Double``, ``Float``); for any other key type (a POJO, a tuple, a class
behind a custom serializer, whose ``hashCode`` is user code) :func:`key_hasher` returns None, and
a caller that needs the key group must refuse. A Kryo key's hash is known when its bytes hold one of those
JDK types (:class:`RawKeyHash`: the class is read from the bytes; other classes are refused per key).
"""

from __future__ import annotations

import functools
import math
import struct
from dataclasses import dataclass
from typing import Any, Callable

from repair.formats.bytes.binary import ByteReader
from repair.formats.flink import kryo, registry
from repair.formats.flink.keygroups import assign_key_group, java_int_hash, java_long_hash, java_string_hash
from repair.formats.flink.serializers import KRYO_GENERATION, SerializerSnapshot


def _double_hash(value: float) -> int:
    """``Double.hashCode``: ``doubleToLongBits`` (one canonical NaN) folded like a long."""
    bits = 0x7FF8000000000000 if math.isnan(value) else struct.unpack(">q", struct.pack(">d", value))[0]
    return java_long_hash(bits)


def _float_hash(value: float) -> int:
    """``Float.hashCode``: ``floatToIntBits`` (one canonical NaN)."""
    return 0x7FC00000 if math.isnan(value) else struct.unpack(">i", struct.pack(">f", value))[0]


#: A key's hash is asked once per state that holds the key (and per timer): strings, whose hash costs
#: time in their length, are remembered for the most recent keys.
_cached_string_hash = functools.lru_cache(maxsize=1 << 16)(java_string_hash)

#: Key serializer snapshot class -> ``hashCode`` of the decoded key (as :mod:`repair.formats.flink.values` decodes it).
_HASHES: dict[str, Callable[[Any], int]] = registry.register(registry.KEY_HASH, {
    registry.STRING: _cached_string_hash,
    registry.LONG: java_long_hash,
    registry.INT: java_int_hash,
    registry.SHORT: java_int_hash,  # Short.hashCode: (int) value
    registry.BYTE: java_int_hash,  # Byte.hashCode: (int) value
    registry.BOOLEAN: lambda value: 1231 if value else 1237,
    registry.CHAR: ord,  # Character.hashCode: the UTF-16 unit
    registry.DOUBLE: _double_hash,
    registry.FLOAT: _float_hash,
})


#: Kryo's own registrations (a key that is a boxed JDK value or a String) -> ``hashCode`` of the value.
_KRYO_HASHES: dict[int, Callable[[Any], int]] = {
    kryo.STRING: _cached_string_hash, kryo.LONG: java_long_hash, kryo.INT: java_int_hash, kryo.SHORT: java_int_hash,
    kryo.BYTE: java_int_hash, kryo.BOOLEAN: lambda value: 1231 if value else 1237, kryo.CHAR: ord,
    kryo.DOUBLE: _double_hash, kryo.FLOAT: _float_hash,
}


@dataclass(frozen=True)
class RawKeyHash:
    """The ``hashCode`` of a key read from its raw bytes: a Kryo key's Java class is in its bytes, not in
    its decoded value (an ``int`` may be a ``Long`` or an ``Integer``, whose hashes differ)."""

    hash_raw: Callable[[bytes], int]


def _kryo_hasher(snapshot: SerializerSnapshot) -> RawKeyHash | None:
    generation = snapshot.attributes.get(KRYO_GENERATION)
    if generation is None:
        return None

    def hash_raw(raw: bytes) -> int:
        node = kryo.read_node(ByteReader(raw), generation)
        while node.same is not None:
            node = node.same
        hasher = _KRYO_HASHES.get(node.cls) if isinstance(node.cls, int) else None
        if hasher is None or node.value is None:
            raise ValueError(f"the hashCode of a Kryo key of class {node.cls} is not known here (only boxed JDK values and Strings)")
        return hasher(node.value)

    return RawKeyHash(hash_raw)


#: The composite serializers whose keys' hashCode is known: a Kryo key's, of its raw bytes.
_COMPOSITES: dict[str, Callable[[SerializerSnapshot], RawKeyHash | None]] = registry.register(registry.KEY_HASH, {
    registry.KRYO: _kryo_hasher,
})


def key_hasher(key_serializer: SerializerSnapshot | None) -> Callable[[Any], int] | RawKeyHash | None:
    """The ``hashCode`` of keys written by ``key_serializer`` (None: not knowable here); for a Kryo key
    (:class:`RawKeyHash`) of its raw bytes, known for the boxed JDK values and Strings."""
    if key_serializer is None:
        return None
    build = _COMPOSITES.get(key_serializer.class_name)
    return build(key_serializer) if build is not None else _HASHES.get(key_serializer.class_name)


def key_group_of(hasher: Callable[[Any], int] | RawKeyHash, key: Any, max_parallelism: int, raw: bytes | None = None) -> int:
    """``KeyGroupRangeAssignment.assignToKeyGroup``: the key group of a decoded key (of its raw bytes
    ``raw`` for a :class:`RawKeyHash`)."""
    if key is None:
        raise ValueError("a null key has no key group (Flink refuses null keys)")
    if isinstance(hasher, RawKeyHash):
        if raw is None:
            raise ValueError("a Kryo key's hash needs its raw bytes")
        return assign_key_group(hasher.hash_raw(raw), max_parallelism)
    return assign_key_group(hasher(key), max_parallelism)
