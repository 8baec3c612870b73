"""Mutated real SST and MANIFEST bytes: only the project's typed errors or findings may come out.

No other exception, no hang, no allocation beyond the input's size (blocks are capped at 1 MiB
here, and every length read from the data is checked before use).
"""

from __future__ import annotations

import resource

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repair.errors import RepairError
from repair.formats.bytes.random_access import BytesSource
from repair.formats.rocksdb.manifest import iter_version_edits, read_manifest, replay
from repair.formats.rocksdb.table.sst import open_table, verify_table
from tests.rocksdb_testlib import make_rocksdict_db, manifest_of, sst_files

_BLOCK_LIMIT = 1 << 20


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    out = {}
    for fv, checksum, compression in ((6, "xxh3", "snappy"), (5, "crc32c", "zstd")):
        db = tmp_path_factory.mktemp(f"fuzz{fv}") / "db"
        make_rocksdict_db(db, format_version=fv, checksum=checksum, compression=compression, block_size=200, keys=150)
        out[f"sst{fv}"] = sst_files(db)[0].read_bytes()
        out[f"manifest{fv}"] = manifest_of(db).read_bytes()
    return out


def _mutations():
    flips = st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=6)
    return st.tuples(flips, st.one_of(st.none(), st.floats(0, 1)), st.booleans())


def _mutate(data: bytes, mutation) -> bytes:
    flips, cut, tail_only = mutation
    out = bytearray(data)
    for where, value in flips:
        # Half of the runs aim at the last 300 bytes, where footer, metaindex and index live.
        span = min(300, len(out)) if tail_only else len(out)
        out[len(out) - span + int(where * span)] = value
    if cut is not None:
        out = out[: int(cut * len(out))]
    return bytes(out)


def _check_sst(data: bytes) -> None:
    report = verify_table(BytesSource(data), max_block_size=_BLOCK_LIMIT)
    assert all(f.kind and f.message for f in report.findings)
    try:
        table = open_table(BytesSource(data), max_block_size=_BLOCK_LIMIT)
        for _ in table.entries():
            pass
        list(table.range_tombstones())
    except RepairError:
        pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=_mutations(), which=st.sampled_from(["sst6", "sst5"]))
def test_mutated_sst_gives_only_typed_errors(samples, mutation, which):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _check_sst(_mutate(samples[which], mutation))
    # Peak memory grows by far less than a gigabyte (kilobytes on Linux).
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 256 * 1024


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=_mutations(), which=st.sampled_from(["manifest6", "manifest5"]))
def test_mutated_manifest_gives_only_typed_errors(samples, mutation, which):
    data = _mutate(samples[which], mutation)
    try:
        replay(read_manifest(BytesSource(data)))
    except RepairError:
        pass
    findings: list = []
    replay(iter_version_edits(BytesSource(data), strict=False, findings=findings))
