"""The serializer registry (repair/formats/flink/registry.py): every serializer, leaf or composite, has
every capability or a documented exemption, each module's lookup table is the registry's and gives what
the registry says, and docs/serializers.md lists each one with what it can do."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest

from repair.formats.flink import registry
from repair.formats.flink.serializers import SIMPLE_SNAPSHOTS, PojoField, SerializerSnapshot
from repair.formats.flink.table_types import SqlType
from tests.conftest import REPO

DOC = REPO / "docs" / "serializers.md"
DOC_SECTION = "## Leaf serializers, and what each one can do"
COMPOSITE_DOC_SECTION = "## Composite serializers, and what each one can do"
EVERY = registry.SERIALIZERS + registry.COMPOSITES

for _module in set(registry.PROVIDERS.values()):
    importlib.import_module(_module)


def _gaps(table: dict[str, dict[str, object]]) -> list[str]:
    """Each capability a serializer lacks without an exemption, and each exemption that is not true."""
    problems = []
    for serializer in EVERY:
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
    del table[registry.ARROW_TYPE][registry.MAP.class_name]
    assert _gaps(table) == [
        "Long: no encode, and no exemption in registry.EXEMPTIONS says why",
        "Char: no key hash, and no exemption in registry.EXEMPTIONS says why",
        "MapSerializer: no Arrow type, and no exemption in registry.EXEMPTIONS says why",
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
        assert set(entry.serializers) <= set(EVERY)


def test_nothing_is_registered_twice():
    with pytest.raises(ValueError, match="decode of Long is registered twice"):
        registry.register(registry.DECODE, {registry.LONG: None})


def test_the_lookup_tables_are_views_of_the_registry():
    from repair.formats.flink import arrow, key_hash, value_encoders, values
    from repair.formats.flink.in_rocksdb import keyed_columns

    assert SIMPLE_SNAPSHOTS == {s.class_name: s.type_name for s in registry.SERIALIZERS}
    leaves = {
        registry.DECODE: values._SIMPLE, registry.FAST_DECODE: values._FAST_SIMPLE,
        registry.ARROW_TYPE: arrow.SIMPLE_TYPES, registry.COLUMN_READER: keyed_columns._VECTOR,
        registry.ENCODE: value_encoders._SIMPLE, registry.KEY_HASH: key_hash._HASHES,
    }
    composites = {
        registry.DECODE: values._COMPOSITES, registry.ARROW_TYPE: arrow._COMPOSITE_TYPES,
        registry.ENCODE: value_encoders._COMPOSITES, registry.KEY_HASH: key_hash._COMPOSITES,
    }
    for capability in registry.CAPABILITIES:
        table = registry.registered(capability)
        assert leaves[capability] == _only(table, registry.SERIALIZERS), capability
        if capability in composites:
            assert composites[capability] == _only(table, registry.COMPOSITES), capability


def _only(table: dict[str, object], serializers: tuple[registry.Serializer, ...]) -> dict[str, object]:
    names = {s.class_name for s in serializers}
    return {name: implementation for name, implementation in table.items() if name in names}


def test_the_snapshot_reader_knows_exactly_the_registered_serializers():
    """Every snapshot class the reader decodes is named in the registry, and every one named there is read."""
    from repair.formats.flink import avro, scala_types
    from repair.formats.flink import serializers as s

    read = {*s.SIMPLE_SNAPSHOTS, *s.COMPOSITE_SNAPSHOTS, s.POJO_SNAPSHOT, s.KRYO_SNAPSHOT, s.ENUM_SNAPSHOT, s.TTL_AWARE_SNAPSHOT,
            *s.GENERIC_TYPE_SNAPSHOTS, *s.TABLE_SNAPSHOTS, scala_types.ENUM_SNAPSHOT, avro.AVRO_SNAPSHOT}
    assert read == {serializer.class_name for serializer in EVERY}
    assert all(s.COMPOSITE_SNAPSHOTS[c.class_name][0] == c.type_name for c in registry.COMPOSITES if c.class_name in s.COMPOSITE_SNAPSHOTS)


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


def _doc_rows(heading: str = DOC_SECTION) -> dict[str, str]:
    text = DOC.read_text()
    assert heading in text, f"docs/serializers.md has no section {heading!r}"
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| `([^`]+)` \|[^|]*\| ([^|]*) \|$", line)
        if match:
            rows[match.group(1)] = match.group(2).strip()
    return rows


@pytest.mark.parametrize("heading, serializers", [(DOC_SECTION, registry.SERIALIZERS), (COMPOSITE_DOC_SECTION, registry.COMPOSITES)])
def test_the_doc_lists_every_serializer_with_its_capabilities(heading, serializers):
    rows = _doc_rows(heading)
    expected = {}
    for serializer in serializers:
        expected[serializer.name] = ", ".join(registry.capabilities_of(serializer)) or "none"
    assert rows == expected


def test_the_registry_imports_nothing_heavy():
    code = "import sys, repair.formats.flink.registry; print(sorted(m for m in sys.modules if m.startswith(('repair.', 'pyarrow'))))"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['repair.formats', 'repair.formats.flink', 'repair.formats.flink.registry']"


# -- composites: what each module gives, for nested serializers that have every capability --------------

_R = registry


def _leaf(serializer: registry.Serializer) -> SerializerSnapshot:
    return SerializerSnapshot(serializer.class_name, 3)


def _composite_sample(serializer: registry.Serializer) -> SerializerSnapshot:
    """A snapshot of ``serializer`` as Flink writes one, with leaf nested serializers (Long, String) that
    have every capability but a key hash's, and the attributes its reader sets."""
    one, two = [_leaf(_R.LONG)], [_leaf(_R.LONG), _leaf(_R.STRING)]
    attributes: dict[str, object] = {}
    nested = two if serializer in (_R.MAP, _R.TAGGED_UNION, _R.EITHER, _R.TUPLE, _R.ROW, _R.TWO_PHASE_COMMIT,
                                   _R.TWO_PHASE_COMMIT_LEGACY, _R.MAP_VIEW, _R.NULL_AWARE_MAP, _R.SCALA_CASE_CLASS,
                                   _R.SCALA_TUPLE2_CASE_CLASS, _R.SCALA_EITHER, _R.TTL, _R.TTL_V2, _R.ROW_DATA) else one
    if serializer is _R.TIMER:
        nested = [_leaf(_R.STRING), _leaf(_R.VOID_NAMESPACE)]
    attributes = {
        _R.TUPLE: {"tuple_class": "org.apache.flink.api.java.tuple.Tuple2"},
        _R.GENERIC_ARRAY: {"component_class": "java.lang.Long"},
        _R.ROW: {"supports_row_kind": True},
        _R.NULLABLE: {"null_padding_length": 0},
        _R.TWO_PHASE_COMMIT: {"supports_null_transaction": True},
        _R.TWO_PHASE_COMMIT_LEGACY: {"supports_null_transaction": True},
        _R.EXTERNAL: {"is_internal_input": True},
        _R.SCALA_CASE_CLASS: {"case_class": "a.Foo"},
        _R.SCALA_TUPLE2_CASE_CLASS: {"case_class": "scala.Tuple2"},
        _R.SCALA_TRAVERSABLE: {"cbf_code": "implicitly[scala.collection.generic.CanBuildFrom[scala.collection.immutable.List[Long], Long, "
                                           "scala.collection.immutable.List[Long]]]"},
        _R.KRYO: {"type_class": "java.lang.Object", "kryo_generation": 5},
        _R.ENUM: {"enum_class": "a.Color", "enum_constants": ["RED", "GREEN"]},
        _R.VALUE: {"type_class": "a.MyValue"}, _R.COPYABLE_VALUE: {"type_class": "a.MyValue"},
        _R.WRITABLE: {"type_class": "a.MyWritable"}, _R.WRITABLE_TYPE_INFO: {"type_class": "a.MyWritable"},
        _R.ROW_DATA: {"logical_types": [SqlType("BIGINT"), SqlType("VARCHAR", params={"length": 10})]},
        _R.TIMESTAMP_DATA: {"precision": 3},
        _R.DECIMAL_DATA: {"precision": 10, "scale": 2},
        _R.BINARY_ROW: {"arity": 2},
        _R.ARRAY_DATA: {"logical_types": [SqlType("BIGINT")]},
        _R.MAP_DATA: {"logical_types": [SqlType("BIGINT"), SqlType("BIGINT")]},
        _R.SCALA_ENUM: {"enum_names": {0: "RED", 1: "GREEN"}},
        _R.AVRO: {"runtime_class": "org.apache.avro.generic.GenericRecord",
                  "schema": '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}'},
        _R.TTL_AWARE: {"is_ttl_enabled": True},
    }.get(serializer, {})
    if serializer in (_R.KRYO, _R.ENUM, _R.VALUE, _R.COPYABLE_VALUE, _R.WRITABLE, _R.WRITABLE_TYPE_INFO, _R.TIMESTAMP_DATA,
                      _R.DECIMAL_DATA, _R.BINARY_ROW, _R.ARRAY_DATA, _R.MAP_DATA, _R.SCALA_ENUM, _R.AVRO):
        nested = []
    if serializer is _R.POJO:
        return SerializerSnapshot(serializer.class_name, 2, attributes={"pojo_class": "a.Pojo"},
                                  pojo_fields=[PojoField("a", "a.Pojo", _leaf(_R.LONG)), PojoField("b", "a.Pojo", _leaf(_R.STRING))])
    return SerializerSnapshot(serializer.class_name, 3, nested, attributes=dict(attributes))


def _what_modules_give(snapshot: SerializerSnapshot) -> set[str]:
    """The capabilities each module gives ``snapshot``'s values (the column reader as export's column path
    uses it: a TTL wrapper's user value's)."""
    from repair.formats.flink.arrow import arrow_type
    from repair.formats.flink.in_rocksdb import keyed_columns
    from repair.formats.flink.key_hash import key_hasher
    from repair.formats.flink.value_encoders import encoder_for
    from repair.formats.flink.values import decoder_for

    decoder = decoder_for(snapshot)
    arrow = arrow_type(snapshot)[0]
    inner = keyed_columns._unwrap(snapshot)[0]
    given = {
        registry.DECODE: decoder.supported,
        registry.FAST_DECODE: decoder.fast is not None,
        registry.ARROW_TYPE: arrow is not None,
        registry.COLUMN_READER: arrow is not None and inner is not None and keyed_columns._vector(inner, arrow) is not None,
        registry.ENCODE: encoder_for(snapshot) is not None,
        registry.KEY_HASH: key_hasher(snapshot) is not None,
    }
    return {capability for capability, yes in given.items() if yes}


@pytest.mark.parametrize("serializer", registry.COMPOSITES, ids=str)
def test_a_composite_has_what_the_registry_says(serializer):
    """Each module's composite branch gives the capabilities registered for the composite, and none other:
    a branch added without its registration, or registered without its branch, fails here."""
    snapshot = _composite_sample(serializer)
    assert _what_modules_give(snapshot) == set(registry.capabilities_of(serializer)), snapshot.describe()


def test_a_composite_of_an_undecodable_serializer_lacks_what_its_nested_one_lacks():
    """A composite's capabilities are its builder's: with a nested serializer that has none, it has none."""
    opaque = SerializerSnapshot("com.example.OpaqueSerializerSnapshot", 1)
    for serializer in (_R.LIST, _R.MAP, _R.TUPLE, _R.NULLABLE, _R.SCALA_OPTION):
        sample = _composite_sample(serializer)
        sample.nested = [opaque for _ in sample.nested]
        assert _what_modules_give(sample) <= {registry.DECODE}, serializer  # a Tuple's decoder exists, and fails on use
