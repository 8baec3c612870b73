"""Flink's own RowDataSerializer against row_data.py, for SQL types the SQL fixtures do not hold.

``tests/java/RowDataSamples.java``, run against every cached Flink (``tests/java_oracle.jar_params``: at
least the releases ``scripts/test.sh`` installs) with its Table API jars, unpacked here when they are not yet
(``fixtures/flink_harness.ensure_flink_table``), writes a ``RowDataSerializer`` snapshot (read by
serializers.py: the logical types from their Java serialization) and rows of BOOLEAN to DOUBLE, compact
and wide DECIMAL, inline and variable STRING and VARBINARY, DATE, TIME, compact and wide TIMESTAMP,
TIMESTAMP_LTZ(6), a nested ROW, ARRAY (with a null element, and of arrays), MAP and MULTISET
(``BinaryArrayData``, ``BinaryMapData``) and null fields; each must decode to the value Java wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from fixtures.flink_harness import ensure_flink_table
from repair.formats.flink.serializers import decode_serializer_snapshot, describe
from repair.formats.flink.value_encoders import encoder_for
from repair.formats.flink.values import decoder_for
from tests.conftest import MISSING_TOOL
from tests.java_oracle import JAVA_SOURCES, jar_params


@pytest.fixture(scope="module", params=jar_params())
def samples(request, tmp_path_factory) -> dict:
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip(f"{MISSING_TOOL} javac/java not on PATH")
    dist_jar = request.param
    version = dist_jar.stem.removeprefix("flink-dist-")
    # Unpacked from the apache-flink-libraries package ensure_flink already downloaded: not a skip on a
    # fresh machine, where only the SQL fixture generator had unpacked them before.
    table_jars = ensure_flink_table(version)
    classpath = os.pathsep.join(map(str, [dist_jar, *table_jars]))
    classes = tmp_path_factory.mktemp(f"rowdata-{version}")
    subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(classes), str(JAVA_SOURCES / "RowDataSamples.java")],
                   check=True, capture_output=True, timeout=120)
    out = subprocess.run(["java", "-cp", f"{classpath}{os.pathsep}{classes}", "RowDataSamples"],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    return json.loads(out.strip().splitlines()[-1])


FULL = {
    "kind": "+U", "f0": True, "f1": -7, "f2": -300, "f3": 123456, "f4": -9007199254740993, "f5": 1.5, "f6": -2.25,
    "f7": "-12345678.91", "f8": "1234567890123456789012345.67891", "f9": "short", "f10": bytes(range(1, 10)),
    "f11": 20454, "f12": 45296789, "f13": 1767225600123, "f14": 1767225600123 * 1_000_000 + 456789,
    "f15": -1000 * 1_000_000 + 1000, "f16": {"kind": "+I", "f0": 42, "f1": "zoë and a longer text"},
    "f17": [1, None, -3], "f18": [(7, "seven"), (-1, "a value longer than seven bytes")], "f19": [("x", 2), ("ünï", 1)],
    "f20": [[1, 2], [], None],
}
NULLS = {"kind": "-D", **{f"f{i}": None for i in range(21)}, "f9": "ünïcode, more than seven bytes", "f10": b"\xff"}


@pytest.mark.slow  # a JVM per Flink release
def test_row_data_of_every_type_decodes_to_what_flink_serialized(samples):
    snapshot, end = decode_serializer_snapshot(bytes.fromhex(samples["snapshot"]))
    assert end == len(bytes.fromhex(samples["snapshot"]))
    assert describe(snapshot) == (
        "ROW<BOOLEAN, TINYINT, SMALLINT, INTEGER, BIGINT, FLOAT, DOUBLE, DECIMAL(10, 2), DECIMAL(30, 5), STRING, BYTES, "
        "DATE, TIME(3), TIMESTAMP(3), TIMESTAMP(9), TIMESTAMP_LTZ(6), ROW<a INT, b STRING>, ARRAY<SMALLINT>, "
        "MAP<INTEGER, STRING>, MULTISET<STRING>, ARRAY<ARRAY<INTEGER>>>"
    ).replace("INT, b", "INTEGER, b")
    decoder = decoder_for(snapshot)
    full, nulls = (bytes.fromhex(row) for row in samples["rows"])
    assert decoder.decode_all(full) == FULL
    assert decoder.decode_all(nulls) == NULLS
    # and written back byte for byte as Flink's RowDataSerializer wrote them (value_encoders)
    encode = encoder_for(snapshot)
    assert encode(FULL) == full and encode(NULLS) == nulls
    assert encode({**FULL, "f18": [list(e) for e in FULL["f18"]]}) == full  # map entries as lists (JSON) too
