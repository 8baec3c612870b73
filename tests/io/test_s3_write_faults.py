"""Write commands against an S3 server that fails writes (tests/fault_proxy.py in front of moto).

Object stores have no rename: a :class:`~repair.io.storage.DirectoryPublisher` writes the files to
their final keys, the commit file (``_metadata``, ``_export.json``) last, and a marker beside the
target (``<target>.repair-in-progress``) first, deleted after the commit file. So on S3 "absent or complete" means:
no key under the target, or the commit file and every file of an undisturbed run. Checked for

* storage errors on writes (503s, resets, a store that stops accepting writes after N requests):
  the command fails with exit 2 naming the storage error, deletes what it wrote, and a rerun succeeds;
* a run killed (SIGKILL) while writing: no commit file, the marker names the dead writer, and a
  rerun deletes that output and succeeds; a marker of a writer that may still run is refused.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from repair.cli.app import main
from repair.io.storage import IN_PROGRESS_SUFFIX
from tests import s3_server
from tests._flink_state_files import REPO
from tests.fault_proxy import FaultProxy, Faults
from tests.write_commands import CHECKPOINT

JOB = CHECKPOINT.parent

#: (name, arguments for source root and target, commit file)
COMMANDS = [
    ("relocate", lambda src, out: ["relocate", f"{src}/chk-5", "--out", out, "--copy"], "chk-5/_metadata"),
    ("export", lambda src, out: ["export", f"{src}/chk-5", "--out", out, "--workers", "1"], "_export.json"),
    ("edit", lambda src, out: ["edit", f"{src}/chk-5", "--out", out, "--rename-uid", "per-type=x", "--copy"], "chk-5/_metadata"),
]


@pytest.fixture(scope="module")
def job_bucket(s3):
    """The job root of :data:`CHECKPOINT` in a new bucket of the session's S3 server: ``(server, bucket)``."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    files = {f"job/{p.relative_to(JOB)}": p.read_bytes() for p in sorted(JOB.rglob("*")) if p.is_file()}
    return s3, s3.new_bucket(files)


def _environment(endpoint: str, budget: float = 2) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": s3_server.REGION, "AWS_ACCESS_KEY_ID": s3_server.ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": s3_server.SECRET_KEY, "AWS_EC2_METADATA_DISABLED": "true",
            "REPAIR_RETRY_BUDGET": str(budget)}


def _below(server, bucket: str, prefix: str) -> set[str]:
    return {key[len(prefix) + 1 :] for key in server.keys(bucket) if key.startswith(prefix + "/")}


def _contents(server, bucket: str, prefix: str) -> dict[str, bytes]:
    client = server.client()
    return {name: client.get_object(Bucket=bucket, Key=f"{prefix}/{name}")["Body"].read() for name in _below(server, bucket, prefix)}


def _assert_complete(server, bucket: str, prefix: str, reference: dict[str, bytes], commit_file: str) -> None:
    """The reference's keys, each with the reference's bytes, but the commit file (it names the target)."""
    found = _contents(server, bucket, prefix)
    assert set(found) == set(reference)
    for name, data in found.items():
        assert data == reference[name] or (name == commit_file and data), f"{prefix}/{name}: other bytes"


@pytest.fixture(scope="module")
def references(job_bucket):
    """Per command: the keys an undisturbed run writes below its target, and their bytes."""
    server, bucket = job_bucket
    out = {}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in _environment(server.endpoint).items():
            patch.setenv(name, value)
        for name, args, _ in COMMANDS:
            assert main(args(f"s3://{bucket}/job", f"s3://{bucket}/reference-{name}")) == 0
            out[name] = _contents(server, bucket, f"reference-{name}")
    return out


@pytest.mark.parametrize(
    "faults",
    [Faults(write_error_rate=0.3, seed=1), Faults(write_reset_rate=0.3, seed=2), Faults(writes_fail_after=0),
     Faults(writes_fail_after=4), Faults(writes_fail_after=9)],
    ids=["30% 503", "30% resets", "no write accepted", "writes fail after 4", "writes fail after 9"],
)
@pytest.mark.parametrize(("name", "args", "commit_file"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_failed_writes_leave_no_partial_output_and_a_rerun_succeeds(job_bucket, references, monkeypatch, capsys, name, args, commit_file, faults):
    server, bucket = job_bucket
    target = f"failed-{name}-{faults.seed}-{faults.writes_fail_after}"
    # A store that stopped accepting writes fails every retry: the run ends when its budget is spent, so a
    # short one (still several tries) tests the same; transient faults get the budget to be retried away.
    budget = 0.5 if faults.writes_fail_after is not None else 2
    with FaultProxy(server.endpoint, faults) as proxy:
        for variable, value in _environment(proxy.endpoint, budget).items():
            monkeypatch.setenv(variable, value)
        code = main(args(f"s3://{bucket}/job", f"s3://{bucket}/{target}"))
    output = capsys.readouterr()
    written = _below(server, bucket, target)
    if code == 0:  # every injected fault was retried away
        _assert_complete(server, bucket, target, references[name], commit_file)
    else:
        assert code == 2 and "Traceback" not in output.err, output
        assert written == set(), f"partial output left: {sorted(written)[:5]}"
        assert target + IN_PROGRESS_SUFFIX not in server.keys(bucket)
    for variable, value in _environment(server.endpoint).items():
        monkeypatch.setenv(variable, value)
    if code != 0:
        assert main(args(f"s3://{bucket}/job", f"s3://{bucket}/{target}")) == 0
    _assert_complete(server, bucket, target, references[name], commit_file)


@pytest.mark.parametrize(("name", "args", "commit_file"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_killed_while_writing_to_s3_a_rerun_takes_over_the_dead_runs_output(job_bucket, references, monkeypatch, name, args, commit_file, tmp_path):
    server, bucket = job_bucket
    target = f"killed-{name}"
    env = {**os.environ, **_environment(server.endpoint), "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path),
           "REPAIR_TEST_WRITE_DELAY": "0.1"}
    process = subprocess.Popen([sys.executable, "-m", "tests.slow_writes_cli", *args(f"s3://{bucket}/job", f"s3://{bucket}/{target}")],
                               cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while len(_below(server, bucket, target)) < 2:
        assert process.poll() is None and time.monotonic() < deadline, "the run ended before it wrote"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
    left = _below(server, bucket, target)
    assert commit_file not in left and target + IN_PROGRESS_SUFFIX in server.keys(bucket), "incomplete, and marked as such"
    for variable, value in _environment(server.endpoint).items():
        monkeypatch.setenv(variable, value)
    assert main(args(f"s3://{bucket}/job", f"s3://{bucket}/{target}")) == 0
    _assert_complete(server, bucket, target, references[name], commit_file)
    assert target + IN_PROGRESS_SUFFIX not in server.keys(bucket)


def test_an_incomplete_output_whose_writer_may_still_run_is_refused(job_bucket, monkeypatch, capsys):
    server, bucket = job_bucket
    server.client().put_object(Bucket=bucket, Key=f"busy{IN_PROGRESS_SUFFIX}", Body=b"0123abcd-1")  # another host's
    server.client().put_object(Bucket=bucket, Key="busy/chk-5/shared/x", Body=b"partial")
    for variable, value in _environment(server.endpoint).items():
        monkeypatch.setenv(variable, value)
    assert main(COMMANDS[0][1](f"s3://{bucket}/job", f"s3://{bucket}/busy")) == 2
    assert "incomplete output of another run" in capsys.readouterr().err
    assert _below(server, bucket, "busy") == {"chk-5/shared/x"} and f"busy{IN_PROGRESS_SUFFIX}" in server.keys(bucket)


def test_bytes_written_to_a_store_answering_503s_are_retried_within_the_budget(job_bucket):
    """A file held in memory (a _metadata, a commit file) is sent again after a transient fault; a
    stream of chunks is not (it cannot be replayed): it fails, cleanly."""
    from repair.errors import StorageError
    from repair.io.storage import Storage, StorageOptions

    server, bucket = job_bucket
    with FaultProxy(server.endpoint, Faults(write_error_rate=0.2, seed=7)) as proxy:
        storage = Storage(StorageOptions(s3_endpoint=proxy.endpoint, s3_region=s3_server.REGION, s3_access_key=s3_server.ACCESS_KEY,
                                         s3_secret_key=s3_server.SECRET_KEY, retry_budget=30))
        for i in range(8):
            data = bytes([i]) * (1000 + i)
            storage.write_atomic(f"s3://{bucket}/retried/{i}", data)
        assert proxy.injected["error"] > 0
    client = server.client()
    assert [client.get_object(Bucket=bucket, Key=f"retried/{i}")["Body"].read() for i in range(8)] == \
        [bytes([i]) * (1000 + i) for i in range(8)]
    with FaultProxy(server.endpoint, Faults(writes_fail_after=0)) as proxy:
        storage = Storage(StorageOptions(s3_endpoint=proxy.endpoint, s3_region=s3_server.REGION, s3_access_key=s3_server.ACCESS_KEY,
                                         s3_secret_key=s3_server.SECRET_KEY, retry_budget=0.5))
        with pytest.raises(StorageError, match="transient fault; retries ran out of time"):
            storage.write_atomic(f"s3://{bucket}/never", b"x")
        with pytest.raises(StorageError):
            storage.write_atomic(f"s3://{bucket}/stream", iter([b"a", b"b"]))
        assert proxy.writes_seen >= 3  # bytes: tried more than once; the stream: once
