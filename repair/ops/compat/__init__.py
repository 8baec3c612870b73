"""``repair compat OLD NEW``: will the new version of a job restore the running job's state?

OLD is a checkpoint or savepoint of the running job, NEW one of a short staging run of the new job
version (any snapshot holding its serializer snapshots). Per operator and state, what Flink does at the
restore (:mod:`repair.ops.compat.rules`): compatible as is, with a reconfigured serializer, after
migration, the state lost (a state or operator the new job no longer registers under that name:
restored empty, with no error), or incompatible (the restore fails). Every entry that is not compatible
names its remedy. Snapshots on either side of the Flink 2.0 wall are not compared: ``repair upgrade
--check`` says what a 2.x release does with 1.x state.

Returns a :class:`CompatResult`: exit code 0 when the new job restores with its state, 1 when not, 2
when a serializer could not be decoded (no verdict); ``to_json()`` is documented in docs/json-contracts.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from repair.errors import UsageError
from repair.findings import Problem, Severity
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.snapshot import LoadedSnapshot, load_snapshot
from repair.ops.advice import Command, Placeholder, repair_command
from repair.ops.compat.rules import (
    AS_IS,
    INCOMPATIBLE,
    MIGRATION,
    RECONFIGURED,
    UNKNOWN,
    Resolution,
    resolve,
    resolve_value,
)
from repair.ops.compat.states import OperatorStates, operator_states
from repair.results import CommandResult

#: A state or operator the new job does not register under its name: restored empty, without an error.
LOST = "state-lost"
#: The verdicts, from harmless to fatal; the first three restore the state.
VERDICTS = (AS_IS, RECONFIGURED, MIGRATION, LOST, UNKNOWN, INCOMPATIBLE)
RESTORES = (AS_IS, RECONFIGURED, MIGRATION)
#: What a state needs when no command of ours changes it.
OWN_MIGRATION = "needs the job's own migration"
#: ``_metadata`` versions Flink 2.x writes (5: 2.0, 6: 2.1 on).
FLINK2_METADATA = 5


@dataclass
class CompatEntry:
    """What Flink does with one state (``state`` None: the operator as a whole) at the restore."""

    operator: str
    operator_id: str
    state: str | None
    verdict: str
    reason: str = ""
    #: A command that makes the restore work (edit, rescale, upgrade), or None.
    remedy: Command | None = None
    #: The remedy in words where no command of ours does it (``needs the job's own migration ...``).
    remedy_text: str | None = None

    def to_json(self) -> dict:
        return {
            "operator": self.operator,
            "operator_id": self.operator_id,
            "state": self.state,
            "verdict": self.verdict,
            "reason": self.reason,
            "remedy": self.remedy.to_shell() if self.remedy else self.remedy_text,
            "remedy_argv": list(self.remedy.argv) if self.remedy else None,
        }


@dataclass
class CompatResult(CommandResult):
    source: str  # NEW, absolute
    old_source: str
    old_metadata_version: int
    new_metadata_version: int
    entries: list[CompatEntry]
    findings: list[Problem] = field(default_factory=list)

    @property
    def unknown(self) -> bool:
        """No verdict: a serializer we cannot decode, or the two sides of the Flink 2.0 wall."""
        return any(e.verdict == UNKNOWN for e in self.entries)

    @property
    def ok(self) -> bool:
        return all(e.verdict in RESTORES for e in self.entries)

    def counts(self) -> dict[str, int]:
        return {verdict: sum(1 for e in self.entries if e.verdict == verdict) for verdict in VERDICTS}

    def document(self) -> dict:
        return {
            "source": self.source,
            "old": {"source": self.old_source, "metadata_version": self.old_metadata_version},
            "new": {"source": self.source, "metadata_version": self.new_metadata_version},
            "restores": self.ok,
            "counts": self.counts(),
            "entries": [e.to_json() for e in self.entries],
            "findings": [f.to_json() for f in self.findings],
        }


def _one_snapshot(path: str, storage: st.Storage, which: str) -> LoadedSnapshot:
    layout = discover(path, storage)
    if len(layout.snapshots) != 1:
        numbers = ", ".join(f"chk-{r.number}" for r in layout.snapshots)
        raise UsageError(f"{which} is a job root ({numbers}): give one checkpoint (a chk-N directory), savepoint or _metadata file")
    return load_snapshot(layout.snapshots[0], layout.root, storage)


def compat(old: str, new: str, *, storage: st.Storage | None = None) -> CompatResult:
    """What Flink does when the job that wrote ``new`` restores ``old``, per operator and state."""
    storage = storage or st.default_storage()
    before, after = _one_snapshot(old, storage, "OLD"), _one_snapshot(new, storage, "NEW")
    old_version, new_version = before.metadata.version, after.metadata.version
    result = CompatResult(st.absolute(new), st.absolute(old), old_version, new_version, [])
    if (old_version >= FLINK2_METADATA) != (new_version >= FLINK2_METADATA):
        result.entries.append(_across_the_wall(old, old_version, new_version))
    else:
        result.entries = _compare(old, operator_states(before, storage), operator_states(after, storage),
                                  flink2=new_version >= FLINK2_METADATA)
    result.findings = [_finding(e) for e in result.entries if e.verdict not in RESTORES]
    return result


def _across_the_wall(old: str, old_version: int, new_version: int) -> CompatEntry:
    if old_version >= FLINK2_METADATA:
        return CompatEntry("*", "", None, INCOMPATIBLE, f"OLD was written by Flink 2.x (_metadata v{old_version}), NEW by "
                           f"Flink 1.x (v{new_version}): Flink 1.x cannot restore a 2.x snapshot", remedy_text=OWN_MIGRATION)
    release = "2.0" if new_version == FLINK2_METADATA else "2.1"
    return CompatEntry("*", "", None, UNKNOWN,
                       f"OLD was written by Flink 1.x (_metadata v{old_version}), NEW by Flink 2.x (v{new_version}): the "
                       "serializers differ across the 2.0 wall (Kryo 5, collections in POJOs), so they are not compared here",
                       remedy=repair_command("upgrade", old, "--to", release, "--check",
                                             note="what this 2.x release does with each state; --to the release the new job runs"))


def _finding(entry: CompatEntry) -> Problem:
    where = entry.operator + (f"/{entry.state}" if entry.state else "")
    severity = Severity.WARNING if entry.verdict == UNKNOWN else Severity.ERROR
    return Problem(entry.verdict.replace("-", "_"), f"{where}: {entry.reason}", severity=severity)


def _compare(old_path: str, old_ops: list[OperatorStates], new_ops: list[OperatorStates], *, flink2: bool) -> list[CompatEntry]:
    entries: list[CompatEntry] = []
    by_id = {op.operator_id: op for op in new_ops}
    old_ids = {op.operator_id for op in old_ops}
    unmatched_new = [op for op in new_ops if op.operator_id not in old_ids]
    for before in old_ops:
        after = by_id.get(before.operator_id)
        if after is None:
            if before.has_state:
                entries.append(_operator_gone(old_path, before, unmatched_new))
            continue
        entries.extend(_operator(old_path, before, after, flink2=flink2))
    return entries


def _operator_gone(old_path: str, before: OperatorStates, candidates: list[OperatorStates]) -> CompatEntry:
    """An operator with state whose uid the new job does not have: Flink refuses the restore (unless it is
    told to skip it with ``--allowNonRestoredState``: then its state is lost)."""
    states = set(before.keyed) | set(before.operator)
    twin = next((op for op in candidates if states and set(op.keyed) | set(op.operator) == states), None)
    reason = ("its uid is not in the new job: Flink refuses the restore (with --allowNonRestoredState it restores "
              "without this operator's state)")
    out = _next_to(old_path, "edited")
    if twin is not None:
        new_uid = twin.uid or Placeholder("NEW_UID")
        remedy = repair_command("edit", old_path, "--out", out, "--rename-uid", f"{before.label}={new_uid}",
                                note=f"the new job's operator {twin.label} registers the same states")
        reason += f"; operator {twin.label} of the new job registers the same states"
    else:
        remedy = repair_command("edit", old_path, "--out", out, "--drop-operator", before.label,
                                note="drops its state for good")
    return CompatEntry(before.label, before.operator_id, None, INCOMPATIBLE, reason, remedy)


def _next_to(path: str, what: str) -> str:
    path = st.absolute(path).rstrip("/")
    return st.join(st.parent(path), f"{st.basename(path)}-{what}")


def default_max_parallelism(parallelism: int) -> int:
    """Flink's max parallelism for an operator that sets none: 1.5 times the parallelism rounded up to a
    power of two, within 128 and 32768 (``KeyGroupRangeAssignment.computeDefaultMaxParallelism``)."""
    wanted = parallelism + parallelism // 2
    power = 1
    while power < wanted:
        power *= 2
    return min(max(power, 128), 32768)


def _operator(old_path: str, before: OperatorStates, after: OperatorStates, *, flink2: bool) -> list[CompatEntry]:
    label, op_id = after.label if after.uid else before.label, before.operator_id
    entries = []
    if before.keyed and before.max_parallelism != after.max_parallelism:
        if after.max_parallelism == default_max_parallelism(after.parallelism):
            entries.append(CompatEntry(label, op_id, None, AS_IS,
                                       f"max parallelism {before.max_parallelism} before, {after.max_parallelism} now, Flink's "
                                       "default for the new parallelism: if the new job does not set it, Flink keeps the old one"))
        else:
            entries.append(CompatEntry(
                label, op_id, None, INCOMPATIBLE,
                f"max parallelism {before.max_parallelism} before, {after.max_parallelism} now: Flink refuses to change it at a restore",
                repair_command("rescale", old_path, "--out", _next_to(old_path, "rescaled"),
                               "--max-parallelism", str(after.max_parallelism))))
    if before.keyed and after.keyed and before.key_serializer is None:
        pass  # a changelog without materialized state or timers records no key serializer: nothing for Flink to check
    elif before.keyed and after.keyed and after.key_serializer is None:
        entries.append(CompatEntry(label, op_id, None, UNKNOWN, "NEW records no key serializer (a changelog without "
                                   "materialized state or timers): give a snapshot taken after a materialization"))
    elif before.keyed and after.keyed:
        key = resolve(before.key_serializer, after.key_serializer, "key")
        if key.verdict in (MIGRATION, INCOMPATIBLE):
            entries.append(CompatEntry(label, op_id, None, INCOMPATIBLE,
                                       f"{key.reason or 'the key serializer changed'}: keys cannot be migrated, Flink refuses the restore",
                                       remedy_text=OWN_MIGRATION + " (the state read and written again under the new key)"))
        elif key.verdict != AS_IS:
            entries.append(CompatEntry(label, op_id, None, key.verdict, key.reason))
    for name, state in before.keyed.items():
        entries.append(_state(label, op_id, name, state, after.keyed.get(name), flink2=flink2, keyed=True, registered=after.keyed,
                              backend=after.backend))
    for name, state in before.operator.items():
        entries.append(_state(label, op_id, name, state, after.operator.get(name), flink2=flink2, keyed=False))
    for name in sorted((set(after.keyed) - set(before.keyed)) | (set(after.operator) - set(before.operator))):
        entries.append(CompatEntry(label, op_id, name, AS_IS, "new in the new job: starts empty"))
    return entries


_TIMER_DOMAINS = ("_timer_state/event_", "_timer_state/processing_")


def _timer_service_in_use(name: str, registered: dict) -> bool:
    """Whether ``name`` is one domain's queue of a timer service whose other domain's queue the new job
    registers: the new job uses that timer service, and registers this queue once it sets such a timer
    (a short staging run that set none does not record it)."""
    for domain, other in (_TIMER_DOMAINS, _TIMER_DOMAINS[::-1]):
        if name.startswith(domain) and other + name[len(domain):] in registered:
            return True
    return False


def _state(label: str, op_id: str, name: str, before, after, *, flink2: bool, keyed: bool,
           registered: dict | None = None, backend: str | None = None) -> CompatEntry:
    if after is None and _timer_service_in_use(name, registered or {}):
        return CompatEntry(label, op_id, name, AS_IS, "the new job uses this timer service (its other time domain is "
                           "registered): the queue is registered again at the restore")
    if after is None:
        return CompatEntry(label, op_id, name, LOST,
                           "the new job does not register this state: Flink restores without it, no error",
                           remedy_text=f"{OWN_MIGRATION}: register it under its old name {name!r} again (a renamed "
                                       "descriptor starts empty), or move its values with the State Processor API")
    if before.kind != after.kind:
        return CompatEntry(label, op_id, name, INCOMPATIBLE,
                           f"a {before.kind} state before, a {after.kind} state now: Flink refuses the restore",
                           remedy_text=f"{OWN_MIGRATION} (or a new state name: the old state is then lost)")
    resolution = Resolution(AS_IS)
    for key, new_snapshot in after.serializers:
        old_snapshot = before.serializer(key)
        what = {"VALUE_SERIALIZER": "value", "NAMESPACE_SERIALIZER": "namespace", "KEY_SERIALIZER": "key"}.get(key, key)
        if key == "VALUE_SERIALIZER":
            resolution = resolution.worse(resolve_value(old_snapshot, new_snapshot, flink2=flink2, backend=backend, what=what))
        else:
            resolution = resolution.worse(resolve(old_snapshot, new_snapshot, what))
    entry = CompatEntry(label, op_id, name, resolution.verdict, resolution.reason)
    if resolution.verdict == INCOMPATIBLE:
        entry.reason += ": Flink refuses the restore"
        entry.remedy_text = OWN_MIGRATION + ("" if keyed else "; or drop this operator state with repair edit --drop-state")
    return entry
