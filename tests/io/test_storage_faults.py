"""Storage faults: a read that failed is retried when the failure may pass, and what stays unreadable
is never taken for damage.

The retry policy is tested with a fake clock; the storage layer with a real S3 server (moto) behind
:mod:`tests.fault_proxy`, which answers 503s, resets connections, cuts bodies and fails objects for
good, deterministically by seed.
"""

from __future__ import annotations

import json
import os

import pytest

from repair.cli.app import main
from repair.errors import StorageError
from repair.io.retry import RetryPolicy, ShortRead, is_transient
from repair.io.storage import Storage, StorageOptions
from repair.ops.fallback import fallback
from repair.ops.verify.engine import verify
from tests import damage, s3_server
from tests.conftest import FIXTURES, fixture_info
from tests.fault_proxy import FaultProxy, Faults

#: A fixture that keeps most files inline in _metadata and a few external: quick to read over S3.
FIXTURE = "flink-1.20-default"
ROOT = FIXTURES / FIXTURE / "checkpoints" / fixture_info(FIXTURES / FIXTURE)["job_id"]


# -- the policy ----------------------------------------------------------------------------------
class FakeTime:
    def __init__(self):
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _policy(budget: float, clock: FakeTime) -> RetryPolicy:
    return RetryPolicy(budget_seconds=budget, clock=lambda: clock.now, sleep=clock.sleep, jitter=lambda cap: cap)


def _failing(errors: list[BaseException], result="done"):
    calls = []

    def operation():
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return result

    return operation, calls


def test_transient_failures_are_retried_with_growing_capped_delays():
    clock = FakeTime()
    operation, calls = _failing([OSError("AWS Error SLOW_DOWN during GetObject operation: HTTP response code: 503")] * 8)
    assert _policy(60, clock).call(operation) == "done"
    assert len(calls) == 9
    assert clock.slept == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0]  # doubling, capped at max_delay


def test_permanent_failures_are_raised_at_once():
    for error in (FileNotFoundError("no such file"), PermissionError("denied"),
                  OSError("AWS Error ACCESS_DENIED during GetObject operation: HTTP response code: 403")):
        clock = FakeTime()
        operation, calls = _failing([error])
        with pytest.raises(type(error)):
            _policy(60, clock).call(operation)
        assert len(calls) == 1 and clock.slept == []


def test_retries_stop_when_the_budget_is_spent():
    clock = FakeTime()
    operation, calls = _failing([ConnectionResetError("reset")] * 100)
    with pytest.raises(ConnectionResetError):
        _policy(2.0, clock).call(operation)
    assert clock.now <= 2.0 and len(calls) == len(clock.slept) + 1 and len(calls) > 3


@pytest.mark.parametrize(
    "message, transient",
    [
        ("AWS Error SLOW_DOWN during GetObject operation: HTTP response code: 503", True),
        ("AWS Error INTERNAL_FAILURE during GetObject operation: injected", True),
        ("AWS Error NETWORK_CONNECTION during GetObject operation: curlCode: 56, Failure when receiving data", True),
        ("Connection reset by peer", True),
        ("curlCode: 28, Timeout was reached", True),
        ("AWS Error ACCESS_DENIED during HeadObject operation: HTTP response code: 403", False),
        ("Path does not exist 'bucket/key'", False),
        ("AWS Error NO_SUCH_KEY: HTTP response code: 404 timed out", False),  # a 404 stays permanent
        # a name that does not resolve answers the same next time: not retried for the whole budget
        ("AWS Error NETWORK_CONNECTION during HeadObject operation: curlCode: 6, Could not resolve hostname; "
         "Details: Could not resolve host: no-such-bucket-or-host", False),
        ("[Errno -2] Name or service not known", False),
        ("java.net.UnknownHostException: namenode.example", False),
        ("[Errno -3] Temporary failure in name resolution", True),  # EAI_AGAIN: the resolver itself failed
        ("AWS Error NETWORK_CONNECTION during GetObject operation: curlCode: 7, Could not connect to server", True),
        ("Unable to locate credentials", False),
        ("AWS Error UNKNOWN (HTTP status 400) during HeadObject operation: ExpiredToken", False),
    ],
)
def test_which_errors_are_transient(message, transient):
    assert is_transient(OSError(message)) is transient


class _ShortFile:
    """A pyarrow-like file whose first reads come back short, as a cut connection leaves them."""

    def __init__(self, data: bytes, short_reads: int):
        self.data, self.short_reads = data, short_reads

    def read_at(self, length: int, offset: int) -> bytes:
        chunk = self.data[offset : offset + length]
        if self.short_reads:
            self.short_reads -= 1
            return chunk[: len(chunk) // 2]
        return chunk

    def close(self) -> None:
        pass


def test_a_short_read_is_read_again_not_taken_for_a_truncated_file():
    from repair.io.storage import InputFile

    clock = FakeTime()
    data = bytes(range(256)) * 4
    file = InputFile("s3://b/k", _ShortFile(data, short_reads=2), len(data), retry=_policy(10, clock))
    assert file.read(100, 500) == data[100:600] and len(clock.slept) == 2
    stuck = InputFile("s3://b/k", _ShortFile(data, short_reads=10**6), len(data), retry=_policy(1, FakeTime()))
    with pytest.raises(StorageError, match="transient") as raised:
        stuck.read(0, 100)
    assert raised.value.transient and isinstance(raised.value.__cause__, ShortRead)


# -- S3 behind the fault proxy -------------------------------------------------------------------
@pytest.fixture(scope="module")
def s3_job(tmp_path_factory):
    """The fixture's job root in a bucket of a loopback S3 server: ``(server, s3://bucket/job)``."""
    server = s3_server.start_s3_server_or_skip()
    files = s3_server.tree(ROOT, "job")
    bucket = server.new_bucket(files)
    yield server, f"s3://{bucket}/job", sorted(files)
    server.stop()


def _storage(endpoint: str, budget: float = 30.0) -> Storage:
    return s3_server.storage_for(endpoint, budget)


def _verdicts(report) -> list[tuple]:
    return sorted((f.severity, f.kind, f.reference.snapshot, f.reference.local_name) for f in report.findings)


@pytest.mark.parametrize(
    "faults",
    [Faults(error_rate=0.25, seed=1), Faults(cut_rate=0.2, seed=2), Faults(reset_rate=0.2, seed=3),
     Faults(error_rate=0.1, cut_rate=0.1, reset_rate=0.1, seed=4)],
    ids=["25% 503", "20% cut bodies", "20% resets", "10% of each"],
)
def test_verify_and_fallback_over_a_faulty_store_reach_the_same_verdicts(s3_job, faults):
    server, root, _ = s3_job
    clean = verify(root, storage=_storage(server.endpoint))
    clean_choice = fallback(root, storage=_storage(server.endpoint)).chosen.name
    with FaultProxy(server.endpoint, faults) as proxy:
        faulty = verify(root, storage=_storage(proxy.endpoint))
        faulty_choice = fallback(root, storage=_storage(proxy.endpoint)).chosen.name
        injected = sum(proxy.injected.values())
    assert injected > 0  # the faults happened
    assert _verdicts(faulty) == _verdicts(clean) and faulty.ok == clean.ok
    assert faulty_choice == clean_choice


def _s3_environment(monkeypatch, endpoint: str, budget: float) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_REGION", s3_server.REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.SECRET_KEY)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("REPAIR_RETRY_BUDGET", str(budget))


def _only_in_newest() -> str:
    """A file in shared/ that only the newest retained checkpoint references."""
    ids = damage.checkpoint_ids(ROOT)
    for path in sorted((ROOT / "shared").iterdir()):
        if damage.referencing_checkpoints(ROOT, path) == [max(ids)]:
            return path.name
    raise AssertionError("no shared file of the newest checkpoint alone")


def test_an_object_that_always_fails_is_unknown_never_broken(s3_job, monkeypatch, capsys):
    server, root, _ = s3_job
    victim = _only_in_newest()
    newest = f"chk-{max(damage.checkpoint_ids(ROOT))}"
    with FaultProxy(server.endpoint, Faults(always_fail=(victim,))) as proxy:
        _s3_environment(monkeypatch, proxy.endpoint, budget=1)
        assert main(["verify", root, "--json"]) == 2
        report = json.loads(capsys.readouterr().out)
        assert main(["fallback", root, "--json"]) == 2
        choice = json.loads(capsys.readouterr().out)
    unreadable = [f for f in report["findings"] if f["kind"] == "unreadable"]
    assert unreadable and all(f["severity"] == "unknown" and victim in f["path"] for f in unreadable)
    assert "InternalError" in unreadable[0]["message"] or "INTERNAL_FAILURE" in unreadable[0]["message"]
    assert not [f for f in report["findings"] if f["severity"] == "error"]  # a fault is not damage
    assert report["ok"] is False and {s["name"]: s["verdict"] for s in report["snapshots"]}[newest] == "unknown"
    assert choice["unknown"] == [newest] and newest in choice["message"] and "--retry-budget" in choice["message"]
    assert choice["chosen"]["checkpoint_id"] < max(damage.checkpoint_ids(ROOT))  # restorable, and said plainly why not newer
    assert {c["name"]: c["verdict"] for c in choice["checkpoints"]}[newest] == "unknown"


def test_verify_text_says_the_verdict_is_unknown_and_how_to_retry(s3_job, monkeypatch, capsys):
    server, root, _ = s3_job
    with FaultProxy(server.endpoint, Faults(always_fail=(_only_in_newest(),))) as proxy:
        _s3_environment(monkeypatch, proxy.endpoint, budget=1)
        assert main(["verify", root]) == 2
    out = capsys.readouterr().out
    assert "UNKNOWN" in out and "unknown (unreadable)" in out and "--retry-budget" in out


@pytest.mark.parametrize("place", ["before the command", "after the command", "after, with ="])
def test_the_retry_budget_option_reaches_the_storage_and_is_restored(monkeypatch, capsys, place):
    monkeypatch.delenv("REPAIR_RETRY_BUDGET", raising=False)
    seen = []
    import repair.ops.diagnose.incidents as incidents

    real = incidents.diagnose

    def spy(text, **kwargs):
        seen.append(StorageOptions.from_env().retry_budget)
        return real(text, **kwargs)

    monkeypatch.setattr(incidents, "diagnose", spy)
    trace = str(FIXTURES.parent / "README.md")
    argv = {"before the command": ["--retry-budget", "7.5", "diagnose", trace],
            "after the command": ["diagnose", trace, "--retry-budget", "7.5"],
            "after, with =": ["diagnose", "--retry-budget=7.5", trace]}[place]
    main(argv)
    capsys.readouterr()
    assert seen == [7.5] and "REPAIR_RETRY_BUDGET" not in os.environ


def test_triage_plans_no_repair_from_a_storage_fault(s3_job, monkeypatch, capsys):
    server, root, _ = s3_job
    newest = f"chk-{max(damage.checkpoint_ids(ROOT))}"
    with FaultProxy(server.endpoint, Faults(always_fail=(_only_in_newest(),))) as proxy:
        _s3_environment(monkeypatch, proxy.endpoint, budget=1)
        assert main(["triage", root, "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["unknown"] == [newest] and "--retry-budget" in document["message"]
    assert document["ok"] is False  # ok is true exactly at exit 0, though an older checkpoint restores
    assert all(way["snapshot"] != newest for way in document["ways"])  # unread is not broken: nothing to rebuild
    assert [way["action"] for way in document["ways"]][:1] == ["restore"]


@pytest.mark.parametrize("case", ["unresolvable endpoint", "missing bucket", "no credentials"])
def test_what_will_not_change_fails_at_once_in_one_line(s3_job, monkeypatch, capsys, case):
    """A host that does not resolve, a bucket that does not exist, credentials the store refuses: exit 2
    with the store's reason, not retried as a transient fault until the budget is spent."""
    server, root, _ = s3_job
    _s3_environment(monkeypatch, server.endpoint, budget=2)
    if case == "unresolvable endpoint":  # .invalid never resolves (RFC 6761): no outside name is looked up
        monkeypatch.setenv("AWS_ENDPOINT_URL", "http://no-such-host.invalid:9")
        monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    elif case == "missing bucket":
        root = "s3://no-such-bucket-here/job"
    else:
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    assert main(["triage", root]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "transient" not in err and "retries ran out" not in err
    reason = {"unresolvable endpoint": "resolve host", "missing bucket": "no such file", "no credentials": "ACCESS_DENIED"}[case]
    assert reason in err
