"""Serializers of Flink's Scala API (``flink-scala``, Flink 1.x): snapshots, descriptions, decoders, encoders.

Checked against ``flink-scala_2.12-1.20.3.jar`` (``javap``) and real Flink 1.20 state
(``fixtures/flink-1.20-scala``). Every snapshot here is a ``CompositeTypeSerializerSnapshot`` (outer
version 2; read by :mod:`repair.formats.flink.serializers` like the other composites):

==========================================  =============================  ==========================================
snapshot (``org.apache.flink.api.scala.     outer payload                  value bytes (``serialize``)
typeutils.``)
==========================================  =============================  ==========================================
``ScalaCaseClassSerializerSnapshot``        ``UTF`` case class name        the fields in order, no null flags (a null
``Tuple2CaseClassSerializerSnapshot``       (``scala.Tuple2`` ...)         is written by the field's serializer, if it can)
``ScalaOptionSerializerSnapshot``           none                           ``bool isSome``, then the value if Some
``TraversableSerializerSnapshot``           ``UTF cbfCode``: Scala source  ``int size``, then per element ``bool
                                            of the CanBuildFrom Flink      notNull`` (true: not null, the opposite of
                                            compiles on restore            Flink's other null flags) and the element
``ScalaEitherSerializerSnapshot``           none                           ``bool isRight``, then the Left or Right
==========================================  =============================  ==========================================

``ScalaEnumSerializerSnapshot`` (version 3, not a composite): ``UTF`` the ``Enumeration`` object's class,
``int n``, n times ``UTF name`` and ``int id``; a value (``EnumValueSerializer``) is ``int id``, decoded
as the value's name.

The case class snapshot names the class but not its fields: values are decoded as ``{"f0": ..., "f1":
...}``, the fields by position (as the Arrow struct of a Java ``Tuple``), an Option as its value or None, a collection as a list (a Scala
``Map`` is a collection of ``Tuple2``: a list of ``{"f0": key, "f1": value}``), an Either as ``{"left": v}`` or
``{"right": v}``. The collection's Scala type is read from the ``cbfCode`` text for descriptions only;
its element serializer is the nested snapshot. Values of a collection whose element serializer is
unknown stay raw (the element has no length of its own).
"""

from __future__ import annotations

import re
import struct
from typing import Any, Callable

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.java_io import read_utf
from repair.formats.flink import registry

#: ``Enumeration#Value`` (``EnumValueSerializer``): no nested serializers; its payload is read by :func:`read_enum_snapshot`.
ENUM_SNAPSHOT = registry.SCALA_ENUM.class_name

#: Labels of the Scala composites in ``serializers.COMPOSITE_SNAPSHOTS`` (their registry type names).
CASE_CLASS, OPTION, TRAVERSABLE, EITHER = (registry.SCALA_CASE_CLASS.type_name, registry.SCALA_OPTION.type_name,
                                           registry.SCALA_TRAVERSABLE.type_name, registry.SCALA_EITHER.type_name)
LABELS = (CASE_CLASS, OPTION, TRAVERSABLE, EITHER)


#: Scala composite -> the key of the UTF its outer payload holds (None: no outer payload), merged into
#: ``serializers.COMPOSITE_SNAPSHOTS``.
COMPOSITES: dict[registry.Serializer, str | None] = {
    registry.SCALA_CASE_CLASS: "case_class",
    registry.SCALA_TUPLE2_CASE_CLASS: "case_class",
    registry.SCALA_OPTION: None,
    registry.SCALA_TRAVERSABLE: "cbf_code",
    registry.SCALA_EITHER: None,
}

# -- descriptions ------------------------------------------------------------------------------------

#: The collection type of a cbfCode such as ``implicitly[scala.collection.generic.CanBuildFrom[
#: scala.collection.immutable.List[java.lang.String], ...]]``: the first type argument's constructor.
_CBF_COLLECTION = re.compile(r"CanBuildFrom\[\s*([A-Za-z_][\w.$]*)")
_SCALA_PACKAGES = ("scala.collection.immutable.", "scala.collection.mutable.", "scala.collection.", "scala.")


def collection_name(cbf_code: Any) -> str:
    """The Scala collection a ``cbfCode`` builds, e.g. ``List`` or ``mutable.ArrayBuffer`` (``Seq`` if unknown)."""
    match = _CBF_COLLECTION.search(cbf_code) if isinstance(cbf_code, str) else None
    if match is None:
        return "Traversable"
    name = match.group(1)
    for package in _SCALA_PACKAGES:
        if name.startswith(package):
            short = name[len(package):]
            return "mutable." + short if package == "scala.collection.mutable." else short
    return name


def describe(snapshot: Any, label: str, describe_nested: Callable[[Any], str]) -> str:
    """``Scala case class a.B(Long, Option<String>)``, ``Option<Long>``, ``Scala List<String>``,
    ``Scala Map<String, Long>``, ``Either<String, Long>``."""
    nested = [describe_nested(n) for n in snapshot.nested]
    if label == CASE_CLASS:
        name = snapshot.attributes.get("case_class")
        if name == "scala.Tuple2" or (isinstance(name, str) and re.fullmatch(r"scala\.Tuple\d+", name)):
            return "(" + ", ".join(nested) + ")"
        return f"Scala case class {name}({', '.join(nested)})"
    if label == OPTION:
        return f"Option<{', '.join(nested)}>"
    if label == EITHER:
        return f"Either<{', '.join(nested)}>"
    collection = collection_name(snapshot.attributes.get("cbf_code"))
    if collection.endswith("Map") and len(snapshot.nested) == 1 and snapshot.nested[0].nested \
            and len(snapshot.nested[0].nested) == 2 and snapshot.nested[0].attributes.get("case_class") == "scala.Tuple2":
        return f"Scala {collection}<{', '.join(describe_nested(n) for n in snapshot.nested[0].nested)}>"
    return f"Scala {collection}<{', '.join(nested)}>"


# -- value readers (the decoders are built in repair.formats.flink.values) ----------------------------


def read_enum_snapshot(r: ByteReader) -> dict[str, Any]:
    """``ScalaEnumSerializerSnapshot.writeSnapshot`` (version 3): the Enumeration class, its values' names by id."""
    enum_class = read_utf(r, "scala enumeration class")
    count = r.count("scala enumeration size", item_size=6)
    names: dict[int, str] = {}
    for _ in range(count):
        name = read_utf(r, "scala enumeration value name")
        names[r.i32("scala enumeration value id")] = name
    return {"enum_class": enum_class, "enum_names": names}


def enum_read(names: dict[int, str]) -> Callable[[ByteReader], str]:
    """``EnumValueSerializer``: ``int id``, decoded as the value's name."""

    def read(r: ByteReader) -> str:
        at = r.offset
        value_id = r.i32("scala enumeration value id")
        if value_id not in names:
            raise FormatError("scala enumeration value id", at, f"one of {sorted(names)[:20]}", value_id)
        return names[value_id]

    return read


def option_read(element: Callable[[ByteReader], Any]) -> Callable[[ByteReader], Any]:
    """``OptionSerializer``: ``bool isSome``, then the value; None is None."""

    def read(r: ByteReader) -> Any:
        return element(r) if r.bool("option is defined") else None

    return read


def traversable_read(element: Callable[[ByteReader], Any]) -> Callable[[ByteReader], list]:
    """``TraversableSerializer``: ``int size``, per element ``bool notNull`` and the element."""

    def read(r: ByteReader) -> list:
        size = r.count("collection size")  # every element takes at least its flag byte
        return [element(r) if r.bool("collection element is not null") else None for _ in range(size)]

    return read


def either_read(left: Callable[[ByteReader], Any], right: Callable[[ByteReader], Any]) -> Callable[[ByteReader], dict]:
    """``EitherSerializer``: ``bool isRight``, then the Right or the Left value."""

    def read(r: ByteReader) -> dict:
        return {"right": right(r)} if r.bool("either is right") else {"left": left(r)}

    return read


# -- encoders (the inverse; used by repair.formats.flink.value_encoders) ------------------------------

Encode = Callable[[Any], bytes]


class ScalaEncodeError(ValueError):
    """A value the Scala serializer cannot write."""


def case_class_read(fields: list[Callable[[ByteReader], Any]]) -> Callable[[ByteReader], dict[str, Any]]:
    """``CaseClassSerializer``: the fields in order, as ``{"f0": ..., "f1": ...}``."""
    named = [(f"f{i}", read) for i, read in enumerate(fields)]

    def read(r: ByteReader) -> dict[str, Any]:
        return {name: read_field(r) for name, read_field in named}

    return read


def case_class_encode(fields: list[Encode]) -> Encode:
    names = [f"f{i}" for i in range(len(fields))]
    name_set = set(names)

    def encode(value: Any) -> bytes:
        if not isinstance(value, dict) or value.keys() != name_set:
            raise ScalaEncodeError(f"a case class of {len(fields)} fields is {{'f0': ..., ...}}, not {value!r}"[:300])
        return b"".join(f(value[name]) for f, name in zip(fields, names))

    return encode


def option_encode(element: Encode) -> Encode:
    def encode(value: Any) -> bytes:
        return b"\x00" if value is None else b"\x01" + element(value)

    return encode


def traversable_encode(element: Encode) -> Encode:
    def encode(value: Any) -> bytes:
        if not isinstance(value, (list, tuple)):
            raise ScalaEncodeError(f"a Scala collection is a list, not {value!r}")
        parts = [struct.pack(">i", len(value))]
        parts += [b"\x00" if v is None else b"\x01" + element(v) for v in value]
        return b"".join(parts)

    return encode


def enum_encode(names: dict[int, str]) -> Encode:
    ids = {name: value_id for value_id, name in names.items()}

    def encode(value: Any) -> bytes:
        if value not in ids:
            raise ScalaEncodeError(f"one of the enumeration's names {sorted(ids)[:20]} is needed, not {value!r}")
        return struct.pack(">i", ids[value])

    return encode


def either_encode(left: Encode, right: Encode) -> Encode:
    def encode(value: Any) -> bytes:
        if isinstance(value, dict) and len(value) == 1 and "right" in value:
            return b"\x01" + right(value["right"])
        if isinstance(value, dict) and len(value) == 1 and "left" in value:
            return b"\x00" + left(value["left"])
        raise ScalaEncodeError(f"an Either is {{'left': v}} or {{'right': v}}, not {value!r}")

    return encode
