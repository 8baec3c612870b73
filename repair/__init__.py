"""flink-checkpoint-repair: read, verify, repair and export Flink RocksDB checkpoints without a JVM.

The library behind the ``repair`` command; each function is one command and returns its result
object, whose ``to_json()`` is the command's ``--json`` document (docs/library.md has an example of
each)::

    import repair

    report = repair.verify("s3://bucket/checkpoints/<job-id>")
    if not report.ok:
        choice = repair.fallback("s3://bucket/checkpoints/<job-id>")

Errors a caller can cause are :class:`RepairError` (:class:`FormatError` for bad bytes, naming the
file and offset; :class:`StorageError` for what could not be read or written; :class:`UsageError`
for arguments). Inputs are only ever read; writing functions take a new output location.

Names are loaded on first use, so ``import repair`` is cheap and Spark (the ``spark`` extra) is
needed only when a function is given ``master=``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the module defining it.
_EXPORTS = {
    # commands
    "triage": "repair.ops.triage",
    "inspect": "repair.ops.inspect",
    "verify": "repair.ops.verify.engine",
    "fallback": "repair.ops.fallback",
    "orphans": "repair.ops.orphans",
    "size": "repair.ops.size",
    "diff": "repair.ops.diff",
    "watch": "repair.ops.watch",
    "compat": "repair.ops.compat",
    "relocate": "repair.ops.relocate",
    "rebuild_manifest": "repair.ops.rebuild",
    "rebuild_db": "repair.ops.rebuild.db",
    "export": "repair.ops.export.job",
    "read_state": "repair.ops.export.scan",
    "iter_state_batches": "repair.ops.export.scan",
    "write_savepoint": "repair.ops.write_savepoint",
    "rescale": "repair.ops.write_savepoint",
    "edit": "repair.ops.edit",
    "upgrade": "repair.ops.upgrade",
    "diagnose": "repair.ops.diagnose.incidents",
    "doctor": "repair.ops.doctor.lint",
    # their results
    "TriageResult": "repair.ops.triage",
    "InspectResult": "repair.ops.inspect",
    "VerifyResult": "repair.ops.verify.engine",
    "FallbackResult": "repair.ops.fallback",
    "OrphansResult": "repair.ops.orphans",
    "SizeResult": "repair.ops.size",
    "DiffResult": "repair.ops.diff",
    "WatchResult": "repair.ops.watch",
    "CompatResult": "repair.ops.compat",
    "RelocateResult": "repair.ops.relocate",
    "RebuildResult": "repair.ops.rebuild.checkpoint",
    "RebuildDbResult": "repair.ops.rebuild.db",
    "ExportResult": "repair.ops.export.job",
    "WriteSavepointResult": "repair.ops.write_savepoint",
    "EditResult": "repair.ops.edit",
    "UpgradeResult": "repair.ops.upgrade",
    "DiagnoseResult": "repair.ops.diagnose.incidents",
    "DoctorResult": "repair.ops.doctor.lint",
    # findings, errors, storage
    "Severity": "repair.findings",
    "RepairError": "repair.errors",
    "FormatError": "repair.errors",
    "TruncatedError": "repair.errors",
    "StorageError": "repair.errors",
    "UsageError": "repair.errors",
    "Storage": "repair.io.storage",
    "StorageOptions": "repair.io.options",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'repair' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads these
    # ruff: noqa: F401 (re-exported through __all__, which is built from _EXPORTS)
    from repair.errors import FormatError, RepairError, StorageError, TruncatedError, UsageError
    from repair.findings import Severity
    from repair.io.options import StorageOptions
    from repair.io.storage import Storage
    from repair.ops.compat import CompatResult, compat
    from repair.ops.diagnose.incidents import DiagnoseResult, diagnose
    from repair.ops.diff import DiffResult, diff
    from repair.ops.doctor.lint import DoctorResult, doctor
    from repair.ops.edit import EditResult, edit
    from repair.ops.export.job import ExportResult, export
    from repair.ops.export.scan import iter_state_batches, read_state
    from repair.ops.fallback import FallbackResult, fallback
    from repair.ops.inspect import InspectResult, inspect
    from repair.ops.orphans import OrphansResult, orphans
    from repair.ops.rebuild import rebuild_manifest
    from repair.ops.rebuild.checkpoint import RebuildResult
    from repair.ops.rebuild.db import RebuildDbResult, rebuild_db
    from repair.ops.relocate import RelocateResult, relocate
    from repair.ops.size import SizeResult, size
    from repair.ops.triage import TriageResult, triage
    from repair.ops.upgrade import UpgradeResult, upgrade
    from repair.ops.verify.engine import VerifyResult, verify
    from repair.ops.watch import WatchResult, watch
    from repair.ops.write_savepoint import WriteSavepointResult, rescale, write_savepoint
