"""Known incident classes as data: the error lines that identify each, its runbook and the next command.

Pure: no I/O. :mod:`repair.ops.diagnose.incidents` matches these rules against a normalized log and extracts the
evidence (:data:`EVIDENCE_PATTERNS`) that the commands are filled from.

A rule's ``patterns`` are regular expressions matched case-insensitively against the log after
:func:`normalize` (all whitespace runs, line breaks included, collapsed to one space). Each match is one
occurrence; occurrences with the same cause and the same identity (job, operator, subtask, file) are
one incident.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RUNBOOKS = "repair/runbooks"


@dataclass(frozen=True)
class Rule:
    cause_id: str
    cause: str
    runbook: str
    #: regexes; a ``(regex, phase)`` pair says which phase a match of that regex implies
    patterns: tuple
    #: the next command (an argv, ``<placeholders>`` filled from the trace) per phase ("restore", "checkpoint" or
    #: None when the phase is unknown); other keys name follow-ups, listed after it
    commands: dict
    kind: str = "incident"  # or "question": a recognised question, not a failure
    #: whether the phase (checkpoint or restore) the trace shows is worth reporting
    phased: bool = True

    def command_for(self, phase: str | None) -> tuple[str, ...]:
        return self.commands.get(phase) or self.commands[None]


#: The commands the rules name, as argvs; ``<placeholders>`` are filled from the trace when it names them.
TRIAGE = ("repair", "triage", "<checkpoint-root>")  # the first command during an incident: every way back, ranked
FALLBACK = ("repair", "fallback", "<checkpoint-root>")
VERIFY = ("repair", "verify", "<checkpoint-root>")
REBUILD = ("repair", "rebuild-manifest", "<checkpoint>", "--out", "<new-root>")
DOCTOR = ("repair", "doctor", "<flink-conf.yaml>")
#: Whether a new job (or Flink release) restores the old one's state, per state; a 1.x snapshot made one 2.x restores.
COMPAT = ("repair", "compat", "<checkpoint>", "<new-job-snapshot>")
UPGRADE = ("repair", "upgrade", "<checkpoint>", "--to", "<2.x>", "--out", "<new-savepoint>")
INSPECT = ("repair", "inspect", "<checkpoint>")


#: The start of a path in an exception's message: no spaces, or else from a URI scheme or '/' on, anything but
#: the parentheses that end the message ("(No such file or directory)") or open a stack frame, spaces included.
_PATH = r"(?:\S*|(?:[a-z][a-z0-9+]*:)?/[^()]{0,400}?)"


def _runbook(name: str) -> str:
    return f"{RUNBOOKS}/{name}.md"


#: A command key of :attr:`Rule.commands`: a missing file outside the job root the log says Flink restored from.
OUTSIDE_RESTORED_ROOT = "outside-restored-root"

RULES: tuple[Rule, ...] = (
    Rule(
        "manifest-missing",
        "a RocksDB MANIFEST (or CURRENT) file is missing: something deleted files in the RocksDB local "
        "directory (tmp cleaner, YARN/Kubernetes cleaning the container dir) or a checkpoint file is gone",
        _runbook("manifest-missing"),
        (
            # a path inside a RocksDB instance dir (.../db/MANIFEST-n): the TaskManager's local dir lost it
            (r"(?<!\S)(?P<file>\S*/db/(?:MANIFEST-\d+|CURRENT))\s*:\s*No such file or directory", "checkpoint"),
            r"(?<![^\s/])(?P<file>(?:\S*/)?(?:MANIFEST-\d+|CURRENT))\s*:\s*No such file or directory",
            r"CURRENT file points to a non-existent MANIFEST",
        ),
        {
            None: TRIAGE,
            "checkpoint": DOCTOR,
            "rebuild": REBUILD,
            "fallback": FALLBACK,
        },
    ),
    Rule(
        "checkpoint-file-missing",
        "a file the checkpoint references (an SST, MANIFEST, CURRENT or OPTIONS upload in shared/ or chk-N/, "
        "or in a native savepoint's directory) is missing from checkpoint storage: deleted by hand, by a "
        "lifecycle rule or by another deployment",
        _runbook("manifest-missing"),
        (
            # the path may hold spaces (a directory named "from broken cluster"): from its first '/' on
            rf"FileNotFoundException\s*:\s*(?:File\s+)?(?P<file>{_PATH}/(?:shared|chk-\d+|taskowned|dstl|savepoint-[0-9a-f]+-[0-9a-f]+)"
            r"/\S*[0-9a-f-]{36})\b",
            rf"File (?P<file>{_PATH}/(?:shared|chk-\d+|taskowned)/\S*[0-9a-f-]{{36}}) does not exist",
            # a state file (its name a UUID) in any directory below a job's root (its id): a _metadata whose
            # recorded path is damaged ("shared" become "sharee") names a directory Flink never wrote
            rf"FileNotFoundException\s*:\s*(?:File\s+)?(?P<file>{_PATH}/[0-9a-f]{{32}}/[^/\s]+/[0-9a-f-]{{36}})\b",
        ),
        {
            None: TRIAGE,
            "verify": VERIFY,
            "rebuild": REBUILD,
            "fallback": FALLBACK,
            # the missing file's path is not under the job root Flink restored from (RESTORED_FROM): its
            # _metadata may record a damaged path (the file is there, under another name of the root)
            OUTSIDE_RESTORED_ROOT: TRIAGE,
        },
    ),
    Rule(
        "restore-download-failed",
        "restoring a RocksDB instance failed while downloading its checkpoint files, and Flink reported "
        "another download thread's error (its registry or its file channel closed) instead of the first "
        "one: the file that failed, most often one missing from checkpoint storage, is not named in the log",
        _runbook("manifest-missing"),
        (
            # RocksDBStateDownloader downloads in parallel; the first failure closes the registry (and the
            # channels it holds), and the exception that surfaces may be a later thread's: "registry is
            # already closed", or a ClosedChannelException of a download cut short (both seen in real Flink
            # 1.20 restores of a checkpoint missing a MANIFEST). Bounded: a stack trace of frames in between.
            r"Could not restore keyed state backend for \S+ .{0,6000}?"
            r"(?:Cannot register Closeable, registry is already closed|java\.nio\.channels\.ClosedChannelException)",
        ),
        {None: VERIFY},
        phased=False,
    ),
    Rule(
        "hard-link-not-supported",
        "the RocksDB local directory is on a filesystem without hard links (network or shared filesystem, "
        "often the checkpoint filesystem itself): RocksDB cannot create its native checkpoint",
        _runbook("hard-links-not-supported"),
        (r"while link file to (?P<file>\S+?)\s*:\s*(?P<source>\S+?)\s*:\s*(?:Operation )?not supported",),
        {None: DOCTOR},
    ),
    Rule(
        "checksum-mismatch",
        "an SST or MANIFEST has bytes that do not match their checksum: a file not synced to disk before "
        "a machine crash, or corrupted in storage or in a task-local recovery copy",
        _runbook("checksum-mismatch"),
        # RocksDB 8 (Flink 2.x) puts the checksums between: "block checksum mismatch: stored = N, computed = N, type = N in F"
        (
            # a MANIFEST record: "checksum mismatch The file <db>/MANIFEST-000004 may be corrupted" (Flink 2.x)
            r"checksum mismatch The file (?P<file>\S+) may be corrupted",
            r"(?:block )?checksum mismatch(?:: stored = \d+, computed = \d+(?:, type = \d+)?)?(?: in (?P<file>\S+))?",
        ),
        {None: TRIAGE, "fallback": FALLBACK},
    ),
    Rule(
        "bad-sst",
        "an SST file is truncated, zero-filled, not an SST, or not the size its MANIFEST records (bad table "
        "magic number / file too short / size mismatch / blocks that do not decode)",
        _runbook("bad-table-magic"),
        (
            r"Bad table magic number(?:: expected \d+, found \d+)?(?: in (?P<file>\S+))?",
            r"file is too short(?: \(\d+ bytes\))? to be an sstable(?:\s*:?\s*(?P<file>\S+\.sst))?",
            # RocksDB checks each SST's size against the MANIFEST when it opens (FRocksDB 8 names both)
            r"Sst file size mismatch: (?P<file>\S+?\.sst)",
            r"RocksDBException: properties unsorted",
        ),
        {None: TRIAGE, "fallback": FALLBACK},
    ),
    Rule(
        "manifest-corrupt",
        "a RocksDB MANIFEST or CURRENT file of the checkpoint is corrupt or belongs to another checkpoint "
        "(it lists SSTs or column families this one does not have)",
        _runbook("manifest-missing"),
        (
            r"CURRENT file does not end with newline",
            r"CURRENT file corrupted",
            r"no log_file_number, next_file_number, last_sequence entry in MANIFEST",
            r"Column families not opened: ",
            r"No such file or directory: While open a file for random read: (?:(?P<file>\S+?\.sst)\b)?",
        ),
        {None: VERIFY, "restore": REBUILD},
    ),
    Rule(
        "metadata-unreadable",
        "the checkpoint's _metadata cannot be loaded by the JobMaster: missing, empty, cut short, or damaged "
        "(its head, a state handle, or the Java-serialized CheckpointProperties at its end)",
        _runbook("metadata-unreadable"),
        (
            r"invalid checkpoint ID: -?\d+",
            r"Unexpected magic number\. This can have multiple reasons",
            r"Cannot find meta data file _metadata in directory (?P<file>\S+?)\.? Please",
            # a directory where _metadata should be (or any file the JobMaster cannot open)
            r"FileNotFoundException\s*:\s*(?P<file>\S*/_metadata) \((?:Is a directory|Permission denied)\)",
            # what ObjectInputStream or the metadata reader throws, under the JobMaster's start
            r"Could not start the JobMaster\..{0,4000}?Caused by: java\.io\.(?:EOF|UTFDataFormat|StreamCorrupted)Exception",
        ),
        {None: TRIAGE, "verify": VERIFY, "fallback": FALLBACK},
        phased=False,
    ),
    Rule(
        "metadata-trailer-unreadable",
        "the CheckpointProperties Java-serialized at the end of the checkpoint's _metadata (metadata V4 on) "
        "does not deserialize, although every operator's state before it may be intact: bytes zeroed or "
        "changed there, or a _metadata cut short",
        _runbook("metadata-unreadable"),
        (
            r"Couldn'?t deserialize checkpoint properties",  # normalize() drops quotes
            r"InvalidClassException: org\.apache\.flink\.runtime\.checkpoint\.\S+; local class incompatible",
            # a field descriptor zeroed (Flink 2.1: "invalid descriptor for field discardCancelled")
            r"InvalidClassException: org\.apache\.flink\.runtime\.checkpoint\.\S+; invalid descriptor for field",
        ),
        # inspect's metadata finding names the trailer, its offset and what does not decode there
        {None: INSPECT, "triage": TRIAGE, "verify": VERIFY, "fallback": FALLBACK},
        phased=False,
    ),
    Rule(
        "state-file-unreadable",
        "a state file Flink decodes itself does not decode: operator state, a keyed backend's meta data "
        "(state names and serializers) or a heap key-group stream, damaged in storage or inline in _metadata",
        _runbook("state-file-corrupt"),
        (
            # (not a Kryo value the heap backend could not read: kryo-unreadable)
            r"Failed when trying to restore (?:operator state backend|heap backend)"
            r"(?!.{0,3000}?at org\.apache\.flink\.api\.java\.typeutils\.runtime\.kryo\.KryoSerializer\.deserialize)",
            # the keyed backend's meta data (state names, serializers) cut short or garbled: the next cause
            r"BackendBuildingException: Caught unexpected exception\.(?:(?!Caused by).){0,3000}"
            r"Caused by: java\.io\.(?:EOF|UTFDataFormat|StreamCorrupted)Exception",
            r"Could not restore operator state backend for \S+",
            r"field serializer snapshots should be present",
            r"Unrecognized version: -?\d+",
            # a canonical savepoint's key-group stream (FullSnapshotRestoreOperation), whatever it threw
            r"\bat org\.apache\.flink\.runtime\.state\.restore\.FullSnapshotRestoreOperation\b",
            # a length read from damaged bytes: a serializer asks for gigabytes (Flink 2.3, heap key groups)
            r"OutOfMemoryError: Java heap space(?: at \S+){0,4}? at org\.apache\.flink\.api\.common\.typeutils\.\S+?\.deserialize\(",
        ),
        {None: TRIAGE, "verify": VERIFY, "fallback": FALLBACK},
    ),
    Rule(
        "changelog-corrupt",
        "the changelog state backend cannot replay the changes logged since the last materialization: a "
        "changelog (DSTL) file is damaged, cut short or missing, or _metadata points into it at an offset "
        "where no change set starts",
        _runbook("state-file-corrupt"),
        (
            # Flink's reader of DSTL files (StateChangeFormat) and its applier, whatever it threw: EOF (an
            # empty file),
            # 'Premature EOF from inputStream', an unknown operation code (NullPointerException: -2), a
            # length read from damaged bytes (OutOfMemoryError: Java heap space)
            r"\bat org\.apache\.flink\.changelog\.fs\.StateChangeFormat\b",
            r"\bat org\.apache\.flink\.state\.changelog\.StateChangeOperation\.byCode\b",
            r"\bat org\.apache\.flink\.state\.changelog\.restore\.ChangelogBackendLogApplier\.apply",
        ),
        {None: TRIAGE, "verify": VERIFY, "fallback": FALLBACK},
    ),
    Rule(
        "state-incompatible",
        "a state's serializer in the new job is incompatible with the one its checkpoint recorded: the job "
        "changed the state's type (a POJO field added as another type, a new value type), or a Flink 1.x "
        "snapshot is restored in Flink 2.x, which gives POJO fields of type List, Map and Set its own "
        "serializers where 1.x used Kryo",
        _runbook("state-incompatible"),
        (
            r"StateMigrationException: The new state serializer \(.{0,400}?\) must not be incompatible",
            r"StateMigrationException: The new (?:namespace|element|state) serializer .{0,400}?must (?:not be in|be )compatible",
        ),
        {None: COMPAT, "upgrade": UPGRADE, "inspect": INSPECT},
    ),
    Rule(
        "key-serializer-incompatible",
        "the keys of a keyed operator's state are of another type than the new job's: its keyBy changed, or "
        "its uid now names another keyed operator (a uid renamed or swapped), or a Flink 1.x snapshot with "
        "Kryo keys restored in Flink 2.x",
        _runbook("state-incompatible"),
        (r"StateMigrationException: The new key serializer .{0,400}?must be compatible",),
        {None: COMPAT, "upgrade": UPGRADE, "inspect": INSPECT},
    ),
    Rule(
        "kryo-unreadable",
        "a value or key Flink serialized with Kryo does not read back: most often state Flink 1.x wrote with "
        "Kryo 2.24 restored in Flink 2.x (Kryo 5 lays out collections, numbers and registrations "
        "differently), else Kryo registrations changed between job versions, or damaged bytes",
        _runbook("state-incompatible"),
        (
            r"at org\.apache\.flink\.api\.java\.typeutils\.runtime\.kryo\.KryoSerializer\.deserialize\b",
            r"com\.esotericsoftware\.kryo\.KryoException: .{0,200}?(?=\s+at\s)",
        ),
        {None: UPGRADE, "compat": COMPAT, "verify": VERIFY},
    ),
    Rule(
        "metadata-already-exists",
        "another job already wrote this checkpoint's _metadata: two deployments share one checkpoint "
        "directory and job id (a fixed job id, no per-deployment directory)",
        _runbook("metadata-already-exists"),
        (r"Target file (?P<file>\S+?/_metadata) already exists", r"(?P<file>\S*/chk-\d+/_metadata) already exists"),
        {None: TRIAGE, "fallback": FALLBACK},
    ),
    Rule(
        "tolerable-failure-threshold",
        "more checkpoints failed in a row than execution.checkpointing.tolerable-failed-checkpoints allows "
        "(default 0), so the job failed over; the checkpoint failures themselves are the cause",
        _runbook("tolerable-failure-threshold"),
        (r"Exceeded checkpoint tolerable failure threshold",),
        {None: DOCTOR},
        phased=False,
    ),
    Rule(
        "kafka-offset-commit",
        "the Kafka source could not commit offsets to the broker on checkpoint completion; Flink restores "
        "from the offsets in its checkpoint, so state is not affected",
        _runbook("kafka-offset-commit"),
        (
            r"Failed to commit consumer offsets for checkpoint (?P<checkpoint>\d+)",
            r"Failed to commit offsets for checkpoint (?P<checkpoint>\d+)",
        ),
        {None: ("repair", "inspect", "<checkpoint-root>")},
        phased=False,
    ),
    Rule(
        "small-state-inline",
        "a question about small state: RocksDB keeps all keyed state (whatever its size); only checkpoint "
        "files below the inline threshold are stored inside _metadata",
        _runbook("small-state-inline"),
        (
            r"(?<!Loading configuration property: )(?P<key>state\.backend\.fs\.memory-threshold|"
            r"state\.storage\.fs\.memory-threshold|execution\.checkpointing\.data-inline-threshold)"
            r"(?=.{0,200}?(?:rocksdb|\?))",
        ),
        {None: ("repair", "inspect", "<checkpoint>", "--files")},
        kind="question",
        phased=False,
    ),
)

#: Markers of the phase a failure happened in, searched around an occurrence (the nearest one wins).
PHASE_MARKERS = {
    "restore": r"restoreFromLocalState|RocksDB\.open|Could not restore|RestoreOperation|restoreState|"
    r"Exception while creating StreamOperatorStateContext|BackendBuildingException",
    "checkpoint": r"createCheckpoint|takeDBNativeCheckpoint|snapshotState|Could not complete snapshot|"
    r"Could not materialize checkpoint|triggerCheckpoint|performCheckpoint|Failure to finalize checkpoint|"
    r"finalizeCheckpoint",
}

#: ``job_<job>_op_<operator>_<hash>__<subtask>_<parallelism>__uuid_<uuid>``: a RocksDB instance dir.
ROCKSDB_DIR = re.compile(
    r"job_(?P<job_id>[0-9a-f]{32})_op_(?P<operator>.+?)_(?P<operator_id>[0-9a-f]{32})__"
    r"(?P<subtask>\d+)_(?P<parallelism>\d+)__uuid_(?P<uuid>[0-9a-f-]{36})",
    re.IGNORECASE,
)

#: Other places a trace names the operator and subtask, most specific first.
TASK_NAMES = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"keyed state backend for (?P<operator>[^\s(]+?)_(?P<operator_id>[0-9a-f]{32})_\((?P<subtask>\d+)/(?P<parallelism>\d+)\)",
        r"for operator (?P<operator>[^()]{1,120}?) \((?P<subtask>\d+)/(?P<parallelism>\d+)\)",
        # a task name with its attempt number, as the TaskManager logs it: "per-user (2/4)#0", maybe followed
        # by the attempt id "(<graph>_<job vertex>_<subtask>_<attempt>)": the vertex id is the id of the
        # chain's first operator, which a keyed operator is (keyBy starts a chain)
        r"(?<![\w\-.>\[\]])(?P<operator>\w[\w\-.>\[\]]*(?: \w[\w\-.>\[\]]*){0,3}) \((?P<subtask>\d+)/(?P<parallelism>\d+)\)#\d+"
        r"(?: \([0-9a-f]{32}_(?P<operator_id>[0-9a-f]{32})_\d+_\d+\))?",
    )
)

JOB_ID = (
    re.compile(r"for job (?P<job_id>[0-9a-f]{32})\b", re.IGNORECASE),
    re.compile(r"/(?P<job_id>[0-9a-f]{32})/(?:chk-\d+|shared|taskowned)\b", re.IGNORECASE),
    re.compile(r"\bjob_(?P<job_id>[0-9a-f]{32})_", re.IGNORECASE),
)

CHECKPOINT_ID = (
    re.compile(r"checkpoint (?P<checkpoint>\d+) for job", re.IGNORECASE),
    re.compile(r"snapshot (?P<checkpoint>\d+) for operator", re.IGNORECASE),
    re.compile(r"for checkpoint (?P<checkpoint>\d+)", re.IGNORECASE),
    re.compile(r"/chk-(?P<checkpoint>\d+)(?:\.tmp)?/", re.IGNORECASE),
)

#: A job checkpoint root named by a path below it; group ``sub`` is ``chk-N``, ``shared`` or ``taskowned``.
CHECKPOINT_PATH = re.compile(
    r"(?P<root>(?:[a-z][a-z0-9+]*:)?/[^\s:'\"]*?/[0-9a-f]{32})/(?P<sub>chk-\d+|shared|taskowned)\b",
    re.IGNORECASE,
)

#: The checkpoint the JobManager restores from, as it logs it: "Restoring job <id> from Checkpoint 5 @ <time> for
#: <id> located at <chk-N>." (a completed checkpoint's description) or "Starting job <id> from savepoint <chk-N>".
RESTORED_FROM = re.compile(
    r"(?:located at|from savepoint) (?P<root>(?:[a-z][a-z0-9+]*:)?/[^\s'\"]*?)/chk-\d+\b",
    re.IGNORECASE,
)

#: Characters pasted logs carry that the patterns must not see: odd spaces, curly quotes, dashes.
ODD_CHARACTERS = {
    0xA0: " ", 0x202F: " ", 0x2007: " ", 0x200B: "", 0xFEFF: "",
    0x2018: "'", 0x2019: "'", 0x201C: '"', 0x201D: '"', 0x2013: "-", 0x2014: "-",
}


def normalize(text: str) -> str:
    """One line of text: odd spaces made plain, quotes dropped, every whitespace run one space, wrapped
    paths joined (``.../chk-1`` + line break + ``/_metadata`` is one path again)."""
    text = text.translate(ODD_CHARACTERS).replace("\u00c2 ", " ").replace("\u00c2", "")
    text = re.sub(r"[\"'`]", "", text)  # quotes around paths in pasted text; never part of what we match
    text = re.sub(r"\s+", " ", text)
    # a line break inside a path: the piece before already holds a '/' and the next starts with '/'
    return re.sub(r"(/[^\s/]*[\w-]) (?=/[\w.-])", r"\1", text)


def local_path(uri: str) -> str:
    """``file:/x`` and ``file:///x`` as ``/x``; other URIs unchanged."""
    match = re.match(r"file:/+(.*)", uri)
    return "/" + match.group(1) if match else uri
