"""POJO fields of Java collection types, from Flink 1.x to Flink 2.x.

Flink 1.x serializes a POJO field declared ``List``, ``Map`` or ``Set`` with Kryo (a
``KryoSerializerSnapshot`` of ``java.util.List`` ...); Flink 2.x with its own serializers, each wrapped
in a ``NullableSerializer`` (the field may be null), as real Flink 2.1 writes them for a
``List<String>``, ``Map<String, Long>`` and ``Set<String>`` (the fixture job's ``Profile``):

* ``List<E>``: ``Nullable(ListSerializer(Nullable(E)))``: a null flag, the size (int), each element
  after a null flag;
* ``Map<K, V>``: ``Nullable(MapSerializer(Nullable(K), V))``: a null flag, the size, each entry as a null
  flag and the key, then the value's null flag and the value;
* ``Set<E>``: ``Nullable(SetSerializer(E))``: a null flag, the size, each element after its null flag.

The element types are not in the 1.x snapshot (Kryo writes each element's class): :class:`FieldTypes`
takes them from the values (every element of the field, in every row, of one class of Kryo's own
registrations: ``String``, ``Long``, ``Integer``, ``Double``, ``Boolean``), and a field whose elements
do not say (empty in every row, mixed, another class) is not converted. :func:`flink2_meta` gives the
keyed backend meta data with the POJO's field snapshots replaced; :class:`PojoColumn` rewrites a value.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable

from repair.errors import FormatError, UnsupportedSerializerError
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.java_io import ByteWriter
from repair.formats.flink import kryo, registry
from repair.formats.flink.kryo_upgrade import KRYO_2, is_kryo, pojo_collection_fields, registrations
from repair.formats.flink.serializers import SerializerSnapshot
from repair.formats.flink.value_encoders import encoder_for
from repair.formats.flink.values import decoder_for

_T = "org.apache.flink.api.java.typeutils.runtime."
_B = "org.apache.flink.api.common.typeutils.base."
NULLABLE = _T + "NullableSerializer$NullableSerializerSnapshot"
COLLECTIONS = {"java.util.List": _B + "ListSerializerSnapshot", "java.util.Map": _B + "MapSerializerSnapshot",
               "java.util.Set": _B + "SetSerializerSnapshot"}
#: ``CompositeTypeSerializerSnapshot``'s and ``NestedSerializersSnapshotDelegate``'s magic numbers.
COMPOSITE_MAGIC, NESTED_MAGIC = 911108, 1333245
#: Kryo's own registrations an element may be, with the Flink serializer Flink 2.x gives that type.
ELEMENTS = {kryo.STRING: registry.STRING.class_name, kryo.LONG: registry.LONG.class_name, kryo.INT: registry.INT.class_name,
            kryo.DOUBLE: registry.DOUBLE.class_name, kryo.BOOLEAN: registry.BOOLEAN.class_name}


@dataclass(frozen=True)
class CollectionField:
    """A POJO field Flink 2.x serializes with its own collection serializer: its declared type and the
    Kryo registration ids of its elements (a map: keys, then values)."""

    name: str
    declared: str
    types: tuple[int, ...]

    def snapshot_bytes(self) -> bytes:
        """The field's serializer snapshot as Flink 2.x writes it (class, version, body)."""
        leaves = [_leaf(t) for t in self.types]
        if self.declared == "java.util.List":
            inner = _composite(COLLECTIONS[self.declared], 1, [_nullable(leaves[0])])
        elif self.declared == "java.util.Map":
            inner = _composite(COLLECTIONS[self.declared], 1, [_nullable(leaves[0]), leaves[1]])
        else:
            inner = _composite(COLLECTIONS[self.declared], 1, leaves)
        return _nullable(inner)

    def value_bytes(self, node: kryo.Node) -> bytes:
        """A field value Kryo 2.24 wrote (``node``) as Flink 2.x's serializers write it."""
        out = bytearray(b"\x00")  # the NullableSerializer's flag: not null (the POJO's own flag is before it)
        items = node.value or []
        out += struct.pack(">i", len(items))
        encode = [encoder_for(SerializerSnapshot(ELEMENTS[t], 3)) for t in self.types]
        for item in items:
            if self.declared == "java.util.Map":
                key, value = item
                out += b"\x00" + encode[0](kryo.plain(key))  # type: ignore[misc]
                out += b"\x01" if value.cls is None else b"\x00" + encode[1](kryo.plain(value))  # type: ignore[misc]
            elif item.cls is None:
                out += b"\x01"
            else:
                out += b"\x00" + encode[0](kryo.plain(item))  # type: ignore[misc]
        return bytes(out)


def _leaf(registration: int) -> bytes:
    writer = ByteWriter()
    writer.utf(ELEMENTS[registration])
    writer.i32(3)
    return writer.getvalue()


def _composite(class_name: str, outer_version: int, nested: list[bytes], outer: bytes = b"") -> bytes:
    """A ``CompositeTypeSerializerSnapshot`` (version 3): magic, outer version, outer snapshot, nested snapshots."""
    writer = ByteWriter()
    writer.utf(class_name)
    writer.i32(3)
    for value in (COMPOSITE_MAGIC, outer_version):
        writer.i32(value)
    writer.raw(outer)
    for value in (NESTED_MAGIC, 1, len(nested)):
        writer.i32(value)
    for snapshot in nested:
        writer.raw(snapshot)
    return writer.getvalue()


def _nullable(inner: bytes) -> bytes:
    return _composite(NULLABLE, 2, [inner], outer=struct.pack(">i", 0))  # no null padding


def _field_nodes(data: bytes, pojo: SerializerSnapshot) -> tuple[list[tuple[int, int, kryo.Node | None]], int] | None:
    """Where each collection field of a 1.x POJO value is: ``(start, end, Kryo graph or None for null)``
    per field of ``pojo`` in order (other fields: no graph), and the value's end; None for a null POJO."""
    reader = ByteReader(data)
    flags = reader.u8("pojo flags")
    if flags & 1:
        return None
    if flags != 2:
        raise UnsupportedSerializerError(pojo.class_name, 0, detail=f"a subclass of {pojo.attributes.get('pojo_class')} (flags {flags})")
    collections = {name for name, _ in pojo_collection_fields(pojo)}
    spans: list[tuple[int, int, kryo.Node | None]] = []
    for field in pojo.pojo_fields or []:
        start = reader.pos
        if reader.bool(f"pojo field {field.name} is null"):
            spans.append((start, reader.pos, None))
            continue
        node = None
        if field.name in collections:
            node = kryo.read_node(reader, KRYO_2, field.snapshot.attributes.get("type_class"), registrations(field.snapshot))  # type: ignore[union-attr,arg-type]
        else:
            _, reader.pos = decoder_for(field.snapshot).decode(data, reader.pos)
        spans.append((start, reader.pos, node))
    return spans, reader.pos


class FieldTypes:
    """The element types of a POJO's collection fields, from its 1.x values (:meth:`add` each)."""

    def __init__(self, pojo: SerializerSnapshot):
        self.pojo = pojo
        self.fields = dict(pojo_collection_fields(pojo))
        self.names = [f.name for f in pojo.pojo_fields or []]
        #: Per field, the Kryo classes seen (a map: of its keys, then of its values).
        self.seen: dict[str, list[set]] = {name: [set(), set()] for name in self.fields}

    def add(self, data: bytes) -> None:
        found = _field_nodes(data, self.pojo)
        for name, (_, _, node) in zip(self.names, found[0] if found else []):
            if name not in self.fields or node is None:
                continue
            for item in node.value or []:
                pair = item if self.fields[name] == "java.util.Map" else (item,)
                for slot, element in zip(self.seen[name], pair):
                    if element.cls is not None:
                        slot.add(element.cls)

    def update(self, other: FieldTypes) -> None:
        """Add the classes ``other`` saw (the same POJO's values read elsewhere: another subtask's)."""
        for name, slots in other.seen.items():
            for mine, theirs in zip(self.seen[name], slots):
                mine |= theirs

    def result(self) -> tuple[tuple[CollectionField, ...], str | None]:
        """The fields with their element types, or why some field's cannot be told (no element
        anywhere, several classes, a class other than :data:`ELEMENTS`')."""
        fields = []
        for name, declared in self.fields.items():
            slots = self.seen[name][: 2 if declared == "java.util.Map" else 1]
            if any(len(classes) != 1 or next(iter(classes)) not in ELEMENTS for classes in slots):
                seen = " and ".join(", ".join(sorted(map(_class_name, classes))) or "none" for classes in slots)
                return (), (f"the element type of POJO field {name} ({declared}) is not told by its values (classes seen: "
                            f"{seen}; String, Long, Integer, Double or Boolean are converted)")
            fields.append(CollectionField(name, declared, tuple(next(iter(classes)) for classes in slots)))
        return tuple(fields), None


def _class_name(cls: object) -> str:
    names = {kryo.STRING: "String", kryo.LONG: "Long", kryo.INT: "Integer", kryo.DOUBLE: "Double", kryo.BOOLEAN: "Boolean"}
    return names.get(cls, str(cls))  # type: ignore[call-overload]


@dataclass(frozen=True)
class PojoColumn:
    """``value_raw`` of a state whose values are POJOs with collection fields: each value rewritten as
    Flink 2.x writes it (the interface of :class:`~repair.formats.flink.kryo_upgrade.KryoColumn`)."""

    pojo: SerializerSnapshot
    fields: tuple[CollectionField, ...]
    raw: str = "value_raw"

    def kryo5(self, data: bytes) -> bytes:
        found = _field_nodes(data, self.pojo)
        if found is None:
            return data
        spans, end = found
        if end != len(data):
            raise FormatError("POJO value", end, f"{len(data)} bytes of one value", f"{len(data) - end} bytes left")
        converted = {f.name: f for f in self.fields}
        out = bytearray(data[:1])
        for field, (start, stop, node) in zip(self.pojo.pojo_fields or [], spans):
            if node is None or field.name not in converted:
                out += data[start:stop]
            else:
                out += b"\x00" + converted[field.name].value_bytes(node)
        return bytes(out)


def state_pojo(state) -> SerializerSnapshot | None:
    """The POJO snapshot whose values fill a state's ``value_raw`` (a value state's value, a list's
    element, a map's value; not under TTL), if it has collection fields."""
    value = state.serializer("VALUE_SERIALIZER")
    if value is not None and state.kind in ("list", "map") and value.nested:
        value = value.nested[-1]
    return value if value is not None and pojo_collection_fields(value) else None


def flink2_meta(data: bytes, pojo: SerializerSnapshot, fields: Iterable[CollectionField]) -> bytes:
    """Keyed backend meta data ``data`` with the snapshots of ``fields`` of the POJO snapshot ``pojo`` (read
    from ``data``) replaced by Flink 2.x's: each field's snapshot is length-framed, so only its length and
    bytes change."""
    by_name = {f.name: f for f in fields}
    spans = []
    for field in pojo.pojo_fields or []:
        if field.name in by_name and is_kryo(field.snapshot):
            start = field.snapshot.offset  # type: ignore[union-attr]
            length = struct.unpack_from(">i", data, start - 4)[0]
            spans.append((start - 4, start + length, by_name[field.name].snapshot_bytes()))
    out = bytearray(data)
    for start, end, snapshot in sorted(spans, reverse=True):
        out[start:end] = struct.pack(">i", len(snapshot)) + snapshot
    return bytes(out)
