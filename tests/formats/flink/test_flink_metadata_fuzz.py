"""Mutation tests: damaged real ``_metadata`` bytes may only raise RepairError subclasses, must not
allocate far beyond the input's size, and must finish quickly."""

from __future__ import annotations

import time
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repair.errors import RepairError
from repair.formats.flink.metadata import decode_metadata, encode_metadata
from tests._flink_state_files import SAMPLES, all_metadata

# Small real files (fast) plus the Flink-written samples (every handle type).
_REAL = sorted((p for _, p in all_metadata()), key=lambda p: p.stat().st_size)[:3]
INPUTS = [p.read_bytes() for p in _REAL + sorted(SAMPLES.glob("v*.bin"))]

#: Generous bound of Python objects per input byte; a length taken from corrupt data and allocated
#: (gigabytes) would exceed it by orders of magnitude.
BYTES_PER_INPUT_BYTE = 32
SLACK = 1 << 20
MAX_SECONDS = 2.0


@st.composite
def damaged(draw):
    data = bytearray(draw(st.sampled_from(INPUTS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "byte", "int", "cut", "insert", "delete"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte" and data:
            data[pos] = draw(st.integers(0, 255))
        elif kind == "int" and len(data) >= pos + 4:
            value = draw(st.sampled_from([-1, 0, 1, 0x7FFFFFFF, -0x80000000, 0xFFFF, 17]))
            data[pos : pos + 4] = (value & 0xFFFFFFFF).to_bytes(4, "big")
        elif kind == "cut":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[pos : pos + draw(st.integers(1, 8))]
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_damaged_metadata_only_raises_repair_errors(data):
    tracemalloc.start()
    started = time.perf_counter()
    try:
        model = decode_metadata(data)
    except RepairError:
        model = None
    finally:
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < MAX_SECONDS
    assert peak < BYTES_PER_INPUT_BYTE * len(data) + SLACK
    if model is not None:
        # Whatever decodes must encode back to the same bytes.
        assert encode_metadata(model) == data


def test_clean_inputs_stay_within_the_memory_bound():
    # Calibrates the bound above on undamaged files: the model of a real file fits comfortably.
    for data in INPUTS:
        tracemalloc.start()
        decode_metadata(data)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < BYTES_PER_INPUT_BYTE * len(data) + SLACK
