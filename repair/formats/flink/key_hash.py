"""``hashCode()`` of a decoded Flink key, by the key serializer that wrote it, and its key group.

Flink assigns a key to key group ``murmurHash(key.hashCode()) % maxParallelism``
(:mod:`repair.formats.flink.keygroups`). The hash of a key is known here only for the boxed Java types
whose ``hashCode`` the JDK defines (``String``, ``Long``, ``Integer``, ``Short``, ``Byte``,
``Boolean``, ``Character``, ``Double``, ``Float``); for any other key type (a POJO, a tuple, a class
behind Kryo or a custom serializer, whose ``hashCode`` is user code) :func:`key_hasher` returns None, and
a caller that needs the key group must refuse.
"""

from __future__ import annotations

import functools
import math
import struct
from typing import Any, Callable

from repair.formats.flink.keygroups import assign_key_group, java_int_hash, java_long_hash, java_string_hash
from repair.formats.flink.serializers import SerializerSnapshot

_B = "org.apache.flink.api.common.typeutils.base."


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
_HASHES: dict[str, Callable[[Any], int]] = {
    _B + "StringSerializer$StringSerializerSnapshot": _cached_string_hash,
    _B + "LongSerializer$LongSerializerSnapshot": java_long_hash,
    _B + "IntSerializer$IntSerializerSnapshot": java_int_hash,
    _B + "ShortSerializer$ShortSerializerSnapshot": java_int_hash,  # Short.hashCode: (int) value
    _B + "ByteSerializer$ByteSerializerSnapshot": java_int_hash,  # Byte.hashCode: (int) value
    _B + "BooleanSerializer$BooleanSerializerSnapshot": lambda value: 1231 if value else 1237,
    _B + "CharSerializer$CharSerializerSnapshot": ord,  # Character.hashCode: the UTF-16 unit
    _B + "DoubleSerializer$DoubleSerializerSnapshot": _double_hash,
    _B + "FloatSerializer$FloatSerializerSnapshot": _float_hash,
}


def key_hasher(key_serializer: SerializerSnapshot | None) -> Callable[[Any], int] | None:
    """The ``hashCode`` of keys written by ``key_serializer`` (None: not knowable here)."""
    return None if key_serializer is None else _HASHES.get(key_serializer.class_name)


def key_group_of(hasher: Callable[[Any], int], key: Any, max_parallelism: int) -> int:
    """``KeyGroupRangeAssignment.assignToKeyGroup``: the key group of a decoded key."""
    if key is None:
        raise ValueError("a null key has no key group (Flink refuses null keys)")
    return assign_key_group(hasher(key), max_parallelism)
