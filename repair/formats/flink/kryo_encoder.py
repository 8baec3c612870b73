"""Kryo values written back as Flink's ``KryoSerializer`` writes them (Kryo 2.24 in Flink 1.x, Kryo 5 in
Flink 2.x): the inverse of :mod:`repair.formats.flink.kryo`.

A decoded Kryo value does not say which Java class to write (an ``int`` may have been a ``Long``, an
``Integer`` or a ``Short``; a list an ``ArrayList``, a ``LinkedList``, a ``TreeSet`` or an ``int[]``), so a
changed value is written in the classes of the bytes it replaces: :func:`encode_like` reads those bytes as
nodes (:func:`repair.formats.flink.kryo.read_node`), puts the new value into them (:func:`retarget`: each
part keeps the class of the part it replaces; a new element of a collection takes its siblings' class) and
writes the nodes (:func:`write_node`). Where there is nothing to replace (a null), a value is written by
its JSON type: a string as ``String``, an integer as ``Long``, a number as ``Double``, a boolean as
``Boolean``, a list as ``java.util.ArrayList``. A value that does not fit the class it replaces (a string
where a ``Long`` was, a number out of a ``Short``'s range) is refused with :class:`KryoEncodeError`.

``write_node(read_node(b)) == b`` for the bytes Flink wrote (the same class-name table, reference
markers and back-references, string forms, collection headers and byte order), and
``plain(read_node(write_node(retarget(n, v)))) == v`` for the values accepted.
"""

from __future__ import annotations

import struct
import uuid
from decimal import Decimal, InvalidOperation
from typing import Any

from repair.errors import RepairError
from repair.formats.bytes.binary import ByteReader
from repair.formats.flink import kryo
from repair.formats.flink.arrow import json_text
from repair.formats.flink.kryo import (
    BIG_DECIMAL,
    BIG_INTEGER,
    BOOLEAN,
    BYTE,
    CHAR,
    COLLECTIONS,
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    MAPS,
    NULL,
    OBJECT_ARRAYS,
    PRIMITIVE_ARRAYS,
    SHORT,
    SORTED_SETS,
    STRING,
    TREE_MAP,
    UUID,
    UUID_REGISTRATION,
    Node,
    Registrations,
    plain,
)


class KryoEncodeError(ValueError):
    """A value that cannot be written in the Kryo classes of the bytes it replaces."""


#: Kryo 2.24 writes strings of 2 to 63 ASCII chars in its ASCII form, Kryo 5 of 2 to 32.
_ASCII_MAX = {2: 63, 5: 32}
_INT_BITS = {INT: 32, LONG: 64, SHORT: 16, BYTE: 8}
_WRAPPERS = {INT, FLOAT, BOOLEAN, BYTE, CHAR, SHORT, LONG, DOUBLE}
_ARRAY_LISTS = "java.util.ArrayList"


def varint(value: int) -> bytes:
    """``Output.writeVarInt(value, true)``: 7 bits a byte, least significant first (up to 5 bytes)."""
    value &= 0xFFFFFFFF
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zigzag(value: int, bits: int) -> int:
    return ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)


def varlong(value: int, *, zigzag: bool = True) -> bytes:
    """``Output.writeVarLong``: 8 bytes of 7 bits, a ninth of 8 (zig-zag unless ``zigzag=False``)."""
    value = _zigzag(value, 64) if zigzag else value & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    for _ in range(8):
        if value < 0x80:
            out.append(value)
            return bytes(out)
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint_flag(flag: bool, value: int) -> bytes:
    """Kryo 5's ``writeVarIntFlag``: the first byte's 0x80 the flag, 0x40 more bytes, its 6 low bits first."""
    first = value & 0x3F | (0x80 if flag else 0)
    value >>= 6
    if not value:
        return bytes([first])
    return bytes([first | 0x40]) + varint(value)


def string(value: str | None, generation: int, ascii_max: int | None = None) -> bytes:
    """``Output.writeString``: null ``0x80``, ASCII (the last char's high bit set) or a length + 1
    (0x80 flag) and the UTF-16 code units in 1, 2 or 3 bytes (``ascii_max``: Kryo 5's ``writeAscii``,
    ASCII at any length)."""
    if value is None:
        return b"\x80"
    units = struct.unpack(f">{len(value.encode('utf-16-be', 'surrogatepass')) // 2}H", value.encode("utf-16-be", "surrogatepass"))
    if 1 < len(units) <= (ascii_max or _ASCII_MAX[generation]) and all(u <= 0x7F for u in units):
        data = bytearray(units)
        data[-1] |= 0x80
        return bytes(data)
    out = bytearray(_varint_flag(True, len(units) + 1))
    for u in units:
        if u <= 0x7F:
            out.append(u)
        elif u <= 0x7FF:
            out += bytes([0xC0 | u >> 6 & 0x1F, 0x80 | u & 0x3F])
        else:
            out += bytes([0xE0 | u >> 12 & 0x0F, 0x80 | u >> 6 & 0x3F, 0x80 | u & 0x3F])
    return bytes(out)


def _unscaled(value: int | None) -> bytes:
    """``BigIntegerSerializer``: a length + 1 varint (0 null), then ``BigInteger.toByteArray``."""
    if value is None:
        return b"\x00"
    length = (value if value >= 0 else ~value).bit_length() // 8 + 1
    return varint(length + 1) + value.to_bytes(length, "big", signed=True)


class _Writer:
    """One ``writeClassAndObject`` graph: its class-name table and the reference ids of the objects
    written, in order."""

    def __init__(self, generation: int):
        self.generation = generation
        self.out = bytearray()
        self.names: dict[str, int] = {}
        self.ids: dict[int, int] = {}
        self.fixed = kryo.fixed_codecs(generation)

    def write_class(self, cls: int | str | None) -> None:
        if cls is None:
            self.out.append(0)
        elif isinstance(cls, int):
            self.out += varint(cls + 2)
        elif cls == UUID:
            self.out += varint(UUID_REGISTRATION + 2)
        elif cls in self.names:
            self.out += b"\x01" + varint(self.names[cls])
        else:
            self.names[cls] = len(self.names)
            self.out += b"\x01" + varint(self.names[cls]) + string(cls, self.generation)

    def write_class_and_object(self, node: Node) -> None:
        self.write_class(node.written_class)
        if node.cls is not None:
            self.write_object(node, nullable=False)

    def wrapper(self, cls: int, value: Any) -> None:
        if cls in self.fixed:
            codec, _ = self.fixed[cls]
            self.out += codec.pack(ord(value) if cls == CHAR else value)
        elif cls == INT:
            self.out += varint(_zigzag(value, 32))
        elif cls == LONG:
            self.out += varlong(value)
        elif cls == BOOLEAN:
            self.out.append(1 if value else 0)
        else:
            self.out += struct.pack(">b", value)

    def _tracked(self, node: Node) -> bool:
        return not (node.enum and self.generation == 5)

    def write_object(self, node: Node, *, nullable: bool) -> None:
        """``node`` as ``read_object`` reads it: a wrapper's value (a null byte first where it may be
        null), else a reference marker (0 null, 1 new, id + 2 a back-reference) and the object."""
        cls = node.cls
        if cls is None:  # a null: a wrapper's null byte and a reference marker's null are both 0
            self.out.append(0)
            return
        if cls in _WRAPPERS:
            if nullable:
                self.out.append(1)
            self.wrapper(cls, node.value)  # type: ignore[arg-type]
            return
        target = node.same
        while target is not None and target.same is not None:
            target = target.same
        if target is not None and id(target) in self.ids:
            self.out += varint(self.ids[id(target)] + 2)
            return
        node = target or node
        if self._tracked(node):
            self.out.append(1)
            self.ids[id(node)] = len(self.ids)
        self._body(node)

    def _body(self, node: Node) -> None:
        cls, value, out = node.cls, node.value, self.out
        if node.enum:
            out += varint(value + 1)
        elif cls == STRING:
            out += string(value, self.generation)
        elif cls == UUID:
            most, least = value
            out += varlong(most) + varlong(least) if self.generation == 2 else struct.pack("<qq", most, least)
        elif cls in kryo.CHILL_READ:
            self._chill(node)
        elif cls in COLLECTIONS or cls in SORTED_SETS:
            self._collection(value, sorted_set=cls in SORTED_SETS)
        elif cls in MAPS or cls == TREE_MAP:
            self._map(value, sorted_map=cls == TREE_MAP)
        elif cls == BIG_INTEGER:
            out += _unscaled(value)
        elif cls == BIG_DECIMAL:
            out += _unscaled(None if value is None else value[0])
            if value is not None:
                out += varint(_zigzag(value[1], 32))
            else:
                out += varint(0)
        elif cls == DATE:
            out += varlong(value, zigzag=False)
        elif cls in PRIMITIVE_ARRAYS:
            self._primitive_array(PRIMITIVE_ARRAYS[cls], value)  # type: ignore[index]
        else:
            element = OBJECT_ARRAYS[cls]  # type: ignore[index]
            if value is None:
                out.append(0)
                return
            out += varint(len(value) + 1)
            for item in value:
                self.write_class_and_object(item) if element is None else self.write_object(item, nullable=True)

    def _chill(self, node: Node) -> None:
        """Flink's chill registrations of JDK classes (see :mod:`repair.formats.flink.kryo`)."""
        cls, value, out, generation = node.cls, node.value, self.out, self.generation
        if cls == kryo.AS_LIST:
            if generation == 5:
                self._collection(value, sorted_set=False)
                return
            out += varint(len(value))
            self.write_class(node.header)
            for element in value:
                self.write_class_and_object(element)
        elif cls == kryo.PRIORITY_QUEUE:
            self._collection(value, sorted_set=True)
        elif cls == kryo.INET_SOCKET_ADDRESS:
            out += string(value[0], generation) + varint(value[1])
        elif cls == kryo.BIT_SET:
            words = [0] * (max(value) // 64 + 1 if value else 0)
            for bit in value:
                words[bit // 64] |= 1 << bit % 64
            out += varint(len(words)) + b"".join(struct.pack((">" if generation == 2 else "<") + "Q", w) for w in words)
        elif cls == kryo.PATTERN:
            out += string(value[0], generation) + (varint(value[1]) if generation == 5 else b"")
        elif cls in (kryo.SQL_DATE, kryo.SQL_TIME):
            out += varlong(value, zigzag=False)
        elif cls == kryo.TIMESTAMP:
            time, nanos = value
            out += varlong(time if generation == 2 else time - nanos // 1_000_000, zigzag=False) + varint(nanos)
        elif cls == kryo.URI_ID:
            out += string(value, generation)
        elif generation == 2:  # a Locale, Java-serialized: only as it was read
            out += value[3]
        else:
            out += b"".join(string(part, generation, ascii_max=1 << 31) for part in value[:2]) + string(value[2], generation)

    def _primitive_array(self, element: int, value: Any) -> None:
        if value is None:
            self.out.append(0)
            return
        self.out += varint(len(value) + 1)
        if element == BYTE:
            self.out += bytes(value)
            return
        for item in value:
            self.wrapper(element, item)

    def _collection(self, elements: list[Node] | None, sorted_set: bool) -> None:
        if self.generation == 2:
            if sorted_set:
                self.out.append(0)  # no comparator
            self.out += varint(len(elements or []))
            for element in elements or []:
                self.write_class_and_object(element)
            return
        if elements is None:
            self.out.append(0)
            return
        classes = {(e.cls, e.enum) for e in elements if e.cls is not None}
        same_type = bool(elements) and len(classes) <= 1
        self.out += _varint_flag(same_type, len(elements) + 1)
        if sorted_set:
            self.out.append(0)
        if not elements:
            return
        if not same_type:
            for element in elements:
                self.write_class_and_object(element)
            return
        if not classes:  # all null
            self.out.append(0)
            return
        self.write_class(next(e.written_class for e in elements if e.cls is not None))
        has_null = any(e.cls is None for e in elements)
        self.out.append(1 if has_null else 0)
        for element in elements:
            self.write_object(element, nullable=has_null)

    def _map(self, entries: list[tuple[Node, Node]] | None, sorted_map: bool) -> None:
        if sorted_map and self.generation == 2:
            self.out.append(0)
        if self.generation == 2:
            self.out += varint(len(entries or []))
        elif entries is None:
            self.out.append(0)
            return
        else:
            self.out += varint(len(entries) + 1)
            if sorted_map:
                self.out.append(0)
        for key, value in entries or []:
            self.write_class_and_object(key)
            self.write_class_and_object(value)


def write_node(node: Node, generation: int) -> bytes:
    """The bytes ``Kryo.writeClassAndObject`` writes for ``node`` in ``generation`` (2: Kryo 2.24, 5: Kryo 5)."""
    writer = _Writer(generation)
    writer.write_class_and_object(node)
    return bytes(writer.out)


def _same(node: Node, value: Any) -> bool:
    """Whether ``value`` (a decoded or JSON-parsed value) is what ``node`` holds, as export writes it."""
    return json_text(plain(node)) == json_text(value)


def _integer(value: Any, bits: int, what: str) -> int:
    if type(value) is not int or not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise KryoEncodeError(f"a {what} ({bits}-bit integer) is needed, not {value!r}")
    return value


def _number(value: Any, what: str) -> float:
    if type(value) not in (int, float):
        raise KryoEncodeError(f"a {what} is needed, not {value!r}")
    return float(value)


def _char(value: Any) -> str:
    if not isinstance(value, str) or len(value) != 1 or ord(value) > 0xFFFF:
        raise KryoEncodeError(f"a Character (one UTF-16 code unit) is needed, not {value!r}")
    return value


def _wrapper_value(cls: int, value: Any) -> Any:
    if cls in _INT_BITS:
        return _integer(value, _INT_BITS[cls], kryo._NAMES.get(cls, "Long" if cls == LONG else "Integer"))
    if cls in (FLOAT, DOUBLE):
        number = _number(value, kryo._NAMES[cls])
        if cls == FLOAT:
            try:
                struct.pack(">f", number)
            except OverflowError:
                raise KryoEncodeError(f"{value!r} is out of a Float's range") from None
        return number
    if cls == CHAR:
        return _char(value)
    if type(value) is not bool:
        raise KryoEncodeError(f"a Boolean is needed, not {value!r}")
    return value


def _list(value: Any, what: str) -> list:
    if not isinstance(value, (list, tuple)):
        raise KryoEncodeError(f"a list ({what}) is needed, not {value!r}")
    return list(value)


def infer(value: Any) -> Node:
    """A node for ``value`` where no bytes say its class: by its JSON type."""
    if value is None:
        return NULL
    if type(value) is bool:
        return Node(BOOLEAN, value)
    if type(value) is int:
        return Node(LONG, _integer(value, 64, "Long"))
    if type(value) is float:
        return Node(DOUBLE, value)
    if isinstance(value, str):
        return Node(STRING, value)
    if isinstance(value, (list, tuple)):
        return Node(_ARRAY_LISTS, [infer(v) for v in value])
    raise KryoEncodeError(f"{value!r} has no Kryo class to write it as (only strings, numbers, booleans and lists can be new)")


def _elements(template: list[Node], values: list) -> list[Node]:
    """``values`` in the classes of ``template``'s elements, by position; new ones as the last non-null."""
    spare = next((e for e in reversed(template) if e.cls is not None), None)
    return [retarget(template[i] if i < len(template) else spare or NULL, v) for i, v in enumerate(values)]


def _pair(value: Any) -> tuple[Any, Any]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise KryoEncodeError(f"a map entry [key, value] is needed, not {value!r}")
    return value[0], value[1]


def _decimal(value: Any, scale: int) -> tuple[int, int]:
    """A ``BigDecimal``'s unscaled value and scale from its text, at ``scale`` where that is exact."""
    try:
        number = Decimal(value) if isinstance(value, str) else None
    except InvalidOperation:
        number = None
    if number is None or not number.is_finite():
        raise KryoEncodeError(f"a BigDecimal as its text (e.g. \"1.25\") is needed, not {value!r}")
    exponent = number.as_tuple().exponent
    scale = max(scale, -exponent) if isinstance(exponent, int) else scale
    return int(number.scaleb(scale)), scale


def retarget(template: Node, value: Any) -> Node:
    """``value`` as a node of the classes of ``template`` (see the module docstring)."""
    while template.same is not None:
        if _same(template, value):
            return template
        template = template.same
    if _same(template, value):
        return template
    if value is None:
        return NULL
    cls = template.cls
    if cls is None:
        return infer(value)
    if template.enum:
        if not isinstance(value, dict) or value.get("enum") != cls or type(value.get("ordinal")) is not int or value["ordinal"] < 0:
            raise KryoEncodeError(f"an enum constant {{\"enum\": \"{cls}\", \"ordinal\": n}} is needed, not {value!r}")
        return Node(cls, value["ordinal"], enum=True)
    if cls in _WRAPPERS:
        return Node(cls, _wrapper_value(cls, value))  # type: ignore[arg-type]
    if cls == STRING:
        if not isinstance(value, str):
            raise KryoEncodeError(f"a String is needed, not {value!r}")
        return Node(cls, value)
    if cls in (BIG_INTEGER, DATE):
        return Node(cls, _integer(value, 64 if cls == DATE else 1 << 20, cls))
    if cls == BIG_DECIMAL:
        return Node(cls, _decimal(value, template.value[1] if template.value else 0))
    if cls == UUID:
        try:
            bits = uuid.UUID(value).int
        except (TypeError, ValueError, AttributeError):
            raise KryoEncodeError(f"a UUID as its text is needed, not {value!r}") from None
        signed = [(b - (1 << 64)) if b >> 63 else b for b in (bits >> 64, bits & (1 << 64) - 1)]
        return Node(cls, tuple(signed))
    if cls in kryo.CHILL_READ:
        return _retarget_chill(template, value)
    if cls in COLLECTIONS or cls in SORTED_SETS:
        return Node(cls, _elements(template.value or [], _list(value, cls)))
    if cls in MAPS or cls == TREE_MAP:
        entries = [_pair(v) for v in _list(value, cls)]
        old = template.value or []
        spare = old[-1] if old else (NULL, NULL)
        return Node(cls, [(retarget((old[i] if i < len(old) else spare)[0], k), retarget((old[i] if i < len(old) else spare)[1], v))
                          for i, (k, v) in enumerate(entries)])
    if cls in PRIMITIVE_ARRAYS:
        element = PRIMITIVE_ARRAYS[cls]
        if element == BYTE:
            try:
                return Node(cls, bytes.fromhex(value) if isinstance(value, str) else bytes(value))
            except (TypeError, ValueError):
                raise KryoEncodeError(f"a byte[] as hex text is needed, not {value!r}") from None
        if element == CHAR:
            if not isinstance(value, str):
                raise KryoEncodeError(f"a char[] as a string is needed, not {value!r}")
            units = value.encode("utf-16-be", "surrogatepass")
            return Node(cls, [chr(int.from_bytes(units[i:i + 2], "big")) for i in range(0, len(units), 2)])
        return Node(cls, [_wrapper_value(element, v) for v in _list(value, cls)])
    element = OBJECT_ARRAYS[cls]  # type: ignore[index]
    values = _list(value, cls)
    if element is None:
        return Node(cls, _elements(template.value or [], values))
    return Node(cls, [NULL if v is None else retarget(Node(element), v) for v in values])


def _dict(value: Any, keys: tuple[str, ...], what: str) -> dict:
    if not isinstance(value, dict) or set(value) != set(keys):
        raise KryoEncodeError(f"a {what} {{{', '.join(repr(k) for k in keys)}}} is needed, not {value!r}")
    return value


def _retarget_chill(template: Node, value: Any) -> Node:
    """A value of one of Flink's chill registrations of JDK classes, in the layout of ``template``."""
    cls = template.cls
    if cls == kryo.AS_LIST:
        return Node(cls, _elements(template.value or [], _list(value, "Arrays.asList")), header=template.header)
    if cls == kryo.PRIORITY_QUEUE:
        return Node(cls, _elements(template.value or [], _list(value, "PriorityQueue, in its heap order")))
    if cls == kryo.INET_SOCKET_ADDRESS:
        given = _dict(value, ("host", "port"), "InetSocketAddress")
        if not isinstance(given["host"], str) or type(given["port"]) is not int or not 0 <= given["port"] <= 65535:
            raise KryoEncodeError(f"an InetSocketAddress's host text and port (0 to 65535) are needed, not {value!r}")
        return Node(cls, (given["host"], given["port"]))
    if cls == kryo.BIT_SET:
        bits = _list(value, "BitSet: its set bits")
        if not all(type(b) is int and 0 <= b < 1 << 20 for b in bits):
            raise KryoEncodeError(f"a BitSet's set bits (integers from 0) are needed, not {value!r}")
        return Node(cls, sorted(set(bits)))
    if cls == kryo.PATTERN:
        with_flags = len(template.value) == 2
        keys = ("pattern", "flags") if with_flags else ("pattern",)
        given = _dict(value, keys, "Pattern" + ("" if with_flags else " (Flink 1.x's chill serializer writes no flags)"))
        if not isinstance(given["pattern"], str) or (with_flags and _integer(given["flags"], 32, "Pattern flags") < 0):
            raise KryoEncodeError(f"a Pattern's text and flags are needed, not {value!r}")
        return Node(cls, (given["pattern"], given["flags"]) if with_flags else (given["pattern"],))
    if cls in (kryo.SQL_DATE, kryo.SQL_TIME):
        return Node(cls, _integer(value, 64, "java.sql date (epoch ms)"))
    if cls == kryo.TIMESTAMP:
        given = _dict(value, ("time", "nanos"), "Timestamp")
        time, nanos = _integer(given["time"], 64, "Timestamp time"), given["nanos"]
        if type(nanos) is not int or not 0 <= nanos < 1_000_000_000 or (time - nanos // 1_000_000) % 1000:
            raise KryoEncodeError(f"a Timestamp's nanos (0 to 999999999) agreeing with its time's milliseconds are needed, not {value!r}")
        return Node(cls, (time, nanos))
    if cls == kryo.URI_ID:
        if not isinstance(value, str):
            raise KryoEncodeError(f"a URI as its text is needed, not {value!r}")
        return Node(cls, value)
    if template.value[3] is not None:  # a Java-serialized Locale (Kryo 2.24)
        raise KryoEncodeError("a Locale of Flink 1.x is Java-serialized (chill's JavaSerializer): only kept as it is, not written anew")
    if not isinstance(value, str):
        raise KryoEncodeError(f"a Locale as language_COUNTRY_variant text is needed, not {value!r}")
    parts = (value.split("_", 2) + ["", ""])[:3]
    if kryo.locale_text(*parts) != value:
        raise KryoEncodeError(f"a Locale as language_COUNTRY_variant text is needed, not {value!r}")
    return Node(cls, (*parts, None))


def encode_like(value: Any, template: bytes | None, generation: int | None, type_class: str | None = None,
                registrations: Registrations | None = None) -> bytes:
    """``value`` written by Kryo of ``generation`` in the classes of the bytes ``template`` holds (None:
    by its JSON type); the template's bytes themselves where ``value`` is what they hold."""
    if generation is None:
        raise KryoEncodeError("the Kryo generation of the snapshot's Flink is unknown (Kryo 2.24 and 5 write values differently)")
    if template is None:
        return write_node(infer(value), generation)
    try:
        node = kryo.read_node(ByteReader(template), generation, type_class, registrations)
    except RepairError as error:
        raise KryoEncodeError(f"the bytes it replaces are not Kryo this tool reads ({error}), so the Java classes to write are unknown") from None
    if _same(node, value):
        return template
    return write_node(retarget(node, value), generation)

