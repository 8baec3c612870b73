"""``repair diagnose``: from a JobManager/TaskManager log or a pasted stack trace to the incident class,
its runbook, the evidence the trace names and the next ``repair`` command.

Pure text processing (no storage access). The incident classes and their error lines are data in
:mod:`repair.ops.diagnose.rules`. Several incidents in one log are reported separately; repeated
occurrences of one incident (same cause, job, operator and file) are counted once, with every subtask
they name. A missing checkpoint file outside the job root the log says Flink restored from points at that
root (its recorded path may be damaged, a directory that does not exist). Returns a :class:`DiagnoseResult`; its ``to_json()`` is documented in docs/json-contracts.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from repair.findings import Problem, Severity, kind_of
from repair.ops.advice import Command, Placeholder, commands_json, output_next_to
from repair.ops.diagnose import rules
from repair.results import CommandResult

#: How far around an occurrence the trace is searched for its operator, job and phase.
_BEFORE, _AFTER = 6000, 2500
_TIMESTAMP = re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}")
_EXCEPTION_LINE = re.compile(r"^\s*(?:Caused by:\s*)?(?:[\w$]+\.)+[\w$]*(?:Exception|Error)\b.*$", re.MULTILINE)

NO_KNOWN_INCIDENT = "no known incident"


@dataclass
class Incident:
    cause_id: str
    cause: str
    runbook: str
    kind: str  # "incident", or "question" for a recognised question about state placement
    phase: str | None  # "checkpoint", "restore" or None when the trace does not say
    next_command: Command
    also: list[Command]
    count: int = 0
    job_id: str | None = None
    operator: str | None = None
    operator_id: str | None = None
    parallelism: int | None = None
    subtasks: list[int] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    checkpoint_ids: list[int] = field(default_factory=list)
    checkpoint_root: str | None = None
    excerpt: str = ""
    #: Which of the rule's commands comes next when the phase does not decide (a key of ``Rule.commands``).
    situation: str | None = field(default=None, repr=False)

    @property
    def evidence(self) -> dict:
        return {
            "job_id": self.job_id,
            "operator": self.operator,
            "operator_id": self.operator_id,
            "subtasks": self.subtasks,
            "parallelism": self.parallelism,
            "files": self.files,
            "paths": self.paths,
            "checkpoint_ids": self.checkpoint_ids,
            "checkpoint_root": self.checkpoint_root,
            "phase": self.phase,
        }

    def to_json(self) -> dict:
        also, also_argv = commands_json(self.also)
        return {
            "cause_id": self.cause_id,
            "cause": self.cause,
            "kind": self.kind,
            "runbook": self.runbook,
            "evidence": self.evidence,
            "next_command": self.next_command.to_shell(),
            "next_argv": list(self.next_command.argv),
            "also": also,
            "also_argv": also_argv,
            "count": self.count,
            "excerpt": self.excerpt,
        }

    def finding(self) -> Problem:
        """The incident in the common finding shape: a question (``kind`` ``question``) is only worth knowing."""
        return Problem(kind_of(self.cause_id), self.cause, severity=Severity.INFO if self.kind == "question" else Severity.ERROR,
                       details=(("runbook", self.runbook), ("next_command", self.next_command.to_shell())))


@dataclass
class DiagnoseResult(CommandResult):
    source: str
    incidents: list[Incident]
    unrecognised: list[str]  # exception lines of a log with no known incident

    @property
    def known(self) -> bool:
        return bool(self.incidents)

    @property
    def message(self) -> str:
        if not self.incidents:
            return NO_KNOWN_INCIDENT
        return f"{len(self.incidents)} incident(s): " + ", ".join(dict.fromkeys(i.cause_id for i in self.incidents))

    @property
    def ok(self) -> bool:
        """A known incident (or question) was found."""
        return self.known

    @property
    def findings(self) -> list[Problem]:
        return [i.finding() for i in self.incidents]

    def document(self) -> dict:
        return {
            "source": self.source,
            "known": self.known,
            "message": self.message,
            "incidents": [i.to_json() for i in self.incidents],
            "unrecognised": self.unrecognised,
            "findings": [i.finding().to_json() for i in self.incidents],
        }


@dataclass
class _Occurrence:
    rule: rules.Rule
    match: re.Match
    phase_hint: str | None

    @property
    def start(self) -> int:
        return self.match.start()

    @property
    def end(self) -> int:
        return self.match.end()


def diagnose(text: str, *, source: str = "-") -> DiagnoseResult:
    """Find every known incident in ``text`` (a log, a trace, several pasted together)."""
    flat = rules.normalize(text)
    occurrences = _occurrences(flat)
    written = _roots_as_written(text)
    only_root = _single_checkpoint_root(flat, written)
    sightings = []
    for i, occ in enumerate(occurrences):
        # the trace around an occurrence, up to its neighbours and to the log entries before and after
        low = max(occurrences[i - 1].end if i else 0, occ.start - _BEFORE)
        high = min(occurrences[i + 1].start if i + 1 < len(occurrences) else len(flat), occ.end + _AFTER)
        before = _after_last_timestamp(flat[low:occ.start])
        after = _before_next_timestamp(flat[occ.end:high])
        sightings.append(_sighting(occ, before, after, only_root, written))
    incidents = _cluster(sightings)
    restored = _restored_root(flat)
    for incident in incidents:
        if restored:
            _against_restored_root(incident, restored)
        _fill_commands(incident)
    unrecognised = [] if incidents else _exception_lines(text)
    return DiagnoseResult(source, incidents, unrecognised)


def _occurrences(flat: str) -> list[_Occurrence]:
    found: list[_Occurrence] = []
    for rule in rules.RULES:
        taken: list[tuple[int, int]] = []
        for entry in rule.patterns:
            pattern, hint = (entry, None) if isinstance(entry, str) else entry
            for match in re.finditer(pattern, flat, re.IGNORECASE):
                if any(s < match.end() and match.start() < e for s, e in taken):
                    continue  # an earlier, more specific pattern of this rule matched here
                taken.append((match.start(), match.end()))
                found.append(_Occurrence(rule, match, hint))
    return sorted(found, key=lambda o: o.start)


def _after_last_timestamp(text: str) -> str:
    stamps = list(_TIMESTAMP.finditer(text))
    return text[stamps[-1].start():] if stamps else text


def _before_next_timestamp(text: str) -> str:
    stamp = _TIMESTAMP.search(text)
    return text[: stamp.start()] if stamp else text


def _group(match: re.Match, name: str) -> str | None:
    return match.groupdict().get(name)


@dataclass
class _Sighting:
    """What one occurrence names."""

    rule: rules.Rule
    start: int  # where in the normalized log
    phase: str | None
    excerpt: str
    job_id: str | None
    operator: dict | None
    file_path: str | None
    checkpoint: str | None
    root: str | None

    @property
    def file_name(self) -> str | None:
        return self.file_path.rsplit("/", 1)[-1] if self.file_path else None

    @property
    def identity(self) -> dict:
        """What tells two incidents of one cause apart: job, operator and file (None: not named). An operator
        is its id where the trace gives one, else its name (see :func:`_same_incident`)."""
        op = self.operator or {}
        return {"job": self.job_id, "operator_id": op.get("operator_id"),
                "operator": None if op.get("operator_id") else op.get("operator"), "file": self.file_name}


def _sighting(occ: _Occurrence, before: str, after: str, only_root: str | None, written: list[str]) -> _Sighting:
    matched = occ.match.group(0)
    # the operator and subtask: from the matched path first, then from the surrounding trace
    operator = _operator(matched, before, after)
    job_id = (operator or {}).get("job_id") or _nearest(rules.JOB_ID, "job_id", matched, before, after)
    checkpoint = _group(occ.match, "checkpoint") or _nearest(rules.CHECKPOINT_ID, "checkpoint", matched, before, after)
    root_match = _nearest_match(rules.CHECKPOINT_PATH, matched, before, after)
    if root_match and not checkpoint and root_match.group("sub").startswith("chk-"):
        checkpoint = root_match.group("sub")[4:]
    root = _as_written(rules.local_path(root_match.group("root")), written) if root_match else only_root
    return _Sighting(occ.rule, occ.start, _phase(occ, before, after), _excerpt(matched), job_id, operator,
                     _group(occ.match, "file"), checkpoint, root)


def _cluster(sightings: list[_Sighting]) -> list[Incident]:
    """One incident per cause and identity. A sighting joins an incident of its cause when nothing they
    both name differs; one that names nothing joins the only incident of its cause, if there is one."""
    incidents: list[tuple[dict, Incident]] = []
    first_seen: dict[int, int] = {}
    anonymous: list[_Sighting] = []
    for s in sightings:
        ident = {k: v for k, v in s.identity.items() if v is not None}
        if not ident:
            anonymous.append(s)
            continue
        for known, incident in incidents:
            if incident.cause_id == s.rule.cause_id and _same_incident(known, ident):
                known.update(ident)
                break
        else:
            incident = _new_incident(s)
            incidents.append((ident, incident))
        _merge(incident, s, first_seen)
    for s in anonymous:
        same = [i for _, i in incidents if i.cause_id == s.rule.cause_id]
        if len(same) == 1:
            _merge(same[0], s, first_seen)
        else:
            incident = _new_incident(s)
            incidents.append(({}, incident))
            _merge(incident, s, first_seen)
    return sorted((i for _, i in incidents), key=lambda i: first_seen[id(i)])


def _same_incident(known: dict, ident: dict) -> bool:
    """Whether two identities of one cause can be one incident: nothing both name differs. Operators are
    compared by id when both have one; a name is compared only with a name, as a task's name in a log line
    ("Unnamed (1/3)#0") and an operator's class in a backend's name ("KeyedProcessOperator_<id>") name one
    operator in two ways, so a sighting with a name only and one with an id are not told apart by them."""
    if any(known.get(k, ident[k]) != ident[k] for k in ("job", "file", "operator_id") if k in ident):
        return False
    if ("operator_id" in known) != ("operator_id" in ident):
        return True
    return known.get("operator", ident.get("operator")) == ident.get("operator", known.get("operator"))


def _new_incident(s: _Sighting) -> Incident:
    return Incident(s.rule.cause_id, s.rule.cause, s.rule.runbook, s.rule.kind, None, Command(()), [], excerpt=s.excerpt)


def _merge(incident: Incident, s: _Sighting, first_seen: dict) -> None:
    first_seen[id(incident)] = min(first_seen.get(id(incident), s.start), s.start)
    incident.count += 1
    incident.phase = incident.phase or s.phase
    incident.job_id = incident.job_id or s.job_id
    incident.checkpoint_root = incident.checkpoint_root or s.root
    if s.operator:
        if s.operator.get("operator_id") and not incident.operator_id:  # a name beside its id is the better label
            incident.operator, incident.operator_id = s.operator.get("operator"), s.operator["operator_id"]
        incident.operator = incident.operator or s.operator.get("operator")
        if s.operator.get("parallelism") and incident.parallelism is None:
            incident.parallelism = int(s.operator["parallelism"])
        _append(incident.subtasks, int(s.operator["subtask"]) if s.operator.get("subtask") else None)
        incident.subtasks.sort()
    _append(incident.files, s.file_name)
    _append(incident.paths, rules.local_path(s.file_path) if s.file_path and "/" in s.file_path else None)
    _append(incident.checkpoint_ids, int(s.checkpoint) if s.checkpoint else None)


def _append(values: list, value) -> None:
    if value is not None and value not in values:
        values.append(value)


def _operator(matched: str, before: str, after: str) -> dict | None:
    found = rules.ROCKSDB_DIR.search(matched)
    if found:
        return found.groupdict()
    for pattern in (rules.ROCKSDB_DIR, *rules.TASK_NAMES):
        found = _nearest_match(pattern, "", before, after)
        if found:
            return found.groupdict()
    return None


def _nearest_match(pattern: re.Pattern, matched: str, before: str, after: str) -> re.Match | None:
    """The match inside ``matched``, else the closest one before it, else the first one after it."""
    inside = pattern.search(matched)
    if inside:
        return inside
    preceding = list(pattern.finditer(before))
    if preceding:
        return preceding[-1]
    return pattern.search(after)


def _nearest(patterns, group: str, matched: str, before: str, after: str) -> str | None:
    for pattern in patterns:
        found = _nearest_match(pattern, matched, before, after)
        if found:
            return found.group(group)
    return None


def _phase(occ: _Occurrence, before: str, after: str) -> str | None:
    if not occ.rule.phased:
        return None
    best: tuple[int, str] | None = None
    for phase, marker in rules.PHASE_MARKERS.items():
        for distance in _distances(marker, before, after):
            if best is None or distance < best[0]:
                best = (distance, phase)
    return best[1] if best else occ.phase_hint


def _distances(marker: str, before: str, after: str):
    for m in re.finditer(marker, before, re.IGNORECASE):
        yield len(before) - m.end()
    for m in re.finditer(marker, after, re.IGNORECASE):
        yield m.start()


def _single_checkpoint_root(flat: str, written: list[str]) -> str | None:
    roots = {_as_written(rules.local_path(m.group("root")), written) for m in rules.CHECKPOINT_PATH.finditer(flat)}
    roots.update(written)
    return roots.pop() if len(roots) == 1 else None


#: A checkpoint root where Flink's messages put a path ("...Exception: /x/<job>/shared/...", "File /x/<job>/chk-3
#: does not exist", "in directory /x/<job>/chk-3"), on one line of the log as written: spaces and quotes kept.
_ROOT_AS_WRITTEN = re.compile(
    r"(?:Exception:[ \t]*|\bFile[ \t]+|directory[ \t]+)(?P<root>(?:file:)?/[^\n]*?/[0-9a-f]{32})(?=/(?:chk-\d+|shared|taskowned)\b)",
    re.IGNORECASE,
)


def _roots_as_written(text: str) -> list[str]:
    """Checkpoint roots as the log writes them. The normalized log has lost their quotes and cannot tell
    where a path with spaces starts; these can."""
    return list(dict.fromkeys(rules.local_path(m.group("root")) for m in _ROOT_AS_WRITTEN.finditer(text)))


def _as_written(root: str, written: list[str]) -> str:
    """``root`` found in the normalized log, or the root as written that it is the end of (a path with spaces
    or quotes, cut at its last space by normalizing)."""
    return next((w for w in written if rules.normalize(w).endswith(root)), root)


def _restored_root(flat: str) -> str | None:
    """The job root of the one checkpoint the log says Flink restored from (None: none, or several)."""
    roots = {rules.local_path(m.group("root")) for m in rules.RESTORED_FROM.finditer(flat)}
    return roots.pop() if len(roots) == 1 else None


def _against_restored_root(incident: Incident, restored: str) -> None:
    """A file missing outside the job root Flink restored from: its ``_metadata`` recorded that path (a
    damaged path, or another job's file): the job root to look at is the one restored from."""
    if rules.OUTSIDE_RESTORED_ROOT not in next(r for r in rules.RULES if r.cause_id == incident.cause_id).commands:
        return
    if incident.paths and not any(path.startswith(restored.rstrip("/") + "/") for path in incident.paths):
        incident.checkpoint_root = restored
        incident.situation = rules.OUTSIDE_RESTORED_ROOT


def _fill_commands(incident: Incident) -> None:
    rule = next(r for r in rules.RULES if r.cause_id == incident.cause_id)
    chosen = rule.commands[incident.situation] if incident.situation else rule.command_for(incident.phase)
    incident.next_command = _fill(chosen, incident)
    incident.also = [_fill(c, incident) for c in dict.fromkeys(rule.commands.values()) if c != chosen]


def _fill(argv: tuple[str, ...], incident: Incident) -> Command:
    """The rule's command with the root, checkpoint and a new root from the trace; what it does not name
    stays a placeholder."""
    values = {}
    root = incident.checkpoint_root
    if root:
        values["<checkpoint-root>"] = root
        if len(incident.checkpoint_ids) == 1:
            name = f"chk-{incident.checkpoint_ids[0]}"
            values["<checkpoint>"] = f"{root}/{name}"
            values["<new-root>"] = output_next_to(root, "rebuilt", name)
    return Command(tuple(values.get(arg, Placeholder(arg) if arg.startswith("<") else arg) for arg in argv))


def _excerpt(matched: str, limit: int = 240) -> str:
    return matched if len(matched) <= limit else matched[: limit - 3] + "..."


def _exception_lines(text: str, limit: int = 5) -> list[str]:
    lines = [line.strip() for line in _EXCEPTION_LINE.findall(text.translate(rules.ODD_CHARACTERS))]
    roots = [line for line in lines if line.startswith("Caused by")] or lines
    return list(dict.fromkeys(roots))[-limit:]
