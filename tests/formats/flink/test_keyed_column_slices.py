"""The byte ranges column-wise decoding cuts out of a batch (repair.formats.flink.in_rocksdb.keyed_columns._slices).

Every raw column and every string of the column-wise decoder is such a cut: one range per row, and
when ranges sit at the same place in every row (a key-group prefix, a fixed-width field, a namespace
suffix) a faster cut is taken. Both must give exactly Python's slices.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as hst

from repair.formats.flink.in_rocksdb.keyed_columns import _ROW_END, _Bytes, _same_place, _slices


def _cut(rows: list[bytes], ranges: list[tuple[int, int]], per_row: bool) -> list[bytes]:
    src = _Bytes(pa.array(rows, pa.binary()))
    offsets = src.starts.to_pylist()
    starts = pa.array([offsets[i] + a for i, (a, _) in enumerate(ranges)], pa.int64())
    ends = pa.array([offsets[i] + b for i, (_, b) in enumerate(ranges)], pa.int64())
    return _slices(src, starts, ends, per_row=per_row).to_pylist()


@hst.composite
def _rows_and_ranges(draw, same_begin: bool, same_tail: bool, same_width: bool):
    begin = draw(hst.integers(0, 4))
    tail = draw(hst.integers(0, 3))
    width = draw(hst.integers(0, 6))
    rows, ranges = [], []
    for _ in range(draw(hst.integers(1, 12))):
        a = begin if same_begin else draw(hst.integers(0, 4))
        w = width if same_width else draw(hst.integers(0, 6))
        t = tail if same_tail else draw(hst.integers(0, 3))
        rows.append(draw(hst.binary(min_size=a + w + t, max_size=a + w + t)))
        ranges.append((a, a + w))
    return rows, ranges


@settings(max_examples=300, deadline=None)
@given(hst.data())
def test_every_cut_is_pythons_slice(data):
    shape = data.draw(hst.tuples(hst.booleans(), hst.booleans(), hst.booleans()))
    rows, ranges = data.draw(_rows_and_ranges(*shape))
    expected = [row[a:b] for row, (a, b) in zip(rows, ranges)]
    assert _cut(rows, ranges, per_row=True) == expected
    assert _cut(rows, ranges, per_row=False) == expected


def test_whole_rows_are_the_rows_themselves_and_suffixes_reach_the_end():
    rows = [b"\x01abc", b"\x02", b"\x03xyzzy"]
    src = _Bytes(pa.array(rows, pa.binary()))
    assert _slices(src, src.starts, src.ends, per_row=True) is src.array
    assert _cut(rows, [(1, len(r)) for r in rows], per_row=True) == [b"abc", b"", b"xyzzy"]
    assert _cut(rows, [(0, 1) for _ in rows], per_row=True) == [b"\x01", b"\x02", b"\x03"]


def test_ranges_of_one_width_are_cut_by_their_width_not_by_their_distance_to_the_end():
    """A key of one width between a key-group prefix and a namespace suffix is both at a fixed distance
    from its row's end and of a fixed width: it is cut as ``(start, start + width)``, for which
    ``binary_slice`` allocates exactly its output; cut as ``(start, -tail)`` it allocates the rows'
    bytes and shrinks them after, a copy of the whole output with the system allocator."""
    rows = [b"\x00\x07" + b"k%04d" % i + b"\x00" for i in range(5)]
    src = _Bytes(pa.array(rows, pa.binary()))
    assert _same_place(src, pa.array(src.starts.to_pylist(), pa.int64()), src.ends) == (0, _ROW_END)
    starts = pa.array([s + 2 for s in src.starts.to_pylist()], pa.int64())
    ends = pa.array([e - 1 for e in src.ends.to_pylist()], pa.int64())
    assert _same_place(src, starts, ends) == (2, 7)
    assert _cut(rows, [(2, 7)] * 5, per_row=True) == [b"k%04d" % i for i in range(5)]
    uneven = [b"\x00\x07" + b"k" * (i + 1) + b"\x00" for i in range(5)]
    src = _Bytes(pa.array(uneven, pa.binary()))
    starts = pa.array([s + 2 for s in src.starts.to_pylist()], pa.int64())
    ends = pa.array([e - 1 for e in src.ends.to_pylist()], pa.int64())
    assert _same_place(src, starts, ends) == (2, -1)
