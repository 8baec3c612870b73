"""The registry of Flink's leaf serializers: each snapshot class named once, and what this toolkit can do
with the values it writes.

A leaf serializer is a ``SimpleTypeSerializerSnapshot`` subclass (or a table serializer without nested
snapshots): its values' bytes follow from its class alone. Each one is a :class:`Serializer` constant here
(``STRING``, ``LONG``, ``VOID_NAMESPACE``, ...). The modules that work on values register their
implementation of a *capability* against those constants with :func:`register`, which hands back the
module's own lookup table (snapshot class name -> implementation):

==================  ===============================================  ==================================
capability          what it is                                       registered by
==================  ===============================================  ==================================
``decode``          the exact reader and Flink's ``getLength()``     :mod:`~.values`
``fast decode``     the reader over ``bytes`` (``FastDecode``)       :mod:`~.values`
``Arrow type``      the Arrow type of the decoded values             :mod:`~.arrow`
``column reader``   the column-wise reader (pyarrow kernels)         :mod:`~.in_rocksdb.keyed_columns`
``encode``          the writer of a value (write-savepoint)          :mod:`~.value_encoders`
``key hash``        the key's Java ``hashCode`` (its key group)      :mod:`~.key_hash`
==================  ===============================================  ==================================

A serializer lacking a capability falls back quietly (a slower path, raw bytes, a refused write-back), so
every gap is written down in :data:`EXEMPTIONS` with the reason; ``tests/test_serializer_registry.py``
fails on a gap without one, on an exemption that is no longer true, and on a serializer
``docs/serializers.md`` does not list with its capabilities. Composite serializers (List, Map, Tuple,
POJO, Row, TTL, ...) are built from their nested snapshots by each module and are not in this registry.

Pure and cheap: it imports nothing of the toolkit (nor pyarrow); the capability tables are complete once the
:data:`PROVIDERS` are imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

DECODE = "decode"
FAST_DECODE = "fast decode"
ARROW_TYPE = "Arrow type"
COLUMN_READER = "column reader"
ENCODE = "encode"
KEY_HASH = "key hash"
CAPABILITIES = (DECODE, FAST_DECODE, COLUMN_READER, ARROW_TYPE, ENCODE, KEY_HASH)

#: The module registering each capability (importing them all makes :func:`registered` complete).
PROVIDERS = {
    DECODE: "repair.formats.flink.values",
    FAST_DECODE: "repair.formats.flink.values",
    ARROW_TYPE: "repair.formats.flink.arrow",
    COLUMN_READER: "repair.formats.flink.in_rocksdb.keyed_columns",
    ENCODE: "repair.formats.flink.value_encoders",
    KEY_HASH: "repair.formats.flink.key_hash",
}


@dataclass(frozen=True)
class Serializer:
    """One leaf serializer: its snapshot class, the type it serializes (what ``describe`` shows) and its
    name in docs/serializers.md."""

    class_name: str
    type_name: str
    name: str

    def __str__(self) -> str:
        return self.name


_F = "org.apache.flink."
_B = _F + "api.common.typeutils.base."
_SERIALIZERS: dict[str, Serializer] = {}


def _serializer(class_name: str, type_name: str, name: str) -> Serializer:
    if class_name in _SERIALIZERS:
        raise ValueError(f"serializer snapshot class {class_name} is registered twice")
    serializer = _SERIALIZERS[class_name] = Serializer(class_name, type_name, name)
    return serializer


def _base(kind: str, type_name: str) -> Serializer:
    """``org.apache.flink.api.common.typeutils.base.<kind>Serializer$<kind>SerializerSnapshot``."""
    return _serializer(f"{_B}{kind}Serializer${kind}SerializerSnapshot", type_name, kind)


def _array(kind: str, type_name: str) -> Serializer:
    return _serializer(f"{_B}array.{kind}ArraySerializer${kind}ArraySerializerSnapshot", type_name, type_name)


# -- flink-core: boxed JDK types, java.time, Flink's Value types ---------------------------------------
STRING = _base("String", "String")
LONG = _base("Long", "Long")
INT = _base("Int", "Integer")
SHORT = _base("Short", "Short")
BYTE = _base("Byte", "Byte")
BOOLEAN = _base("Boolean", "Boolean")
DOUBLE = _base("Double", "Double")
FLOAT = _base("Float", "Float")
CHAR = _base("Char", "Character")
VOID = _base("Void", "Void")
DATE = _base("Date", "java.util.Date")
SQL_DATE = _base("SqlDate", "java.sql.Date")
SQL_TIME = _base("SqlTime", "java.sql.Time")
SQL_TIMESTAMP = _base("SqlTimestamp", "java.sql.Timestamp")
BIG_INT = _base("BigInt", "BigInteger")
BIG_DEC = _base("BigDec", "BigDecimal")
INSTANT = _base("Instant", "Instant")
LOCAL_DATE = _base("LocalDate", "LocalDate")
LOCAL_TIME = _base("LocalTime", "LocalTime")
LOCAL_DATE_TIME = _base("LocalDateTime", "LocalDateTime")
STRING_VALUE = _base("StringValue", "StringValue")
INT_VALUE = _base("IntValue", "IntValue")
LONG_VALUE = _base("LongValue", "LongValue")
SHORT_VALUE = _base("ShortValue", "ShortValue")
BYTE_VALUE = _base("ByteValue", "ByteValue")
BOOLEAN_VALUE = _base("BooleanValue", "BooleanValue")
DOUBLE_VALUE = _base("DoubleValue", "DoubleValue")
FLOAT_VALUE = _base("FloatValue", "FloatValue")
CHAR_VALUE = _base("CharValue", "CharValue")
NULL_VALUE = _base("NullValue", "NullValue")
VARIANT = _base("Variant", "Variant")
# -- flink-core: arrays ------------------------------------------------------------------------------
BYTE_ARRAY = _array("BytePrimitive", "byte[]")
INT_ARRAY = _array("IntPrimitive", "int[]")
LONG_ARRAY = _array("LongPrimitive", "long[]")
SHORT_ARRAY = _array("ShortPrimitive", "short[]")
CHAR_ARRAY = _array("CharPrimitive", "char[]")
FLOAT_ARRAY = _array("FloatPrimitive", "float[]")
DOUBLE_ARRAY = _array("DoublePrimitive", "double[]")
BOOLEAN_ARRAY = _array("BooleanPrimitive", "boolean[]")
STRING_ARRAY = _array("String", "String[]")
# -- namespaces and windows, tuples, Java serialization ------------------------------------------------
VOID_NAMESPACE = _serializer(
    _F + "runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot", "VoidNamespace", "VoidNamespace"
)
QUERYABLE_VOID_NAMESPACE = _serializer(
    _F + "queryablestate.client.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot", "VoidNamespace",
    "VoidNamespace (queryable state)",
)
TIME_WINDOW = _serializer(
    _F + "streaming.api.windowing.windows.TimeWindow$Serializer$TimeWindowSerializerSnapshot", "TimeWindow", "TimeWindow"
)
GLOBAL_WINDOW = _serializer(
    _F + "streaming.api.windowing.windows.GlobalWindow$Serializer$GlobalWindowSerializerSnapshot", "GlobalWindow",
    "GlobalWindow",
)
TUPLE0 = _serializer(_F + "api.java.typeutils.runtime.Tuple0SerializerSnapshot", "Tuple0", "Tuple0")
JAVA = _serializer(
    _F + "runtime.state.JavaSerializer$JavaSerializerSnapshot", "Serializable (Java serialization)", "JavaSerializer"
)
# -- flink-table-runtime / flink-table-api-java: internal data structures of SQL state ------------------
STRING_DATA = _serializer(
    _F + "table.runtime.typeutils.StringDataSerializer$StringDataSerializerSnapshot", "STRING", "StringDataSerializer"
)
NULL = _serializer(_F + "table.dataview.NullSerializer$NullSerializerSnapshot", "NULL", "NullSerializer")
SQL_TIME_WINDOW = _serializer(
    _F + "table.runtime.operators.window.TimeWindow$Serializer$TimeWindowSerializerSnapshot", "TimeWindow",
    "TimeWindow (SQL)",
)
SQL_COUNT_WINDOW = _serializer(
    _F + "table.runtime.operators.window.CountWindow$Serializer$CountWindowSerializerSnapshot", "CountWindow",
    "CountWindow (SQL)",
)

#: Every leaf serializer, in the order above.
SERIALIZERS: tuple[Serializer, ...] = tuple(_SERIALIZERS.values())


@dataclass(frozen=True)
class Exemption:
    """Capabilities some serializers lack on purpose, and why."""

    capabilities: tuple[str, ...]
    serializers: tuple[Serializer, ...]
    reason: str


_NOT_DECODED = (
    DATE, SQL_DATE, SQL_TIME, SQL_TIMESTAMP, BIG_INT, BIG_DEC, INSTANT, LOCAL_DATE, LOCAL_TIME, LOCAL_DATE_TIME,
    STRING_VALUE, INT_VALUE, LONG_VALUE, SHORT_VALUE, BYTE_VALUE, BOOLEAN_VALUE, DOUBLE_VALUE, FLOAT_VALUE,
    CHAR_VALUE, NULL_VALUE, VARIANT, STRING_ARRAY, TUPLE0, SQL_TIME_WINDOW, SQL_COUNT_WINDOW,
)

#: Every capability a registered serializer lacks, with the reason (the test holds that there are no
#: others, and that each one listed is really missing).
EXEMPTIONS: tuple[Exemption, ...] = (
    Exemption(CAPABILITIES, _NOT_DECODED,
              "wire format not implemented yet: the snapshot is read and described, values stay raw bytes"),
    Exemption(CAPABILITIES, (JAVA,),
              "Java serialization of user classes: the stream names classes whose fields only the JVM knows"),
    Exemption((FAST_DECODE, COLUMN_READER), (STRING_DATA, NULL),
              "SQL state is decoded by the exact readers of row_data, row by row (no fast path yet)"),
    Exemption((ENCODE,), (VOID, NULL),
              "the values are always null and never part of a RocksDB key: their raw bytes are kept"),
    Exemption((ENCODE,), (STRING_DATA,),
              "written inside RowData and ExternalSerializer by encoder_for's SQL branch, never as a column of "
              "its own (writes_serializer is false)"),
    Exemption((KEY_HASH,), (BYTE_ARRAY, BOOLEAN_ARRAY, CHAR_ARRAY, SHORT_ARRAY, INT_ARRAY, LONG_ARRAY, FLOAT_ARRAY,
                            DOUBLE_ARRAY),
              "an array's hashCode is its identity: Flink refuses arrays as keys"),
    Exemption((KEY_HASH,), (VOID, NULL),
              "the value is always null, and Flink refuses null keys"),
    Exemption((KEY_HASH,), (VOID_NAMESPACE, QUERYABLE_VOID_NAMESPACE, TIME_WINDOW, GLOBAL_WINDOW),
              "a namespace serializer: it never writes keys"),
    Exemption((KEY_HASH,), (STRING_DATA,),
              "SQL keys are rows (RowData), never a StringData alone"),
)


def exemption(serializer: Serializer, capability: str) -> str | None:
    """Why ``serializer`` lacks ``capability`` on purpose, or None."""
    for entry in EXEMPTIONS:
        if capability in entry.capabilities and serializer in entry.serializers:
            return entry.reason
    return None


_REGISTERED: dict[str, dict[str, Any]] = {capability: {} for capability in CAPABILITIES}


def register(capability: str, implementations: dict[Serializer, T]) -> dict[str, T]:
    """Register ``capability``'s implementation for each serializer; return the lookup table by snapshot
    class name (the providing module's own table). A serializer registered twice is a ValueError."""
    table = _REGISTERED[capability]
    for serializer in implementations:
        if serializer.class_name in table:
            raise ValueError(f"{capability} of {serializer} is registered twice")
    table.update((serializer.class_name, implementation) for serializer, implementation in implementations.items())
    return {serializer.class_name: implementation for serializer, implementation in implementations.items()}


def registered(capability: str) -> dict[str, Any]:
    """Snapshot class name -> implementation, of what the imported :data:`PROVIDERS` registered."""
    return dict(_REGISTERED[capability])


def capabilities_of(serializer: Serializer) -> tuple[str, ...]:
    """The registered capabilities of ``serializer``, in :data:`CAPABILITIES` order."""
    return tuple(c for c in CAPABILITIES if serializer.class_name in _REGISTERED[c])


def type_names() -> dict[str, str]:
    """Snapshot class name -> the type it serializes (``describe``'s text), of every leaf serializer."""
    return {serializer.class_name: serializer.type_name for serializer in SERIALIZERS}
