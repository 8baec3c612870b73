"""The long-lived JVMs the suite's real-Flink runs go through (``fixtures/restore_server.py``) give what
a JVM of its own gives: the same restored state, the same snapshot taken again, a refusal that leaves the
server serving.

Every real-Flink restore and resnapshot of the suite runs in such servers (``tests/conftest.py``), so the
evidence of those tests is only as good as this equality. It is checked here for both of the serve
mode's kinds of run: the DataStream fixture job's restore mode and another job's generate mode (the Kryo
job resumed from a savepoint and snapshotting again, on the other jobs' class path).
"""

from __future__ import annotations

import json

import pytest

from fixtures import flink_harness, state_model
from fixtures.flink_harness import FlinkRunError
from fixtures.restore import resnapshot, restore_state
from fixtures.restore_server import RestoreServers
from repair.ops.export.job import export
from tests.conftest import FIXTURES, canonical_savepoint, fixture_info
from tests.writeback_testlib import export_rows


@pytest.fixture
def own_servers(monkeypatch):
    """Runs of this test in servers of its own (closed at its end), not the session's."""
    servers = RestoreServers()
    monkeypatch.setattr(flink_harness, "job_servers", servers)
    yield servers
    servers.close()


@pytest.mark.slow  # two JVMs of their own and two servers
def test_a_server_gives_what_a_jvm_of_its_own_gives(own_servers, monkeypatch, tmp_path):
    name = "flink-1.20-default"
    info = fixture_info(FIXTURES / name)
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    savepoint = canonical_savepoint(name)  # the newest checkpoint's state in files of its own (the checkpoints name Flink's paths)
    records = state_model.read_records(FIXTURES / name / "records.tsv")
    kryo = "flink-1.20-kryo"

    # in the servers: a refused restore (another max parallelism than the checkpoint's), then restores
    with pytest.raises(FlinkRunError) as refused:
        restore_state(info["flink_version"], savepoint, records, max_parallelism=256)
    assert "Max parallelism mismatch" in refused.value.output  # Flink's own refusal, as a JVM of its own writes it
    served = restore_state(info["flink_version"], savepoint, records)
    served_again = resnapshot(fixture_info(FIXTURES / kryo)["flink_version"], canonical_savepoint(kryo), "KryoJob",
                              tmp_path / "served", state_backend="hashmap")

    monkeypatch.setattr(flink_harness, "job_servers", None)  # a JVM of its own each
    own = restore_state(info["flink_version"], savepoint, records)
    own_again = resnapshot(fixture_info(FIXTURES / kryo)["flink_version"], canonical_savepoint(kryo), "KryoJob",
                           tmp_path / "own", state_backend="hashmap")

    assert served == own
    assert (served["keyed"], served["operator"]) == (expected["keyed"], expected["operator"])
    export(str(served_again), str(tmp_path / "served-export"))
    export(str(own_again), str(tmp_path / "own-export"))
    rows = export_rows(tmp_path / "served-export")
    assert rows == export_rows(tmp_path / "own-export")
    assert sum(map(len, rows.values())) > 500
