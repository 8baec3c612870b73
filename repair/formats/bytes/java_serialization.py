"""A small reader of the Java object serialization stream protocol (``java.io.ObjectOutputStream``).

It implements the grammar of the "Object Serialization Stream Protocol" (Java SE spec, chapter 6):
stream header ``AC ED 00 05``, class descriptors (``TC_CLASSDESC``, ``TC_PROXYCLASSDESC``), objects whose
classes use default field serialization with optional ``writeObject`` annotations, strings, enums, arrays,
class objects, block data and back references. It never instantiates anything; it returns plain
dataclasses. Externalizable objects without block-data mode and ``TC_EXCEPTION`` are reported as
unsupported. Every length is checked against the bytes left and nesting is bounded, like every decoder.

The one consumer today is the V4+ ``_metadata`` trailer: :func:`decode_checkpoint_properties` turns the
serialized ``org.apache.flink.runtime.checkpoint.CheckpointProperties`` (fields: ``SnapshotType
checkpointType``, booleans ``forced``, ``discardSubsumed``, ``discardFinished``, ``discardCancelled``,
``discardFailed``, ``discardSuspended``, ``unclaimed``; ``CheckpointType`` has ``name`` and
``sharingFilesStrategy``, ``SavepointType`` has ``name``, ``postCheckpointAction`` and ``formatType``) into
:class:`CheckpointProperties`.
"""

from __future__ import annotations

import struct
from dataclasses import field
from typing import Any

from repair.errors import FormatError
from repair.formats.bytes.binary import ByteReader, decode_modified_utf8
from repair.formats.records import record

STREAM_MAGIC = 0xACED
STREAM_VERSION = 5

TC_NULL = 0x70
TC_REFERENCE = 0x71
TC_CLASSDESC = 0x72
TC_OBJECT = 0x73
TC_STRING = 0x74
TC_ARRAY = 0x75
TC_CLASS = 0x76
TC_BLOCKDATA = 0x77
TC_ENDBLOCKDATA = 0x78
TC_RESET = 0x79
TC_BLOCKDATALONG = 0x7A
TC_EXCEPTION = 0x7B
TC_LONGSTRING = 0x7C
TC_PROXYCLASSDESC = 0x7D
TC_ENUM = 0x7E
BASE_WIRE_HANDLE = 0x7E0000

SC_WRITE_METHOD = 0x01
SC_SERIALIZABLE = 0x02
SC_EXTERNALIZABLE = 0x04
SC_BLOCK_DATA = 0x08
SC_ENUM = 0x10

MAX_DEPTH = 64

_PRIMITIVE_SIZES = {"B": 1, "C": 2, "D": 8, "F": 4, "I": 4, "J": 8, "S": 2, "Z": 1}


@record
class JavaField:
    """A field of a class descriptor: type code (``B C D F I J S Z [ L``), name, and class for ``[``/``L``."""

    type_code: str
    name: str
    class_name: str | None = None


@record
class JavaClassDesc:
    """A class descriptor (``TC_CLASSDESC`` or, with ``proxy_interfaces`` set, ``TC_PROXYCLASSDESC``)."""

    name: str
    serial_version_uid: int
    flags: int
    fields: list[JavaField]
    annotations: list[Any]
    super_desc: "JavaClassDesc | None"
    proxy_interfaces: list[str] | None = None
    #: Where the descriptor's serialVersionUID is in the file (None for proxies).
    uid_offset: int | None = None

    def hierarchy(self) -> list["JavaClassDesc"]:
        """This class and its serializable superclasses, topmost first (the order of class data)."""
        chain, desc = [], self
        while desc is not None:
            chain.append(desc)
            desc = desc.super_desc
        return chain[::-1]


@record
class JavaObject:
    """An object: per class of its hierarchy (topmost first) the field values and annotations."""

    class_desc: JavaClassDesc
    class_data: list[tuple[str, dict[str, Any], list[Any]]] = field(default_factory=list)

    @property
    def class_name(self) -> str:
        return self.class_desc.name

    def get(self, name: str, default: Any = None) -> Any:
        """The value of field ``name``, looked up from the most derived class up."""
        for _cls, values, _ann in reversed(self.class_data):
            if name in values:
                return values[name]
        return default


@record
class JavaEnum:
    class_name: str
    constant: str


@record
class JavaArray:
    """An array; a ``byte[]`` keeps its values as ``bytes``."""

    class_name: str
    values: list[Any] | bytes


@record
class JavaClass:
    class_desc: JavaClassDesc | None


@record
class JavaBlockData:
    data: bytes


class JavaStreamReader:
    """Reads the contents of one serialization stream from a :class:`ByteReader`."""

    def __init__(self, reader: ByteReader):
        self.r = reader
        self._handles: list[Any] = []
        self._depth = 0

    def header(self) -> None:
        r = self.r
        at = r.offset
        magic = r.u16("java serialization magic")
        if magic != STREAM_MAGIC:
            raise FormatError("java serialization magic", at, "0xACED", f"0x{magic:04X}")
        at = r.offset
        version = r.u16("java serialization version")
        if version != STREAM_VERSION:
            raise FormatError("java serialization version", at, STREAM_VERSION, version)

    # -- contents ----------------------------------------------------------------------------------
    def content(self) -> Any:
        """One ``content``: block data or an object."""
        r = self.r
        code = self._peek()
        if code == TC_BLOCKDATA:
            r.u8("block data tag")
            return JavaBlockData(r.raw(r.u8("block data length"), "block data"))
        if code == TC_BLOCKDATALONG:
            r.u8("block data tag")
            return JavaBlockData(r.raw(r.count("block data length"), "block data"))
        return self.object()

    def object(self) -> Any:
        """One ``object`` (``TC_OBJECT``, ``TC_STRING``, ``TC_ENUM``, ``TC_ARRAY``, ``TC_NULL``, ...)."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise FormatError("java object", self.r.offset, f"objects nested at most {MAX_DEPTH} deep", "deeper nesting")
            return self._object()
        finally:
            self._depth -= 1

    def _object(self) -> Any:
        r = self.r
        at = r.offset
        code = r.u8("java type code")
        while code == TC_RESET:
            self._handles.clear()
            at = r.offset
            code = r.u8("java type code")
        if code == TC_NULL:
            return None
        if code == TC_REFERENCE:
            return self._reference(at)
        if code in (TC_CLASSDESC, TC_PROXYCLASSDESC):
            return self._class_desc_body(code)
        if code == TC_STRING:
            return self._new_handle(self.r.utf("java string"))
        if code == TC_LONGSTRING:
            length_at = r.offset
            length = r.i64("java long string length")
            if length < 0 or length > r.remaining:
                raise FormatError("java long string length", length_at, f"0..{r.remaining}", length)
            raw = r.raw(length, "java long string")
            try:
                return self._new_handle(decode_modified_utf8(raw))
            except ValueError as exc:
                raise FormatError("java long string", length_at + 8, "modified UTF-8", raw[:32].hex(), detail=str(exc)) from None
        if code == TC_ENUM:
            desc = self.class_desc()
            slot = self._reserve()
            name_at = r.offset
            constant = self.object()
            if not isinstance(constant, str):
                raise FormatError("java enum constant", name_at, "a string", type(constant).__name__)
            value = JavaEnum(desc.name if desc else "?", constant)
            self._handles[slot] = value
            return value
        if code == TC_OBJECT:
            return self._new_object(at)
        if code == TC_ARRAY:
            return self._array()
        if code == TC_CLASS:
            return self._new_handle(JavaClass(self.class_desc()))
        if code == TC_EXCEPTION:
            raise FormatError("java type code", at, "an object", "TC_EXCEPTION", detail="the writer failed while serializing")
        raise FormatError("java type code", at, "a type code 0x70..0x7E", f"0x{code:02X}")

    def _peek(self) -> int:
        r = self.r
        if r.at_end():
            r.u8("java type code")  # raises TruncatedError
        return r.data[r.pos]

    def _reference(self, at: int) -> Any:
        handle = self.r.i32("java back reference")
        index = handle - BASE_WIRE_HANDLE
        if not 0 <= index < len(self._handles):
            raise FormatError("java back reference", at + 1, f"a handle 0x{BASE_WIRE_HANDLE:X}..0x{BASE_WIRE_HANDLE + len(self._handles) - 1:X}", f"0x{handle & 0xFFFFFFFF:X}")
        return self._handles[index]

    def _reserve(self) -> int:
        self._handles.append(None)
        return len(self._handles) - 1

    def _new_handle(self, value: Any) -> Any:
        self._handles.append(value)
        return value

    # -- class descriptors ---------------------------------------------------------------------------
    def class_desc(self) -> JavaClassDesc | None:
        """A ``classDesc``: a new descriptor, ``TC_NULL`` or a back reference to a descriptor."""
        r = self.r
        at = r.offset
        code = r.u8("java class descriptor")
        if code == TC_NULL:
            return None
        if code == TC_REFERENCE:
            value = self._reference(at)
            if not isinstance(value, JavaClassDesc):
                raise FormatError("java class descriptor", at, "a reference to a class descriptor", type(value).__name__)
            return value
        if code in (TC_CLASSDESC, TC_PROXYCLASSDESC):
            return self._class_desc_body(code)
        raise FormatError("java class descriptor", at, "TC_CLASSDESC, TC_PROXYCLASSDESC, TC_REFERENCE or TC_NULL", f"0x{code:02X}")

    def _class_desc_body(self, code: int) -> JavaClassDesc:
        r = self.r
        if code == TC_PROXYCLASSDESC:
            slot = self._reserve()
            count = r.count("proxy interface count", item_size=2)
            interfaces = [r.utf("proxy interface name") for _ in range(count)]
            desc = JavaClassDesc("<proxy>", 0, SC_SERIALIZABLE, [], [], None, proxy_interfaces=interfaces)
            self._handles[slot] = desc
            desc.annotations = self._annotations()
            desc.super_desc = self.class_desc()
            return desc
        name = r.utf("java class name")
        uid_at = r.offset
        suid = r.i64("serialVersionUID")
        slot = self._reserve()
        flags = r.u8("java class flags")
        count_at = r.offset
        count = r.i16("java field count")
        if count < 0 or count * 3 > r.remaining:
            raise FormatError("java field count", count_at, f"0..{r.remaining // 3}", count)
        desc = JavaClassDesc(name, suid, flags, [], [], None, uid_offset=uid_at)
        self._handles[slot] = desc
        for _ in range(count):
            type_at = r.offset
            type_code = chr(r.u8("java field type"))
            field_name = r.utf("java field name")
            if type_code in _PRIMITIVE_SIZES:
                desc.fields.append(JavaField(type_code, field_name))
            elif type_code in "[L":
                class_at = r.offset
                class_name = self.object()
                if not isinstance(class_name, str):
                    raise FormatError("java field class name", class_at, "a string", type(class_name).__name__)
                desc.fields.append(JavaField(type_code, field_name, class_name))
            else:
                raise FormatError("java field type", type_at, "one of B C D F I J S Z [ L", repr(type_code))
        desc.annotations = self._annotations()
        desc.super_desc = self.class_desc()
        return desc

    def _annotations(self) -> list[Any]:
        """Contents up to and including ``TC_ENDBLOCKDATA``."""
        out = []
        while self._peek() != TC_ENDBLOCKDATA:
            out.append(self.content())
        self.r.u8("end of block data")
        return out

    # -- objects and arrays ------------------------------------------------------------------------
    def _new_object(self, at: int) -> JavaObject:
        desc = self.class_desc()
        if desc is None:
            raise FormatError("java object class", at + 1, "a class descriptor", "null")
        obj = JavaObject(desc)
        self._new_handle(obj)
        for cls in desc.hierarchy():
            values: dict[str, Any] = {}
            annotations: list[Any] = []
            if cls.flags & SC_EXTERNALIZABLE:
                if not cls.flags & SC_BLOCK_DATA:
                    raise FormatError("java object", at, "block-data externalizable contents", f"old externalizable {cls.name}")
                annotations = self._annotations()
            elif cls.flags & SC_SERIALIZABLE:
                for f in cls.fields:
                    values[f.name] = self._field_value(f.type_code)
                if cls.flags & SC_WRITE_METHOD:
                    annotations = self._annotations()
            obj.class_data.append((cls.name, values, annotations))
        return obj

    def _field_value(self, type_code: str) -> Any:
        r = self.r
        if type_code == "Z":
            return r.u8("java boolean") != 0  # as DataInput.readBoolean: any byte but 0 is true
        if type_code == "B":
            return r.i8("java byte")
        if type_code == "C":
            return chr(r.u16("java char"))
        if type_code == "S":
            return r.i16("java short")
        if type_code == "I":
            return r.i32("java int")
        if type_code == "J":
            return r.i64("java long")
        if type_code == "F":
            return struct.unpack(">f", r.raw(4, "java float"))[0]
        if type_code == "D":
            return struct.unpack(">d", r.raw(8, "java double"))[0]
        return self.object()

    def _array(self) -> JavaArray:
        r = self.r
        at = r.offset
        desc = self.class_desc()
        if desc is None or not desc.name.startswith("["):
            raise FormatError("java array class", at, "an array class descriptor", desc.name if desc else "null")
        slot = self._reserve()
        component = desc.name[1]
        size = r.count("java array length", item_size=_PRIMITIVE_SIZES.get(component, 1))
        if component == "B":
            value = JavaArray(desc.name, r.raw(size, "java byte array"))
        else:
            value = JavaArray(desc.name, [self._field_value(component) for _ in range(size)])
        self._handles[slot] = value
        return value


def read_java_object(data: bytes, *, base: int = 0) -> tuple[Any, int]:
    """Read the stream header and the first object of ``data``; return it and the bytes consumed."""
    value, consumed, _ = _read_first_object(data, base)
    return value, consumed


def _read_first_object(data: bytes, base: int) -> tuple[Any, int, list[JavaClassDesc]]:
    """The first object, the bytes consumed, and every class descriptor the stream defined."""
    reader = ByteReader(data, base=base)
    stream = JavaStreamReader(reader)
    stream.header()
    value = stream.object()
    return value, reader.pos, [h for h in stream._handles if isinstance(h, JavaClassDesc)]


# -- CheckpointProperties ------------------------------------------------------------------------------

CHECKPOINT_PROPERTIES_CLASS = "org.apache.flink.runtime.checkpoint.CheckpointProperties"

#: The serialVersionUIDs of Flink's classes in the trailer (the same in every trailer Flink 1.20 to 2.3
#: wrote, see the fixtures); ``ObjectInputStream`` refuses another (``java.io.InvalidClassException: local
#: class incompatible``). Enums always have 0 (``enum descriptor has non-zero serialVersionUID``).
FLINK_SERIAL_VERSION_UIDS = {
    CHECKPOINT_PROPERTIES_CLASS: 2,
    "org.apache.flink.runtime.checkpoint.CheckpointType": -2963844630364414662,
    "org.apache.flink.runtime.checkpoint.SavepointType": -6879297871714708296,
}
#: Flink's enums in the trailer and their constants: ``Enum.valueOf`` refuses another name.
FLINK_ENUM_CONSTANTS = {
    "org.apache.flink.runtime.checkpoint.SnapshotType$SharingFilesStrategy": ("FORWARD_BACKWARD", "FORWARD", "NO_SHARING"),
    "org.apache.flink.core.execution.SavepointFormatType": ("CANONICAL", "NATIVE"),
    "org.apache.flink.runtime.checkpoint.SavepointType$PostCheckpointAction": ("NONE", "SUSPEND", "TERMINATE"),
}


def _check_flink_classes(descs: list[JavaClassDesc], value: Any) -> None:
    """Refuse what Flink's ``ObjectInputStream`` refuses: a changed serialVersionUID of a class whose
    serialVersionUID is known, an enum's that is not 0, an unknown constant of Flink's enums."""
    for desc in descs:
        at = desc.uid_offset if desc.uid_offset is not None else 0
        if desc.flags & SC_ENUM and desc.serial_version_uid != 0:
            raise FormatError(f"serialVersionUID of {desc.name}", at, 0, desc.serial_version_uid,
                              detail="an enum's is always 0 (java.io.InvalidClassException)")
        expected = FLINK_SERIAL_VERSION_UIDS.get(desc.name)
        if expected is not None and not desc.flags & SC_ENUM and desc.serial_version_uid != expected:
            raise FormatError(f"serialVersionUID of {desc.name}", at, expected, desc.serial_version_uid,
                              detail="java.io.InvalidClassException: local class incompatible")
    stack, seen = [value], set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, JavaEnum):
            constants = FLINK_ENUM_CONSTANTS.get(item.class_name)
            if constants is not None and item.constant not in constants:
                raise FormatError(f"constant of {item.class_name}", 0, " or ".join(constants), item.constant,
                                  detail="java.lang.IllegalArgumentException: No enum constant")
        elif isinstance(item, JavaObject):
            for _cls, values, _annotations in item.class_data:
                stack.extend(values.values())


@record
class CheckpointProperties:
    """The decoded V4+ trailer (``CheckpointProperties`` and its ``SnapshotType``).

    ``checkpoint_type`` is the type's ``name`` string ("Checkpoint", "Full Checkpoint", "Savepoint",
    "Suspend Savepoint", "Terminate Savepoint"). ``sharing_files_strategy`` is set for checkpoints
    (``FORWARD_BACKWARD``, ``FORWARD``, ``NO_SHARING``); ``savepoint_format`` (``CANONICAL``, ``NATIVE``)
    and ``post_checkpoint_action`` (``NONE``, ``SUSPEND``, ``TERMINATE``) for savepoints. A boolean that
    the writer's class did not have is None. ``trailing_bytes`` counts bytes after the object.
    """

    is_savepoint: bool
    checkpoint_type: str
    snapshot_type_class: str
    sharing_files_strategy: str | None
    savepoint_format: str | None
    post_checkpoint_action: str | None
    forced: bool | None
    discard_subsumed: bool | None
    discard_finished: bool | None
    discard_cancelled: bool | None
    discard_failed: bool | None
    discard_suspended: bool | None
    unclaimed: bool | None
    trailing_bytes: int = 0


def _enum_name(value: Any) -> str | None:
    return value.constant if isinstance(value, JavaEnum) else None


def decode_checkpoint_properties(data: bytes, *, base: int = 0) -> CheckpointProperties:
    """Decode a Java-serialized ``CheckpointProperties`` (the trailer of metadata V4+).

    Raises :class:`FormatError` when the bytes are not a serialization stream or hold another class.
    """
    value, consumed, descs = _read_first_object(data, base)
    if not isinstance(value, JavaObject) or value.class_name != CHECKPOINT_PROPERTIES_CLASS:
        found = value.class_name if isinstance(value, JavaObject) else type(value).__name__
        raise FormatError("checkpoint properties", base + 4, CHECKPOINT_PROPERTIES_CLASS, found)
    _check_flink_classes(descs, value)
    snapshot_type = value.get("checkpointType")
    if isinstance(snapshot_type, JavaObject):
        type_class = snapshot_type.class_name
        name = snapshot_type.get("name")
        is_savepoint = type_class.endswith("SavepointType")
        if not isinstance(name, str) or not (is_savepoint or type_class.endswith("CheckpointType")):
            raise FormatError("checkpoint type", base + 4, "a CheckpointType or SavepointType with a name", type_class)
        sharing = _enum_name(snapshot_type.get("sharingFilesStrategy"))
        fmt = _enum_name(snapshot_type.get("formatType"))
        action = _enum_name(snapshot_type.get("postCheckpointAction"))
    elif isinstance(snapshot_type, JavaEnum):
        # Older writers had an enum CheckpointType (CHECKPOINT, SAVEPOINT, SAVEPOINT_SUSPEND, ...).
        type_class, name = snapshot_type.class_name, snapshot_type.constant
        is_savepoint = "SAVEPOINT" in name
        sharing = fmt = action = None
    else:
        raise FormatError("checkpoint type", base + 4, "a SnapshotType object", type(snapshot_type).__name__)

    def flag(field_name: str) -> bool | None:
        found = value.get(field_name)
        return found if isinstance(found, bool) else None

    return CheckpointProperties(
        is_savepoint=is_savepoint,
        checkpoint_type=name,
        snapshot_type_class=type_class,
        sharing_files_strategy=sharing,
        savepoint_format=fmt,
        post_checkpoint_action=action,
        forced=flag("forced"),
        discard_subsumed=flag("discardSubsumed"),
        discard_finished=flag("discardFinished"),
        discard_cancelled=flag("discardCancelled"),
        discard_failed=flag("discardFailed"),
        discard_suspended=flag("discardSuspended"),
        unclaimed=flag("unclaimed"),
        trailing_bytes=len(data) - consumed,
    )
