"""Reads from an object store overlap their latency: verify, fallback and export keep several requests
in flight (at most :data:`repair.io.resolved.IN_FLIGHT` per process) and reach the same verdicts and
write the same Parquet bytes as from a local disk.

The store is a real S3 server (moto) on loopback behind :mod:`tests.fault_proxy`, which delays every
answer as a remote store's time to the first byte and counts the requests it serves at once.
"""

from __future__ import annotations

import logging

import pytest

from repair.errors import StorageError
from repair.io.resolved import IN_FLIGHT
from repair.io.storage import Storage
from repair.ops.export.job import export
from repair.ops.fallback import fallback
from repair.ops.verify.engine import verify
from tests import s3_server
from tests.conftest import FIXTURES, fixture_info
from tests.fault_proxy import FaultProxy, Faults

#: Many external SSTs (three subtasks, five retained checkpoints): several files per subtask to copy.
FIXTURE = "flink-2.1-p3-external-xxh3-zstd"
ROOT = FIXTURES / FIXTURE / "checkpoints" / fixture_info(FIXTURES / FIXTURE)["job_id"]
LATENCY = Faults(latency_seconds=0.01)  # any latency: what is tested is that requests overlap


@pytest.fixture(scope="module")
def s3_job():
    """The fixture's job root in a bucket of a loopback S3 server: ``(server, s3://bucket/job)``."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    try:
        server = s3_server.start_s3_server()
    except ImportError as error:
        pytest.skip(f"missing tool: moto[server] is not installed: {error}")
    bucket = server.new_bucket(s3_server.tree(ROOT, "job"))
    yield server, f"s3://{bucket}/job"
    server.stop()


def _storage(endpoint: str, budget: float = 10.0) -> Storage:
    return s3_server.storage_for(endpoint, budget)


def _verdicts(report) -> list[tuple]:
    return sorted((f.severity, f.kind, f.reference.snapshot, f.reference.local_name) for f in report.findings)


def _parts(out) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.parquet"))}


def test_verify_and_fallback_overlap_requests_and_reach_the_local_verdicts(s3_job):
    server, root = s3_job
    local = verify(str(ROOT), workers=1)
    with FaultProxy(server.endpoint, LATENCY) as proxy:
        remote = verify(root, storage=_storage(proxy.endpoint), workers=1)
        overlapped = proxy.max_in_flight
        choice = fallback(root, storage=_storage(proxy.endpoint), workers=1).chosen.name
        with_pool = verify(root, storage=_storage(proxy.endpoint), workers=2)
    assert _verdicts(remote) == _verdicts(local) == _verdicts(with_pool) and remote.ok == local.ok
    assert remote.bytes == local.bytes and remote.files == local.files
    assert choice == fallback(str(ROOT), workers=1).chosen.name
    assert 1 < overlapped <= IN_FLIGHT  # several at once, never more than the bound (one process)


@pytest.mark.parametrize("engine", ["rocksdb", "python"])
def test_export_copies_remote_files_several_at_once_and_writes_the_local_bytes(s3_job, engine, tmp_path):
    server, root = s3_job
    export(str(ROOT), str(tmp_path / "local"), workers=1, engine=engine)
    with FaultProxy(server.endpoint, LATENCY) as proxy:
        export(root, str(tmp_path / "remote"), storage=_storage(proxy.endpoint), workers=1, engine=engine)
        overlapped = proxy.max_in_flight
    assert _parts(tmp_path / "remote") == _parts(tmp_path / "local") and _parts(tmp_path / "local")
    assert 1 < overlapped <= IN_FLIGHT


def test_a_file_that_stays_unreadable_among_concurrent_copies_stops_the_export(s3_job, tmp_path):
    server, root = s3_job
    newest = max(ROOT.glob("chk-*"), key=lambda p: int(p.name[4:]))
    metadata = (newest / "_metadata").read_bytes()
    victim = next(p.name for p in sorted((ROOT / "shared").iterdir()) if p.name.encode() in metadata)  # read by the export
    with FaultProxy(server.endpoint, Faults(always_fail=(victim,))) as proxy:
        with pytest.raises(StorageError, match=victim):
            export(root, str(tmp_path / "out"), storage=_storage(proxy.endpoint, budget=0.5), workers=1)
    assert not (tmp_path / "out").exists()
