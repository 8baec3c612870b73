"""Flink's key-group math, bit for bit.

Flink splits the key space of a keyed operator into ``max_parallelism`` *key groups*. A key goes to
key group ``murmur_hash(key.hashCode()) % max_parallelism``; each of the ``parallelism`` subtasks
owns one contiguous range of key groups. RocksDB keys of keyed state start with the key group as a
1- or 2-byte big-endian prefix. Rebuilding or splitting a checkpoint needs exactly the same numbers
Flink computes, so every function here mirrors one Java method (named in its docstring) including
Java's 32-bit integer overflow. ``tests/java/KeyGroupOracle.java`` checks them against the real
Flink jars.

Operator ids: an operator with ``uid("...")`` gets the id ``murmur3_128(seed 0)`` over the UTF-8
bytes of the uid (``StreamGraphHasherV2.generateUserSpecifiedHash``); :func:`operator_id_for_uid`
returns it as ``OperatorID.toHexString()`` prints it, the form found in logs and in the
State Processor API.
"""

from __future__ import annotations

import operator
import struct

#: ``KeyGroupRangeAssignment.DEFAULT_LOWER_BOUND_MAX_PARALLELISM``.
DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 1 << 7
#: ``KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM`` (``Transformation.UPPER_BOUND_MAX_PARALLELISM``).
UPPER_BOUND_MAX_PARALLELISM = 1 << 15

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


# -- Java integer helpers ------------------------------------------------------------------------
def _to_int32(value: int) -> int:
    """Wrap ``value`` to a Java ``int`` (two's complement, 32 bits)."""
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def _rotl32(value: int, bits: int) -> int:
    value &= _MASK32
    return ((value << bits) | (value >> (32 - bits))) & _MASK32


def _rotl64(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK64


def _check_int32(name: str, value: int) -> None:
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"{name} must be a Java int (32-bit signed), got {value}")


# -- hashes of key types -------------------------------------------------------------------------
def java_string_hash(value: str) -> int:
    """``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as a Java int.

    Characters outside the Basic Multilingual Plane count as two code units (a surrogate pair), as
    in Java. The sum is taken at once over the units and cached powers of 31 (modulo 2^32): the same
    number as Java's loop, some ten times faster than a loop in Python for long keys.
    """
    units = value.encode("utf-16-be", "surrogatepass")
    count = len(units) // 2
    powers = _powers_of_31(count)
    total = sum(map(operator.mul, reversed(struct.unpack(f">{count}H", units)), powers))
    return _to_int32(total)


#: ``31**k mod 2**32`` for k = 0, 1, ... (grown to the longest string hashed so far).
_POWERS_OF_31 = [1]


def _powers_of_31(count: int) -> list[int]:
    powers = _POWERS_OF_31
    while len(powers) < count:
        powers.append((powers[-1] * 31) & _MASK32)
    return powers


def java_long_hash(value: int) -> int:
    """``Long.hashCode(long)``: ``(int) (value ^ (value >>> 32))``."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"value must be a Java long (64-bit signed), got {value}")
    bits = value & _MASK64
    return _to_int32(bits ^ (bits >> 32))


def java_int_hash(value: int) -> int:
    """``Integer.hashCode(int)``: the value itself."""
    _check_int32("value", value)
    return value


# -- key groups ----------------------------------------------------------------------------------
def murmur_hash(code: int) -> int:
    """``MathUtils.murmurHash(int)``: one murmur3_32 round over ``code`` (seed 0), made non-negative.

    The result is in ``[0, 2**31 - 1]``: a negative hash is negated, and ``Integer.MIN_VALUE``
    (which has no positive counterpart) becomes 0.
    """
    _check_int32("code", code)
    h = (code * 0xCC9E2D51) & _MASK32
    h = _rotl32(h, 15)
    h = (h * 0x1B873593) & _MASK32
    h = _rotl32(h, 13)
    h = (h * 5 + 0xE6546B64) & _MASK32
    h ^= 4  # the length in bytes of the hashed int
    # MathUtils.bitMix: the murmur3 finaliser
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    signed = _to_int32(h)
    if signed >= 0:
        return signed
    return -signed if signed != -(1 << 31) else 0


def check_parallelism(parallelism: int) -> None:
    """``KeyGroupRangeAssignment.checkParallelismPreconditions``: ``0 < parallelism <= 32768``."""
    if not 0 < parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(
            f"operator parallelism must be in (0, {UPPER_BOUND_MAX_PARALLELISM}], got {parallelism}"
        )


def _check_parallelisms(max_parallelism: int, parallelism: int) -> None:
    check_parallelism(parallelism)
    check_parallelism(max_parallelism)
    if max_parallelism < parallelism:
        raise ValueError(
            f"maximum parallelism ({max_parallelism}) must not be smaller than parallelism ({parallelism})"
        )


def assign_key_group(key_hash: int, max_parallelism: int) -> int:
    """``KeyGroupRangeAssignment.computeKeyGroupForKeyHash``: the key group of a key with ``hashCode() == key_hash``.

    ``assignToKeyGroup(key, maxParallelism)`` in Flink is this applied to ``key.hashCode()``; use
    :func:`java_string_hash`, :func:`java_long_hash` or :func:`java_int_hash` for the key's hash.
    """
    if max_parallelism <= 0:
        raise ValueError(f"max_parallelism must be positive, got {max_parallelism}")
    return murmur_hash(key_hash) % max_parallelism


def operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """``KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup``: the subtask owning ``key_group``."""
    if not 0 <= key_group < max_parallelism:
        raise ValueError(f"key group {key_group} is outside [0, {max_parallelism})")
    return key_group * parallelism // max_parallelism


def key_group_range_for_operator(max_parallelism: int, parallelism: int, operator_index: int) -> tuple[int, int]:
    """``KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex``: key groups of one subtask.

    Returns ``(start, end)`` with ``end`` **inclusive**, like Flink's ``KeyGroupRange``. With more
    subtasks than key groups a subtask can own none; then ``end == start - 1``
    (``KeyGroupRange.EMPTY_KEY_GROUP_RANGE`` in Flink).
    """
    _check_parallelisms(max_parallelism, parallelism)
    if not 0 <= operator_index < parallelism:
        raise ValueError(f"operator index {operator_index} is outside [0, {parallelism})")
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return start, end


def key_group_prefix_bytes(max_parallelism: int) -> int:
    """``CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix``: 1 if ``max_parallelism <= 128`` else 2."""
    return 2 if max_parallelism > 128 else 1


def _round_up_to_power_of_two(value: int) -> int:
    """``MathUtils.roundUpToPowerOfTwo`` for positive values."""
    return 1 << (value - 1).bit_length()


def default_max_parallelism(parallelism: int) -> int:
    """``KeyGroupRangeAssignment.computeDefaultMaxParallelism``.

    ``1.5 * parallelism`` rounded up to a power of two, at least 128 and at most 32768.
    """
    check_parallelism(parallelism)
    rounded = _round_up_to_power_of_two(parallelism + parallelism // 2)
    return min(max(rounded, DEFAULT_LOWER_BOUND_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)


# -- operator ids --------------------------------------------------------------------------------
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    k ^= k >> 33
    return k


def murmur3_128(data: bytes, seed: int = 0) -> bytes:
    """MurmurHash3 x64 128-bit of ``data``, as Guava's ``Hashing.murmur3_128(seed).hashBytes(data).asBytes()``.

    Austin Appleby's ``MurmurHash3_x64_128``: 16-byte blocks read as two little-endian 64-bit
    lanes ``k1, k2``, mixed into ``h1, h2``; the 0..15 tail bytes mixed likewise; then the length
    and the ``fmix64`` finaliser. Guava's ``asBytes()`` is ``h1`` then ``h2``, each little-endian.
    """
    _check_int32("seed", seed)
    length = len(data)
    h1 = h2 = seed & _MASK64  # Guava widens its int seed to long with sign extension
    body = length - length % 16
    for k1, k2 in struct.iter_unpack("<QQ", data[:body]):
        k1 = (_rotl64((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64
        h1 ^= k1
        h1 = (_rotl64(h1, 27) + h2) & _MASK64
        h1 = (h1 * 5 + 0x52DCE729) & _MASK64
        k2 = (_rotl64((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
        h2 ^= k2
        h2 = (_rotl64(h2, 31) + h1) & _MASK64
        h2 = (h2 * 5 + 0x38495AB5) & _MASK64

    tail = data[body:]
    if tail:
        padded = tail.ljust(16, b"\0")
        k1, k2 = struct.unpack("<QQ", padded)
        if len(tail) > 8:
            h2 ^= (_rotl64((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
        h1 ^= (_rotl64((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64

    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    return struct.pack("<QQ", h1, h2)


def java_utf8(value: str) -> bytes:
    """``value.getBytes(StandardCharsets.UTF_8)`` as Java computes it.

    Surrogate pairs held as two separate code points (as a naive decoder of Java's modified UTF-8
    leaves them) are joined into one character; a lone surrogate becomes ``?``, Java's replacement.
    """
    joined = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return joined.encode("utf-8", "replace")


def operator_id_for_uid(uid: str) -> str:
    """The operator id Flink derives from ``uid(...)``, as 32 lower-case hex characters.

    ``StreamGraphHasherV2.generateUserSpecifiedHash``: ``murmur3_128(0)`` over the UTF-8 bytes of
    the uid. ``new OperatorID(bytes)`` reads bytes 0..7 as its lower and 8..15 as its upper part
    and ``toHexString()`` prints lower then upper, so the hex string is the hash bytes in order.
    """
    return murmur3_128(java_utf8(uid), 0).hex()


def operator_label(operator: str | None) -> str:
    """How an operator is shown: its uid or name as it is; an operator known only by its 32-hex-digit
    id (Flink before 2.0 stores no uid) by the id's first 8 digits, as every command shows it."""
    if operator and len(operator) == 32 and all(c in "0123456789abcdef" for c in operator):
        return operator[:8]
    return operator or ""
