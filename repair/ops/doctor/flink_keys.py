"""Flink configuration keys behind the checkpoint incidents, per Flink version, as data.

Checked against the ``ConfigOption`` definitions in the Flink jars (``CheckpointingOptions``,
``StateBackendOptions``, ``StateRecoveryOptions``, ``RocksDBOptions``, ``PipelineOptionsInternal``,
``ExecutionCheckpointingOptions``, ``SavepointConfigOptions``) of Flink 1.15.4, 1.18.1, 1.20.3, 2.1.1 and 2.3.0
(``javap -c -constants``: the key and its ``withDeprecatedKeys``). Each option lists its names, oldest
first, with the first version that reads the name. From 1.20 on, the older names are still accepted
as deprecated keys (in 2.1.1 and 2.3.0 too); a name newer than the Flink version is unknown there and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

Version = tuple[int, int]


@dataclass(frozen=True)
class Option:
    id: str
    #: ``(first version that reads it, name)``, oldest first
    names: tuple[tuple[Version, str], ...]

    @property
    def all_names(self) -> tuple[str, ...]:
        return tuple(name for _, name in self.names)

    def name_for(self, version: Version | None) -> str:
        """The current name in ``version`` (the newest name when the version is unknown)."""
        if version is None:
            return self.names[-1][1]
        return [name for since, name in self.names if since <= version][-1]

    def since(self, name: str) -> Version:
        return next(since for since, n in self.names if n == name)


_ALWAYS: Version = (1, 0)
_RENAMED: Version = (1, 20)  # 1.20 moved the checkpointing keys to execution.checkpointing.* / execution.state-recovery.*

OPTIONS: dict[str, Option] = {
    o.id: o
    for o in (
        Option("backend", ((_ALWAYS, "state.backend"), ((1, 17), "state.backend.type"))),
        Option("checkpoint_dir", ((_ALWAYS, "state.checkpoints.dir"), (_RENAMED, "execution.checkpointing.dir"))),
        Option("savepoint_dir", ((_ALWAYS, "state.savepoints.dir"), (_RENAMED, "execution.checkpointing.savepoint-dir"))),
        Option("num_retained", ((_ALWAYS, "state.checkpoints.num-retained"), (_RENAMED, "execution.checkpointing.num-retained"))),
        Option("incremental", ((_ALWAYS, "state.backend.incremental"), (_RENAMED, "execution.checkpointing.incremental"))),
        Option("inline_threshold", (
            (_ALWAYS, "state.backend.fs.memory-threshold"),
            ((1, 13), "state.storage.fs.memory-threshold"),
            (_RENAMED, "execution.checkpointing.data-inline-threshold"),
        )),
        Option("local_recovery", ((_ALWAYS, "state.backend.local-recovery"), (_RENAMED, "execution.state-recovery.from-local"))),
        Option("local_backup_dirs", (
            (_ALWAYS, "taskmanager.state.local.root-dirs"), (_RENAMED, "execution.checkpointing.local-backup.dirs"),
        )),
        Option("restore_path", ((_ALWAYS, "execution.savepoint.path"), (_RENAMED, "execution.state-recovery.path"))),
        Option("claim_mode", ((_ALWAYS, "execution.savepoint-restore-mode"), (_RENAMED, "execution.state-recovery.claim-mode"))),
        Option("create_subdir", (((1, 19), "state.checkpoints.create-subdir"), (_RENAMED, "execution.checkpointing.create-subdir"))),
        Option("tolerable_failures", ((_ALWAYS, "execution.checkpointing.tolerable-failed-checkpoints"),)),
        Option("rocksdb_localdir", ((_ALWAYS, "state.backend.rocksdb.localdir"),)),
        Option("job_id", ((_ALWAYS, "$internal.pipeline.job-id"),)),
    )
}

#: Defaults that the hazards depend on (same in every checked version).
DEFAULT_NUM_RETAINED = 1
DEFAULT_INLINE_THRESHOLD = 20 * 1024


def parse_version(text: str | None) -> Version | None:
    """``"1.20.3"``, ``"1.20"``, ``"2"`` -> ``(1, 20)``, ``(1, 20)``, ``(2, 0)``."""
    if not text:
        return None
    parts = [int(p) for p in text.strip().lstrip("v").split(".")[:2] if p.isdigit()]
    if not parts:
        raise ValueError(f"not a Flink version: {text!r}")
    version = (parts[0], parts[1] if len(parts) > 1 else 0)
    if not OLDEST_VERSION <= version < NEXT_MAJOR:
        raise ValueError(f"Flink {text} is not a version doctor knows the keys of: 1.11 to 2.x (names read from the 1.15 to 2.3 jars)")
    return version


#: The versions doctor judges: 1.11 (the oldest line with today's key names) to any 2.x.
OLDEST_VERSION = (1, 11)
NEXT_MAJOR = (3, 0)
