"""Avro's schema resolution (``SchemaCompatibility.checkReaderWriterCompatibility``), as flink-avro's
``AvroSerializerSnapshot`` asks it: can data written with the old (writer) schema be read with the new
(reader) schema? Plus the one restriction Flink's migration of ``GenericRecord`` state adds (real Flink
1.20 and 2.1, fixtures/compat_matrix.json): it writes each old record with the new schema field by
position, so a field the new record has beyond the old one's fails the restore.

Pure: JSON schema texts in, a reason out (None when compatible).
"""

from __future__ import annotations

from typing import Any

from repair.formats.flink.avro import AvroSchemaError, Schema

#: Writer type -> the reader types Avro promotes it to.
_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}
_NAMED = ("record", "error", "enum", "fixed")


class _Checker:
    def __init__(self, writer: Schema, reader: Schema):
        self.writer, self.reader = writer, reader
        self.in_progress: set[tuple[str, str]] = set()

    def check(self, w: Any, wns: str | None, r: Any, rns: str | None, where: str) -> str | None:
        w, wns = self.writer.resolve(w, wns)
        r, rns = self.reader.resolve(r, rns)
        wt, rt = _type(w), _type(r)
        if wt == "union":
            for branch in w:
                reason = self.check(branch, wns, r, rns, where)
                if reason:
                    return reason
            return None
        if rt == "union":
            if any(self.check(w, wns, branch, rns, where) is None for branch in r):
                return None
            return f"{where}: no branch of the new union reads the old {wt}"
        if wt != rt:
            if rt in _PROMOTIONS.get(wt, ()):
                return None
            return f"{where}: {wt} in the old schema, {rt} in the new one"
        if wt in _NAMED:
            wname, rname = Schema.full_name(w, wns), Schema.full_name(r, rns)
            if wname.rsplit(".", 1)[-1] != rname.rsplit(".", 1)[-1] and wname not in (r.get("aliases") or ()):
                return f"{where}: {wt} {wname} in the old schema, {rname} in the new one"
            wns, rns = wname.rpartition(".")[0] or None, rname.rpartition(".")[0] or None
            if wt == "fixed" and w.get("size") != r.get("size"):
                return f"{where}: fixed of {w.get('size')} bytes in the old schema, {r.get('size')} in the new one"
            if wt == "enum":
                missing = [s for s in w.get("symbols") or () if s not in (r.get("symbols") or ())]
                if missing and "default" not in r:
                    return f"{where}: enum symbols {', '.join(missing)} are not in the new schema (and it has no default)"
            if wt in ("record", "error"):
                return self._record(w, wns, r, rns, wname, rname, where)
            return None
        if wt == "array":
            return self.check(w.get("items"), wns, r.get("items"), rns, where + "[]")
        if wt == "map":
            return self.check(w.get("values"), wns, r.get("values"), rns, where + "{}")
        return None

    def _record(self, w: dict, wns, r: dict, rns, wname: str, rname: str, where: str) -> str | None:
        pair = (wname, rname)
        if pair in self.in_progress:
            return None
        self.in_progress.add(pair)
        try:
            written = {f["name"]: f for f in w.get("fields") or ()}
            for field in r.get("fields") or ():
                names = [field["name"], *(field.get("aliases") or ())]
                old = next((written[n] for n in names if n in written), None)
                inner = f"{where}.{field['name']}" if where else field["name"]
                if old is None:
                    if "default" not in field:
                        return f"field {inner} is new and has no default"
                    continue
                reason = self.check(old.get("type"), wns, field.get("type"), rns, inner)
                if reason:
                    return reason
            return None
        finally:
            self.in_progress.discard(pair)


def _type(node: Any) -> str:
    if isinstance(node, list):
        return "union"
    if isinstance(node, dict):
        kind = node.get("type")
        return kind if isinstance(kind, str) else _type(kind)
    return str(node)


def read_incompatibility(old_schema: str, new_schema: str) -> str | None:
    """Why data of ``old_schema`` cannot be read with ``new_schema`` by Avro's rules (None: it can)."""
    try:
        writer, reader = Schema(old_schema), Schema(new_schema)
        return _Checker(writer, reader).check(writer.root, None, reader.root, None, "")
    except AvroSchemaError as error:
        return f"the schemas cannot be compared: {error}"


def generic_migration_problem(old_schema: str, new_schema: str) -> str | None:
    """Why Flink's migration of ``GenericRecord`` state fails where Avro's rules allow the change (None: it
    works): the old records are written with the new schema field by position, so the new top-level
    record must have no field beyond the old one's, each in the old one's place."""
    try:
        old, new = Schema(old_schema).root, Schema(new_schema).root
    except AvroSchemaError as error:
        return f"the schemas cannot be compared: {error}"
    if _type(old) != "record" or _type(new) != "record":
        return None
    old_fields = [f["name"] for f in old.get("fields") or ()]
    for position, field in enumerate(f["name"] for f in new.get("fields") or ()):
        if position >= len(old_fields):
            return (f"field {field} is new: Flink migrates GenericRecord state by writing each old record with the new "
                    f"schema field by position, and the old records have no field {position} (the restore fails)")
        if old_fields[position] != field:
            return (f"field {field} is at position {position}, where the old records hold {old_fields[position]}: Flink "
                    "migrates GenericRecord state field by position")
    return None
