"""What a caller of ``import repair`` sees, checked by mypy (scripts/test.sh; ``[tool.mypy]`` in
pyproject.toml), never run: each exported function called as docs/library.md shows it, its result
assigned to the exported result type, and the result's ``to_json()`` used as the ``--json`` document.

mypy fails here when a public function loses its annotations (``disallow_untyped_calls``), returns
another type than its result class, or a result's ``to_json()`` stops returning a dict; the modules
behind the API are followed for their signatures, their bodies are not reported."""

from __future__ import annotations

from typing import Any, Protocol

import pyarrow as pa

import repair


class _Result(Protocol):
    def to_json(self) -> dict[str, Any]: ...


def _every_command(path: str, out: str) -> list[dict[str, Any]]:
    storage: repair.Storage = repair.Storage(repair.StorageOptions())
    results: list[_Result] = [
        repair.triage(path, storage=storage),
        repair.inspect(path, storage=storage),
        repair.verify(path, storage=storage, workers=1),
        repair.fallback(path, storage=storage),
        repair.orphans(path, storage=storage),
        repair.relocate(path, out, storage=storage),
        repair.rebuild_manifest(path, out, storage=storage),
        repair.rebuild_db(path, out, storage=storage),
        repair.export(path, out, storage=storage),
        repair.write_savepoint(path, out, storage=storage),
        repair.rescale(path, out, storage=storage),
        repair.edit(path, out, storage=storage),
        repair.diagnose(path),
        repair.doctor(path),
        repair.watch(path, state_dir=out, storage=storage),
    ]
    return [result.to_json() for result in results]


def _result_types(path: str, out: str) -> None:
    triage: repair.TriageResult = repair.triage(path)
    inspected: repair.InspectResult = repair.inspect(path)
    verified: repair.VerifyResult = repair.verify(path)
    fallback: repair.FallbackResult = repair.fallback(path)
    orphans: repair.OrphansResult = repair.orphans(path)
    relocated: repair.RelocateResult = repair.relocate(path, out)
    rebuilt: repair.RebuildResult | repair.RebuildDbResult = repair.rebuild_manifest(path, out)
    rebuilt_db: repair.RebuildDbResult = repair.rebuild_db(path, out)
    exported: repair.ExportResult = repair.export(path, out)
    written: repair.WriteSavepointResult = repair.write_savepoint(path, out)
    rescaled: repair.WriteSavepointResult = repair.rescale(path, out)
    edited: repair.EditResult = repair.edit(path, out)
    diagnosed: repair.DiagnoseResult = repair.diagnose(path)
    doctored: repair.DoctorResult = repair.doctor(path)
    watched: repair.WatchResult = repair.watch(path, state_dir=out)
    healthy: list[bool] = [triage.ok, verified.ok, orphans.ok, relocated.ok, rebuilt.ok, rebuilt_db.ok,
                           exported.ok, written.ok, rescaled.ok, edited.ok, doctored.ok, watched.ok]
    del inspected, fallback, diagnosed, healthy


def _state_readers(path: str) -> None:
    table: pa.Table = repair.read_state(path, "operator", "state")
    for batch in repair.iter_state_batches(path, "operator", "state"):
        rows: int = batch.num_rows
        del rows
    del table


def _errors(error: repair.RepairError) -> str:
    kinds: tuple[type[repair.RepairError], ...] = (repair.FormatError, repair.TruncatedError, repair.StorageError, repair.UsageError)
    worst: repair.Severity = repair.Severity.ERROR
    return f"{isinstance(error, kinds)} {worst} {repair.__version__}"
