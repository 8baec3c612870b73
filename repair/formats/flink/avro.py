"""Avro state (``flink-avro``'s ``AvroSerializer``): the writer schema from the snapshot, values decoded
and encoded with it.

**Snapshot** (``org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot``, checked against
flink-avro 1.20.3 and 2.1.1 with ``javap`` and real state): version 3 writes the runtime class name
(``org.apache.avro.generic.GenericRecord`` for generic records, the specific record's class) and the
writer schema as JSON, each as ``StringValue.writeString`` (``StringUtils.writeString``); version 2 wrote
both with ``writeUTF``, version 1 the schema alone.

**Values** are *not* Avro's binary encoding: ``AvroSerializer`` hands the datum writer Flink's own
``DataOutputEncoder``, which writes through ``DataOutput``:

=====================  ===============================================================================
Avro type              bytes
=====================  ===============================================================================
null                   nothing
boolean                one byte
int, long              4 or 8 bytes, big-endian (no zig-zag varints)
float, double          4 or 8 bytes, big-endian IEEE 754
string, bytes          ``int length`` + the (UTF-8) bytes
fixed                  its size in bytes
enum                   ``int ordinal``
union                  ``int branch index``, then the branch's value
array, map             blocks: a count as an unsigned varint (7 bits a byte, least significant first,
                       high bit = more), that many items (a map's: string key, value), until a count 0
record                 the fields in schema order
=====================  ===============================================================================

Decoded values: a record is a ``dict`` of its fields, an enum its symbol, bytes and fixed ``bytes``, a
map a list of ``(key, value)`` (as Flink's ``Map`` is decoded; Parquet ``map<string, V>``); a union of null and one other type is that type's value or None, any other union
``{"<branch type>": value}`` (as Avro's JSON encoding writes it). Logical types: ``decimal`` (on bytes or
fixed) is decoded as its decimal text (the schema's scale); ``date``, ``time-*``, ``timestamp-*`` and
``local-timestamp-*`` stay the numbers they are stored as, ``uuid`` its string. A schema this module
cannot follow (unknown type names, invalid JSON) leaves the values raw, with the reason.
"""

from __future__ import annotations

import json
import struct
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Callable

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.java_io import read_utf
from repair.formats.flink import registry
from repair.formats.flink.string_value import read_string_value

if TYPE_CHECKING:  # imported by arrow_type: verify and inspect read Avro snapshots without pyarrow (start-up)
    import pyarrow as pa

AVRO_SNAPSHOT = registry.AVRO.class_name
GENERIC_RECORD = "org.apache.avro.generic.GenericRecord"
#: Records nested deeper than this (recursive schemas) are refused rather than overflowing the stack.
MAX_DEPTH = 64

_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_F32, _F64 = struct.Struct(">f"), struct.Struct(">d")

Read = Callable[[ByteReader], Any]
Encode = Callable[[Any], bytes]


class AvroSchemaError(ValueError):
    """A writer schema this module cannot follow."""


class AvroEncodeError(ValueError):
    """A value the schema cannot write."""


# -- the snapshot ------------------------------------------------------------------------------------


def read_snapshot(reader: ByteReader, version: int) -> dict[str, Any]:
    """The payload of ``AvroSerializerSnapshot`` ``version`` (1 to 3): ``runtime_class`` and ``schema``
    (the JSON text)."""
    if version >= 3:
        runtime_class, schema = read_string_value(reader), read_string_value(reader)
    elif version == 2:
        runtime_class, schema = read_utf(reader, "avro runtime class"), read_utf(reader, "avro schema")
    else:
        runtime_class, schema = None, read_utf(reader, "avro schema")
    if schema is None:
        raise FormatError("avro schema", reader.offset, "the writer schema", "null")
    return {"runtime_class": runtime_class, "schema": schema}


class Schema:
    """A parsed writer schema: the root and its named types by full name."""

    def __init__(self, text: str):
        try:
            self.root = json.loads(text)
        except ValueError as error:
            raise AvroSchemaError(f"the Avro schema is no JSON: {error}") from None
        self.named: dict[str, dict] = {}
        self._collect(self.root, None, 0)

    def _collect(self, node: Any, namespace: str | None, depth: int) -> None:
        if depth > 1000:
            raise AvroSchemaError("the Avro schema is nested too deep")
        if isinstance(node, list):
            for branch in node:
                self._collect(branch, namespace, depth + 1)
            return
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            name = self.full_name(node, namespace)
            self.named[name] = node
            namespace = name.rpartition(".")[0] or None
            for field in node.get("fields") or ():
                if not isinstance(field, dict) or not isinstance(field.get("name"), str):
                    raise AvroSchemaError(f"record {name} has a field without a name")
                self._collect(field.get("type"), namespace, depth + 1)
        elif kind == "array":
            self._collect(node.get("items"), namespace, depth + 1)
        elif kind == "map":
            self._collect(node.get("values"), namespace, depth + 1)
        elif isinstance(kind, (dict, list)):
            self._collect(kind, namespace, depth + 1)

    @staticmethod
    def full_name(node: dict, namespace: str | None) -> str:
        name = node.get("name")
        if not isinstance(name, str):
            raise AvroSchemaError(f"a named Avro type without a name: {node.get('type')}")
        if "." in name:
            return name
        space = node.get("namespace", namespace)
        return f"{space}.{name}" if space else name

    def resolve(self, node: Any, namespace: str | None) -> tuple[Any, str | None]:
        """``node`` with a type name replaced by the named type it names, and the namespace inside it."""
        if isinstance(node, str) and node not in _PRIMITIVES:
            name = node if "." in node or not namespace else f"{namespace}.{node}"
            target = self.named.get(name) or self.named.get(node)
            if target is None:
                raise AvroSchemaError(f"unknown Avro type name {node!r}")
            node = target
        if isinstance(node, dict) and node.get("type") in ("record", "error", "enum", "fixed"):
            return node, (self.full_name(node, namespace).rpartition(".")[0] or None)
        return node, namespace


def schema_of(snapshot: Any) -> Schema:
    text = snapshot.attributes.get("schema")
    if not isinstance(text, str):
        raise AvroSchemaError("the snapshot holds no Avro schema")
    return Schema(text)


def describe(snapshot: Any) -> str:
    """``Avro GenericRecord fixturejob.User{name: string, age: int, ...}`` (or the specific class)."""
    runtime = snapshot.attributes.get("runtime_class")
    kind = "GenericRecord" if runtime in (None, GENERIC_RECORD) else "SpecificRecord"
    try:
        schema = schema_of(snapshot)
    except AvroSchemaError as error:
        return f"Avro {kind} ({error})"
    return f"Avro {kind} {_type_name(schema, schema.root, None, 0)}"


def _type_name(schema: Schema, node: Any, namespace: str | None, depth: int, *, expand: bool = True) -> str:
    if isinstance(node, str) and node in _PRIMITIVES:
        return node
    if isinstance(node, list):
        return "|".join(_type_name(schema, b, namespace, depth + 1, expand=False) for b in node)
    try:
        node, inner = schema.resolve(node, namespace)
    except AvroSchemaError:
        return str(node)
    if not isinstance(node, dict):
        return "?"
    kind = node.get("type")
    logical = node.get("logicalType")
    if kind == "record" or kind == "error":
        name = schema.full_name(node, namespace)
        if not expand or depth > 0:
            return name
        fields = node.get("fields") or []
        shown = [f"{f['name']}: {_type_name(schema, f.get('type'), inner, depth + 1, expand=False)}" for f in fields[:8]]
        more = f", ... ({len(fields)} fields)" if len(fields) > 8 else ""
        return f"{name}{{{', '.join(shown)}{more}}}"
    if kind in ("enum", "fixed"):
        return f"{kind} {schema.full_name(node, namespace)}"
    if kind == "array":
        return f"array<{_type_name(schema, node.get('items'), namespace, depth + 1, expand=False)}>"
    if kind == "map":
        return f"map<{_type_name(schema, node.get('values'), namespace, depth + 1, expand=False)}>"
    if isinstance(logical, str):
        return logical if logical != "decimal" else f"decimal({node.get('precision')}, {node.get('scale', 0)})"
    return _type_name(schema, kind, namespace, depth + 1, expand=False)


# -- reading -----------------------------------------------------------------------------------------


def _var_count(r: ByteReader, field: str) -> int:
    """``DataOutputEncoder.writeVarLongCount``: an unsigned varint, 7 bits a byte, least significant first."""
    at = r.offset
    value = shift = 0
    while True:
        byte = r.u8(field)
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
        if shift > 63:
            raise FormatError(field, at, "a varint of at most 10 bytes", "a longer varint")


def _decimal_text(unscaled: bytes, scale: int) -> str:
    return str(Decimal(int.from_bytes(unscaled, "big", signed=True)).scaleb(-scale))


def _union_branch_name(schema: Schema, branch: Any, namespace: str | None) -> str:
    if isinstance(branch, str) and branch in _PRIMITIVES:
        return branch
    node, _ = schema.resolve(branch, namespace)
    if isinstance(node, dict) and node.get("type") in ("record", "error", "enum", "fixed"):
        return schema.full_name(node, namespace)
    return node.get("type") if isinstance(node, dict) and isinstance(node.get("type"), str) else str(node)


class _Compiler:
    """Turns a schema into readers and encoders (named types compiled once, so recursion works)."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.readers: dict[str, Read] = {}
        self.encoders: dict[str, Encode] = {}
        self.depth = 0

    # readers
    def reader(self, node: Any, namespace: str | None = None) -> Read:
        if isinstance(node, list):
            return self._union_reader(node, namespace)
        if isinstance(node, str) and node in _PRIMITIVES:
            return _PRIMITIVE_READERS[node]
        node, inner = self.schema.resolve(node, namespace)
        if not isinstance(node, dict):
            raise AvroSchemaError(f"not an Avro type: {node!r}")
        kind = node.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            name = self.schema.full_name(node, namespace)
            if name not in self.readers:
                self.readers[name] = lambda r: self.readers[name](r)  # a recursive reference, replaced below
                self.readers[name] = self._named_reader(node, kind, inner)
            return lambda r: self.readers[name](r)
        if kind == "array":
            items = self.reader(node.get("items"), namespace)
            return lambda r: [items(r) for _ in self._blocks(r, "array")]
        if kind == "map":
            values = self.reader(node.get("values"), namespace)
            return lambda r: [(_read_string(r), values(r)) for _ in self._blocks(r, "map")]
        if node.get("logicalType") == "decimal" and kind == "bytes":
            scale = node.get("scale", 0)
            return lambda r: _decimal_text(_read_bytes(r), scale)
        if isinstance(kind, (str, list, dict)):
            return self.reader(kind, namespace)
        raise AvroSchemaError(f"not an Avro type: {node!r}")

    def _named_reader(self, node: dict, kind: str, namespace: str | None) -> Read:
        if kind == "enum":
            symbols = node.get("symbols") or []

            return lambda r: symbols[_ordinal(r, len(symbols), "avro enum ordinal")]
        if kind == "fixed":
            size = node.get("size")
            if type(size) is not int or size < 0:
                raise AvroSchemaError(f"fixed {node.get('name')} has no size")
            if node.get("logicalType") == "decimal":
                scale = node.get("scale", 0)
                return lambda r: _decimal_text(r.raw(size, "avro fixed"), scale)
            return lambda r: r.raw(size, "avro fixed")
        fields = [(f["name"], self.reader(f.get("type"), namespace)) for f in node.get("fields") or []]

        def read_record(r: ByteReader) -> dict[str, Any]:
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise FormatError("avro record", r.offset, f"records nested at most {MAX_DEPTH} deep", "deeper")
                return {name: read(r) for name, read in fields}
            finally:
                self.depth -= 1

        return read_record

    def _union_reader(self, branches: list, namespace: str | None) -> Read:
        readers = [self.reader(b, namespace) for b in branches]
        names = [_union_branch_name(self.schema, b, namespace) for b in branches]
        plain = len(branches) <= 2 and names.count("null") == len(branches) - 1  # [null, T] or [T] or [null]

        def read(r: ByteReader) -> Any:
            index = _ordinal(r, len(readers), "avro union branch")
            value = readers[index](r)
            return value if plain or names[index] == "null" else {names[index]: value}

        return read

    @staticmethod
    def _blocks(r: ByteReader, what: str):
        """One ``None`` per item of an array or map, over its blocks."""
        while True:
            count = _var_count(r, f"avro {what} block count")
            if count == 0:
                return
            if count > r.remaining:  # a bound before looping (only items of type null take no byte)
                raise FormatError(f"avro {what} block count", r.offset, f"at most {r.remaining} items", count)
            for _ in range(count):
                yield None

    # encoders
    def encoder(self, node: Any, namespace: str | None = None) -> Encode:
        if isinstance(node, list):
            return self._union_encoder(node, namespace)
        if isinstance(node, str) and node in _PRIMITIVES:
            return _PRIMITIVE_ENCODERS[node]
        node, inner = self.schema.resolve(node, namespace)
        kind = node.get("type") if isinstance(node, dict) else None
        if kind in ("record", "error", "enum", "fixed"):
            name = self.schema.full_name(node, namespace)
            if name not in self.encoders:
                self.encoders[name] = lambda v: self.encoders[name](v)
                self.encoders[name] = self._named_encoder(node, kind, inner)
            return lambda v: self.encoders[name](v)
        if kind == "array":
            items = self.encoder(node.get("items"), namespace)
            return lambda v: _blocks_of([items(x) for x in _expect(v, list, "an array")])
        if kind == "map":
            values = self.encoder(node.get("values"), namespace)
            return lambda v: _blocks_of([_string(k) + values(x) for k, x in _entries(v)])
        if node.get("logicalType") == "decimal" and kind == "bytes":
            scale = node.get("scale", 0)
            return lambda v: _bytes(_unscaled(v, scale, None))
        if isinstance(kind, (str, list, dict)):
            return self.encoder(kind, namespace)
        raise AvroSchemaError(f"not an Avro type: {node!r}")

    def _named_encoder(self, node: dict, kind: str, namespace: str | None) -> Encode:
        if kind == "enum":
            symbols = node.get("symbols") or []
            return lambda v: struct.pack(">i", _index(symbols, v))
        if kind == "fixed":
            size = node.get("size")
            if node.get("logicalType") == "decimal":
                scale = node.get("scale", 0)
                return lambda v: _unscaled(v, scale, size)
            return lambda v: _fixed(v, size)
        fields = [(f["name"], self.encoder(f.get("type"), namespace)) for f in node.get("fields") or []]
        names = [name for name, _ in fields]
        name_set = set(names)

        def encode(value: Any) -> bytes:
            if not isinstance(value, dict) or value.keys() != name_set:
                raise AvroEncodeError(f"a record of fields {names} is needed, not {value!r}"[:300])
            return b"".join(encode_field(value[name]) for name, encode_field in fields)

        return encode

    def _union_encoder(self, branches: list, namespace: str | None) -> Encode:
        encoders = [self.encoder(b, namespace) for b in branches]
        names = [_union_branch_name(self.schema, b, namespace) for b in branches]
        plain = len(branches) <= 2 and names.count("null") == len(branches) - 1

        def encode(value: Any) -> bytes:
            if value is None and "null" in names:
                return struct.pack(">i", names.index("null"))
            if plain:
                index = next(i for i, n in enumerate(names) if n != "null")
                return struct.pack(">i", index) + encoders[index](value)
            if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in names:
                name, inner = next(iter(value.items()))
                index = names.index(name)
                return struct.pack(">i", index) + encoders[index](inner)
            raise AvroEncodeError(f"a value of union {names} is {{'<branch>': value}}, not {value!r}"[:300])

        return encode


def _ordinal(r: ByteReader, count: int, field: str) -> int:
    """An ``int`` index into ``count`` choices (an enum's symbols, a union's branches)."""
    at = r.offset
    index = r.i32(field)
    if not 0 <= index < count:
        raise FormatError(field, at, f"0..{count - 1}", index)
    return index


def _read_bytes(r: ByteReader) -> bytes:
    return r.raw(r.count("avro bytes length"), "avro bytes")


def _read_string(r: ByteReader) -> str:
    at = r.offset
    data = _read_bytes(r)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FormatError("avro string", at, "UTF-8", data[:32].hex(), detail=str(error)) from None


_PRIMITIVE_READERS: dict[str, Read] = {
    "null": lambda r: None,
    "boolean": lambda r: r.bool("avro boolean"),
    "int": lambda r: r.i32("avro int"),
    "long": lambda r: r.i64("avro long"),
    "float": lambda r: _F32.unpack(r.raw(4, "avro float"))[0],
    "double": lambda r: _F64.unpack(r.raw(8, "avro double"))[0],
    "bytes": _read_bytes,
    "string": _read_string,
}


def _expect(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """``value`` if it is a ``kind`` (a bool is no number here)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
        raise AvroEncodeError(f"{what} is needed, not {value!r}"[:300])
    return value


def _null(value: Any) -> bytes:
    if value is not None:
        raise AvroEncodeError(f"null is needed, not {value!r}"[:300])
    return b""


def _packed(fmt: str, kind: type | tuple[type, ...], what: str) -> Encode:
    packer = struct.Struct(fmt)

    def encode(value: Any) -> bytes:
        _expect(value, kind, what)
        try:
            return packer.pack(value)
        except (struct.error, OverflowError) as error:
            raise AvroEncodeError(f"{value!r} is not {what}: {error}") from None

    return encode


def _bytes(value: Any) -> bytes:
    data = bytes(_expect(value, (bytes, bytearray), "bytes"))
    return struct.pack(">i", len(data)) + data


def _string(value: Any) -> bytes:
    try:
        return _bytes(_expect(value, str, "a string").encode("utf-8"))
    except UnicodeEncodeError as error:
        raise AvroEncodeError(f"a string Avro can write is needed: {error}") from None


def _fixed(value: Any, size: int) -> bytes:
    data = bytes(_expect(value, (bytes, bytearray), "bytes"))
    if len(data) != size:
        raise AvroEncodeError(f"a fixed of {size} bytes is needed, not {len(data)}")
    return data


def _entries(value: Any) -> list:
    """A map's ``(key, value)`` entries: as decoded (a list of pairs, the order written) or a dict."""
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list) and all(isinstance(e, (tuple, list)) and len(e) == 2 for e in value):
        return value
    raise AvroEncodeError(f"a map is a list of (key, value) pairs, not {value!r}"[:300])


def _index(symbols: list, value: Any) -> int:
    if value not in symbols:
        raise AvroEncodeError(f"one of the enum symbols {symbols} is needed, not {value!r}"[:300])
    return symbols.index(value)


def _unscaled(value: Any, scale: int, size: int | None) -> bytes:
    """A decimal's unscaled value in two's complement: as few bytes as Java's ``BigInteger.toByteArray``,
    or ``size`` bytes (sign-extended) for a fixed."""
    try:
        number = Decimal(_expect(value, str, "a decimal as text"))
        unscaled = number.scaleb(scale)
        if unscaled != unscaled.to_integral_value():
            raise AvroEncodeError(f"{value} has more than {scale} decimal places")
        integer = int(unscaled)
    except (InvalidOperation, ValueError) as error:
        if isinstance(error, AvroEncodeError):
            raise
        raise AvroEncodeError(f"a decimal is needed, not {value!r}") from None
    bits = (integer if integer >= 0 else ~integer).bit_length()  # BigInteger.bitLength(): without the sign bit
    length = bits // 8 + 1 if size is None else size
    try:
        return integer.to_bytes(length, "big", signed=True)
    except OverflowError:
        raise AvroEncodeError(f"{value} does not fit a fixed of {size} bytes") from None


def _blocks_of(items: list[bytes]) -> bytes:
    if not items:
        return b"\x00"
    count, head = len(items), bytearray()
    while count >= 0x80:
        head.append(count & 0x7F | 0x80)
        count >>= 7
    head.append(count)
    return bytes(head) + b"".join(items) + b"\x00"


_PRIMITIVE_ENCODERS: dict[str, Encode] = {
    "null": _null,
    "boolean": _packed(">?", bool, "a boolean"),
    "int": _packed(">i", int, "an int"),
    "long": _packed(">q", int, "a long"),
    "float": _packed(">f", (float, int), "a float"),
    "double": _packed(">d", (float, int), "a double"),
    "bytes": _bytes,
    "string": _string,
}


#: The pyarrow type function of each primitive Avro type.
_ARROW_PRIMITIVES = {
    "null": "null", "boolean": "bool_", "int": "int32", "long": "int64", "float": "float32", "double": "float64",
    "bytes": "binary", "string": "string",
}


def arrow_type(snapshot: Any) -> tuple[pa.DataType | None, str | None]:
    """``(Arrow type, None)`` of the decoded values, or ``(None, why not)`` (then JSON text): records are
    structs of their fields, a union of null and one type that type, enums and decimals strings, fixed
    binary, maps ``map<string, V>``; other unions and recursive records have none."""
    try:
        schema = schema_of(snapshot)
        return _arrow(schema, schema.root, None, set()), None
    except AvroSchemaError as error:
        return None, f"no decoded type for Avro: {error}"


def _arrow(schema: Schema, node: Any, namespace: str | None, seen: set[str]) -> pa.DataType:
    import pyarrow as pa

    if isinstance(node, str) and node in _ARROW_PRIMITIVES:
        return getattr(pa, _ARROW_PRIMITIVES[node])()
    if isinstance(node, list):
        others = [b for b in node if b != "null"]
        if len(others) != 1:
            raise AvroSchemaError(f"a union of {len(others)} non-null types has no single Arrow type")
        return _arrow(schema, others[0], namespace, seen)
    node, inner = schema.resolve(node, namespace)
    kind = node.get("type") if isinstance(node, dict) else None
    if node.get("logicalType") == "decimal" and kind in ("bytes", "fixed"):
        return pa.string()
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary()
    if kind == "array":
        return pa.list_(_arrow(schema, node.get("items"), namespace, seen))
    if kind == "map":
        return pa.map_(pa.string(), _arrow(schema, node.get("values"), namespace, seen))
    if kind in ("record", "error"):
        name = schema.full_name(node, namespace)
        fields = node.get("fields") or []
        if name in seen:
            raise AvroSchemaError(f"record {name} is recursive")
        if not fields or len({f["name"] for f in fields}) != len(fields):
            raise AvroSchemaError(f"record {name} has no fields or duplicate ones")
        return pa.struct([pa.field(f["name"], _arrow(schema, f.get("type"), inner, seen | {name})) for f in fields])
    if isinstance(kind, (str, list, dict)):
        return _arrow(schema, kind, namespace, seen)
    raise AvroSchemaError(f"not an Avro type: {node!r}")


def reader_for(snapshot: Any) -> tuple[Read | None, str | None]:
    """``(read, None)`` for the values of an ``AvroSerializerSnapshot``, or ``(None, why not)``."""
    try:
        schema = schema_of(snapshot)
        return _Compiler(schema).reader(schema.root), None
    except (AvroSchemaError, RecursionError) as error:
        return None, f"cannot decode Avro values: {error}"


def encoder_for(snapshot: Any) -> Encode | None:
    """The encoder of the snapshot's values (raising :class:`AvroEncodeError`), None if the schema is unusable."""
    try:
        schema = schema_of(snapshot)
        return _Compiler(schema).encoder(schema.root)
    except (AvroSchemaError, RecursionError):
        return None
