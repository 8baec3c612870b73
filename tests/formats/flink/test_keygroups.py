"""Tests of repair.formats.flink.keygroups: fixed values, properties, and Flink's own answers from the real jar."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repair.formats.flink.keygroups import (
    UPPER_BOUND_MAX_PARALLELISM,
    assign_key_group,
    default_max_parallelism,
    java_int_hash,
    java_long_hash,
    java_string_hash,
    java_utf8,
    key_group_prefix_bytes,
    key_group_range_for_operator,
    murmur3_128,
    murmur_hash,
    operator_id_for_uid,
    operator_index_for_key_group,
)
from tests.java_oracle import compiled, jar_params

MAX_PARALLELISMS = [1, 2, 3, 7, 100, 127, 128, 129, 200, 256, 1000, 4096, 10_000, 32_767, 32_768]
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


# -- fixed values (taken from Flink 1.20.3 and 2.1.1 through the oracle) -------------------------
def test_java_hash_codes():
    assert java_string_hash("") == 0
    assert java_string_hash("ab") == 3105
    assert java_string_hash("hello world") == 1794106052
    assert java_string_hash("\U0001f600") == java_string_hash("\ud83d\ude00")  # one code point = two units
    assert java_long_hash(-5) == 4
    assert java_long_hash(LONG_MIN) == INT_MIN
    assert java_int_hash(INT_MIN) == INT_MIN


def test_murmur_hash_is_non_negative_and_matches_flink():
    assert murmur_hash(INT_MIN) == 1718298732
    assert assign_key_group(java_long_hash(-5), 128) == 7
    with pytest.raises(ValueError):
        murmur_hash(INT_MAX + 1)


def test_operator_id_for_uid_known_values():
    assert operator_id_for_uid("") == "0" * 32
    assert operator_id_for_uid("ab") == "2e1bed16ea118b93add4529b01a75ee6"
    assert len(operator_id_for_uid("a uid with ünïcödé 😀")) == 32


def test_murmur3_128_tail_lengths_differ():
    """Every tail length 0..16 takes a different path through the tail mixing; none may collide."""
    data = bytes(range(40))
    digests = {murmur3_128(data[:n]) for n in range(33)}
    assert len(digests) == 33
    assert all(len(d) == 16 for d in digests)


def test_java_utf8_joins_surrogate_pairs_and_replaces_lone_ones():
    assert java_utf8("\ud83d\ude00") == "\U0001f600".encode("utf-8")
    assert java_utf8("a\ud800b") == b"a?b"


def test_default_max_parallelism():
    assert default_max_parallelism(1) == 128
    assert default_max_parallelism(100) == 256
    assert default_max_parallelism(30_000) == 32_768
    with pytest.raises(ValueError):
        default_max_parallelism(0)


def test_key_group_prefix_bytes():
    assert key_group_prefix_bytes(128) == 1
    assert key_group_prefix_bytes(129) == 2
    assert key_group_prefix_bytes(32_768) == 2


def test_range_rejects_bad_arguments():
    with pytest.raises(ValueError):
        key_group_range_for_operator(4, 8, 0)  # max parallelism below parallelism
    with pytest.raises(ValueError):
        key_group_range_for_operator(128, 4, 4)  # no such subtask
    with pytest.raises(ValueError):
        operator_index_for_key_group(128, 4, 128)  # no such key group


# -- properties ----------------------------------------------------------------------------------
@st.composite
def parallelisms(draw):
    max_parallelism = draw(st.integers(1, UPPER_BOUND_MAX_PARALLELISM))
    parallelism = draw(st.integers(1, max_parallelism))
    return max_parallelism, parallelism


@settings(max_examples=150, deadline=None)
@given(parallelisms())
def test_ranges_partition_all_key_groups(params):
    """The subtask ranges are contiguous, in order, and cover [0, max_parallelism) exactly once."""
    max_parallelism, parallelism = params
    next_start = 0
    for index in range(parallelism):
        start, end = key_group_range_for_operator(max_parallelism, parallelism, index)
        assert start == next_start
        assert end >= start - 1  # empty ranges (end == start - 1) only when parallelism > groups
        next_start = end + 1
    assert next_start == max_parallelism


@settings(max_examples=300, deadline=None)
@given(parallelisms(), st.data())
def test_every_key_group_lies_in_the_range_of_its_operator(params, data):
    max_parallelism, parallelism = params
    key_group = data.draw(st.integers(0, max_parallelism - 1))
    index = operator_index_for_key_group(max_parallelism, parallelism, key_group)
    assert 0 <= index < parallelism
    start, end = key_group_range_for_operator(max_parallelism, parallelism, index)
    assert start <= key_group <= end  # with the partition property above: in no other range


@settings(max_examples=300, deadline=None)
@given(st.integers(INT_MIN, INT_MAX), st.integers(1, UPPER_BOUND_MAX_PARALLELISM))
def test_key_groups_are_in_range(key_hash, max_parallelism):
    assert 0 <= murmur_hash(key_hash) <= INT_MAX
    assert 0 <= assign_key_group(key_hash, max_parallelism) < max_parallelism


# -- Flink's own answers -------------------------------------------------------------------------


@pytest.fixture(scope="module", params=jar_params())
def flink_oracle(request, tmp_path_factory):
    """A function running queries through KeyGroupOracle compiled against one flink-dist jar."""
    jar: Path = request.param
    run_oracle = compiled("KeyGroupOracle", jar, tmp_path_factory.mktemp(f"oracle-{jar.stem}"))

    def run(queries: list[str]) -> list[dict]:
        answers = json.loads(run_oracle("\n".join(queries) + "\n"))
        assert len(answers) == len(queries)
        return answers

    return run


def _hex16(value: str) -> str:
    """The oracle's string encoding: hex of big-endian UTF-16 code units."""
    return value.encode("utf-16-be", "surrogatepass").hex()


def _sample_strings(rng: random.Random) -> list[str]:
    alphabets = [
        "abcdefghijklmnopqrstuvwxyz0123456789-_ ",
        "äöüßéèçñøåÆŒ",  # Latin-1 and Latin Extended
        "日本語中文한국어",  # BMP, 3 UTF-8 bytes
        "\U0001f600\U0001f680\U00010348",  # astral: surrogate pairs in Java
    ]
    fixed = ["", "a", "ab", "user-1", "operator-uid", "Source: Kafka", "ünïcödé", "😀", "a\ud800b", "\udfff"]
    generated = []
    for _ in range(300):
        chars = "".join(rng.sample(alphabets, rng.randint(1, len(alphabets))))
        generated.append("".join(rng.choice(chars) for _ in range(rng.randint(1, 40))))
    return fixed + generated


def _compare(oracle, cases: list[tuple[str, object]]) -> None:
    """Runs each query through Flink and compares with the Python answer; lists every mismatch."""
    answers = oracle([query for query, _ in cases])
    mismatches = []
    for (query, python_answer), flink in zip(cases, answers):
        if "error" in flink:
            if python_answer is not ValueError:
                mismatches.append(f"{query}: Flink raised {flink['error']}, Python gave {python_answer!r}")
        elif flink["result"] != python_answer:
            mismatches.append(f"{query}: Flink {flink['result']!r}, Python {python_answer!r}")
    assert not mismatches, f"{len(mismatches)} of {len(cases)} differ:\n" + "\n".join(mismatches[:20])


def _python_or_value_error(function, *args):
    try:
        result = function(*args)
    except ValueError:
        return ValueError
    return list(result) if isinstance(result, tuple) else result


@pytest.mark.slow
def test_keygroups_match_flink(flink_oracle):
    rng = random.Random(20240601)
    strings = _sample_strings(rng)
    longs = [0, 1, -1, LONG_MIN, LONG_MAX, INT_MIN, INT_MAX, 2**32] + [rng.randint(LONG_MIN, LONG_MAX) for _ in range(200)]
    ints = [0, 1, -1, INT_MIN, INT_MAX] + [rng.randint(INT_MIN, INT_MAX) for _ in range(200)]
    cases: list[tuple[str, object]] = []

    for s in strings:
        cases.append((f"hash string {_hex16(s)}", java_string_hash(s)))
        cases.append((f"uid {_hex16(s)}", operator_id_for_uid(s)))
        mp = rng.choice(MAX_PARALLELISMS)
        cases.append((f"keygroup string {_hex16(s)} {mp}", assign_key_group(java_string_hash(s), mp)))
    for n in longs:
        mp = rng.choice(MAX_PARALLELISMS)
        cases.append((f"hash long {n}", java_long_hash(n)))
        cases.append((f"keygroup long {n} {mp}", assign_key_group(java_long_hash(n), mp)))
    for n in ints:
        cases.append((f"hash int {n}", java_int_hash(n)))
        cases.append((f"murmur {n}", murmur_hash(n)))
        for mp in MAX_PARALLELISMS:
            cases.append((f"keyhash {n} {mp}", assign_key_group(n, mp)))
    for mp in MAX_PARALLELISMS:
        n = rng.randint(INT_MIN, INT_MAX)
        cases.append((f"keygroup int {n} {mp}", assign_key_group(java_int_hash(n), mp)))

    # The ranges and owners for many (max parallelism, parallelism) pairs, every index of each.
    pairs = [(mp, p) for mp in MAX_PARALLELISMS for p in {1, 2, 3, 5, 7, 64, 127, 128, 129, 1000, mp} if p <= mp]
    for mp, p in pairs:
        for index in range(p) if p <= 130 else rng.sample(range(p), 130):
            cases.append((f"range {mp} {p} {index}", list(key_group_range_for_operator(mp, p, index))))
        for kg in {0, mp - 1, rng.randrange(mp), rng.randrange(mp)}:
            cases.append((f"opindex {mp} {p} {kg}", operator_index_for_key_group(mp, p, kg)))
    # Arguments Flink rejects must be rejected here too.
    for mp, p in [(4, 8), (128, 0), (40_000, 2), (0, 1)]:
        cases.append((f"range {mp} {p} 0", _python_or_value_error(key_group_range_for_operator, mp, p, 0)))
    for p in [1, 2, 3, 50, 85, 86, 100, 171, 1000, 10_000, 21_845, 21_846, 32_768, 0, 32_769]:
        cases.append((f"defaultmax {p}", _python_or_value_error(default_max_parallelism, p)))

    assert len(cases) > 3000
    _compare(flink_oracle, cases)


@pytest.mark.slow
def test_key_hashes_of_boxed_key_types_match_flink(flink_oracle):
    """repair.formats.flink.key_hash: ``hashCode`` of each boxed key type, decoded as the value decoders
    give it, and its key group, against Flink's ``assignToKeyGroup`` on the same Java object."""
    import struct

    from repair.formats.flink.key_hash import _HASHES, key_group_of

    def hasher(kind: str):
        return next(f for name, f in _HASHES.items() if f".{kind}Serializer$" in name)

    rng = random.Random(23)
    doubles = [0.0, -0.0, 1.5, -2.25, float("inf"), float("-inf"), float("nan"), 5e-324, 1.7976931348623157e308]
    doubles += [rng.uniform(-1e12, 1e12) for _ in range(50)]
    floats = [struct.unpack(">f", struct.pack(">f", d))[0] for d in doubles if abs(d) < 3e38 or d != d or abs(d) == float("inf")]
    samples = [
        ("short", "Short", [0, 1, -1, -32768, 32767] + [rng.randint(-32768, 32767) for _ in range(30)], str),
        ("byte", "Byte", [0, 1, -1, -128, 127], str),
        ("boolean", "Boolean", [True, False], lambda v: str(v).lower()),
        ("char", "Char", ["a", "\u00e9", "\ud83d", "\uffff", "\x00"], lambda v: str(ord(v))),
        ("double", "Double", doubles, lambda v: str(struct.unpack(">q", struct.pack(">d", v))[0])),
        ("float", "Float", floats, lambda v: str(struct.unpack(">i", struct.pack(">f", v))[0])),
    ]
    cases: list[tuple[str, object]] = []
    for query_type, serializer, values, text in samples:
        f = hasher(serializer)
        for value in values:
            cases.append((f"hash {query_type} {text(value)}", f(value)))
            mp = rng.choice(MAX_PARALLELISMS)
            cases.append((f"keygroup {query_type} {text(value)} {mp}", key_group_of(f, value, mp)))
    _compare(flink_oracle, cases)
