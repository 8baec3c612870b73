"""Flink 1.x state as Flink 2.x reads it: Kryo 2.24 values written again as Kryo 5 writes them, and the
serializer snapshots Flink 2.x refuses.

Flink 2.0 replaced Kryo 2.24 with Kryo 5. Both write a value as ``writeClassAndObject`` (the class, a
reference marker, the object: :mod:`repair.formats.flink.kryo`), but Kryo 5 writes a ``Float``,
``Double``, ``Short`` and ``Character`` little-endian (Kryo 2.24: big-endian), an enum without a reference
marker, a collection's and a map's size + 1 with a flag, ... The ``KryoSerializerSnapshot`` is the same,
so Flink 2.x restores the state and reads its bytes with Kryo 5: a value whose Kryo 5 bytes are the Kryo
2.24 bytes (a ``Long``, a ``String``) reads back the same, any other differently (doubles byte-swapped,
every enum its first constant, collections shortened or empty), without an error (``upgrade_outcomes.json``
of the fixtures: real Flink 2.0, 2.1 and 2.3). :func:`kryo5_bytes` gives the bytes Kryo 5 writes for the
graph Kryo 2.24 wrote; where they equal the input, Flink 2.x reads the same value.

A POJO field declared ``List``, ``Map`` or ``Set`` is Kryo in Flink 1.x, Flink's own list, map or set
serializer in 2.x: the new ``PojoSerializer`` is incompatible with the restored one and the restore fails
(``StateMigrationException``): :func:`pojo_collection_fields` finds them in a snapshot. Flink 2.x has no
Scala API: a snapshot of one of its serializers fails the restore (:func:`scala_snapshots`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from repair.errors import FormatError, UnsupportedSerializerError
from repair.formats.bytes.binary import ByteReader
from repair.formats.flink import kryo
from repair.formats.flink.arrow import unwrap_ttl
from repair.formats.flink.backend_meta import StateMetaInfo
from repair.formats.flink.kryo_encoder import KryoEncodeError, write_node
from repair.formats.flink.serializers import KRYO_SNAPSHOT, POJO_SNAPSHOT, SerializerSnapshot

#: The Kryo generations of Flink 1.x and 2.x (:func:`repair.formats.flink.metadata.generation_of_metadata_version`).
KRYO_2, KRYO_5 = 2, 5
#: Declared types of POJO fields Flink 2.x gives its own serializers (Kryo in Flink 1.x).
COLLECTION_INTERFACES = ("java.util.List", "java.util.Map", "java.util.Set")
#: The package of the Scala API's serializers (flink-scala), gone from Flink 2.x.
SCALA_API = "org.apache.flink.api.scala."
#: A TTL value's last-access time and a timer's timestamp, before the value or key (a long).
TIMESTAMP_BYTES = 8


def is_kryo(snapshot: SerializerSnapshot | None) -> bool:
    return snapshot is not None and snapshot.class_name == KRYO_SNAPSHOT


def registrations(snapshot: SerializerSnapshot) -> kryo.Registrations:
    """The classes a ``KryoSerializerSnapshot`` registers (their ids follow Kryo's and Flink's own)."""
    return kryo.Registrations(snapshot.attributes.get("kryo_registrations"),
                              snapshot.attributes.get("kryo_registration_serializers"))


def kryo5_bytes(data: bytes, snapshot: SerializerSnapshot, *, start: int = 0, whole: bool = True) -> bytes:
    """``data`` as Flink 2.x reads it the same: as it is where Kryo 5 reads the value Kryo 2.24 wrote at
    ``start`` (one ``writeClassAndObject`` graph, to the end of ``data`` when ``whole``; else what follows
    it is kept) as the same value (a ``Long``, a ``String``: Kryo 5 reads Kryo 2.24's ASCII strings of any
    length, though it writes those longer than 32 characters in its other form), else with that value
    written as Kryo 5 writes it, under the registrations of ``snapshot``. Raises
    :class:`~repair.errors.UnsupportedSerializerError` for a class whose layout is the job's (a
    FieldSerializer class, a registered serializer) and :class:`~repair.errors.FormatError` for bytes
    that are no such graph."""
    type_class, known = snapshot.attributes.get("type_class"), registrations(snapshot)
    reader = ByteReader(data)
    reader.pos = start
    node = kryo.read_node(reader, KRYO_2, type_class, known)
    end = reader.pos
    if whole and end != len(data):
        raise FormatError("Kryo 2.24 value", reader.offset, f"{len(data) - start} bytes of one value", f"{len(data) - end} bytes left")
    if _reads_as(data, start, end, kryo.plain(node), type_class, known):
        return data
    try:
        written = write_node(_as_kryo5(node, set()), KRYO_5)
    except (KryoEncodeError, ValueError, TypeError, IndexError, KeyError, struct.error) as error:
        raise UnsupportedSerializerError(KRYO_SNAPSHOT, start, detail=f"cannot write this Kryo 2.24 value as Kryo 5 ({error})") from None
    return data[:start] + written + data[end:]


def _as_kryo5(node: kryo.Node, seen: set[int]) -> kryo.Node:
    """``node``'s graph with what Kryo 2.24 leaves out filled in as Flink 1.x restores it: a
    ``java.util.regex.Pattern`` (chill's serializer writes no flags: Flink 1.x restores flags 0)."""
    if id(node) in seen:
        return node
    seen.add(id(node))
    if node.cls == kryo.PATTERN and isinstance(node.value, tuple) and len(node.value) == 1:
        node.value = (node.value[0], 0)
    children = node.value if isinstance(node.value, list) else []
    for child in children:
        for item in (child if isinstance(child, tuple) else (child,)):
            if isinstance(item, kryo.Node):
                _as_kryo5(item, seen)
    if node.same is not None:
        _as_kryo5(node.same, seen)
    return node


def _reads_as(data: bytes, start: int, end: int, value: object, type_class: str | None, known: kryo.Registrations) -> bool:
    """Whether Kryo 5 reads the bytes ``data[start:end]`` as ``value``, to their end."""
    reader = ByteReader(data)
    reader.pos = start
    try:
        read = kryo.plain(kryo.read_node(reader, KRYO_5, type_class, known))
    except FormatError:  # Kryo 5 reads something else, or fails
        return False
    return reader.pos == end and read == value


#: Values a :class:`KryoColumn` remembers converted, and the largest it remembers (bytes): the same bytes
#: convert the same, and state repeats small values (enums, numbers, tags). Bounded (at most about 1 MB
#: per column): forgotten all at once when full.
REMEMBERED, REMEMBERED_BYTES = 4096, 128


@dataclass(frozen=True)
class KryoColumn:
    """Where a raw column of an export row holds a Kryo value: its snapshot, the bytes before it (a TTL
    or timer timestamp) and whether it fills the column (a timer's key is followed by its namespace)."""

    raw: str
    snapshot: SerializerSnapshot
    start: int = 0
    whole: bool = True
    #: Bytes already converted (at most :data:`REMEMBERED`), and what they became.
    _converted: dict = field(default_factory=dict, compare=False, repr=False)

    def kryo5(self, data: bytes) -> bytes:
        if type(data) is not bytes or len(data) > REMEMBERED_BYTES:
            return kryo5_bytes(data, self.snapshot, start=self.start, whole=self.whole)
        converted = self._converted.get(data)
        if converted is None:
            if len(self._converted) >= REMEMBERED:
                self._converted.clear()
            converted = self._converted[data] = kryo5_bytes(data, self.snapshot, start=self.start, whole=self.whole)
        return converted


def kryo_columns(state: StateMetaInfo, key_serializer: SerializerSnapshot | None) -> list[KryoColumn]:
    """The raw columns of a state's export rows (``key_raw``, ``user_key_raw``, ``value_raw``) that hold a
    Kryo value at their top level: the key (a timer's after its timestamp), a map's key, the value, a
    list's element or a map's value (after a TTL timestamp)."""
    kind, value = state.kind, state.serializer("VALUE_SERIALIZER")
    found: list[KryoColumn] = []
    if kind == "priority-queue":
        timer_key = value.nested[0] if value is not None and len(value.nested) == 2 else None
        if is_kryo(timer_key):
            found.append(KryoColumn("key_raw", timer_key, start=TIMESTAMP_BYTES, whole=False))  # type: ignore[arg-type]
        return found
    if is_kryo(key_serializer):
        found.append(KryoColumn("key_raw", key_serializer))  # type: ignore[arg-type]
    if kind in ("list", "map") and value is not None:
        if kind == "map" and len(value.nested) == 2 and is_kryo(value.nested[0]):
            found.append(KryoColumn("user_key_raw", value.nested[0]))
        value = value.nested[-1] if value.nested else None
    if state.kind in ("operator-list", "union-list", "broadcast"):  # operator state: VALUE_SERIALIZER is the element's
        user_key = state.serializer("KEY_SERIALIZER")
        if is_kryo(user_key):
            found.append(KryoColumn("user_key_raw", user_key))  # type: ignore[arg-type]
    inner, ttl = unwrap_ttl(value)
    if is_kryo(inner):
        found.append(KryoColumn("value_raw", inner, start=TIMESTAMP_BYTES if ttl else 0))  # type: ignore[arg-type]
    return found


def pojo_collection_fields(snapshot: SerializerSnapshot | None) -> list[tuple[str, str]]:
    """``(field, declared class)`` of the fields of a POJO snapshot that Flink 1.x serialized with Kryo
    and Flink 2.x serializes with its own list, map or set serializer."""
    if snapshot is None or snapshot.class_name != POJO_SNAPSHOT:
        return []
    found = []
    for pojo_field in snapshot.pojo_fields or []:
        declared = pojo_field.snapshot.attributes.get("type_class") if is_kryo(pojo_field.snapshot) else None  # type: ignore[union-attr]
        if declared in COLLECTION_INTERFACES:
            found.append((pojo_field.name, str(declared)))
    return found


def snapshot_tree(snapshot: SerializerSnapshot) -> list[SerializerSnapshot]:
    """``snapshot`` and every snapshot below it (nested serializers, POJO fields), depth first."""
    children = [*snapshot.nested, *(f.snapshot for f in snapshot.pojo_fields or [] if f.snapshot is not None)]
    return [snapshot] + [found for child in children for found in snapshot_tree(child)]


def kryo_snapshots(snapshot: SerializerSnapshot) -> list[SerializerSnapshot]:
    """Every Kryo snapshot in the tree of ``snapshot`` (itself, nested serializers, POJO fields): a Kryo
    value inside a composite's bytes is not one :func:`kryo_columns` finds."""
    return [found for found in snapshot_tree(snapshot) if is_kryo(found)]


def scala_snapshots(snapshot: SerializerSnapshot | None) -> list[SerializerSnapshot]:
    """Every snapshot of a Scala API serializer in the tree of ``snapshot`` (a case class, ``Option``, a
    Scala collection, an ``Enumeration``: flink-scala's). Flink 2.x has no Scala API: its restore of such a
    snapshot fails (``ClassNotFoundException``, real Flink 2.0, 2.1 and 2.3: ``scala_upgrade_outcome.json``
    of the fixtures), and no serializer of Flink 2.x reads what they wrote as the same values."""
    return [] if snapshot is None else [found for found in snapshot_tree(snapshot) if found.class_name.startswith(SCALA_API)]
