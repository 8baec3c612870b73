"""The registry of Flink's serializers: each snapshot class named once, and what this toolkit can do
with the values it writes.

A leaf serializer is a ``SimpleTypeSerializerSnapshot`` subclass (or a table serializer without nested
snapshots): its values' bytes follow from its class alone. A composite serializer's snapshot holds more:
nested snapshots (List, Map, Tuple, POJO, Row, TTL, Scala case classes ...) or parameters of its own
(an enum's constants, a Kryo type, an Avro schema, a SQL row's logical types). Each one is a
:class:`Serializer` constant here (``STRING``, ``LONG``, ``VOID_NAMESPACE``, ``LIST``, ``POJO``, ...):
:data:`SERIALIZERS` the leaves, :data:`COMPOSITES` the others. The modules that work on values register
their implementation of a *capability* against those constants with :func:`register`, which hands back
the module's own lookup table (snapshot class name -> implementation); a composite's implementation is
the module's builder for it, which combines the implementations of its nested serializers:

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
every gap is written down in :data:`EXEMPTIONS` with the reason; ``tests/formats/flink/test_serializer_registry.py``
fails on a gap without one, on an exemption that is no longer true, and on a serializer
``docs/serializers.md`` does not list with its capabilities. A composite has a capability when its
builder gives it for nested serializers that have it (the test builds one of each with leaf nested
serializers and asks every module).

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
    """One serializer: its snapshot class, the type it serializes (a leaf's is what ``describe`` shows; a
    composite's is its label, e.g. ``List``, which ``describe`` completes with the nested types) and its
    name in docs/serializers.md."""

    class_name: str
    type_name: str
    name: str

    def __str__(self) -> str:
        return self.name


_F = "org.apache.flink."
_B = _F + "api.common.typeutils.base."
_T = _F + "table.runtime.typeutils."
_S = _F + "api.scala.typeutils."
_SERIALIZERS: dict[str, Serializer] = {}
_COMPOSITES: dict[str, Serializer] = {}


def _serializer(class_name: str, type_name: str, name: str, *, into: dict[str, Serializer] = _SERIALIZERS) -> Serializer:
    if class_name in _SERIALIZERS or class_name in _COMPOSITES:
        raise ValueError(f"serializer snapshot class {class_name} is registered twice")
    serializer = into[class_name] = Serializer(class_name, type_name, name)
    return serializer


def _composite(class_name: str, label: str, name: str) -> Serializer:
    return _serializer(class_name, label, name, into=_COMPOSITES)


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

# -- composites framed as CompositeTypeSerializerSnapshot (an outer payload, then nested snapshots) -------
LIST = _composite(_B + "ListSerializerSnapshot", "List", "ListSerializer")
MAP = _composite(_B + "MapSerializerSnapshot", "Map", "MapSerializer")
SET = _composite(_B + "SetSerializerSnapshot", "Set", "SetSerializer")
ARRAY_LIST = _composite(_F + "runtime.state.ArrayListSerializerSnapshot", "ArrayList", "ArrayListSerializer")
TTL = _composite(_F + "runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot", "TTL", "TtlSerializer")
TTL_V2 = _composite(_F + "runtime.state.v2.ttl.TtlStateFactory$TtlSerializerSnapshot", "TTL", "TtlSerializer (state V2)")
TIMER = _composite(_F + "streaming.api.operators.TimerSerializerSnapshot", "Timer", "TimerSerializer")
BUFFER_ENTRY = _composite(_F + "streaming.api.operators.co.IntervalJoinOperator$BufferEntrySerializerSnapshot",
                          "BufferEntry", "BufferEntrySerializer (interval join)")
STREAM_ELEMENT = _composite(_F + "streaming.runtime.streamrecord.StreamElementSerializer$StreamElementSerializerSnapshot",
                            "StreamElement", "StreamElementSerializer")
TAGGED_UNION = _composite(_F + "streaming.api.datastream.CoGroupedStreams$UnionSerializerSnapshot", "TaggedUnion",
                          "UnionSerializer (coGroup)")
EITHER = _composite(_F + "api.java.typeutils.runtime.JavaEitherSerializerSnapshot", "Either", "EitherSerializer")
SINGLE_THREAD_ACCESS_CHECKING = _composite(
    _F + "api.common.typeutils.SingleThreadAccessCheckingTypeSerializer$SingleThreadAccessCheckingTypeSerializerSnapshot",
    "", "SingleThreadAccessCheckingTypeSerializer")
TUPLE = _composite(_F + "api.java.typeutils.runtime.TupleSerializerSnapshot", "Tuple", "TupleSerializer")
GENERIC_ARRAY = _composite(_B + "GenericArraySerializerSnapshot", "Array", "GenericArraySerializer")
ROW = _composite(_F + "api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot", "Row", "RowSerializer")
NULLABLE = _composite(_F + "api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot", "Nullable",
                      "NullableSerializer")
TWO_PHASE_COMMIT = _composite(_F + "streaming.api.functions.sink.TwoPhaseCommitSinkFunction$StateSerializerSnapshot",
                              "TwoPhaseCommitState", "TwoPhaseCommitSinkFunction.StateSerializer")
TWO_PHASE_COMMIT_LEGACY = _composite(
    _F + "streaming.api.functions.sink.legacy.TwoPhaseCommitSinkFunction$StateSerializerSnapshot", "TwoPhaseCommitState",
    "TwoPhaseCommitSinkFunction.StateSerializer (legacy package)")
RAW_VALUE = _composite(_T + "RawValueDataSerializer$RawValueDataSerializerSnapshot", "RAW", "RawValueDataSerializer")
EXTERNAL = _composite(_T + "ExternalSerializer$ExternalSerializerSnapshot", "External", "ExternalSerializer")
WINDOW_KEY = _composite(_T + "WindowKeySerializer$WindowKeySerializerSnapshot", "WindowKey", "WindowKeySerializer")
MAP_VIEW = _composite(_F + "table.dataview.MapViewSerializerSnapshot", "MapView", "MapViewSerializer")
LIST_VIEW = _composite(_F + "table.dataview.ListViewSerializerSnapshot", "ListView", "ListViewSerializer")
NULL_AWARE_MAP = _composite(_F + "table.dataview.NullAwareMapSerializerSnapshot", "NullAwareMap", "NullAwareMapSerializer")
# flink-scala (Flink 1.x): case classes, Option, collections, Either
SCALA_CASE_CLASS = _composite(_S + "ScalaCaseClassSerializerSnapshot", "ScalaCaseClass", "ScalaCaseClassSerializer")
SCALA_TUPLE2_CASE_CLASS = _composite(_S + "Tuple2CaseClassSerializerSnapshot", "ScalaCaseClass", "Tuple2CaseClassSerializer")
SCALA_OPTION = _composite(_S + "ScalaOptionSerializerSnapshot", "ScalaOption", "OptionSerializer (Scala)")
SCALA_TRAVERSABLE = _composite(_S + "TraversableSerializerSnapshot", "ScalaTraversable", "TraversableSerializer (Scala)")
SCALA_EITHER = _composite(_S + "ScalaEitherSerializerSnapshot", "ScalaEither", "EitherSerializer (Scala)")
# -- serializers whose snapshots have payloads of their own ---------------------------------------------
POJO = _composite(_F + "api.java.typeutils.runtime.PojoSerializerSnapshot", "POJO", "PojoSerializer")
KRYO = _composite(_F + "api.java.typeutils.runtime.kryo.KryoSerializerSnapshot", "Kryo", "KryoSerializer")
ENUM = _composite(_B + "EnumSerializer$EnumSerializerSnapshot", "Enum", "EnumSerializer")
TTL_AWARE = _composite(_F + "runtime.state.ttl.TtlAwareSerializerSnapshot", "TtlAware", "TtlAwareSerializer")
VALUE = _composite(_F + "api.java.typeutils.runtime.ValueSerializer$ValueSerializerSnapshot", "Value", "ValueSerializer")
COPYABLE_VALUE = _composite(_F + "api.java.typeutils.runtime.CopyableValueSerializer$CopyableValueSerializerSnapshot",
                            "CopyableValue", "CopyableValueSerializer")
WRITABLE_TYPE_INFO = _composite(_F + "api.java.typeutils.WritableTypeInfo$WritableSerializerSnapshot", "Writable",
                                "WritableSerializer (WritableTypeInfo)")
WRITABLE = _composite(_F + "api.java.typeutils.runtime.WritableSerializer$WritableSerializerSnapshot", "Writable",
                      "WritableSerializer")
ROW_DATA = _composite(_T + "RowDataSerializer$RowDataSerializerSnapshot", "RowData", "RowDataSerializer")
TIMESTAMP_DATA = _composite(_T + "TimestampDataSerializer$TimestampDataSerializerSnapshot", "TimestampData",
                            "TimestampDataSerializer")
DECIMAL_DATA = _composite(_T + "DecimalDataSerializer$DecimalSerializerSnapshot", "DecimalData", "DecimalDataSerializer")
BINARY_ROW = _composite(_T + "BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot", "BinaryRow",
                        "BinaryRowDataSerializer")
ARRAY_DATA = _composite(_T + "ArrayDataSerializer$ArrayDataSerializerSnapshot", "ArrayData", "ArrayDataSerializer")
MAP_DATA = _composite(_T + "MapDataSerializer$MapDataSerializerSnapshot", "MapData", "MapDataSerializer")
SCALA_ENUM = _composite(_S + "ScalaEnumSerializerSnapshot", "ScalaEnum", "EnumValueSerializer (Scala)")
AVRO = _composite("org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot", "Avro", "AvroSerializer")

#: Every composite serializer, in the order above.
COMPOSITES: tuple[Serializer, ...] = tuple(_COMPOSITES.values())


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
    # -- composites ---------------------------------------------------------------------------------------
    Exemption(CAPABILITIES, (BUFFER_ENTRY, STREAM_ELEMENT, TAGGED_UNION, EITHER, SINGLE_THREAD_ACCESS_CHECKING, GENERIC_ARRAY,
                             TWO_PHASE_COMMIT, TWO_PHASE_COMMIT_LEGACY, WINDOW_KEY, MAP_VIEW, LIST_VIEW, NULL_AWARE_MAP, ARRAY_DATA,
                             MAP_DATA),
              "wire format not implemented yet: the snapshot is read and described, values stay raw bytes"),
    Exemption(CAPABILITIES, (VALUE, COPYABLE_VALUE, WRITABLE_TYPE_INFO, WRITABLE),
              "user classes that write themselves (Value.write, Writable.write): only their code knows the bytes"),
    Exemption(CAPABILITIES, (BINARY_ROW,),
              "its snapshot has the row's arity only, not the field types"),
    Exemption((FAST_DECODE, COLUMN_READER), (RAW_VALUE, ROW_DATA, TIMESTAMP_DATA, DECIMAL_DATA),
              "SQL state is decoded by the exact readers of row_data, row by row (no fast path yet)"),
    Exemption((FAST_DECODE, COLUMN_READER), (SCALA_CASE_CLASS, SCALA_TUPLE2_CASE_CLASS, SCALA_OPTION, SCALA_TRAVERSABLE,
                                             SCALA_EITHER, SCALA_ENUM, AVRO, KRYO),
              "decoded row by row by their own readers (scala_types, avro, kryo): no fast path yet"),
    Exemption((COLUMN_READER,), (EXTERNAL,),
              "no column-wise reader yet: its internal serializer's values go through the fast path, row by row"),
    Exemption((ARROW_TYPE, COLUMN_READER), (TIMER,),
              "a timer is split into columns of their own (key, namespace, timestamp), never one typed value"),
    Exemption((ARROW_TYPE,), (KRYO, SCALA_EITHER),
              "JSON text columns: a Kryo column may hold a Long in one row and a String in the next; an Either "
              "holds one of two types"),
    Exemption((ENCODE,), (MAP, SET, ROW, NULLABLE, POJO, ENUM, TIMESTAMP_DATA, DECIMAL_DATA),
              "no encoder yet: write-savepoint writes unchanged values from their raw bytes and refuses an edit"),
    Exemption((ENCODE,), (KRYO,),
              "Kryo columns are JSON text, written back by kryo_encoder in the classes of the bytes they replace"),
    Exemption((ENCODE,), (RAW_VALUE,),
              "a RAW value is the bytes of a serializer the row's type does not name: kept as its bytes"),
    Exemption((KEY_HASH,), (TTL, TTL_V2, TTL_AWARE, TIMER),
              "wraps state values or timers, never a key: the key is hashed by the key serializer"),
    Exemption((KEY_HASH,), (LIST, MAP, SET, ARRAY_LIST, TUPLE, ROW, NULLABLE, EXTERNAL, RAW_VALUE, POJO, ENUM, SCALA_CASE_CLASS,
                            SCALA_TUPLE2_CASE_CLASS, SCALA_OPTION, SCALA_TRAVERSABLE, SCALA_EITHER, SCALA_ENUM, AVRO, ROW_DATA,
                            TIMESTAMP_DATA, DECIMAL_DATA),
              "the hashCode of a composite key (its fields', or the user class's own) is not computed here: "
              "write-savepoint keeps such a row's key group and refuses another max parallelism"),
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
