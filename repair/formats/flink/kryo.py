"""Values Flink's ``KryoSerializer`` wrote (generic types: a ``keyBy`` returning ``Object``, a
``ValueState<Object>``), for the classes Kryo registers itself, the same in Kryo 2.24 (Flink 1.x) and
Kryo 5 (Flink 2.x), checked against real Flink 1.20 and 2.1 state (fixtures ``flink-*-kryo``).

``Kryo.writeClassAndObject``: the class as a varint (7 bits a byte, least significant first; ``0``
null, ``1`` a class written by name, else the registration id + 2), then, for classes whose objects
Kryo tracks by reference (all but the primitive wrappers), a reference marker varint (``1`` a new
object; ``0`` null; others back-references), then the object. Kryo's own registrations come first in
every ``Kryo`` instance, so their ids do not depend on the user's: 0 ``int``/``Integer`` (zig-zag
varint), 1 ``String``, 3 ``boolean`` (one byte), 4 ``byte``, 7 ``long``/``Long`` (zig-zag varlong of up
to 9 bytes, the ninth holding 8 bits).

A ``String`` is either ASCII (no high bit but on its last byte, which carries 0x80) or a length + 1
(0: null) in a varint whose first byte has 0x80 as its flag and 6 bits (0x40: more bytes), followed by
UTF-16 code units each in 1 (<= 0x7F), 2 (<= 0x7FF) or 3 bytes.

Classes Kryo writes by name (not registered: ``1``, a name id, the name the first time in a graph):
``java.util.ArrayList``, ``LinkedList``, ``HashSet``, ``LinkedHashSet`` (``CollectionSerializer``) and
``HashMap``, ``LinkedHashMap`` (``MapSerializer``, entries as ``[(key, value), ...]``), their elements
by ``writeClassAndObject``. Kryo 2.24 writes a collection's or map's size as a varint; Kryo 5 the size
+ 1 (0: null), for a collection with a flag (all elements of one class: that class once, a has-null
boolean, then the elements without their class). Back-references (marker id + 2) name a tracked object
read before in the same graph. Flink's snapshot does not say which Kryo wrote the bytes: the readers
take the generation from the checkpoint's ``_metadata`` version (``metadata.generation_of_metadata_version``,
set on the snapshot as its ``kryo_generation`` attribute); without it both are tried
(:func:`read_class_and_object`), and fixed-width values alone (floats, chars, shorts and doubles, whose
byte order differs between the generations) are then ambiguous.

Also read: ``java.util.UUID`` (Flink's chill registration 82), ``TreeSet``/``TreeMap`` without a
comparator, and a Java enum written by name (Kryo's ``EnumSerializer``: the ordinal + 1) where those
bytes are the whole value. The reader keeps the graph as :class:`Node` s (classes, reference markers,
back-references), which :mod:`repair.formats.flink.kryo_encoder` writes back byte for byte; :func:`plain`
gives the Python value.

The same classes registered with Kryo's default serializer (a ``KryoSerializer`` registers its own type
class first, at :data:`FIRST_USER_REGISTRATION`: a POJO field declared ``ArrayList`` or ``HashMap`` is
written under that id, in Flink 1.20 and 2.1 alike: fixtures ``flink-*-pojo``) are read as when written
by name, their nodes keeping the id. Anything else (other classes written by name, e.g. POJOs of Kryo's
``FieldSerializer``; other user registrations, whose ids depend on the job's configuration; Flink's other
chill registrations) raises
:class:`~repair.formats.flink.values.UnsupportedSerializerError` with the reason, so the raw bytes
are kept.
"""

from __future__ import annotations

import re
import struct
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from repair.errors import FormatError, UnsupportedSerializerError
from repair.formats.bytes.binary import ByteReader
from repair.formats.bytes.java_serialization import JavaObject, read_java_object
from repair.formats.flink.row_data import decimal_text
from repair.formats.flink.serializers import KRYO_SNAPSHOT

#: Kryo's own registration ids (``Kryo`` constructor, 2.24 and 5).
INT, STRING, FLOAT, BOOLEAN, BYTE, CHAR, SHORT, LONG, DOUBLE = range(9)
_NAMES = {FLOAT: "float", CHAR: "char", SHORT: "short", DOUBLE: "double"}


def read_varint(r: ByteReader, field: str) -> int:
    """``Input.readVarInt(true)``: up to 5 bytes, 7 bits each, least significant first."""
    value = 0
    for shift in range(0, 35, 7):
        byte = r.u8(field)
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & 0xFFFFFFFF
    raise FormatError(field, r.offset - 1, "a varint of at most 5 bytes", "a longer one")


def _unzigzag(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return (value >> 1) ^ -(value & 1)


def read_varlong(r: ByteReader, field: str, *, zigzag: bool = True) -> int:
    """``Input.readLong(false)`` / ``readVarLong(false)``: 8 bytes of 7 bits, a ninth of 8, zig-zag
    (``zigzag=False``: ``readLong(true)``, a signed 64-bit value as written)."""
    value = 0
    for shift in range(0, 56, 7):
        byte = r.u8(field)
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
    else:
        value |= r.u8(field) << 56
    return _unzigzag(value, 64) if zigzag else value - (1 << 64) if value >> 63 else value


#: A byte with its high bit set: the last char of a Kryo ASCII string, or any byte of a multi-byte char.
_HIGH_BIT = re.compile(rb"[\x80-\xff]")


def read_string(r: ByteReader) -> str | None:
    """``Input.readString``."""
    start = r.pos
    first = r.u8("kryo string")
    if not first & 0x80:  # ASCII: the last char has its high bit set (found at once, not byte by byte)
        last = _HIGH_BIT.search(r.data, r.pos, r.end)
        if last is None:
            r.pos = r.end
            r.u8("kryo ascii string")  # raises: the string runs past the end
        r.pos = last.end()  # type: ignore[union-attr]
        chars = bytearray(r.data[start:r.pos])
        chars[-1] &= 0x7F
        return chars.decode("ascii")
    length = first & 0x3F
    if first & 0x40:
        for shift in range(6, 34, 7):
            byte = r.u8("kryo string length")
            length |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
    if length == 0:
        return None
    count = length - 1
    if count > r.remaining:
        raise FormatError("kryo string length", r.offset, f"at most {r.remaining} chars", count)
    if _HIGH_BIT.search(r.data, r.pos, r.pos + count) is None:  # every char one byte: ASCII (count <= remaining)
        r.pos += count
        return bytes(r.data[r.pos - count:r.pos]).decode("ascii")
    units = bytearray()
    for _ in range(count):
        at = r.offset
        b = r.u8("kryo string char")
        kind = b >> 4
        if kind < 8:
            unit = b
        elif kind in (12, 13):
            unit = (b & 0x1F) << 6 | r.u8("kryo string char") & 0x3F
        elif kind == 14:
            unit = (b & 0x0F) << 12 | (r.u8("kryo string char") & 0x3F) << 6 | r.u8("kryo string char") & 0x3F
        else:
            raise FormatError("kryo string char", at, "a 1-, 2- or 3-byte char", f"0x{b:02x}")
        units += unit.to_bytes(2, "big")
    return units.decode("utf-16-be", errors="surrogatepass")


#: Kryo's own registrations whose objects are not tracked by reference (``Util.isWrapperClass``).
_WRAPPERS = {INT, FLOAT, BOOLEAN, BYTE, CHAR, SHORT, LONG, DOUBLE}
#: Fixed-width values: Kryo 2.24's ``Output`` writes them big-endian, Kryo 5's little-endian.
_FIXED = {FLOAT: ("f", 4), DOUBLE: ("d", 8), SHORT: ("h", 2), CHAR: ("H", 2)}
_VARIABLE: dict[int, Callable[[ByteReader], Any]] = {
    INT: lambda r: _unzigzag(read_varint(r, "kryo int"), 32),
    LONG: lambda r: read_varlong(r, "kryo long"),
    BOOLEAN: lambda r: r.bool("kryo boolean"),
    BYTE: lambda r: r.i8("kryo byte"),
}
#: The array classes Kryo's ``DefaultArraySerializers`` write (by name: arrays are not registered), by
#: element: a length + 1 varint (0 null), then the elements (``int[]`` zig-zag varints, ``long[]`` zig-zag
#: varlongs, ``boolean[]`` a byte each, ``byte[]`` the bytes, the others fixed-width); a ``char[]`` is read
#: as a string, a ``byte[]`` as bytes.
PRIMITIVE_ARRAYS = {"[I": INT, "[J": LONG, "[S": SHORT, "[C": CHAR, "[F": FLOAT, "[D": DOUBLE, "[Z": BOOLEAN, "[B": BYTE}
#: Object arrays (``ObjectArraySerializer``) whose elements are read here: ``Object[]`` has each element
#: with its class, the final classes' arrays each element as ``writeObjectOrNull`` (no class).
OBJECT_ARRAYS = {
    "[Ljava.lang.Object;": None, "[Ljava.lang.String;": STRING, "[Ljava.lang.Integer;": INT, "[Ljava.lang.Long;": LONG,
    "[Ljava.lang.Short;": SHORT, "[Ljava.lang.Byte;": BYTE, "[Ljava.lang.Boolean;": BOOLEAN,
    "[Ljava.lang.Character;": CHAR, "[Ljava.lang.Float;": FLOAT, "[Ljava.lang.Double;": DOUBLE,
}
#: JDK classes of Kryo's ``DefaultSerializers`` read here (by name: they are not registered): a
#: ``BigInteger`` as a length + 1 varint (0 null) and its two's complement bytes, big-endian (an int); a
#: ``BigDecimal`` that unscaled value, then its scale as a zig-zag varint (its plain text); a ``Date`` as
#: ``readLong(true)`` (epoch milliseconds) - the same in both generations. A ``TreeMap`` (entries as a
#: ``HashMap``'s) is read when it has no comparator (its comparator comes before the size in Kryo 2.24,
#: after it in Kryo 5).
BIG_INTEGER, BIG_DECIMAL, DATE, TREE_MAP = "java.math.BigInteger", "java.math.BigDecimal", "java.util.Date", "java.util.TreeMap"
#: The id of the first class of the snapshot's ``kryo registrations`` (the type class, then the user's
#: registrations in order): Kryo's ten own registrations and the 75 of Flink's chill registrar come first
#: (the same in Flink 1.20 and 2.1: fixtures ``flink-*-kryo``).
FIRST_USER_REGISTRATION = 85
#: Flink's chill registrations of JDK classes (``FlinkChillPackageRegistrar``, Flink 1.x and 2.x alike),
#: from id 73; ids 10 to 72 are the Scala classes Flink 1.x's ``FlinkScalaKryoInstantiator`` registers where
#: ``flink-scala`` is on the classpath (else Flink falls back to Kryo's own and these, with the same ids).
CHILL_JAVA_FIRST = 73
CHILL_JAVA = ("java.util.Arrays$ArrayList", "java.util.BitSet", "java.util.PriorityQueue", "java.util.regex.Pattern",
              "java.sql.Date", "java.sql.Time", "java.sql.Timestamp", "java.net.URI", "java.net.InetSocketAddress",
              "java.util.UUID", "java.util.Locale", "java.text.SimpleDateFormat")
#: Classes Kryo writes by name (not registered) whose default serializers are read here.
COLLECTIONS = ("java.util.ArrayList", "java.util.LinkedList", "java.util.HashSet", "java.util.LinkedHashSet")
#: ``TreeSet`` (``TreeSetSerializer``): a collection whose comparator (null here) Kryo writes too.
SORTED_SETS = ("java.util.TreeSet",)
MAPS = ("java.util.HashMap", "java.util.LinkedHashMap")
#: ``java.util.UUID``: registered by Flink's chill registrations (``FlinkChillPackageRegistrar``, ids 73
#: to 84, in Flink 1.x and 2.x alike) as id 82 with its own serializer; its nodes are named by class.
UUID_REGISTRATION, UUID = 82, "java.util.UUID"
#: Flink's other chill registrations read here (their nodes keep the registration id): ``Arrays.asList``
#: (Kryo 2.24: chill's size and elements with their classes; Kryo 5: a collection), ``BitSet`` (the
#: number of words, then each ``long``, big-endian in Kryo 2.24, little-endian in Kryo 5: the set bits'
#: indexes), ``Pattern`` (its text; Kryo 5 also its flags, which chill's serializer drops), ``java.sql.Date``
#: and ``Time`` (epoch ms as a positive varlong), ``Timestamp`` (chill: ``getTime()`` and the nanos; Kryo 5:
#: the whole seconds' ms and the nanos; ``{"time", "nanos"}``), ``URI`` (its text) and ``Locale`` (Kryo 5:
#: language, country, variant strings; Kryo 2.24: Java serialization, the first one of a graph only; its
#: ``language_COUNTRY_variant`` text), ``PriorityQueue`` (as a ``TreeSet``: a null comparator and the
#: elements in the queue's heap order) and ``InetSocketAddress`` (its host string and port: ``{"host", "port"}``).
AS_LIST, BIT_SET, PRIORITY_QUEUE, PATTERN, SQL_DATE, SQL_TIME, TIMESTAMP, URI_ID, INET_SOCKET_ADDRESS, LOCALE = (
    73, 74, 75, 76, 77, 78, 79, 80, 81, 83)
CHILL_READ = frozenset((AS_LIST, BIT_SET, PRIORITY_QUEUE, PATTERN, SQL_DATE, SQL_TIME, TIMESTAMP, URI_ID, INET_SOCKET_ADDRESS, LOCALE))
KNOWN_NAMES = frozenset((*COLLECTIONS, *SORTED_SETS, *MAPS, *PRIMITIVE_ARRAYS, *OBJECT_ARRAYS, BIG_INTEGER, BIG_DECIMAL, DATE, TREE_MAP))
#: Kryo generations: 2 (Kryo 2.24, Flink 1.x) and 5 (Kryo 5, Flink 2.x) differ in collection headers.
GENERATIONS = (5, 2)


def _unsupported(at: int, detail: str) -> UnsupportedSerializerError:
    return UnsupportedSerializerError(KRYO_SNAPSHOT, at, detail=detail)


def read_varint_flag(r: ByteReader, field: str) -> tuple[bool, int]:
    """Kryo 5's ``readVarIntFlag``: the first byte's 0x80 is a flag, 0x40 says more bytes follow, its
    6 low bits and then 7 bits a byte are the value."""
    first = r.u8(field)
    value = first & 0x3F
    if first & 0x40:
        for shift in range(6, 34, 7):
            byte = r.u8(field)
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
    return bool(first & 0x80), value


class Registrations:
    """The user's Kryo registrations from the ``KryoSerializerSnapshot``: class names and serializer
    classes (None: Kryo's default serializer for the class) by registration id."""

    def __init__(self, classes: list[str] | None = None, serializers: list[str | None] | None = None):
        self.classes = list(classes or [])
        self.serializers = list(serializers or [None] * len(self.classes))

    def default_class(self, registration_id: int) -> str | None:
        """The class registered at ``registration_id`` with Kryo's default serializer, when it is one whose
        layout this module reads (:data:`KNOWN_NAMES`: a ``KryoSerializer`` of ``ArrayList`` or ``HashMap``,
        e.g. a POJO field declared so, registers its type class first): its objects are written as when
        the class is written by name. Else None."""
        index = registration_id - FIRST_USER_REGISTRATION
        if not 0 <= index < len(self.classes) or (index < len(self.serializers) and self.serializers[index] is not None):
            return None
        name = self.classes[index]
        return name if name in KNOWN_NAMES else None

    def describe(self, registration_id: int) -> str:
        index = registration_id - FIRST_USER_REGISTRATION
        if CHILL_JAVA_FIRST <= registration_id < FIRST_USER_REGISTRATION:
            return (f"registration id {registration_id}, {CHILL_JAVA[registration_id - CHILL_JAVA_FIRST]}, written by the serializer "
                    "of Flink's chill registrations (not decoded yet)")
        if 10 <= registration_id < CHILL_JAVA_FIRST:
            return (f"registration id {registration_id}, one of the Scala classes Flink 1.x's FlinkScalaKryoInstantiator "
                    "registers when flink-scala is on the classpath (not decoded)")
        if not 0 <= index < len(self.classes):
            return f"registration id {registration_id} (not one of the snapshot's registrations)"
        name, serializer = self.classes[index], self.serializers[index] if index < len(self.serializers) else "?"
        if serializer is None:
            return (f"registration id {registration_id}, {name}, written by the serializer Kryo chooses for it "
                    "(its FieldSerializer's fields, an enum's ordinal): the layout is in the job's classes, not in the snapshot")
        return f"registration id {registration_id}, {name}, written by its own serializer {serializer}, whose format is the job's"


def _by_name(name: str) -> str:
    return (f"class {name} (written by name, with the serializer Kryo chooses for it: its FieldSerializer's "
            "fields, an enum's ordinal): the layout is in the job's classes, not in the snapshot")


@dataclass(eq=False)
class Node:
    """One object of a Kryo graph as it was written: its class (a registration id, a class name, or
    None for null), its value (a leaf's Python value; a collection's or object array's element nodes; a
    map's ``(key, value)`` node pairs; a primitive array's values; an enum's ordinal; a ``BigDecimal``'s
    ``(unscaled, scale)``, a ``UUID``'s ``(most, least)`` significant bits), and for a back-reference the
    node it names (``same``). :func:`plain` gives the Python value export shows; the encoder
    (:mod:`repair.formats.flink.kryo_encoder`) writes nodes back byte for byte."""

    cls: int | str | None
    value: Any = None
    same: "Node | None" = None
    enum: bool = False
    #: What a serializer writes before the value and the value does not show (Kryo 2.24's
    #: ``Arrays.asList``: the array's component class).
    header: Any = None
    #: The registration id a class of :data:`KNOWN_NAMES` was written under (``cls`` its name), or None.
    registration: int | None = None

    @property
    def written_class(self) -> int | str | None:
        """The class as the bytes name it: its registration id, else ``cls``."""
        return self.cls if self.registration is None else self.registration


NULL = Node(None)


def plain(node: Node, memo: dict[int, Any] | None = None) -> Any:
    """The Python value of ``node``: a back-reference is the value it names (the same Python object,
    as Kryo gives the same Java object), a list may hold itself."""
    memo = {} if memo is None else memo
    while node.same is not None:
        node = node.same
    if id(node) in memo:
        return memo[id(node)]
    cls, value = node.cls, node.value
    if cls is None or value is None:
        return None
    if node.enum:
        return {"enum": cls, "ordinal": value}
    if cls in COLLECTIONS or cls in SORTED_SETS or cls in OBJECT_ARRAYS:
        out: list = []
        memo[id(node)] = out
        out.extend(plain(element, memo) for element in value)
        return out
    if cls in CHILL_READ:
        return _plain_chill(node, memo)
    if cls in MAPS or cls == TREE_MAP:
        entries: list = []
        memo[id(node)] = entries
        entries.extend((plain(k, memo), plain(v, memo)) for k, v in value)
        return entries
    if cls == BIG_DECIMAL:
        return decimal_text(*value)
    if cls == UUID:
        most, least = value
        return str(uuid.UUID(int=(most % (1 << 64)) << 64 | least % (1 << 64)))
    if cls in PRIMITIVE_ARRAYS and PRIMITIVE_ARRAYS[cls] == CHAR:  # type: ignore[index]
        return "".join(value)
    return value


def locale_text(language: str, country: str, variant: str) -> str:
    """``Locale.toString()`` of a language, country and variant (no script or extensions)."""
    if variant:
        return f"{language}_{country}_{variant}"
    return f"{language}_{country}" if country else language


def _plain_chill(node: Node, memo: dict[int, Any]) -> Any:
    cls, value = node.cls, node.value
    if cls in (AS_LIST, PRIORITY_QUEUE):
        out: list = []
        memo[id(node)] = out
        out.extend(plain(element, memo) for element in value)
        return out
    if cls == PATTERN:
        return {"pattern": value[0]} if len(value) == 1 else {"pattern": value[0], "flags": value[1]}
    if cls == TIMESTAMP:
        return {"time": value[0], "nanos": value[1]}
    if cls == LOCALE:
        return locale_text(*value[:3])
    if cls == INET_SOCKET_ADDRESS:
        return {"host": value[0], "port": value[1]}
    return value


class _Graph:
    """One ``readClassAndObject`` graph: its class-name table (Kryo numbers the classes written by name
    per graph) and the Kryo generation whose collection headers and byte order to read."""

    def __init__(self, r: ByteReader, generation: int, type_class: str | None, registrations: Registrations | None = None):
        self.r, self.generation, self.type_class = r, generation, type_class
        self.registrations = registrations or Registrations()
        self.names: dict[int, str] = {}
        #: The tracked objects read so far, by reference id (Kryo numbers them in the order it meets them).
        self.objects: list[Node] = []
        self.fixed = fixed_codecs(generation)
        #: Whether a Java serialization stream was read in this graph (Kryo 2.24's ``JavaSerializer`` keeps one per graph).
        self.java_stream = False

    def read_class(self) -> int | str | None:
        """A registration id, a class name, or None (null)."""
        r = self.r
        at = r.offset
        tag = read_varint(r, "kryo class")
        if tag == 0:
            return None
        if tag != 1:
            return tag - 2
        name_id = read_varint(r, "kryo class name id")
        if name_id not in self.names:
            name = read_string(r)
            if name is None:
                raise FormatError("kryo class name", at, "a class name", "null")
            self.names[name_id] = name
        return self.names[name_id]

    def read_root(self) -> Node:
        """The graph's object; a class written by name whose bytes are exactly an enum's is read as one."""
        cls = self.read_class()
        if cls is None:
            return NULL
        if isinstance(cls, str) and cls not in KNOWN_NAMES:
            enum = self._enum(cls)
            if enum is not None:
                return enum
        return self.read_object(cls, nullable=False)

    def _enum(self, cls: str) -> Node | None:
        """Kryo's ``EnumSerializer``: the ordinal + 1 as a varint; Kryo 2.24 tracks enums by reference (a
        new-object marker first), Kryo 5 does not. Read only where those bytes are the whole value."""
        r = self.r
        start = r.pos
        try:
            if self.generation == 2 and read_varint(r, "kryo reference marker") != 1:
                raise FormatError("kryo enum", r.offset, "a new-object marker", "another")
            ordinal = read_varint(r, "kryo enum ordinal")
        except FormatError:
            ordinal = 0
        if ordinal >= 1 and r.pos == r.end:
            node = Node(cls, ordinal - 1, enum=True)
            if self.generation == 2:
                self.objects.append(node)
            return node
        r.pos = start
        return None

    def read_class_and_object(self) -> Node:
        cls = self.read_class()
        if cls is None:
            return NULL
        return self.read_object(cls, nullable=False)

    def wrapper(self, cls: int) -> Any:
        """A primitive or its wrapper (no reference marker, no null marker)."""
        if cls in self.fixed:
            unpack, size = self.fixed[cls]
            value = unpack.unpack(self.r.raw(size, "kryo " + _NAMES[cls]))[0]
            return chr(value) if cls == CHAR else value
        return _VARIABLE[cls](self.r)

    def read_object(self, cls: int | str, *, nullable: bool) -> Node:
        """An object of ``cls``: its reference marker first if Kryo tracks it; a wrapper that may be null
        (``readObjectOrNull``) has a null byte instead."""
        r = self.r
        at = r.offset
        if cls in _WRAPPERS:
            if nullable and not r.bool("kryo not null"):
                return NULL
            return Node(cls, self.wrapper(cls))  # type: ignore[arg-type]
        registration = None
        if isinstance(cls, int) and self.registrations.default_class(cls) is not None:
            registration, cls = cls, self.registrations.default_class(cls)
        if isinstance(cls, int) and cls not in (STRING, UUID_REGISTRATION) and cls not in CHILL_READ:
            raise _unsupported(at, f"cannot decode Kryo {self.type_class}: a {self.registrations.describe(cls)}")
        if isinstance(cls, str) and cls not in KNOWN_NAMES:
            raise _unsupported(at, f"cannot decode Kryo {self.type_class}: a {_by_name(cls)}")
        marker = read_varint(r, "kryo reference marker")
        if marker == 0:
            return NULL
        if marker != 1:  # the same object as one read before in this graph
            if not marker - 2 < len(self.objects):
                raise FormatError("kryo reference", at, f"a reference id below {len(self.objects)}", marker - 2)
            return Node(cls, same=self.objects[marker - 2], registration=registration)
        node = Node(UUID if cls == UUID_REGISTRATION else cls, registration=registration)
        self.objects.append(node)
        if cls == STRING:
            node.value = read_string(r)
        elif cls == UUID_REGISTRATION:
            node.value = self._uuid()
        elif cls in CHILL_READ:
            node.value = self._chill(cls, at)  # type: ignore[arg-type]
            if cls == AS_LIST and self.generation == 2:
                node.header = self.component
        elif cls in COLLECTIONS or cls in SORTED_SETS:
            node.value = self._collection(sorted_set=cls in SORTED_SETS)
        elif cls in MAPS or cls == TREE_MAP:
            node.value = self._map(sorted_map=cls == TREE_MAP)
        elif cls == BIG_INTEGER:
            node.value = self._unscaled()
        elif cls == BIG_DECIMAL:
            unscaled = self._unscaled()
            scale = _unzigzag(read_varint(r, "kryo BigDecimal scale"), 32)
            node.value = None if unscaled is None else (unscaled, scale)
        elif cls == DATE:
            node.value = read_varlong(r, "kryo Date", zigzag=False)
        elif cls in PRIMITIVE_ARRAYS:
            node.value = self._primitive_array(PRIMITIVE_ARRAYS[cls])  # type: ignore[index]
        else:
            node.value = self._object_array(OBJECT_ARRAYS[cls])  # type: ignore[index]
        return node

    def _chill(self, cls: int, at: int) -> Any:
        r = self.r
        if cls == AS_LIST:
            if self.generation == 5:
                return self._collection()
            size = read_varint(r, "kryo Arrays.asList size")
            if size > r.remaining:
                raise FormatError("kryo Arrays.asList size", r.offset, f"at most {r.remaining} elements", size)
            self.component = self.read_class()  # the array's component class, then every element with its own
            return [self.read_class_and_object() for _ in range(size)]
        if cls == PRIORITY_QUEUE:
            return self._collection(sorted_set=True)
        if cls == INET_SOCKET_ADDRESS:
            return read_string(r), read_varint(r, "kryo InetSocketAddress port")
        if cls == BIT_SET:
            words = read_varint(r, "kryo BitSet words")
            if words * 8 > r.remaining:
                raise FormatError("kryo BitSet words", r.offset, f"at most {r.remaining // 8} words", words)
            codec = struct.Struct((">" if self.generation == 2 else "<") + "Q")
            return [i * 64 + bit for i in range(words) for word in [codec.unpack(r.raw(8, "kryo BitSet word"))[0]]
                    for bit in range(64) if word >> bit & 1]
        if cls == PATTERN:
            pattern = read_string(r)
            return (pattern,) if self.generation == 2 else (pattern, read_varint(r, "kryo Pattern flags"))
        if cls in (SQL_DATE, SQL_TIME):
            return read_varlong(r, "kryo java.sql date", zigzag=False)
        if cls == TIMESTAMP:  # as (getTime(), getNanos())
            time, nanos = read_varlong(r, "kryo Timestamp", zigzag=False), read_varint(r, "kryo Timestamp nanos")
            return (time, nanos) if self.generation == 2 else (time + nanos // 1_000_000, nanos)
        if cls == URI_ID:
            return read_string(r)
        if self.generation == 5:  # LOCALE
            return read_string(r), read_string(r), read_string(r), None
        return self._java_locale(at)

    def _java_locale(self, at: int) -> tuple[str, str, str, bytes]:
        """Kryo 2.24's ``Locale``: chill's ``JavaSerializer``, a Java serialization stream (one per graph:
        a second object would continue it without its header)."""
        if self.java_stream:
            raise _unsupported(at, f"cannot decode Kryo {self.type_class}: a second Java-serialized object in one value")
        self.java_stream = True
        r = self.r
        start = r.pos
        try:
            value, consumed = read_java_object(bytes(r.data[start:r.end]), base=r.offset)
        except FormatError as error:
            raise _unsupported(at, f"cannot decode Kryo {self.type_class}: a Java-serialized Locale ({error})") from None
        fields = [value.get(name) if isinstance(value, JavaObject) else None for name in ("language", "country", "variant")]
        if not isinstance(value, JavaObject) or value.class_name != "java.util.Locale" or not all(isinstance(f, str) for f in fields):
            raise _unsupported(at, f"cannot decode Kryo {self.type_class}: a Java-serialized object that is no Locale")
        r.pos = start + consumed
        return fields[0], fields[1], fields[2], bytes(r.data[start:r.pos])

    def _uuid(self) -> tuple[int, int]:
        """The ``UUID`` serializer of Flink's chill registrations (id 82): its most and least significant
        bits, as zig-zag varlongs in Kryo 2.24 (chill's), as 8 little-endian bytes each in Kryo 5."""
        if self.generation == 2:
            return read_varlong(self.r, "kryo UUID"), read_varlong(self.r, "kryo UUID")
        return struct.unpack("<qq", self.r.raw(16, "kryo UUID"))

    def _unscaled(self) -> int | None:
        """``BigIntegerSerializer``: a length + 1 varint (0 null), then ``BigInteger.toByteArray``."""
        length = self._array_length()
        return None if length is None else int.from_bytes(self.r.raw(length, "kryo BigInteger"), "big", signed=True)

    def _no_comparator(self) -> None:
        at = self.r.offset
        if self.read_class_and_object().cls is not None:
            raise _unsupported(at, f"cannot decode Kryo {self.type_class}: a sorted collection with a comparator")

    def _array_length(self) -> int | None:
        r = self.r
        length = read_varint(r, "kryo array length")
        if length == 0:
            return None
        if length - 1 > r.remaining:
            raise FormatError("kryo array length", r.offset, f"at most {r.remaining} elements", length - 1)
        return length - 1

    def _primitive_array(self, element: int) -> Any:
        length = self._array_length()
        if length is None:
            return None
        if element == BYTE:
            return self.r.raw(length, "kryo byte[]")
        return [self.wrapper(element) for _ in range(length)]

    def _object_array(self, element: int | None) -> list | None:
        """``ObjectArraySerializer``: ``Object[]`` has each element with its class, the final classes'
        arrays each as ``writeObjectOrNull``."""
        length = self._array_length()
        if length is None:
            return None
        return [self.read_class_and_object() if element is None else self.read_object(element, nullable=True) for _ in range(length)]

    def _collection(self, sorted_set: bool = False) -> list | None:
        """``CollectionSerializer`` without a known element class; a ``TreeSet``'s (``sorted_set``)
        comparator must be null (Kryo 2.24 writes it before the size, Kryo 5 after it)."""
        r = self.r
        if self.generation == 2:  # a varint size, then every element with its class
            if sorted_set:
                self._no_comparator()
            size = read_varint(r, "kryo collection size")
            if size > r.remaining:
                raise FormatError("kryo collection size", r.offset, f"at most {r.remaining} elements", size)
            return [self.read_class_and_object() for _ in range(size)]
        same_type, length = read_varint_flag(r, "kryo collection size")
        if length == 0:
            return None
        length -= 1
        # every element takes a byte at least, but in a list of nulls only (its element class null)
        if length > (r.remaining if not same_type else max(r.remaining, _MAX_NULLS)):
            raise FormatError("kryo collection size", r.offset, f"at most {r.remaining} elements", length)
        if sorted_set:
            self._no_comparator()
        if length and not same_type:
            return [self.read_class_and_object() for _ in range(length)]
        if not length:
            return []
        cls = self.read_class()
        if cls is None:  # all elements null: no bytes of their own
            return [NULL] * length
        if length > r.remaining:
            raise FormatError("kryo collection size", r.offset, f"at most {r.remaining} elements", length)
        has_null = r.bool("kryo collection has null")
        return [self.read_object(cls, nullable=has_null) for _ in range(length)]

    def _map(self, sorted_map: bool = False) -> list[tuple[Node, Node]] | None:
        """``MapSerializer`` without known key and value classes: entries as ``[(key, value), ...]``; a
        ``TreeMap``'s (``sorted_map``) comparator must be null."""
        r = self.r
        if sorted_map and self.generation == 2:
            self._no_comparator()
        size = read_varint(r, "kryo map size")
        if self.generation != 2:
            if size == 0:
                return None
            size -= 1
            if sorted_map:
                self._no_comparator()
        if size > r.remaining:
            raise FormatError("kryo map size", r.offset, f"at most {r.remaining} entries", size)
        out = []
        for _ in range(size):
            key = self.read_class_and_object()
            out.append((key, self.read_class_and_object()))
        return out


#: The most elements read of a Kryo 5 collection of nulls only (they take no bytes to bound them by).
_MAX_NULLS = 1 << 20


def fixed_codecs(generation: int) -> dict[int, tuple[struct.Struct, int]]:
    """The fixed-width wrappers' codecs of ``generation``: big-endian in Kryo 2.24, little-endian in Kryo 5."""
    order = ">" if generation == 2 else "<"
    return {cls: (struct.Struct(order + code), size) for cls, (code, size) in _FIXED.items()}


def read_node(r: ByteReader, generation: int, type_class: str | None = None, registrations: Registrations | None = None) -> Node:
    """The graph ``Kryo.writeClassAndObject`` wrote at ``r`` in ``generation``, as nodes."""
    return _Graph(r, generation, type_class, registrations).read_root()


def read_class_and_object(
    r: ByteReader, type_class: str | None = None, generation: int | None = None, registrations: Registrations | None = None
) -> Any:
    """``Kryo.readClassAndObject`` of one graph (see the module docstring). Without ``generation``, both
    Kryo generations are tried: a reading that ends where ``r``'s data ends wins; readings that differ
    are ambiguous and raise as unsupported (raw bytes kept)."""
    if generation is not None:
        return plain(read_node(r, generation, type_class, registrations))
    start = r.pos
    found: list[tuple[int, Any]] = []
    first_error: FormatError | None = None
    for candidate in GENERATIONS:
        r.pos = start
        try:
            value = plain(read_node(r, candidate, type_class, registrations))
        except FormatError as error:
            first_error = first_error or error
            continue
        found.append((r.pos, value))
    if not found:  # Kryo is read for some classes only: bytes it does not read are not understood, not corrupt
        r.pos = start
        if isinstance(first_error, UnsupportedSerializerError):
            raise first_error
        raise _unsupported(r.offset, f"cannot decode Kryo {type_class}: {first_error}")
    # A key is followed by its namespace, a list element by a delimiter: the end of the data is not
    # always the value's. Where no reading ends there, the readings must agree.
    at_end = [item for item in found if item[0] == r.end] or found
    if any(value != at_end[0][1] or end != at_end[0][0] for end, value in at_end[1:]):
        r.pos = start
        raise _unsupported(r.offset, f"cannot decode Kryo {type_class}: the bytes read differently as Kryo 2.24 and Kryo 5")
    r.pos = at_end[0][0]
    return at_end[0][1]
