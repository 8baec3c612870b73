"""``repair doctor``: lint a Flink configuration for the hazards behind the checkpoint incidents.

Reads a ``flink-conf.yaml`` (flat ``key: value``), a Flink 1.19+/2.x ``config.yaml`` (nested YAML,
flattened to dotted keys), the ``flinkConfiguration`` of a Kubernetes ``FlinkDeployment``, or
``-D key=value`` lines. Each check is a small function over the flattened configuration; key names per
Flink version are data in :mod:`repair.ops.doctor.flink_keys`. Returns a :class:`DoctorResult`; its ``to_json()``
is documented in docs/json-contracts.md.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from repair.errors import UsageError
from repair.findings import Problem, Severity, kind_of
from repair.io.textinput import text_or_file
from repair.ops.doctor.config import check_is_flink_config, parse_config
from repair.ops.doctor.flink_keys import DEFAULT_INLINE_THRESHOLD, DEFAULT_NUM_RETAINED, OPTIONS, Version, parse_version
from repair.results import CommandResult

SEVERITIES = ("error", "warning", "info")
RUNBOOKS = "repair/runbooks"

#: A path component or scheme naming a network, shared or FUSE filesystem (no hard links, no local speed).
NETWORK_FS = re.compile(
    r"(?:^|[/_.\-:])(nfs\d?|smb|cifs|efs|azure\w*|afs|s3fs|gcsfuse|goofys|mountpoint-s3|blobfuse\w*|fuse|juicefs|"
    r"glusterfs?|cephfs|lustre|gpfs|hdfs|dbfs|s3a?|gs|abfss?|wasbs?|oss)(?:$|[/_.\-:])",
    re.IGNORECASE,
)
#: Local directories that cleaners empty (systemd-tmpfiles, tmpwatch) or that YARN/Kubernetes remove.
TMP_DIR = re.compile(r"^(?:file:/+)?/(?:var/)?tmp(?:/|$)")


@dataclass(frozen=True)
class ConfigFinding(Problem):
    """A hazard in a Flink configuration: which check, which key and value, why it matters, the fix.
    Its JSON document has every one of these, null included."""

    check: str = field(kw_only=True)
    key: str = field(kw_only=True)
    value: str | None = field(kw_only=True)
    why: str = field(kw_only=True)
    fix: str = field(kw_only=True)
    runbook: str | None = field(default=None, kw_only=True)

    @classmethod
    def of(cls, check: str, severity: str, key: str, value: str | None, why: str, fix: str, runbook: str | None = None) -> "ConfigFinding":
        """The finding of ``check`` (kebab-case, its ``kind`` in snake_case) on ``key``: ``message`` is ``key: why``."""
        return cls(kind_of(check), f"{key}: {why}", severity=Severity(severity), check=check, key=key, value=value, why=why,
                   fix=fix, runbook=runbook)

    def context(self) -> tuple[tuple[str, Any], ...]:
        return (("check", self.check), ("key", self.key), ("value", self.value), ("why", self.why), ("fix", self.fix),
                ("runbook", self.runbook))


@dataclass
class DoctorResult(CommandResult):
    source: str
    format: str  # "flat-yaml", "nested-yaml", "flink-deployment" or "dynamic-properties"
    flink_version: str | None
    config: dict[str, str]
    findings: list[ConfigFinding]
    #: Where ``flink_version`` came from: "argument" (--flink), "flink-deployment" (its spec.flinkVersion) or None.
    flink_version_source: str | None = None

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITIES}

    def document(self) -> dict:
        return {"source": self.source, "format": self.format, "flink_version": self.flink_version,
                "flink_version_source": self.flink_version_source, "counts": self.counts(), "findings": [f.to_json() for f in self.findings],
                "config": self.config}


# ---------------------------------------------------------------------------------------------------
# reading a configuration


def doctor(text_or_path: str, *, flink_version: str | None = None, source: str | None = None) -> DoctorResult:
    """Lint ``text_or_path`` (a file path, or the configuration text itself)."""
    text, name = text_or_file(text_or_path)
    source = source or name
    try:
        version = parse_version(flink_version)
    except ValueError as error:
        raise UsageError(str(error)) from None
    fmt, config, deployment_version = parse_config(text)
    check_is_flink_config(text, config)
    version_source = "argument" if flink_version else None
    if flink_version is None and deployment_version is not None:
        try:  # a FlinkDeployment says which Flink reads it: judge that version's key names
            version, flink_version, version_source = parse_version(deployment_version), deployment_version, "flink-deployment"
        except ValueError:
            pass  # a version doctor does not know the keys of: judged without one, as without --flink
    findings = [f for check in CHECKS for f in check(config, version)]
    findings.sort(key=lambda f: f.severity.rank)
    return DoctorResult(source, fmt, flink_version, config, findings, version_source)


# ---------------------------------------------------------------------------------------------------
# helpers over a flattened configuration


def _lookup(config: dict[str, str], option_id: str, version: Version | None) -> tuple[str, str] | None:
    """``(key, value)`` of an option under its newest name that is set and that ``version`` reads."""
    option = OPTIONS[option_id]
    for name in reversed(option.all_names):
        if name in config and (version is None or option.since(name) <= version):
            return name, config[name]
    return None


def _dirs(value: str) -> list[str]:
    """RocksDB and local-recovery dirs: comma-separated (and, in flink-conf.yaml, path-separator) lists."""
    return [d.strip() for d in re.split(r"[,;]|(?<!file):(?!//)", value) if d.strip()]


def _local(path: str) -> str:
    match = re.match(r"file:(?://)?(/.*)", path)
    return (match.group(1) if match else path).rstrip("/") or "/"


def _size(text: str) -> int | None:
    match = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)(i?b?)(?:ytes?)?\s*", text.lower())
    if not match:
        return None
    return int(match.group(1)) * 1024 ** " kmgt".index(match.group(2) or " ")


def _runbook(name: str) -> str:
    return f"{RUNBOOKS}/{name}.md"


# ---------------------------------------------------------------------------------------------------
# the checks


def check_rocksdb_localdir(config: dict[str, str], version: Version | None) -> list[ConfigFinding]:
    found = _lookup(config, "rocksdb_localdir", version)
    checkpoint = _lookup(config, "checkpoint_dir", version)
    key = OPTIONS["rocksdb_localdir"].name_for(version)
    if not found:
        return [ConfigFinding.of(
            "rocksdb-localdir", "info", key, None,
            "not set: RocksDB works in the TaskManager's temporary directories (io.tmp.dirs; on YARN the "
            "container's appcache dir). A tmp cleaner or the cluster manager deleting files there gives "
            "'MANIFEST-000006: No such file or directory' at checkpoint time.",
            f"set {key} to a dedicated directory on a local disk (SSD) that no cleaner touches",
            _runbook("manifest-missing"),
        )]
    key, value = found
    findings = []
    for directory in _dirs(value):
        if checkpoint and _is_under(_local(directory), _local(checkpoint[1])):
            findings.append(ConfigFinding.of(
                "rocksdb-localdir-on-checkpoint-fs", "error", key, value,
                f"{directory} is inside the checkpoint directory {checkpoint[1]} ({checkpoint[0]}): RocksDB's "
                "working files live on the checkpoint filesystem, which (as a network or shared filesystem) "
                "has no hard links: 'while link file to ...: Not supported'.",
                f"move {key} to a local disk (e.g. /mnt/local-ssd/flink-rocksdb); keep {checkpoint[0]} where it is",
                _runbook("hard-links-not-supported"),
            ))
        elif NETWORK_FS.search(directory):
            findings.append(ConfigFinding.of(
                "rocksdb-localdir-network-fs", "error", key, value,
                f"{directory} looks like a network, shared or FUSE filesystem: RocksDB needs hard links and "
                "fast local I/O ('while link file to ...: Not supported').",
                f"set {key} to a directory on a local disk",
                _runbook("hard-links-not-supported"),
            ))
        elif TMP_DIR.match(directory):
            findings.append(ConfigFinding.of(
                "rocksdb-localdir-tmp", "warning", key, value,
                f"{directory} is under /tmp, which tmp cleaners (systemd-tmpfiles, tmpwatch) empty by age: "
                "RocksDB's MANIFEST and SST files disappear under a running job.",
                f"set {key} to a dedicated directory outside /tmp, or exclude it from the cleaner",
                _runbook("manifest-missing"),
            ))
    return findings


def _is_under(path: str, parent: str) -> bool:
    if "://" in parent and not parent.startswith("file:"):
        return False
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def check_shared_checkpoint_dir(config: dict[str, str], version: Version | None) -> list[ConfigFinding]:
    findings = []
    job_id = _lookup(config, "job_id", version)
    checkpoint = _lookup(config, "checkpoint_dir", version)
    if job_id:
        findings.append(ConfigFinding.of(
            "fixed-job-id", "warning" if checkpoint else "info", job_id[0], job_id[1],
            "a fixed job id: every deployment started with this configuration writes to "
            "<checkpoint-dir>/<job-id>/chk-N; two of them running, or a redeploy restoring an older checkpoint, "
            "collide on chk-N ('Target file .../chk-N/_metadata already exists') and mix their files in shared/.",
            "give every deployment its own checkpoint directory (e.g. end the checkpoint dir with the deployment "
            "name) or drop the fixed job id",
            _runbook("metadata-already-exists"),
        ))
    subdir = _lookup(config, "create_subdir", version)
    if subdir and subdir[1].lower() == "false":
        findings.append(ConfigFinding.of(
            "no-job-id-subdir", "error" if checkpoint else "warning", subdir[0], subdir[1],
            "checkpoints are written directly into the checkpoint directory, without a <job-id> subdirectory: "
            "every job using this directory writes the same chk-N paths.",
            f"remove {subdir[0]} (default true) or give each job its own checkpoint directory",
            _runbook("metadata-already-exists"),
        ))
    return findings


def check_tolerable_failures(config: dict[str, str], version: Version | None) -> list[ConfigFinding]:
    found = _lookup(config, "tolerable_failures", version)
    key = OPTIONS["tolerable_failures"].name_for(version)
    fix = f"set {key} to a small number (e.g. 3) so that one failed checkpoint does not restart the job"
    if not found:  # the same hazard as an explicit 0, so the same severity
        return [ConfigFinding.of("tolerable-failures", "warning", key, None,
                        "not set, so the default 0: Flink tolerates no failed checkpoint; the first one that fails "
                        "(timeout, storage hiccup) fails the job ('Exceeded checkpoint tolerable failure threshold').",
                        fix, _runbook("tolerable-failure-threshold"))]
    if found[1].strip() == "0":
        return [ConfigFinding.of("tolerable-failures", "warning", found[0], found[1],
                        "0: the first failed checkpoint fails the job ('Exceeded checkpoint tolerable failure "
                        "threshold').", fix, _runbook("tolerable-failure-threshold"))]
    return []


def check_num_retained(config: dict[str, str], version: Version | None) -> list[ConfigFinding]:
    found = _lookup(config, "num_retained", version)
    key = found[0] if found else OPTIONS["num_retained"].name_for(version)
    raw = found[1] if found else None
    try:
        retained = int(raw) if raw is not None else DEFAULT_NUM_RETAINED
    except ValueError:
        return [ConfigFinding.of("num-retained", "error", key, raw, "not a number", f"set {key} to an integer >= 2")]
    if retained >= 2:
        return []
    what = f"{retained}" if found else f"not set (default {DEFAULT_NUM_RETAINED})"
    return [ConfigFinding.of(
        "num-retained", "warning", key, raw,
        f"{what}: only one checkpoint is kept, so when it is damaged (a missing MANIFEST, a bad SST) there is "
        "no older checkpoint to fall back to (repair fallback finds none).",
        f"set {key} to 2 or more (3 is common); shared SST files make the extra checkpoints cheap",
        None,
    )]


def check_local_recovery(config: dict[str, str], version: Version | None) -> list[ConfigFinding]:
    found = _lookup(config, "local_recovery", version)
    if not found or found[1].lower() != "true":
        return []
    dirs = _lookup(config, "local_backup_dirs", version)
    findings = [ConfigFinding.of(
        "local-recovery", "info", found[0], found[1],
        "task-local recovery keeps a second copy of each TaskManager's state on its local disk and restores "
        "from it first; after a machine crash that copy can be torn ('checksum mismatch' in a localState dir). "
        "Flink then falls back to the checkpoint, but a crash-looping TaskManager shows the error.",
        "keep the local-recovery dirs on a local disk that survives only with the TaskManager; if a restore "
        "fails on a localState path, delete that TaskManager's localState dir and restart",
        _runbook("checksum-mismatch"),
    )]
    if dirs:
        for directory in _dirs(dirs[1]):
            if NETWORK_FS.search(directory):
                findings.append(ConfigFinding.of(
                    "local-recovery-network-fs", "warning", dirs[0], dirs[1],
                    f"{directory} looks like a network filesystem: local recovery is only useful (and only "
                    "safe against hard-link limits) on a local disk",
                    f"set {dirs[0]} to a local disk", _runbook("checksum-mismatch"),
                ))
    return findings


def check_inline_threshold(config: dict[str, str], version: Version | None) -> list[ConfigFinding]:
    found = _lookup(config, "inline_threshold", version)
    if not found:
        return []
    key, value = found
    size = _size(value)
    if size is None:
        return [ConfigFinding.of("inline-threshold", "error", key, value, "not a memory size (e.g. 20kb)",
                        f"set {key} to a size such as 20kb")]
    if size > 1024 * 1024:
        severity, why = "warning", "above 1 MiB"
    elif size > 100 * 1024:
        severity, why = "warning", "far above the 20 kb default"
    else:
        return []
    return [ConfigFinding.of(
        "inline-threshold", severity, key, value,
        f"{why}: every state file below it is stored inside _metadata, for every subtask; _metadata grows to "
        "parallelism x threshold per operator, the JobManager holds it in memory and writes it on every "
        "checkpoint.",
        f"keep {key} at the default ({DEFAULT_INLINE_THRESHOLD // 1024} kb) or lower",
        _runbook("small-state-inline"),
    )]


def check_key_names(config: dict[str, str], version: Version | None) -> list[ConfigFinding]:
    """Renamed keys: a name the version does not read yet (error), an older name (deprecated), both set."""
    findings = []
    for option in OPTIONS.values():
        used = [n for n in option.all_names if n in config]
        for name in used:
            if version is not None and option.since(name) > version:
                old = option.name_for(version)
                findings.append(ConfigFinding.of(
                    "unknown-key", "error", name, config[name],
                    f"Flink {_v(version)} does not read {name} (introduced in {_v(option.since(name))}): the "
                    "setting is silently ignored.",
                    f"use {old} for Flink {_v(version)}", None,
                ))
            elif name != option.name_for(version):
                current = option.name_for(version)
                severity = "warning" if version is not None else "info"
                findings.append(ConfigFinding.of(
                    "deprecated-key", severity, name, config[name],
                    f"renamed to {current} in Flink {_v(option.since(current))}; the old name is still read as a "
                    "deprecated key, but mixing names makes it easy to set an option twice.",
                    f"rename {name} to {current}" + ("" if version else f" (on Flink {_v(option.since(current))} or newer)"),
                    None,
                ))
        if len(used) > 1:
            findings.append(ConfigFinding.of(
                "key-set-twice", "warning", ", ".join(used), " | ".join(config[n] for n in used),
                f"one option under {len(used)} names; Flink reads only one of them (the newest name it knows).",
                f"keep only {option.name_for(version)}", None,
            ))
    return findings


def _v(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def check_misspelled_keys(config: dict[str, str], version: Version | None) -> list[ConfigFinding]:
    """A key Flink does not have that is one or two typos from a key behind these checks: Flink ignores
    unknown keys silently, so the setting the user meant never happens."""
    known = sorted({name for option in OPTIONS.values() for name in option.all_names})
    findings = []
    for key in config:
        if key in known:
            continue
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.9)
        if close:
            findings.append(ConfigFinding.of(
                "misspelled-key", "warning", key, config[key],
                f"Flink has no option {key}: it ignores it silently, so the setting never takes effect.",
                f"did you mean {close[0]}?", None,
            ))
    return findings


CHECKS = (
    check_misspelled_keys,
    check_rocksdb_localdir,
    check_shared_checkpoint_dir,
    check_tolerable_failures,
    check_num_retained,
    check_local_recovery,
    check_inline_threshold,
    check_key_names,
)
