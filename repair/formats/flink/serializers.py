"""Flink serializer snapshots (``TypeSerializerSnapshot``) as written into state meta data.

A top-level snapshot (``TypeSerializerSnapshotSerializationUtil.writeSerializerSnapshot``) is ``int 2``
(the serialization proxy version) followed by a *versioned snapshot*: ``UTF className``, ``int version``
and a class-specific payload (``TypeSerializerSnapshot.writeVersionedSnapshot``). The payload has **no
length prefix**, so every class met must be understood to find the end of it. This module knows the
classes of flink-dist (checked against the 1.18.1 and 2.1.1 jars):

* ``SimpleTypeSerializerSnapshot`` subclasses: version 3, empty payload (version 2: one UTF).
* ``CompositeTypeSerializerSnapshot`` subclasses: for version > 2, ``int 0x000DE704``, ``int
  outerVersion``, the outer payload (class-specific, usually empty), then the nested snapshots
  (``NestedSerializersSnapshotDelegate``: ``int 0x001457FD``, ``int 1``, ``int n``, n versioned snapshots).
  Version <= 2 ("legacy") has no magic and the outer payload is read with ``outerVersion = version``.
* ``PojoSerializerSnapshot`` (version 2): ``UTF pojoClass`` and three ``LinkedOptionalMap``s (fields,
  registered subclasses, non-registered subclasses) whose entries are length-framed.
* ``KryoSerializerSnapshot`` (version 2): ``UTF typeClass`` and three length-framed ``LinkedOptionalMap``s.
* ``EnumSerializer$EnumSerializerSnapshot`` (version 3), ``GenericTypeSerializerSnapshot`` subclasses
  (version 2: ``UTF typeClass``), ``TtlAwareSerializerSnapshot`` (2.x: ``bool``, nested snapshot).

An unknown class raises :class:`UnknownSerializerSnapshotError` (a :class:`FormatError`) naming it; the
caller decides what of the surrounding data is still usable (see ``flink_backend_meta``).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Callable, Iterable

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.java_io import read_utf
from repair.formats.bytes.java_serialization import JavaStreamReader
from repair.formats.flink import avro, registry, scala_types
from repair.formats.flink.table_types import SqlType, sql_type_of
from repair.formats.records import record


def read_java_stream_object(reader: ByteReader) -> Any:
    """One object written by ``InstantiationUtil.serializeObject`` (its own stream: header, object)."""
    stream = JavaStreamReader(reader)
    stream.header()
    return stream.object()

#: ``TypeSerializerSnapshotSerializationUtil$TypeSerializerSnapshotSerializationProxy.VERSION``.
SNAPSHOT_PROXY_VERSION = 2
#: ``CompositeTypeSerializerSnapshot.MAGIC_NUMBER``.
COMPOSITE_MAGIC = 911108
#: ``NestedSerializersSnapshotDelegate.MAGIC_NUMBER`` and ``VERSION``.
NESTED_MAGIC = 1333245
NESTED_VERSION = 1
#: ``LinkedOptionalMapSerializer.HEADER``.
LINKED_OPTIONAL_MAP_HEADER = 0x4F2C69A3D70
#: Snapshot version of the pre-1.17 ``TypeSerializerConfigSnapshot`` adapter (``ADAPTER_VERSION``).
CONFIG_SNAPSHOT_ADAPTER_VERSION = 0x7A53C4F0

MAX_DEPTH = 32


#: Serializer snapshot versions are small positive numbers (1 to 3 in every release so far); beyond this
#: bound a version is damage, not a release this decoder does not know.
MAX_PLAUSIBLE_SNAPSHOT_VERSION = 1000

class UnknownSerializerSnapshotError(FormatError):
    """A snapshot class whose payload layout this module does not know (payloads are not framed)."""

    def __init__(self, class_name: str, offset: int, *, detail: str | None = None):
        self.class_name = class_name
        super().__init__("serializer snapshot class", offset, "a snapshot class this decoder knows", class_name, detail=detail)


@record
class PojoField:
    """A field of a POJO snapshot: name, declaring class and the field serializer's snapshot.

    ``snapshot`` is None when the field's class could not be decoded; ``problem`` then says why (the
    entry is length-framed, so the other fields are still decoded).
    """

    name: str
    declaring_class: str | None
    snapshot: "SerializerSnapshot | None"
    problem: str | None = None


@record
class SerializerSnapshot:
    """One versioned serializer snapshot.

    ``nested`` holds the nested snapshots of composite serializers (element of a list; key and value of a
    map; the user value of a TTL serializer; key and namespace of a timer; tuple fields ...).
    ``attributes`` holds what a class writes besides (``type_class``, ``tuple_class``, ``enum_constants``,
    ``supports_row_kind``, ...). ``pojo_fields`` is set for POJO snapshots.
    """

    class_name: str
    version: int
    nested: list["SerializerSnapshot"] = field(default_factory=list)
    outer_version: int | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    pojo_fields: list[PojoField] | None = None
    offset: int = field(default=-1, compare=False, repr=False)

    @property
    def simple_name(self) -> str:
        """The class name without package, e.g. ``StringSerializer$StringSerializerSnapshot``."""
        return self.class_name.rsplit(".", 1)[-1]

    def describe(self) -> str:
        """A short type description such as ``List<Long>``, ``Map<Integer, String>``, ``TTL<String>``."""
        return describe(self)


# -- the known classes -------------------------------------------------------------------------------

#: SimpleTypeSerializerSnapshot subclasses (and leaf table serializers) -> the type they serialize: a view
#: of :mod:`repair.formats.flink.registry`, where each of them is named.
SIMPLE_SNAPSHOTS: dict[str, str] = registry.type_names()


def _no_outer(reader: ByteReader, outer_version: int) -> dict[str, Any]:
    return {}


def _utf_outer(key: str) -> Callable[[ByteReader, int], dict[str, Any]]:
    def read(reader: ByteReader, outer_version: int) -> dict[str, Any]:
        return {key: read_utf(reader, key.replace("_", " "))}

    return read


def _bool_outer_from_v4(key: str) -> Callable[[ByteReader, int], dict[str, Any]]:
    # RowSerializerSnapshot / TwoPhaseCommitSinkFunction$StateSerializerSnapshot.readOuterSnapshot:
    # version < 3 -> false, 3 -> true, >= 4 -> a written boolean.
    def read(reader: ByteReader, outer_version: int) -> dict[str, Any]:
        if outer_version < 3:
            return {key: False}
        if outer_version == 3:
            return {key: True}
        return {key: reader.bool(key.replace("_", " "))}

    return read


def _int_outer(key: str) -> Callable[[ByteReader, int], dict[str, Any]]:
    def read(reader: ByteReader, outer_version: int) -> dict[str, Any]:
        return {key: reader.i32(key.replace("_", " "))}

    return read


def _external_outer(reader: ByteReader, outer_version: int) -> dict[str, Any]:
    # ExternalSerializer$ExternalSerializerSnapshot (outer version 1): the DataType, Java-serialized,
    # then ``bool isInternalInput``.
    data_type = read_java_stream_object(reader)
    return {"data_type": data_type, "is_internal_input": reader.bool("is internal input")}


#: ``TimerSerializer``'s snapshot (timers: key and namespace serializers nested).
TIMER_SNAPSHOT = registry.TIMER.class_name
_R = registry
#: The outer payload of each CompositeTypeSerializerSnapshot subclass (the registry names them).
_OUTER: dict[registry.Serializer, Callable[[ByteReader, int], dict[str, Any]]] = {
    _R.LIST: _no_outer, _R.MAP: _no_outer, _R.SET: _no_outer, _R.ARRAY_LIST: _no_outer, _R.TTL: _no_outer,
    _R.TTL_V2: _no_outer, _R.TIMER: _no_outer, _R.BUFFER_ENTRY: _no_outer, _R.STREAM_ELEMENT: _no_outer,
    _R.TAGGED_UNION: _no_outer, _R.EITHER: _no_outer, _R.SINGLE_THREAD_ACCESS_CHECKING: _no_outer,
    _R.TUPLE: _utf_outer("tuple_class"), _R.GENERIC_ARRAY: _utf_outer("component_class"),
    _R.ROW: _bool_outer_from_v4("supports_row_kind"), _R.NULLABLE: _int_outer("null_padding_length"),
    _R.TWO_PHASE_COMMIT: _bool_outer_from_v4("supports_null_transaction"),
    _R.TWO_PHASE_COMMIT_LEGACY: _bool_outer_from_v4("supports_null_transaction"),
    _R.RAW_VALUE: _no_outer, _R.EXTERNAL: _external_outer, _R.WINDOW_KEY: _no_outer, _R.MAP_VIEW: _no_outer,
    _R.LIST_VIEW: _no_outer, _R.NULL_AWARE_MAP: _no_outer,
    # flink-scala (Flink 1.x): case classes, Option, collections, Either
    **{serializer: _utf_outer(key) if key else _no_outer for serializer, key in scala_types.COMPOSITES.items()},
}
#: CompositeTypeSerializerSnapshot subclasses -> (label: the registry's type name, outer payload reader).
COMPOSITE_SNAPSHOTS: dict[str, tuple[str, Callable[[ByteReader, int], dict[str, Any]]]] = {
    serializer.class_name: (serializer.type_name, outer) for serializer, outer in _OUTER.items()
}

POJO_SNAPSHOT = registry.POJO.class_name
KRYO_SNAPSHOT = registry.KRYO.class_name
#: The attribute of a ``KryoSerializerSnapshot`` naming the Kryo generation that wrote its values (2: Kryo
#: 2.24, Flink 1.x; 5: Kryo 5, Flink 2.x). The snapshot's bytes do not say (they are the same in Flink
#: 1.20 and 2.1): the readers set it from the checkpoint's metadata version (:func:`set_kryo_generation`).
KRYO_GENERATION = "kryo_generation"
ENUM_SNAPSHOT = registry.ENUM.class_name
TTL_AWARE_SNAPSHOT = registry.TTL_AWARE.class_name
ROW_DATA_SNAPSHOT = registry.ROW_DATA.class_name
TIMESTAMP_DATA_SNAPSHOT = registry.TIMESTAMP_DATA.class_name
DECIMAL_DATA_SNAPSHOT = registry.DECIMAL_DATA.class_name
BINARY_ROW_SNAPSHOT = registry.BINARY_ROW.class_name
ARRAY_DATA_SNAPSHOT = registry.ARRAY_DATA.class_name
MAP_DATA_SNAPSHOT = registry.MAP_DATA.class_name
TABLE_SNAPSHOTS = (ROW_DATA_SNAPSHOT, TIMESTAMP_DATA_SNAPSHOT, DECIMAL_DATA_SNAPSHOT, BINARY_ROW_SNAPSHOT,
                   ARRAY_DATA_SNAPSHOT, MAP_DATA_SNAPSHOT)
# GenericTypeSerializerSnapshot subclasses (payload: UTF type class).
GENERIC_TYPE_SNAPSHOTS = {
    serializer.class_name: serializer.type_name
    for serializer in (registry.VALUE, registry.COPYABLE_VALUE, registry.WRITABLE_TYPE_INFO, registry.WRITABLE)
}


# -- reading -----------------------------------------------------------------------------------------


class SnapshotReader:
    """Reads serializer snapshots from ``reader``; nesting is bounded by :data:`MAX_DEPTH`."""

    def __init__(self, reader: ByteReader):
        self.r = reader
        self._depth = 0

    def top_level(self, field_name: str = "serializer snapshot") -> SerializerSnapshot:
        """``writeSerializerSnapshot``: ``int 2`` then a versioned snapshot."""
        r = self.r
        at = r.offset
        proxy_version = r.i32(field_name + " proxy version")
        if proxy_version != SNAPSHOT_PROXY_VERSION:
            if proxy_version == 1:
                raise UnknownSerializerSnapshotError(
                    "TypeSerializerConfigSnapshot (proxy version 1)", at, detail="pre-1.17 legacy serializer snapshot"
                )
            raise FormatError(field_name + " proxy version", at, SNAPSHOT_PROXY_VERSION, proxy_version)
        return self.versioned()

    def versioned(self) -> SerializerSnapshot:
        """``TypeSerializerSnapshot.readVersionedSnapshot``: class name, version, class payload."""
        r = self.r
        self._depth += 1
        try:
            at = r.offset
            if self._depth > MAX_DEPTH:
                raise FormatError("serializer snapshot", at, f"snapshots nested at most {MAX_DEPTH} deep", "deeper nesting")
            class_name = read_utf(r, "serializer snapshot class")
            version_at = r.offset
            version = r.i32("serializer snapshot version")
            snapshot = SerializerSnapshot(class_name, version, offset=at)
            if version == CONFIG_SNAPSHOT_ADAPTER_VERSION:
                raise UnknownSerializerSnapshotError(class_name, at, detail="legacy TypeSerializerConfigSnapshot adapter (Flink < 1.17)")
            if class_name in SIMPLE_SNAPSHOTS:
                self._simple(snapshot, version_at)
            elif class_name in COMPOSITE_SNAPSHOTS:
                self._composite(snapshot, COMPOSITE_SNAPSHOTS[class_name][1])
            elif class_name == POJO_SNAPSHOT:
                self._pojo(snapshot, version_at)
            elif class_name == KRYO_SNAPSHOT:
                self._kryo(snapshot, version_at)
            elif class_name == ENUM_SNAPSHOT:
                self._enum(snapshot, version_at)
            elif class_name in GENERIC_TYPE_SNAPSHOTS:
                self._expect_version(snapshot, version_at, (2,))
                snapshot.attributes["type_class"] = read_utf(r, "type class")
            elif class_name in TABLE_SNAPSHOTS:
                self._table(snapshot, version_at)
            elif class_name == scala_types.ENUM_SNAPSHOT:  # flink-scala's Enumeration#Value
                self._expect_version(snapshot, version_at, (3,))
                snapshot.attributes.update(scala_types.read_enum_snapshot(r))
            elif class_name == avro.AVRO_SNAPSHOT:  # flink-avro: the runtime class and the writer schema
                self._expect_version(snapshot, version_at, (1, 2, 3))
                snapshot.attributes.update(avro.read_snapshot(r, version))
            elif class_name == TTL_AWARE_SNAPSHOT:
                self._expect_version(snapshot, version_at, (1,))
                snapshot.attributes["is_ttl_enabled"] = r.bool("ttl enabled")
                snapshot.nested.append(self.versioned())
            else:
                raise UnknownSerializerSnapshotError(class_name, at)
            return snapshot
        finally:
            self._depth -= 1

    @staticmethod
    def _expect_version(snapshot: SerializerSnapshot, at: int, versions: tuple[int, ...]) -> None:
        if not 0 < snapshot.version <= MAX_PLAUSIBLE_SNAPSHOT_VERSION:
            # Not a version some other Flink release may write: damaged bytes. Flink's snapshot classes
            # refuse it ("Unrecognized version: -16777213" in real Flink 2.1 for a flipped byte).
            raise FormatError("serializer snapshot version", at, f"a version of {snapshot.class_name} (known: {versions})",
                              snapshot.version)
        if snapshot.version not in versions:
            raise UnknownSerializerSnapshotError(
                snapshot.class_name, snapshot.offset, detail=f"snapshot version {snapshot.version} at offset {at}, known: {versions}"
            )

    def _simple(self, snapshot: SerializerSnapshot, version_at: int) -> None:
        # SimpleTypeSerializerSnapshot.readSnapshot: 3 -> nothing, 2 -> one (ignored) UTF.
        self._expect_version(snapshot, version_at, (2, 3))
        if snapshot.version == 2:
            snapshot.attributes["legacy_class"] = read_utf(self.r, "legacy serializer class")

    def _composite(self, snapshot: SerializerSnapshot, outer: Callable[[ByteReader, int], dict[str, Any]]) -> None:
        r = self.r
        if snapshot.version > 2:
            r.expect_i32(COMPOSITE_MAGIC, "composite snapshot magic number")
            snapshot.outer_version = r.i32("outer snapshot version")
        else:
            snapshot.outer_version = snapshot.version
        snapshot.attributes.update(outer(r, snapshot.outer_version))
        snapshot.nested = self.nested_delegate()

    def nested_delegate(self) -> list[SerializerSnapshot]:
        """``NestedSerializersSnapshotDelegate.readNestedSerializerSnapshots``."""
        r = self.r
        r.expect_i32(NESTED_MAGIC, "nested snapshots magic number")
        at = r.offset
        version = r.i32("nested snapshots version")
        if version != NESTED_VERSION:
            raise FormatError("nested snapshots version", at, NESTED_VERSION, version)
        count = r.count("nested snapshot count", item_size=6)
        return [self.versioned() for _ in range(count)]

    def linked_optional_map(self, field_name: str) -> list[tuple[str, bytes | None, bytes | None, int]]:
        """``LinkedOptionalMapSerializer.readOptionalMap``: entries of (name, key frame, value frame, offset
        of the value frame)."""
        r = self.r
        at = r.offset
        header = r.i64(field_name + " header")
        if header != LINKED_OPTIONAL_MAP_HEADER:
            raise FormatError(field_name + " header", at, f"0x{LINKED_OPTIONAL_MAP_HEADER:X}", f"0x{header & 0xFFFFFFFFFFFFFFFF:X}")
        count = r.count(field_name + " size", item_size=4)
        entries = []
        for _ in range(count):
            name = read_utf(r, field_name + " key name")
            key = r.raw(r.count(field_name + " key frame length"), field_name + " key frame") if r.bool(field_name + " has key") else None
            value_at = -1
            value = None
            if r.bool(field_name + " has value"):
                length = r.count(field_name + " value frame length")
                value_at = r.offset
                value = r.raw(length, field_name + " value frame")
            entries.append((name, key, value, value_at))
        return entries

    def _pojo(self, snapshot: SerializerSnapshot, version_at: int) -> None:
        # PojoSerializerSnapshotData.writeSnapshotData: class, field map, registered and non-registered subclasses.
        self._expect_version(snapshot, version_at, (2,))
        snapshot.attributes["pojo_class"] = read_utf(self.r, "pojo class")
        snapshot.pojo_fields = []
        for name, key, value, value_at in self.linked_optional_map("pojo fields"):
            declaring = None
            if key is not None:
                frame = ByteReader(key, base=0)
                try:
                    declaring = read_utf(frame, "pojo field declaring class")
                except FormatError:
                    declaring = None
            nested, problem = self._framed_snapshot(value, value_at)
            snapshot.pojo_fields.append(PojoField(name, declaring, nested, problem))
        for key in ("registered_subclasses", "non_registered_subclasses"):
            entries = self.linked_optional_map("pojo " + key.replace("_", " "))
            snapshot.attributes[key] = [name for name, *_ in entries]

    def _framed_snapshot(self, frame: bytes | None, at: int) -> tuple[SerializerSnapshot | None, str | None]:
        if frame is None:
            return None, "no snapshot written"
        sub = SnapshotReader(ByteReader(frame, base=at))
        sub._depth = self._depth
        try:
            return sub.versioned(), None
        except UnknownSerializerSnapshotError as error:
            return None, str(error)

    def _kryo(self, snapshot: SerializerSnapshot, version_at: int) -> None:
        self._expect_version(snapshot, version_at, (2,))
        snapshot.attributes["type_class"] = read_utf(self.r, "kryo type class")
        for key in ("kryo_registrations", "default_kryo_serializers", "default_kryo_serializer_classes"):
            entries = self.linked_optional_map(key.replace("_", " "))
            snapshot.attributes[key] = [name for name, *_ in entries]
            if key == "kryo_registrations":
                snapshot.attributes["kryo_registration_serializers"] = [_kryo_registration_serializer(value) for _, _, value, _ in entries]

    def _table(self, snapshot: SerializerSnapshot, version_at: int) -> None:
        """The flink-table-runtime snapshots with payloads of their own (checked against the 1.20 jars):
        logical types and serializers as Java-serialized objects, precision and scale as ints."""
        r, name = self.r, snapshot.class_name
        attributes = snapshot.attributes
        if name == ROW_DATA_SNAPSHOT:  # v3: int n, n LogicalTypes, nested field serializers
            self._expect_version(snapshot, version_at, (3,))
            count = r.count("row data field count", item_size=4)
            attributes["logical_types"] = [self._logical_type() for _ in range(count)]
            snapshot.nested = self.nested_delegate()
        elif name == TIMESTAMP_DATA_SNAPSHOT:  # v1: int precision
            self._expect_version(snapshot, version_at, (1,))
            attributes["precision"] = r.i32("timestamp precision")
        elif name == DECIMAL_DATA_SNAPSHOT:  # v3: int precision, int scale
            self._expect_version(snapshot, version_at, (3,))
            attributes["precision"] = r.i32("decimal precision")
            attributes["scale"] = r.i32("decimal scale")
        elif name == BINARY_ROW_SNAPSHOT:  # v3: int arity
            self._expect_version(snapshot, version_at, (3,))
            attributes["arity"] = r.i32("binary row arity")
        elif name == ARRAY_DATA_SNAPSHOT:  # v3: element LogicalType, element serializer (Java-serialized)
            self._expect_version(snapshot, version_at, (3,))
            attributes["logical_types"] = [self._logical_type()]
            read_java_stream_object(r)
        elif name == MAP_DATA_SNAPSHOT:  # v3: key and value LogicalTypes, then their serializers
            self._expect_version(snapshot, version_at, (3,))
            attributes["logical_types"] = [self._logical_type(), self._logical_type()]
            read_java_stream_object(r)
            read_java_stream_object(r)

    def _logical_type(self) -> SqlType:
        return sql_type_of(read_java_stream_object(self.r))

    def _enum(self, snapshot: SerializerSnapshot, version_at: int) -> None:
        # EnumSerializer$EnumSerializerSnapshot (version 3): class, int n, n constant names.
        r = self.r
        self._expect_version(snapshot, version_at, (3,))
        snapshot.attributes["enum_class"] = read_utf(r, "enum class")
        count = r.count("enum constant count", item_size=2)
        snapshot.attributes["enum_constants"] = [read_utf(r, "enum constant") for _ in range(count)]


def _kryo_registration_serializer(frame: bytes | None) -> str | None:
    """The serializer class of one ``KryoRegistration`` frame (``UTF registered class``, ``int`` kind: 0
    Kryo's default serializer for the class, 1 a serializer class (``UTF`` name), 2 a serializer instance),
    None for Kryo's default; ``"?"`` where the frame does not say."""
    if frame is None:
        return "?"
    r = ByteReader(frame, base=0)
    try:
        read_utf(r, "kryo registered class")
        kind = r.i32("kryo registration kind")
        if kind == 0:
            return None
        return read_utf(r, "kryo registration serializer class") if kind == 1 else "?"
    except FormatError:
        return "?"


def opaque_snapshot(error: UnknownSerializerSnapshotError) -> SerializerSnapshot:
    """A snapshot whose class is known by name only: its payload could not be read (``undecoded`` says
    why), so values it serialized stay raw bytes."""
    return SerializerSnapshot(error.class_name, -1, attributes={"undecoded": str(error)}, offset=error.offset)


def decode_serializer_snapshot(data: bytes, offset: int = 0) -> tuple[SerializerSnapshot, int]:
    """Decode one top-level snapshot at ``offset``; return it and the offset after it."""
    reader = ByteReader(data, offset)
    snapshot = SnapshotReader(reader).top_level()
    return snapshot, reader.pos


# -- descriptions ------------------------------------------------------------------------------------


def describe(snapshot: SerializerSnapshot | None) -> str:
    """A short human-readable type for a snapshot, e.g. ``Map<String, Long>`` or ``POJO a.b.Profile``."""
    if snapshot is None:
        return "?"
    name = snapshot.class_name
    if name in SIMPLE_SNAPSHOTS:
        return SIMPLE_SNAPSHOTS[name]
    if name in COMPOSITE_SNAPSHOTS:
        label = COMPOSITE_SNAPSHOTS[name][0]
        if label in scala_types.LABELS:
            return scala_types.describe(snapshot, label, describe)
        if label == "TTL" and snapshot.nested:
            # TtlSerializer = (LongSerializer for the last-access timestamp, user serializer).
            return f"TTL<{describe(snapshot.nested[-1])}>"
        inner = ", ".join(describe(n) for n in snapshot.nested)
        if label == "Tuple":
            label = f"Tuple{len(snapshot.nested)}"
        if not label:
            return inner
        return f"{label}<{inner}>"
    if name == POJO_SNAPSHOT:
        return f"POJO {snapshot.attributes.get('pojo_class')}"
    if name == KRYO_SNAPSHOT:
        return f"Kryo {snapshot.attributes.get('type_class')}"
    if name == ENUM_SNAPSHOT:
        return f"Enum {snapshot.attributes.get('enum_class')}"
    if name in GENERIC_TYPE_SNAPSHOTS:
        return f"{GENERIC_TYPE_SNAPSHOTS[name]} {snapshot.attributes.get('type_class')}"
    if name == TTL_AWARE_SNAPSHOT:
        return describe(snapshot.nested[0]) if snapshot.nested else "?"
    if name == avro.AVRO_SNAPSHOT:
        return avro.describe(snapshot)
    if name == scala_types.ENUM_SNAPSHOT:
        return f"Scala Enumeration {snapshot.attributes.get('enum_class')}"
    if name in TABLE_SNAPSHOTS:
        return _describe_table(snapshot)
    return snapshot.simple_name


def _describe_table(snapshot: SerializerSnapshot) -> str:
    name, attributes = snapshot.class_name, snapshot.attributes
    types = attributes.get("logical_types") or []
    if name == ROW_DATA_SNAPSHOT:
        return "ROW<" + ", ".join(t.sql() for t in types) + ">"
    if name == TIMESTAMP_DATA_SNAPSHOT:
        return f"TIMESTAMP({attributes.get('precision')})"
    if name == DECIMAL_DATA_SNAPSHOT:
        return f"DECIMAL({attributes.get('precision')}, {attributes.get('scale')})"
    if name == BINARY_ROW_SNAPSHOT:
        return f"BinaryRow({attributes.get('arity')} fields)"
    if name == ARRAY_DATA_SNAPSHOT and types:
        return f"ARRAY<{types[0].sql()}>"
    if name == MAP_DATA_SNAPSHOT and len(types) == 2:
        return f"MAP<{types[0].sql()}, {types[1].sql()}>"
    return snapshot.simple_name


def set_kryo_generation(snapshots: Iterable["SerializerSnapshot | None"], generation: int) -> None:
    """Mark every ``KryoSerializerSnapshot`` in ``snapshots`` (nested ones and POJO fields included) as
    written by Kryo ``generation`` (see :data:`KRYO_GENERATION`)."""
    pending = [s for s in snapshots if s is not None]
    while pending:
        snapshot = pending.pop()
        if snapshot.class_name == KRYO_SNAPSHOT:
            snapshot.attributes[KRYO_GENERATION] = generation
        pending.extend(snapshot.nested)
        pending.extend(f.snapshot for f in snapshot.pojo_fields or () if f.snapshot is not None)
