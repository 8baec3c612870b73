"""Flink SQL logical types (``org.apache.flink.table.types.logical.LogicalType``) as table serializer
snapshots hold them: Java-serialized objects (``InstantiationUtil.serializeObject``), read by
:mod:`repair.formats.bytes.java_serialization` and turned into :class:`SqlType` values here.

Every ``LogicalType`` has the fields ``isNullable`` and ``typeRoot`` (a ``LogicalTypeRoot`` enum); the
subclasses add ``length`` (CHAR, VARCHAR, BINARY, VARBINARY), ``precision``/``scale`` (DECIMAL),
``precision`` (TIME, TIMESTAMP, TIMESTAMP_LTZ), ``resolution``/``yearPrecision``/``dayPrecision``/
``fractionalPrecision`` (intervals), ``elementType`` (ARRAY, MULTISET), ``keyType``/``valueType`` (MAP) and
``fields`` (ROW: a list of ``RowField`` with ``name``, ``type`` and ``description``). A class this module
does not know keeps its type root and no parameters.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from repair.formats.bytes.java_serialization import JavaArray, JavaEnum, JavaObject
from repair.formats.records import record


@record
class SqlType:
    """A logical type: its ``LogicalTypeRoot`` name, nullability, parameters and children; ``names`` are
    the field names of a ROW."""

    root: str
    nullable: bool = True
    params: dict[str, int] = field(default_factory=dict)
    children: list["SqlType"] = field(default_factory=list)
    names: list[str] | None = None
    class_name: str = ""

    def sql(self) -> str:
        """The type as Flink SQL writes it, e.g. ``VARCHAR(2147483647)`` is ``STRING``,
        ``ROW<user STRING, cnt BIGINT NOT NULL>``."""
        return _sql(self) + ("" if self.nullable else " NOT NULL")


_TEXT_MAX = 2147483647


def _sql(t: SqlType) -> str:
    root, p = t.root, t.params
    if root == "VARCHAR" and p.get("length") == _TEXT_MAX:
        return "STRING"
    if root == "VARBINARY" and p.get("length") == _TEXT_MAX:
        return "BYTES"
    if root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY") and "length" in p:
        return f"{root}({p['length']})"
    if root == "DECIMAL":
        return f"DECIMAL({p.get('precision')}, {p.get('scale')})"
    if root == "TIMESTAMP_WITHOUT_TIME_ZONE":
        return f"TIMESTAMP({p.get('precision')})"
    if root == "TIMESTAMP_WITH_LOCAL_TIME_ZONE":
        return f"TIMESTAMP_LTZ({p.get('precision')})"
    if root == "TIMESTAMP_WITH_TIME_ZONE":
        return f"TIMESTAMP({p.get('precision')}) WITH TIME ZONE"
    if root == "TIME_WITHOUT_TIME_ZONE":
        return f"TIME({p.get('precision')})"
    if root in ("ARRAY", "MULTISET") and t.children:
        return f"{root}<{t.children[0].sql()}>"
    if root == "MAP" and len(t.children) == 2:
        return f"MAP<{t.children[0].sql()}, {t.children[1].sql()}>"
    if root in ("ROW", "STRUCTURED_TYPE") and t.names is not None:
        return "ROW<" + ", ".join(f"{n} {c.sql()}" for n, c in zip(t.names, t.children)) + ">"
    if root == "RAW":
        return "RAW"
    return root


def _java_list(value: Any) -> list[Any]:
    """The elements of a serialized ``java.util.List`` (an ``ArrayList``, possibly wrapped unmodifiable)."""
    if isinstance(value, JavaArray):
        return list(value.values) if not isinstance(value.values, bytes) else []
    if not isinstance(value, JavaObject):
        return []
    inner = value.get("list") or value.get("c")  # Collections$Unmodifiable(RandomAccess)List / Collection
    if isinstance(inner, JavaObject) and inner is not value:
        return _java_list(inner)
    for cls, _values, class_annotations in value.class_data:
        if cls in ("java.util.ArrayList", "java.util.LinkedList", "java.util.CollSer") or cls.endswith("List"):  # CollSer: List.of
            # writeObject: the size (block data), then the elements
            return [a for a in class_annotations if isinstance(a, (JavaObject, JavaEnum, str)) or a is None][0:]
    return []


def sql_type_of(value: Any) -> SqlType:
    """The :class:`SqlType` of a deserialized ``LogicalType`` (unknown shapes give root ``?``)."""
    if not isinstance(value, JavaObject):
        return SqlType("?")
    root_value = value.get("typeRoot")
    root = root_value.constant if isinstance(root_value, JavaEnum) else "?"
    out = SqlType(root, bool(value.get("isNullable", True)), class_name=value.class_name)
    for param in ("length", "precision", "scale", "yearPrecision", "dayPrecision", "fractionalPrecision"):
        found = value.get(param)
        if isinstance(found, int) and not isinstance(found, bool):
            out.params[param] = found
    if root in ("ARRAY", "MULTISET"):
        out.children = [sql_type_of(value.get("elementType"))]
    elif root == "MAP":
        out.children = [sql_type_of(value.get("keyType")), sql_type_of(value.get("valueType"))]
    elif root in ("ROW", "STRUCTURED_TYPE"):
        fields = [f for f in _java_list(value.get("fields") or value.get("attributes")) if isinstance(f, JavaObject)]
        if fields or root == "ROW":  # a structured type whose attributes were not found stays unknown (raw)
            out.names = [f.get("name") if isinstance(f.get("name"), str) else f"f{i}" for i, f in enumerate(fields)]
            out.children = [sql_type_of(f.get("type")) for f in fields]
    return out
