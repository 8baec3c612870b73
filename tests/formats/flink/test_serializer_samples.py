"""Flink's own serializers against the Python decoders, for formats the fixtures do not hold.

``tests/java/SerializerSamples.java``, run against every cached flink-dist jar, serializes Rows of
every RowKind (``-U`` and ``-D`` never occur in the fixture job's state), legacy Rows without kinds,
and Sets (Flink 2.x); each must decode, by the exact reader and by the fast path, to the value the
Java program serialized, ending exactly at the end of its bytes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from repair.formats.flink.serializers import SerializerSnapshot
from repair.formats.flink.values import FAST_MISSES, decoder_for
from tests.java_oracle import compiled, jar_params

_B = "org.apache.flink.api.common.typeutils.base."
_R = "org.apache.flink.api.java.typeutils.runtime."
LONG = SerializerSnapshot(_B + "LongSerializer$LongSerializerSnapshot", 3)
STRING = SerializerSnapshot(_B + "StringSerializer$StringSerializerSnapshot", 1)


def _row(kinds: bool) -> SerializerSnapshot:
    return SerializerSnapshot(_R + "RowSerializer$RowSerializerSnapshot", 3, nested=[LONG, STRING, LONG], attributes={"supports_row_kind": kinds})


SET = SerializerSnapshot(_B + "SetSerializerSnapshot", 3, nested=[STRING])
#: What SerializerSamples.java serialized, by sample name: (the serializer's snapshot, the value).
EXPECTED = {
    **{f"row {kind}": (_row(True), {"kind": kind, "f0": 7, "f1": "héllo", "f2": -1}) for kind in ("+I", "-U", "+U", "-D")},
    "row +I nulls": (_row(True), {"kind": "+I", "f0": None, "f1": None, "f2": -(2**63)}),
    "legacy row": (_row(False), {"kind": None, "f0": 7, "f1": "héllo", "f2": -1}),
    "legacy row nulls": (_row(False), {"kind": None, "f0": None, "f1": "x", "f2": None}),
    "set": (SET, ["a", None, "ünï"]),
    "set empty": (SET, []),
}

pytestmark = pytest.mark.slow  # compiles and runs a Java program against each Flink jar


@pytest.fixture(scope="module", params=jar_params())
def samples(request, tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    jar: Path = request.param
    run = compiled("SerializerSamples", jar, tmp_path_factory.mktemp(f"samples-{jar.stem}"))
    return jar, {sample["name"]: bytes.fromhex(sample["hex"]) for sample in json.loads(run())}


def test_every_sample_decodes_to_what_flink_serialized(samples):
    jar, found = samples
    flink_2 = int(re.search(r"flink-dist-(\d+)\.", jar.name)[1]) >= 2
    assert set(found) == {name for name in EXPECTED if flink_2 or not name.startswith("set")}
    assert len({found[f"row {kind}"][0] for kind in ("+I", "-U", "+U", "-D")}) == 4, "the kinds differ in the first byte"
    for name, data in found.items():
        snapshot, value = EXPECTED[name]
        decoder = decoder_for(snapshot)
        assert decoder.decode(data) == (value, len(data)), name
        fields = value.values() if isinstance(value, dict) else value
        try:
            assert decoder.fast(data, 0) == (value, len(data)), name
        except FAST_MISSES:  # only non-ASCII text is left to the exact reader
            assert any(isinstance(v, str) and not v.isascii() for v in fields), name
