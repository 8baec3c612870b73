"""Reads from an object store overlap their latency: verify, fallback and export keep several requests
in flight (at most :data:`repair.io.resolved.IN_FLIGHT` per process) and reach the same verdicts and
write the same Parquet bytes as from a local disk. They also make few requests: a file scanned whole
(verify) is read in one request when small, its tail in one request when large, within a budget of
buffered bytes; export reads ``_metadata`` once however many tasks run in its process.

The store is a real S3 server (moto) on loopback behind :mod:`tests.fault_proxy`, which delays every
answer as a remote store's time to the first byte and counts the requests it serves at once.
"""

from __future__ import annotations

import os
import threading

import pytest

from repair.errors import StorageError
from repair.io import layout as layout_module
from repair.io import objects as objects_module
from repair.io import resolved as resolved_module
from repair.io import storage as storage_module
from repair.io.objects import ObjectFile
from repair.io.resolved import IN_FLIGHT
from repair.io.storage import ByteBudget, Storage
from repair.ops.export.job import export
from repair.ops.fallback import fallback
from repair.ops.size import size
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
    for server, bucket in s3_server.serving_tree(ROOT):
        yield server, f"s3://{bucket}/job"


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


def test_size_reads_remote_ssts_several_at_once_and_counts_the_local_bytes(s3_job):
    server, root = s3_job
    local = size(str(ROOT))
    with FaultProxy(server.endpoint, LATENCY) as proxy:
        remote = size(root, storage=_storage(proxy.endpoint))
        overlapped = proxy.max_in_flight
    assert remote.ok and local.ok

    def per_state(result) -> list:
        return [[(g["operator"], g["state"], g["bytes"], g["entries"]) for g in c.to_json("state", None)["groups"]]
                for c in result.checkpoints]

    assert per_state(remote) == per_state(local) and remote.bytes_read == local.bytes_read
    assert 1 < overlapped <= IN_FLIGHT


def test_size_reads_an_sst_in_one_request_and_lists_a_directory_once(s3_job):
    """Per SST one GET of its tail (footer, metaindex and properties; its answer also says the size);
    the other files of a directory holding many are known from one listing, a missing one too."""
    server, _ = s3_job
    local = size(str(ROOT / "chk-5")).checkpoints[0].pieces
    key = {p.file: "job/" + os.path.relpath(p.file, ROOT) for p in local if p.file and p.kind != "metadata"}
    ssts = {key[p.file] for p in local if p.kind == "sst"}
    others = sorted({key[p.file] for p in local if p.file in key and p.kind != "sst"})  # in shared/ and chk-5/
    files = s3_server.tree(ROOT, "job")
    del files[others[0]]
    bucket = server.new_bucket(files)
    with FaultProxy(server.endpoint, Faults()) as proxy:
        remote = size(f"s3://{bucket}/job/chk-5", storage=_storage(proxy.endpoint))
    requests = {(method, path.split("/", 2)[2]): n for (method, path), n in proxy.by_object.items() if path.count("/") > 1}
    # one GET each (a transient fault's retry aside: the footer, metaindex and properties read apart were 3)
    assert all(requests.get(("GET", sst)) for sst in ssts) and sum(requests[("GET", sst)] for sst in ssts) < 1.2 * len(ssts)
    assert len(others) >= 16 and not [other for other in others if ("HEAD", other) in requests]
    assert [(f.kind, f.details[0][1].endswith(others[0])) for f in remote.findings] == [("missing_file", True)]


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


# -- how many requests ---------------------------------------------------------------------------


def _gets_and_heads(proxy: FaultProxy, key_suffix: str) -> tuple[int, int]:
    gets = sum(n for (method, key), n in proxy.by_object.items() if method == "GET" and key.endswith(key_suffix))
    heads = sum(n for (method, key), n in proxy.by_object.items() if method == "HEAD" and key.endswith(key_suffix))
    return gets, heads


@pytest.fixture(scope="module")
def blobs(s3_job):
    """Random objects of 300 KB and 200 KB in a bucket of their own: ``(server, bucket, {name: bytes})``."""
    server, _ = s3_job
    files = {"a.bin": os.urandom(300_000), "b.bin": os.urandom(200_000), "c.bin": os.urandom(300_000)}
    return server, server.new_bucket(files), files


#: Reads as an SST's verification makes them: footer, metaindex, index, properties near the end, then the blocks.
_READS = [(-53, 53), (-4000, 1200), (-9000, 4000), (-2500, 700), (0, 4096), (4096, 100_000), (104_096, 90_000)]


def _read_all(file, size: int) -> list[bytes]:
    return [bytes(file.read(offset % size, length)) for offset, length in _READS]


def _expected(data: bytes) -> list[bytes]:
    return [data[offset % len(data):][:length] for offset, length in _READS]


def test_a_small_file_scanned_whole_is_one_request_and_reads_the_same_bytes(blobs):
    server, bucket, files = blobs
    with FaultProxy(server.endpoint, Faults()) as proxy:
        storage = _storage(proxy.endpoint)
        with storage.open_input(f"s3://{bucket}/a.bin", scan=True) as file:
            assert _read_all(file, file.size) == _expected(files["a.bin"])
            assert file.preferred_read_size == storage_module.LOCAL_READ_SIZE  # in memory: read as a local file
        assert _gets_and_heads(proxy, "/a.bin") == (1, 0)  # its tail asked for: the whole file, and its size
        with storage.open_input(f"s3://{bucket}/b.bin") as file:  # not a scan: a request per read
            assert _read_all(file, file.size) == _expected(files["b.bin"])
            assert file.preferred_read_size is None  # the reader's large ranges
        assert _gets_and_heads(proxy, "/b.bin") == (len(_READS), 1)


def test_a_ranged_read_passed_on_is_the_clients_buffer_not_a_copy(blobs):
    """Copies to scratch space pass each range on (``read_view``): the client's answer is not copied into bytes."""
    server, bucket, files = blobs
    with _storage(server.endpoint).open_input(f"s3://{bucket}/b.bin", size=len(files["b.bin"])) as file:
        view = file.read_view(1000, 5000)
        assert isinstance(view, memoryview) and view == files["b.bin"][1000:6000]
        assert type(file.read(1000, 5000)) is bytes  # what the readers get, as from pyarrow


def test_a_large_file_scanned_reads_its_tail_in_one_request(blobs, monkeypatch):
    server, bucket, files = blobs
    monkeypatch.setattr(storage_module, "SCAN_WHOLE_MAX", 100_000)  # a.bin is "large"
    monkeypatch.setattr(storage_module, "SCAN_TAIL", 16_384)
    with FaultProxy(server.endpoint, Faults()) as proxy:
        with _storage(proxy.endpoint).open_input(f"s3://{bucket}/a.bin", scan=True) as file:
            assert _read_all(file, file.size) == _expected(files["a.bin"])
            assert file.preferred_read_size is None  # its blocks are read by ranges: the reader's large ones
    # the four reads in the last 16 KB: one request (which also says the size); the three before it: one each
    assert _gets_and_heads(proxy, "/a.bin") == (1 + 3, 0)


def test_buffered_bytes_stay_within_the_budget_and_are_given_back(blobs, monkeypatch):
    server, bucket, files = blobs
    budget = ByteBudget(500_000)  # room for a.bin, not for c.bin beside it
    monkeypatch.setattr(storage_module, "READ_BUFFERS", budget)
    with FaultProxy(server.endpoint, Faults()) as proxy:
        storage = _storage(proxy.endpoint)
        sized = {name: {"size": len(data)} for name, data in files.items()}  # as _metadata records them
        with storage.open_input(f"s3://{bucket}/a.bin", scan=True, **sized["a.bin"]) as a, \
                storage.open_input(f"s3://{bucket}/c.bin", scan=True, **sized["c.bin"]) as c:
            assert _read_all(a, a.size) == _expected(files["a.bin"])
            assert budget.held == 300_000
            assert _read_all(c, c.size) == _expected(files["c.bin"])  # read by ranges: no room
        assert budget.held == 0 and budget.peak <= budget.limit
        assert _gets_and_heads(proxy, "/a.bin")[0] == 1 and _gets_and_heads(proxy, "/c.bin")[0] == len(_READS)
        with storage.open_input(f"s3://{bucket}/c.bin", scan=True, **sized["c.bin"]) as c:  # room again once a.bin was closed
            assert _read_all(c, c.size) == _expected(files["c.bin"])
        assert _gets_and_heads(proxy, "/c.bin")[0] == len(_READS) + 1


def test_concurrent_reads_of_a_scanned_file_fill_its_buffer_once(blobs):
    server, bucket, files = blobs
    with FaultProxy(server.endpoint, Faults(latency_seconds=0.02)) as proxy:
        with _storage(proxy.endpoint).open_input(f"s3://{bucket}/b.bin", scan=True) as file:
            results: list[list[bytes]] = []
            threads = [threading.Thread(target=lambda: results.append(_read_all(file, file.size))) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    assert results == [_expected(files["b.bin"])] * 4
    assert _gets_and_heads(proxy, "/b.bin") == (1, 0)


def test_verify_reads_each_file_in_one_get(s3_job):
    server, root = s3_job
    with FaultProxy(server.endpoint, Faults()) as proxy:
        report = verify(root, storage=_storage(proxy.endpoint), workers=1)
    data_files = {key for (method, key) in proxy.by_object if "/shared/" in key or "/taskowned/" in key}
    assert len(data_files) > 100 and report.bytes > 0
    for key in data_files:  # before: a request per block read (footer, metaindex, properties, index, ...)
        assert proxy.by_object[("GET", key)] == 1, key
    # no HEAD: the size is _metadata's, the GET's answer says the true one; a HEAD only for the few files
    # the layout looks for (was the checkpoint moved?)
    assert sum(proxy.by_object[("HEAD", key)] > 0 for key in data_files) <= 5


@pytest.mark.parametrize("how", ["tails", "no room"])
def test_verify_reaches_the_local_verdicts_whatever_the_buffering(s3_job, monkeypatch, how):
    """Every SST (about 1 KB here) read with only its last 128 bytes buffered (reads that straddle the
    tail's start go by ranges), or with no room for any buffer: the same verdicts and bytes as from the
    local disk. The newest checkpoint (155 files, about a hundred SSTs), not the whole job root: each
    read is a request here, and what is tested is how a file is read, not how many."""
    server, root = s3_job
    if how == "tails":
        monkeypatch.setattr(storage_module, "SCAN_WHOLE_MAX", 64)
        monkeypatch.setattr(storage_module, "SCAN_TAIL", 128)
    else:
        monkeypatch.setattr(storage_module, "READ_BUFFERS", ByteBudget(0))
    newest = max(ROOT.glob("chk-*"), key=lambda p: int(p.name[4:])).name
    local = verify(str(ROOT / newest), workers=1)
    with FaultProxy(server.endpoint, Faults()) as proxy:
        remote = verify(f"{root}/{newest}", storage=_storage(proxy.endpoint), workers=1)
    assert _verdicts(remote) == _verdicts(local) and remote.bytes == local.bytes and remote.files == local.files
    data_gets = [n for (method, key), n in proxy.by_object.items() if method == "GET" and "/shared/" in key]
    assert max(data_gets) > 1  # read in several requests, as configured


def test_a_file_missing_from_the_store_is_a_missing_file_never_unknown(s3_job):
    server, _ = s3_job
    newest = max(ROOT.glob("chk-*"), key=lambda p: int(p.name[4:]))
    metadata = (newest / "_metadata").read_bytes()
    victim = next(p.name for p in sorted((ROOT / "shared").iterdir()) if p.name.encode() in metadata)
    files = {key: data for key, data in s3_server.tree(ROOT, "job").items() if not key.endswith(victim)}
    root = f"s3://{server.new_bucket(files)}/job/{newest.name}"
    report = verify(root, storage=_storage(server.endpoint), workers=1)
    missing = [f for f in report.findings if f.kind == "missing_file"]
    assert missing and all(victim in f.path and f.severity == "error" for f in missing)
    assert not [f for f in report.findings if f.severity == "unknown"] and not report.ok


def test_export_in_one_process_reads_metadata_once(s3_job, tmp_path):
    server, root = s3_job
    newest = max(ROOT.glob("chk-*"), key=lambda p: int(p.name[4:]))
    with FaultProxy(server.endpoint, Faults()) as proxy:
        result = export(f"{root}/{newest.name}", str(tmp_path / "out"), storage=_storage(proxy.endpoint), workers=1)
    assert sum(len(op.subtasks) for op in result.operators) > 2  # several tasks, each loading the snapshot
    assert _gets_and_heads(proxy, f"/{newest.name}/_metadata")[0] == 1


def test_export_copies_each_remote_file_in_one_get_however_large(s3_job, tmp_path, monkeypatch):
    """A copy to scratch space streams the object's one answer in chunks (here far smaller than the files):
    one GET per file, not one per chunk."""
    server, root = s3_job
    monkeypatch.setattr(resolved_module, "SCRATCH_CHUNK", 256)
    newest = max(ROOT.glob("chk-*"), key=lambda p: int(p.name[4:]))
    with FaultProxy(server.endpoint, Faults()) as proxy:
        export(f"{root}/{newest.name}", str(tmp_path / "out"), storage=_storage(proxy.endpoint), workers=1)
    export(str(newest), str(tmp_path / "local"), workers=1)
    assert _parts(tmp_path / "out") == _parts(tmp_path / "local")
    copied = {key: n for (method, key), n in proxy.by_object.items() if method == "GET" and "/shared/" in key}
    sizes = {key: (ROOT / key.split("/job/", 1)[1]).stat().st_size for key in copied}
    assert len(copied) > 5 and max(sizes.values()) > 4 * 256  # several chunks each
    assert set(copied.values()) == {1}


def test_a_streamed_copy_cut_short_goes_on_from_the_byte_reached(blobs, monkeypatch):
    """Bodies cut in the middle (half of the GETs): each retry asks for the rest only, and the bytes are the object's."""
    server, bucket, files = blobs
    starts: list[int] = []
    stream = ObjectFile.stream

    def counted(self, start, end, chunk_size):
        starts.append(start)
        return stream(self, start, end, chunk_size)

    monkeypatch.setattr(ObjectFile, "stream", counted)
    with FaultProxy(server.endpoint, Faults(cut_rate=0.5, seed=3)) as proxy:
        with _storage(proxy.endpoint).open_input(f"s3://{bucket}/a.bin", size=300_000) as file:
            chunks = list(file.stream(1000, 299_000, 16_384))
    assert b"".join(chunks) == files["a.bin"][1000:]
    assert proxy.injected["cut"] > 0 and len(starts) == 1 + proxy.injected["cut"]
    assert starts[0] == 1000 and max(starts) > 1000  # the rest asked for, not the whole again


def test_a_streamed_copy_of_a_file_shorter_than_recorded_fails_without_retrying(blobs):
    server, bucket, files = blobs
    with FaultProxy(server.endpoint, Faults()) as proxy:
        with _storage(proxy.endpoint).open_input(f"s3://{bucket}/b.bin", size=250_000) as file:
            with pytest.raises(StorageError, match="has 200000 bytes, not the 250000 expected") as caught:
                list(file.stream(0, 250_000, 16_384))
    assert not caught.value.transient and _gets_and_heads(proxy, "/b.bin") == (1, 0)


def test_verify_and_fallback_ask_each_metadata_once_for_its_status(s3_job):
    """The status the layout asked (does ``_metadata`` exist? its file time) is not asked again for the time."""
    server, root = s3_job
    newest = max(ROOT.glob("chk-*"), key=lambda p: int(p.name[4:]))
    with FaultProxy(server.endpoint, Faults()) as proxy:
        storage = _storage(proxy.endpoint)
        report = verify(f"{root}/{newest.name}", storage=storage, workers=1)
        assert _gets_and_heads(proxy, f"/{newest.name}/_metadata") == (1, 1)
        fallback(root, storage=storage, workers=1)
    checkpoints = sorted(p.name for p in ROOT.glob("chk-*"))
    assert len(checkpoints) > 1
    for name in checkpoints:  # fallback: one status each (the listing's), one read; verify's above
        expected = (2, 2) if name == newest.name else (1, 1)
        assert _gets_and_heads(proxy, f"/{name}/_metadata") == expected, name
    written = storage.stat(f"{root}/{newest.name}/_metadata").mtime
    assert written is not None and [s.written_at for s in report.snapshots] == [written]


# -- verify's remote path: threads fetch, one thread checks -----------------------------------------


def test_verify_and_fallback_from_an_object_store_create_no_pyarrow_file_system(s3_job, monkeypatch):
    """Status and listings go through obstore as the reads do: pyarrow's S3 file system (its import and
    the AWS SDK's start, about 0.2 s before the first request) is never created to read a checkpoint."""
    server, root = s3_job
    created = []
    monkeypatch.setattr(Storage, "_create_filesystem", lambda self, location: created.append(location.uri))
    remote = verify(root, storage=_storage(server.endpoint), workers=1)
    choice = fallback(root, storage=_storage(server.endpoint), workers=1).chosen.name
    assert created == []
    assert _verdicts(remote) == _verdicts(verify(str(ROOT), workers=1)) and remote.files > 100
    assert choice == fallback(str(ROOT), workers=1).chosen.name


def test_verify_reads_ahead_within_the_read_buffers_and_each_file_in_one_get(s3_job, monkeypatch):
    """The files fetched ahead of the checking thread hold at most the read buffers' bytes, and every file
    still fits whole: one GET each (before, sixteen files checked at once took more than such a budget
    and the files that found no room were read by ranges)."""
    server, root = s3_job
    newest = max(ROOT.glob("chk-*"), key=lambda p: int(p.name[4:]))
    largest = max(p.stat().st_size for p in ROOT.rglob("*") if p.is_file() and p.name != "_metadata")
    budget = ByteBudget(3 * largest)
    monkeypatch.setattr(storage_module, "READ_BUFFERS", budget)
    with FaultProxy(server.endpoint, Faults(latency_seconds=0.005)) as proxy:
        remote = verify(f"{root}/{newest.name}", storage=_storage(proxy.endpoint), workers=1)
    assert _verdicts(remote) == _verdicts(verify(str(newest), workers=1)) and remote.files > 100
    assert 0 < budget.peak <= budget.limit and budget.held == 0
    data = {key for (_, key) in proxy.by_object if "/shared/" in key or f"/{newest.name}/" in key and not key.endswith("/_metadata")}
    assert len(data) > 100 and {proxy.by_object[("GET", key)] for key in data} == {1}
    # a file that found no room in the buffers would have been asked its size (a HEAD), then read by ranges;
    # the only HEADs left are the layout's look for where the checkpoint's files are (was it moved?)
    assert sum(proxy.by_object[("HEAD", key)] for key in data) <= layout_module._SAMPLES


def test_a_fault_on_one_file_is_unknown_for_it_and_the_other_files_keep_their_verdicts(s3_job):
    """One object always fails, another is damaged: the first is ``unknown``, the second still judged, the
    rest sound (the fetching threads hand every file, read or not, to the checking thread)."""
    server, _ = s3_job
    newest = max(ROOT.glob("chk-*"), key=lambda p: int(p.name[4:]))
    metadata = (newest / "_metadata").read_bytes()
    referenced = [p for p in (ROOT / "shared").iterdir() if p.name.encode() in metadata]
    failing, damaged = [p.name for p in sorted(referenced, key=lambda p: -p.stat().st_size)[:2]]  # SSTs, the largest
    files = s3_server.tree(ROOT, "job")
    key = f"job/shared/{damaged}"
    files[key] = files[key][:10] + bytes([files[key][10] ^ 0xFF]) + files[key][11:]  # inside the first data block
    bucket = server.new_bucket(files)
    with FaultProxy(server.endpoint, Faults(always_fail=(failing,))) as proxy:
        report = verify(f"s3://{bucket}/job/{newest.name}", storage=_storage(proxy.endpoint, budget=0.5), workers=1)
    by_file = {}
    for finding in report.findings:
        by_file.setdefault(finding.path.rsplit("/", 1)[-1], set()).add(finding.severity)
    assert by_file.pop(failing) == {"unknown"}
    assert by_file.pop(damaged) - {"unknown"}  # found damaged: a verdict on bytes that were read
    assert by_file == {} and report.files > 100


@pytest.mark.parametrize("client", ["obstore", "pyarrow"])
def test_a_scanned_file_read_ahead_is_in_memory_before_its_first_read(blobs, monkeypatch, client):
    """Verify's fetching threads read a scanned file's bytes (``InputFile.read_ahead``), so that the checking
    thread waits for no request; also where pyarrow reads (a pool's worker, forked after obstore was used),
    whose open asks only the size."""
    server, bucket, files = blobs
    if client == "pyarrow":
        monkeypatch.setattr(objects_module, "_forked_after_use", True)
    with FaultProxy(server.endpoint, Faults()) as proxy:
        with _storage(proxy.endpoint).open_input(f"s3://{bucket}/a.bin", scan=True) as file:
            file.read_ahead()
            fetched = dict(proxy.by_object)
            assert _read_all(file, file.size) == _expected(files["a.bin"])
            assert dict(proxy.by_object) == fetched
    assert _gets_and_heads(proxy, "/a.bin") == (1, 0 if client == "obstore" else 1)


def test_verify_from_an_object_store_runs_in_one_process_by_default(s3_job, monkeypatch):
    """Above the pool threshold a local verify takes a pool of every core, one from an object store
    stays in one process: its threads fetch while one checks, and a pool's forked workers could not use
    obstore (they would read through pyarrow, slower: docs/benchmarks/remote.md)."""
    from repair.ops.runner import default_workers
    from repair.ops.verify import engine

    server, root = s3_job
    pools = []

    def recording(func, tasks, *, workers=1, **options):
        if len(tasks) > 1:
            pools.append(workers)
        return run_tasks(func, tasks, workers=1, **options)

    run_tasks = engine.run_tasks
    monkeypatch.setattr(engine, "POOL_THRESHOLD_BYTES", 0)
    monkeypatch.setattr(engine, "run_tasks", recording)
    remote = verify(root, storage=_storage(server.endpoint))
    assert pools and set(pools) == {1}
    pools.clear()
    assert _verdicts(verify(str(ROOT))) == _verdicts(remote)
    assert pools and set(pools) == {default_workers()}
