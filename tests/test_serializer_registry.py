"""The serializer registry (repair/formats/flink/registry.py): every leaf serializer has every capability
or a documented exemption, and docs/serializers.md lists each one with what it can do."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from repair.formats.flink import registry
from repair.formats.flink.serializers import SIMPLE_SNAPSHOTS, SerializerSnapshot

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "serializers.md"
DOC_SECTION = "## Leaf serializers, and what each one can do"

for _module in set(registry.PROVIDERS.values()):
    importlib.import_module(_module)


def _gaps(table: dict[str, dict[str, object]]) -> list[str]:
    """Each capability a serializer lacks without an exemption, and each exemption that is not true."""
    problems = []
    for serializer in registry.SERIALIZERS:
        for capability in registry.CAPABILITIES:
            has = serializer.class_name in table[capability]
            why = registry.exemption(serializer, capability)
            if not has and why is None:
                problems.append(f"{serializer}: no {capability}, and no exemption in registry.EXEMPTIONS says why")
            elif has and why is not None:
                problems.append(f"{serializer}: has {capability}, yet is exempted ({why})")
    return problems


def _registered() -> dict[str, dict[str, object]]:
    return {capability: registry.registered(capability) for capability in registry.CAPABILITIES}


def test_every_serializer_has_each_capability_or_a_documented_exemption():
    assert _gaps(_registered()) == []


def test_a_forgotten_capability_is_caught():
    table = _registered()
    del table[registry.ENCODE][registry.LONG.class_name]
    del table[registry.KEY_HASH][registry.CHAR.class_name]
    assert _gaps(table) == [
        "Long: no encode, and no exemption in registry.EXEMPTIONS says why",
        "Char: no key hash, and no exemption in registry.EXEMPTIONS says why",
    ]


def test_an_exemption_that_is_no_longer_true_is_caught():
    table = _registered()
    table[registry.ENCODE][registry.VOID.class_name] = object()
    assert _gaps(table) == [
        "Void: has encode, yet is exempted (the values are always null and never part of a RocksDB key: "
        "their raw bytes are kept)"
    ]


def test_exemptions_name_registered_serializers_and_capabilities_with_a_reason():
    for entry in registry.EXEMPTIONS:
        assert entry.reason.strip()
        assert set(entry.capabilities) <= set(registry.CAPABILITIES)
        assert set(entry.serializers) <= set(registry.SERIALIZERS)


def test_nothing_is_registered_twice():
    with pytest.raises(ValueError, match="decode of Long is registered twice"):
        registry.register(registry.DECODE, {registry.LONG: None})


def test_the_lookup_tables_are_views_of_the_registry():
    from repair.formats.flink import arrow, key_hash, value_encoders, values
    from repair.formats.flink.in_rocksdb import keyed_columns

    assert SIMPLE_SNAPSHOTS == {s.class_name: s.type_name for s in registry.SERIALIZERS}
    views = {
        registry.DECODE: values._SIMPLE, registry.FAST_DECODE: values._FAST_SIMPLE,
        registry.ARROW_TYPE: arrow.SIMPLE_TYPES, registry.COLUMN_READER: keyed_columns._VECTOR,
        registry.ENCODE: value_encoders._SIMPLE, registry.KEY_HASH: key_hash._HASHES,
    }
    for capability, view in views.items():
        assert view == registry.registered(capability), capability


def test_a_registered_capability_is_used():
    """Each capability's table is what its module consults: a decoder, an Arrow type, an encoder, a key
    hash for a serializer that has them (and none for one exempted)."""
    from repair.formats.flink.arrow import arrow_type
    from repair.formats.flink.in_rocksdb import keyed_columns
    from repair.formats.flink.key_hash import key_hasher
    from repair.formats.flink.value_encoders import encoder_for
    from repair.formats.flink.values import decoder_for

    decoded = registry.registered(registry.DECODE)
    fast = registry.registered(registry.FAST_DECODE)
    for serializer in registry.SERIALIZERS:
        snapshot = SerializerSnapshot(serializer.class_name, 3)
        decoder = decoder_for(snapshot)
        assert decoder.supported is (serializer.class_name in decoded), serializer
        assert (decoder.fast is not None) is (serializer.class_name in fast), serializer
        assert (arrow_type(snapshot)[0] is not None) is (serializer.class_name in registry.registered(registry.ARROW_TYPE))
        has_encoder = serializer.class_name in registry.registered(registry.ENCODE)
        assert (encoder_for(snapshot) is not None) is (has_encoder or serializer is registry.STRING_DATA), serializer
        assert (key_hasher(snapshot) is not None) is (serializer.class_name in registry.registered(registry.KEY_HASH))
        arrow = arrow_type(snapshot)[0]
        column_reader = arrow is not None and keyed_columns._vector(snapshot, arrow) is not None
        assert column_reader is (serializer.class_name in registry.registered(registry.COLUMN_READER)), serializer


def _doc_rows() -> dict[str, str]:
    text = DOC.read_text()
    assert DOC_SECTION in text, f"docs/serializers.md has no section {DOC_SECTION!r}"
    section = text.split(DOC_SECTION, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| `([^`]+)` \|[^|]*\| ([^|]*) \|$", line)
        if match:
            rows[match.group(1)] = match.group(2).strip()
    return rows


def test_the_doc_lists_every_serializer_with_its_capabilities():
    rows = _doc_rows()
    expected = {}
    for serializer in registry.SERIALIZERS:
        expected[serializer.name] = ", ".join(registry.capabilities_of(serializer)) or "none"
    assert rows == expected


def test_the_registry_imports_nothing_heavy():
    code = "import sys, repair.formats.flink.registry; print(sorted(m for m in sys.modules if m.startswith(('repair.', 'pyarrow'))))"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['repair.formats', 'repair.formats.flink', 'repair.formats.flink.registry']"
