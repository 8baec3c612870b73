"""What Flink decides when a restored serializer snapshot meets the new job's serializer: the rules of
the ``TypeSerializerSnapshot.resolveSchemaCompatibility`` implementations Flink ships, over the snapshots
we decode (:mod:`repair.formats.flink.serializers`), each held by a cell of fixtures/compat_matrix.json.

A :class:`Resolution` is one of Flink's four answers (compatible as is, with a reconfigured serializer,
after migration, incompatible) or ``unknown`` (a snapshot we cannot decode), with the reason. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from repair.formats.flink import avro
from repair.formats.flink.serializers import (
    COMPOSITE_SNAPSHOTS,
    ENUM_SNAPSHOT,
    KRYO_SNAPSHOT,
    POJO_SNAPSHOT,
    TTL_AWARE_SNAPSHOT,
    SerializerSnapshot,
    describe,
)
from repair.ops.compat.avro_schemas import generic_migration_problem, read_incompatibility

AS_IS = "compatible"
RECONFIGURED = "compatible-reconfigured"
MIGRATION = "compatible-after-migration"
UNKNOWN = "unknown"
INCOMPATIBLE = "incompatible"
#: Worse answers later: a composite is as compatible as its least compatible part.
_ORDER = (AS_IS, RECONFIGURED, MIGRATION, UNKNOWN, INCOMPATIBLE)
_GENERIC_RECORD = "org.apache.avro.generic.GenericRecord"
#: The keyed state backends a snapshot's handles can name (:mod:`repair.ops.compat.states`).
ROCKSDB = "rocksdb"
HEAP = "heap"


@dataclass(frozen=True)
class Resolution:
    verdict: str
    reason: str = ""

    def worse(self, other: Resolution) -> Resolution:
        return other if _ORDER.index(other.verdict) > _ORDER.index(self.verdict) else self


COMPATIBLE = Resolution(AS_IS)


def is_ttl(snapshot: SerializerSnapshot | None) -> bool:
    return snapshot is not None and "TtlSerializerSnapshot" in snapshot.class_name


def without_ttl(snapshot: SerializerSnapshot | None) -> tuple[bool, SerializerSnapshot | None]:
    """``(whether the state has TTL, its user value's snapshot)``: the TTL serializer and Flink 2.x's
    ``TtlAwareSerializer`` unwrapped."""
    ttl = False
    while snapshot is not None:
        if snapshot.class_name == TTL_AWARE_SNAPSHOT and len(snapshot.nested) == 1:
            ttl = ttl or bool(snapshot.attributes.get("is_ttl_enabled"))
            snapshot = snapshot.nested[0]
        elif is_ttl(snapshot) and len(snapshot.nested) == 2:  # (long timestamp, user value)
            ttl, snapshot = True, snapshot.nested[1]
        else:
            return ttl, snapshot
    return ttl, None


def resolve_value(old: SerializerSnapshot | None, new: SerializerSnapshot | None, *, flink2: bool,
                  backend: str | None = None, what: str = "value") -> Resolution:
    """A state's value serializer, restored by the new job's ``backend`` (None: not known). TTL turned on or
    off is refused in Flink 1.x (the TTL serializer and the plain one are different classes); Flink 2.x
    migrates it on RocksDB (its ``TtlAwareSerializer``), and its heap backend refuses it
    (``HeapKeyedStateBackend.tryRegisterStateTable``: ``TtlAwareSerializer.needTtlStateMigration`` gives a
    ``StateMigrationException``, "For heap backends, the new state serializer ... must not need ttl state
    migration")."""
    old_ttl, old_inner = without_ttl(old)
    new_ttl, new_inner = without_ttl(new)
    if old_ttl != new_ttl:
        change = "turned on" if new_ttl else "turned off"
        if not flink2:
            return Resolution(INCOMPATIBLE, f"TTL {change}: Flink 1.x cannot migrate between a state with TTL and one without")
        if backend == HEAP:
            return Resolution(INCOMPATIBLE, f"TTL {change}: Flink 2.x's heap backend refuses to migrate between a state "
                              "with TTL and one without")
        caveat = "" if backend == ROCKSDB else (" (on RocksDB; the heap backend refuses it, and NEW, a savepoint, does not "
                                                "say which backend the new job runs: a checkpoint of it does)")
        return Resolution(MIGRATION, f"TTL {change}: Flink 2.x migrates the values{caveat}").worse(resolve(old_inner, new_inner, what))
    return resolve(old_inner, new_inner, what)


def resolve(old: SerializerSnapshot | None, new: SerializerSnapshot | None, what: str = "value") -> Resolution:
    """The compatibility of ``new`` (the new job's serializer, as its snapshot) with data written by ``old``."""
    if old is None or new is None:
        return Resolution(UNKNOWN, f"{what}: a serializer snapshot we cannot decode")
    if old.class_name != new.class_name:
        return Resolution(INCOMPATIBLE, f"{what}: {describe(old)} before, {describe(new)} now")
    name = old.class_name
    if name == POJO_SNAPSHOT:
        return _pojo(old, new, what)
    if name == KRYO_SNAPSHOT:
        return _kryo(old, new, what)
    if name == avro.AVRO_SNAPSHOT:
        return _avro(old, new, what)
    if name == ENUM_SNAPSHOT:
        return _enum(old, new, what)
    if name in COMPOSITE_SNAPSHOTS or old.nested or new.nested:
        return _composite(old, new, what)
    if old.attributes.get("type_class", "") != new.attributes.get("type_class", ""):
        return Resolution(INCOMPATIBLE, f"{what}: {old.attributes.get('type_class')} before, {new.attributes.get('type_class')} now")
    if old.attributes.get("logical_types") != new.attributes.get("logical_types"):
        return Resolution(INCOMPATIBLE, f"{what}: {describe(old)} before, {describe(new)} now")
    return COMPATIBLE


def _composite(old: SerializerSnapshot, new: SerializerSnapshot, what: str) -> Resolution:
    """``CompositeTypeSerializerSnapshot``: the outer snapshot (tuple class, component class ...) must be the
    same; then as compatible as the least compatible nested serializer. A Row gaining its row kind migrates."""
    result = COMPATIBLE
    old_outer = {k: v for k, v in old.attributes.items() if k != "supports_row_kind"}
    new_outer = {k: v for k, v in new.attributes.items() if k != "supports_row_kind"}
    if old_outer != new_outer:
        return Resolution(INCOMPATIBLE, f"{what}: {describe(old)} before, {describe(new)} now")
    if old.attributes.get("supports_row_kind") != new.attributes.get("supports_row_kind"):
        if old.attributes.get("supports_row_kind"):
            return Resolution(INCOMPATIBLE, f"{what}: a Row with its row kind before, without now")
        result = Resolution(MIGRATION, f"{what}: a Row now with its row kind")
    if len(old.nested) != len(new.nested):
        return Resolution(INCOMPATIBLE, f"{what}: {describe(old)} before, {describe(new)} now")
    for index, (o, n) in enumerate(zip(old.nested, new.nested)):
        result = result.worse(resolve(o, n, f"{what} ({describe(old)} part {index + 1})"))
    return result


def _pojo(old: SerializerSnapshot, new: SerializerSnapshot, what: str) -> Resolution:
    """``PojoSerializerSnapshot``: the same class; a field of the same name with an incompatible serializer
    is refused; fields added or removed migrate (missing fields restore as null); the order the fields are
    declared in does not matter (Flink orders them by name); registered subclasses changed reconfigure."""
    pojo = old.attributes.get("pojo_class")
    if pojo != new.attributes.get("pojo_class"):
        return Resolution(INCOMPATIBLE, f"{what}: POJO {pojo} before, {new.attributes.get('pojo_class')} now")
    old_fields = {f.name: f for f in old.pojo_fields or ()}
    new_fields = {f.name: f for f in new.pojo_fields or ()}
    result = COMPATIBLE
    for name in old_fields.keys() & new_fields.keys():
        inner = resolve(old_fields[name].snapshot, new_fields[name].snapshot, f"{what} field {name}")
        if inner.verdict == INCOMPATIBLE:
            return Resolution(INCOMPATIBLE, f"POJO {pojo}: " + inner.reason)
        result = result.worse(inner)
    added, removed = sorted(new_fields.keys() - old_fields.keys()), sorted(old_fields.keys() - new_fields.keys())
    if added or removed:
        changes = "; ".join(part for part in (f"fields added: {', '.join(added)}" if added else "",
                                              f"fields removed: {', '.join(removed)}" if removed else "") if part)
        result = result.worse(Resolution(MIGRATION, f"POJO {pojo}: {changes}"))
    old_subclasses = old.attributes.get("registered_subclasses") or []
    new_subclasses = new.attributes.get("registered_subclasses") or []
    if old_subclasses != new_subclasses[:len(old_subclasses)]:
        result = result.worse(Resolution(RECONFIGURED, f"POJO {pojo}: registered subclasses changed"))
    return result


def _kryo(old: SerializerSnapshot, new: SerializerSnapshot, what: str) -> Resolution:
    """``KryoSerializerSnapshot``: the same type class; registrations changed give a reconfigured
    serializer (the old registration ids kept), else as is."""
    type_class = old.attributes.get("type_class")
    if type_class != new.attributes.get("type_class"):
        return Resolution(INCOMPATIBLE, f"{what}: Kryo of {type_class} before, of {new.attributes.get('type_class')} now")
    keys = ("kryo_registrations", "default_kryo_serializers", "default_kryo_serializer_classes")
    if any(old.attributes.get(key) != new.attributes.get(key) for key in keys):
        before, now = old.attributes.get("kryo_registrations") or [], new.attributes.get("kryo_registrations") or []
        changes = [f"registered: {', '.join(c for c in now if c not in before)}" if set(now) - set(before) else "",
                   f"no longer registered: {', '.join(c for c in before if c not in now)}" if set(before) - set(now) else ""]
        detail = "; ".join(c for c in changes if c) or "default serializers changed"
        return Resolution(RECONFIGURED, f"{what}: Kryo registrations changed ({detail}): Flink keeps the old registration ids")
    return COMPATIBLE


def _avro(old: SerializerSnapshot, new: SerializerSnapshot, what: str) -> Resolution:
    """``AvroSerializerSnapshot``: the same runtime class; the old (writer) schema read with the new
    (reader) schema by Avro's rules: equal as is, readable after migration, else incompatible."""
    runtime = old.attributes.get("runtime_class")
    if runtime != new.attributes.get("runtime_class"):
        return Resolution(INCOMPATIBLE, f"{what}: Avro {runtime} before, {new.attributes.get('runtime_class')} now")
    old_schema, new_schema = old.attributes.get("schema") or "", new.attributes.get("schema") or ""
    if old_schema == new_schema:
        return COMPATIBLE
    reason = read_incompatibility(old_schema, new_schema)
    if reason:
        return Resolution(INCOMPATIBLE, f"{what}: Avro schema change not readable by Avro's rules: {reason}")
    if runtime == _GENERIC_RECORD:
        problem = generic_migration_problem(old_schema, new_schema)
        if problem:
            return Resolution(INCOMPATIBLE, f"{what}: {problem}")
    return Resolution(MIGRATION, f"{what}: Avro schema changed, readable by Avro's rules")


def _enum(old: SerializerSnapshot, new: SerializerSnapshot, what: str) -> Resolution:
    """``EnumSerializerSnapshot``: a constant gone is refused; constants added or reordered reconfigure."""
    before = old.attributes.get("enum_constants") or []
    now = new.attributes.get("enum_constants") or []
    if old.attributes.get("enum_class") != new.attributes.get("enum_class"):
        return Resolution(INCOMPATIBLE, f"{what}: enum {old.attributes.get('enum_class')} before, {new.attributes.get('enum_class')} now")
    gone = [c for c in before if c not in now]
    if gone:
        return Resolution(INCOMPATIBLE, f"{what}: enum constants gone: {', '.join(gone)}")
    if before != now:
        return Resolution(RECONFIGURED, f"{what}: enum constants added or reordered")
    return COMPATIBLE
