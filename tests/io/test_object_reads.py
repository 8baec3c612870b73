"""Object-store reads through obstore (:mod:`repair.io.objects`): no request whose answer is known.

Against a real S3 server (moto) behind :mod:`tests.fault_proxy`, which counts the requests by object:
verify reads each SST in one GET and no HEAD (its size comes from ``_metadata``), export copies each in
one GET; a file shorter than ``_metadata`` records is still found shorter (the GET's answer says the
object's size), never taken for a storage fault; an S3 profile, which only the AWS SDK reads, leaves the
reads to pyarrow.
"""

from __future__ import annotations

import pytest

from repair.io import objects
from repair.io.options import StorageOptions
from repair.io.uris import parse_location
from repair.ops.export.job import export
from repair.ops.verify.engine import verify
from tests import s3_server
from tests.conftest import FIXTURES, fixture_info
from tests.fault_proxy import FaultProxy, Faults

#: Many external SSTs (three subtasks, five retained checkpoints).
FIXTURE = "flink-2.1-p3-external-xxh3-zstd"
ROOT = FIXTURES / FIXTURE / "checkpoints" / fixture_info(FIXTURES / FIXTURE)["job_id"]
NEWEST = max(ROOT.glob("chk-*"), key=lambda p: int(p.name[4:]))
SST_MAGICS = ((0x88E241B785F4CFF7).to_bytes(8, "little"), (0xDB4775248B80FB57).to_bytes(8, "little"))


@pytest.fixture(scope="module")
def server():
    server = s3_server.start_s3_server_or_skip()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def job(server):
    """The fixture's job root in a bucket: ``(bucket, {key: bytes})``."""
    files = s3_server.tree(ROOT, "job")
    return server.new_bucket(files), files


def _ssts(files: dict[str, bytes]) -> set[str]:
    return {key for key, data in files.items() if data[-8:] in SST_MAGICS}


def _requests(proxy: FaultProxy, bucket: str) -> dict[tuple[str, str], int]:
    """Requests by (method, key in the bucket)."""
    prefix = f"/{bucket}/"
    return {(method, path[len(prefix):]): n for (method, path), n in proxy.by_object.items() if path.startswith(prefix)}


def test_verify_reads_each_sst_in_one_get_and_no_head(server, job):
    bucket, files = job
    with FaultProxy(server.endpoint, Faults()) as proxy:
        report = verify(f"s3://{bucket}/job/{NEWEST.name}", storage=s3_server.storage_for(proxy.endpoint), workers=1)
    requests = _requests(proxy, bucket)
    read = {key for (_, key) in requests} & _ssts(files)
    assert report.ok and len(read) > 10
    # before: a HEAD to open each (pyarrow asks the size _metadata records), then the GET
    assert {key: requests.get(("GET", key)) for key in read} == dict.fromkeys(read, 1)
    assert len(_headed(requests, read)) <= SAMPLED


def _headed(requests: dict, keys: set[str]) -> list[str]:
    """Keys asked about by a HEAD: only the files the layout looks for to tell where a recorded root is now
    (was the checkpoint moved?), at most :data:`SAMPLED`."""
    return [key for key in keys if ("HEAD", key) in requests]


#: Files the layout looks for (``repair.io.layout._SAMPLES``; one when the first is there).
SAMPLED = 3


def test_export_copies_each_sst_in_one_get_and_no_head(server, job, tmp_path):
    bucket, files = job
    with FaultProxy(server.endpoint, Faults()) as proxy:
        export(f"s3://{bucket}/job/{NEWEST.name}", str(tmp_path / "out"), storage=s3_server.storage_for(proxy.endpoint), workers=1)
    requests = _requests(proxy, bucket)
    read = {key for (_, key) in requests} & _ssts(files)
    assert len(read) > 10 and list(tmp_path.joinpath("out").rglob("*.parquet"))
    assert {key: requests.get(("GET", key)) for key in read} == dict.fromkeys(read, 1)
    assert len(_headed(requests, read)) <= SAMPLED


def test_ssts_of_other_sizes_than_recorded_are_found_so_in_one_request_each(server):
    """The size is not asked of the store: the answer to the one GET says it, and verify reports a
    shorter, longer or empty SST as from a local disk (an error about the file, never 'unknown')."""
    files = s3_server.tree(ROOT, "job")
    metadata = (NEWEST / "_metadata").read_bytes()
    victims = [key for key in sorted(_ssts(files)) if "/shared/" in key and key.rsplit("/", 1)[1].encode() in metadata][:3]
    changes = dict(zip(victims, ["shorter", "longer", "empty"]))
    for key, change in changes.items():
        data = files[key]
        files[key] = {"shorter": data[: len(data) // 2], "longer": data + b"\0" * 100, "empty": b""}[change]
    bucket = server.new_bucket(files)
    with FaultProxy(server.endpoint, Faults()) as proxy:
        report = verify(f"s3://{bucket}/job/{NEWEST.name}", storage=s3_server.storage_for(proxy.endpoint), workers=1)
    assert len(changes) == 3 and not [f for f in report.findings if f.severity == "unknown"]
    for key, change in changes.items():
        found = [(f.kind, f.severity) for f in report.findings if key.rsplit("/", 1)[1] in (f.path or "")]
        assert ("size_mismatch" if change == "longer" else "truncated_file", "error") in found, (change, found)
        assert _requests(proxy, bucket).get(("GET", key)) == 1, change


def test_an_s3_profile_leaves_the_reads_to_pyarrow(tmp_path):
    s3 = parse_location("s3://bucket/key")
    options = StorageOptions()
    profile = tmp_path / "credentials"
    profile.write_text("[default]\naws_access_key_id = a\naws_secret_access_key = b\n")
    assert not objects.can_serve(s3, options, {"AWS_SHARED_CREDENTIALS_FILE": str(profile), "AWS_CONFIG_FILE": str(tmp_path / "none")})
    assert not objects.can_serve(s3, options, {"AWS_PROFILE": "dev", "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                                               "AWS_CONFIG_FILE": str(tmp_path / "none")})
    nothing = {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none")}
    assert objects.can_serve(s3, options, nothing)  # the instance's metadata service, as the SDK would try last
    assert objects.can_serve(s3, options, {**nothing, "AWS_ACCESS_KEY_ID": "a", "AWS_PROFILE": ""})
    assert objects.can_serve(s3, StorageOptions(s3_access_key="a", s3_secret_key="b"), {"AWS_PROFILE": "dev"})
    assert not objects.can_serve(parse_location("hdfs://nn:8020/x"), options, nothing)


@pytest.mark.parametrize(("message", "kind", "transient"), [
    ("Generic S3 error: Error performing GET http://h/b/k in 1ms - Server returned non-2xx status code: 503 Service Unavailable: "
     "<Error><Code>SlowDown</Code></Error>\n\nDebug source:\nretry_timeout: 180s", OSError, True),
    ("Generic S3 error: Error performing GET http://h/b/k in 1ms - Server returned non-2xx status code: 416 Range Not Satisfiable",
     OSError, False),
    ("Generic S3 error: Error performing GET http://h/b/k in 1ms - HTTP error: error sending request\n\nDebug source:\nConnection refused",
     ConnectionError, True),
    ("Generic S3 error: HTTP error: request or response body error\n\nDebug source:\nkind: Body", ConnectionError, True),
    ("Generic S3 error: Error performing GET http://nowhere.invalid/b/k - HTTP error: error sending request\n\nDebug source:\n"
     "dns error: failed to lookup address information: Name or service not known", OSError, False),
])
def test_obstore_errors_become_the_kinds_the_retry_policy_classifies(message, kind, transient):
    from obstore.exceptions import GenericError

    from repair.io.retry import is_transient

    error = objects.os_error(GenericError(message))
    assert type(error) is kind and is_transient(error) is transient
    assert "Debug source" not in str(error)
