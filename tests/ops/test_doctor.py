"""``repair doctor``: the configurations quoted in the incident reports raise the hazards they describe;
a clean modern configuration raises no error; renamed keys are judged per Flink version (key names
checked against the Flink 1.15.4, 1.18.1, 1.20.3, 2.1.1 and 2.3.0 jars, see repair/ops/doctor/flink_keys.py)."""

from __future__ import annotations

import json

import pytest

from repair.errors import UsageError
from repair.ops.doctor.config import parse_config
from repair.ops.doctor.flink_keys import OPTIONS
from repair.ops.doctor.lint import doctor
from tests.conftest import DATA, REPO

CONFIGS = DATA / "configs"


def _checks(result, severity: str | None = None) -> set[str]:
    return {f.check for f in result.findings if severity is None or f.severity == severity}


def _finding(result, check: str):
    (found,) = [f for f in result.findings if f.check == check]
    return found


def test_seed_001_rocksdb_dir_on_the_checkpoint_share_is_an_error():
    result = doctor(str(CONFIGS / "seed-001-azure-file-share.yaml"), flink_version="1.15")
    assert not result.ok
    finding = _finding(result, "rocksdb-localdir-on-checkpoint-fs")
    assert (finding.severity, finding.key, finding.value) == ("error", "state.backend.rocksdb.localdir", "/mnt/checkpoints/job")
    assert finding.runbook == "repair/runbooks/hard-links-not-supported.md"
    assert result.config["state.backend.incremental"] == "true"  # 'true' quoted in the report


def test_seed_003_shared_dir_fixed_job_id_one_retained_local_recovery():
    result = doctor(str(CONFIGS / "seed-003-shared-nfs.yaml"), flink_version="1.16")
    checks = _checks(result)
    assert {"fixed-job-id", "num-retained", "local-recovery", "tolerable-failures"} <= checks
    assert _finding(result, "fixed-job-id").severity == "warning"
    assert _finding(result, "fixed-job-id").runbook == "repair/runbooks/metadata-already-exists.md"
    retained = _finding(result, "num-retained")
    assert (retained.severity, retained.value) == ("warning", "1")
    assert _finding(result, "tolerable-failures").severity == "warning"  # not set: Flink tolerates none
    assert "deprecated-key" not in checks  # these are the current names in 1.16


def test_clean_flink_2_config_yaml_has_no_error_and_nothing_to_fix():
    result = doctor(str(CONFIGS / "clean-2.1-config.yaml"), flink_version="2.1")
    assert result.format == "nested-yaml"
    assert result.config["execution.checkpointing.num-retained"] == "3"
    assert result.config["state.backend.rocksdb.localdir"] == "/mnt/local-ssd/flink-rocksdb"
    assert result.ok and result.findings == []


@pytest.mark.parametrize("version, severity", [("1.20", "warning"), ("2.1", "warning"), (None, "info")])
def test_old_names_are_deprecated_from_1_20(version, severity):
    text = ("state.checkpoints.dir: s3://b/c\nstate.savepoints.dir: s3://b/s\nstate.checkpoints.num-retained: 3\n"
            "state.backend.incremental: true\nstate.storage.fs.memory-threshold: 20kb\n"
            "execution.savepoint.path: s3://b/c/x/chk-3\nexecution.checkpointing.tolerable-failed-checkpoints: 3\n"
            "state.backend.rocksdb.localdir: /mnt/ssd/rocksdb\n")
    result = doctor(text, flink_version=version)
    deprecated = {f.key: f for f in result.findings if f.check == "deprecated-key"}
    assert set(deprecated) == {"state.checkpoints.dir", "state.savepoints.dir", "state.checkpoints.num-retained",
                               "state.backend.incremental", "state.storage.fs.memory-threshold", "execution.savepoint.path"}
    assert {f.severity for f in deprecated.values()} == {severity}
    assert "execution.checkpointing.dir" in deprecated["state.checkpoints.dir"].fix
    assert "execution.state-recovery.path" in deprecated["execution.savepoint.path"].fix
    assert "execution.checkpointing.data-inline-threshold" in deprecated["state.storage.fs.memory-threshold"].fix
    assert result.ok


def test_old_names_are_current_in_1_15_and_new_names_are_ignored_there():
    text = "state.backend: rocksdb\nstate.checkpoints.dir: s3://b/c\nexecution.checkpointing.num-retained: 3\n"
    result = doctor(text, flink_version="1.15.4")
    unknown = [f for f in result.findings if f.check == "unknown-key"]
    assert [f.key for f in unknown] == ["execution.checkpointing.num-retained"]
    assert unknown[0].severity == "error" and "state.checkpoints.num-retained" in unknown[0].fix
    assert "deprecated-key" not in _checks(result)
    # the ignored key does not count: 1.15 keeps the default, one checkpoint
    assert _finding(result, "num-retained").value is None


def test_state_backend_type_is_current_from_1_17():
    assert "deprecated-key" in _checks(doctor("state.backend: rocksdb", flink_version="1.20"))
    assert "unknown-key" in _checks(doctor("state.backend.type: rocksdb", flink_version="1.15"))
    assert not {"deprecated-key", "unknown-key"} & _checks(doctor("state.backend.type: rocksdb", flink_version="1.18"))


def test_one_option_under_two_names():
    result = doctor("state.checkpoints.dir: s3://a\nexecution.checkpointing.dir: s3://b", flink_version="1.20")
    twice = _finding(result, "key-set-twice")
    assert twice.severity == "warning" and "execution.checkpointing.dir" in twice.fix


@pytest.mark.parametrize("localdir", [
    "/mnt/nfs/flink/rocksdb", "/mnt/azurefiles/rocksdb", "/mnt/efs/rocksdb", "/mnt/s3fs/tmp", "/data/gcsfuse/x",
    "/mnt/cifs-share/rocksdb", "/mnt/smb/rocksdb",
])
def test_rocksdb_localdir_on_a_network_filesystem(localdir):
    result = doctor(f"state.backend.rocksdb.localdir: {localdir}\nexecution.checkpointing.dir: s3://bucket/cp")
    finding = _finding(result, "rocksdb-localdir-network-fs")
    assert finding.severity == "error" and not result.ok


def test_rocksdb_localdir_under_tmp_and_unset():
    assert _finding(doctor("state.backend.rocksdb.localdir: /tmp/rocksdb"), "rocksdb-localdir-tmp").severity == "warning"
    unset = _finding(doctor("execution.checkpointing.dir: s3://b/c"), "rocksdb-localdir")
    assert unset.severity == "info" and unset.runbook == "repair/runbooks/manifest-missing.md"


def test_tolerable_failures_zero_and_no_job_subdir():
    result = doctor("-Dexecution.checkpointing.tolerable-failed-checkpoints=0 -Dexecution.checkpointing.dir=s3://b/c "
                    "-D execution.checkpointing.create-subdir=false", flink_version="1.20")
    assert result.format == "dynamic-properties"
    assert _finding(result, "tolerable-failures").severity == "warning"
    assert _finding(result, "no-job-id-subdir").severity == "error"


def test_inline_threshold_far_above_default_bloats_metadata():
    assert _finding(doctor("execution.checkpointing.data-inline-threshold: 512kb"), "inline-threshold").severity == "warning"
    assert _finding(doctor("execution.checkpointing.data-inline-threshold: 5 mb"), "inline-threshold").severity == "warning"
    assert "inline-threshold" not in _checks(doctor("execution.checkpointing.data-inline-threshold: 20kb"))


def test_flink_deployment_flink_configuration():
    text = """
apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
spec:
  flinkVersion: v1_20
  flinkConfiguration:
    state.backend.type: rocksdb
    execution.checkpointing.dir: file:///flink-data/checkpoints
    state.backend.rocksdb.localdir: /flink-data/checkpoints/rocksdb
"""
    result = doctor(text, flink_version="1.20")
    assert result.format == "flink-deployment"
    assert _finding(result, "rocksdb-localdir-on-checkpoint-fs").severity == "error"


def test_flink_deployment_flink_version_chooses_the_key_names():
    """Without --flink, a FlinkDeployment's spec.flinkVersion says which Flink reads the keys."""
    text = """
kind: FlinkDeployment
spec:
  flinkVersion: {version}
  flinkConfiguration:
    execution.checkpointing.dir: s3://b/c
"""
    old = doctor(text.format(version="v1_15"))
    assert old.flink_version == "1.15" and old.flink_version_source == "flink-deployment"
    assert _finding(old, "unknown-key").key == "execution.checkpointing.dir"  # 1.15 reads state.checkpoints.dir
    new = doctor(text.format(version="v2_1"))
    assert new.flink_version == "2.1" and "unknown-key" not in _checks(new)
    given = doctor(text.format(version="v1_15"), flink_version="2.1")  # --flink wins
    assert given.flink_version == "2.1" and given.flink_version_source == "argument" and "unknown-key" not in _checks(given)


@pytest.mark.parametrize("text", ["$internal.pipeline.job-id: 00000000000000000000000000000001\n",
                                  "$internal:\n  pipeline:\n    job-id: 00000000000000000000000000000001\n"])
def test_values_stay_the_text_the_user_wrote(text):
    result = doctor(text + "execution.checkpointing.dir: s3://b/c\nstate.backend.local-recovery: on\n")
    assert result.config["$internal.pipeline.job-id"] == "00000000000000000000000000000001"
    assert _finding(result, "fixed-job-id").value == "00000000000000000000000000000001"
    assert result.config["state.backend.local-recovery"] == "on"  # not YAML 1.1's True


def test_unset_tolerable_failures_is_the_same_hazard_as_an_explicit_0():
    unset = _finding(doctor("execution.checkpointing.dir: s3://b/c"), "tolerable-failures")
    zero = _finding(doctor("execution.checkpointing.tolerable-failed-checkpoints: 0"), "tolerable-failures")
    assert unset.severity == zero.severity == "warning" and "default 0" in unset.why


def test_dynamic_properties_with_quotes_and_a_dollar_key():
    fmt, config, _ = parse_config("flink run -D'$internal.pipeline.job-id=00000000000000000000000000000001' "
                               '-Dstate.backend.rocksdb.localdir="/mnt/local ssd/rocksdb" job.jar')
    assert fmt == "dynamic-properties"
    assert config == {"$internal.pipeline.job-id": "00000000000000000000000000000001",
                      "state.backend.rocksdb.localdir": "/mnt/local ssd/rocksdb"}


def test_bad_version_is_a_usage_error():
    with pytest.raises(UsageError):
        doctor("state.backend: rocksdb", flink_version="latest")


def test_json_contract_and_runbooks_exist():
    document = doctor(str(CONFIGS / "seed-003-shared-nfs.yaml")).to_json()
    assert set(document) == {"schema_version", "source", "format", "flink_version", "flink_version_source", "ok", "counts", "findings", "config"}
    for finding in document["findings"]:
        assert set(finding) == {"kind", "message", "check", "severity", "key", "value", "why", "fix", "runbook"}
        assert finding["runbook"] is None or (REPO / finding["runbook"]).is_file()
    json.dumps(document)


def test_every_option_name_has_a_version_order():
    for option in OPTIONS.values():
        versions = [since for since, _ in option.names]
        assert versions == sorted(versions), option.id


def test_a_misspelled_key_is_flagged_with_the_key_meant():
    result = doctor("state.backend.typ: rocksdb\nstate.checkpoints.num-retaned: 3\ntaskmanager.memory.process.size: 4g\n")
    misspelled = {f.key: f.fix for f in result.findings if f.check == "misspelled-key"}
    assert misspelled == {"state.backend.typ": "did you mean state.backend.type?",
                          "state.checkpoints.num-retaned": "did you mean state.checkpoints.num-retained?"}


@pytest.mark.slow  # runs the fixture job in real Flink 1.20
def test_real_flink_ignores_a_misspelled_key_silently(tmp_path):
    """What ``misspelled-key`` rests on: Flink neither refuses nor warns about a key it does not have;
    the setting meant simply does not apply. The fixture job, told to take incremental checkpoints
    under a misspelled key only, runs and takes full ones (Flink's default)."""
    from fixtures import state_model
    from fixtures.flink_harness import JobSettings, ensure_flink, run_fixture_job
    from repair.formats.flink.handles import IncrementalKeyedHandle
    from repair.formats.flink.metadata import decode_metadata

    misspelled = "execution.checkpointing.incremantal"
    assert _finding(doctor(f"{misspelled}: true\n", flink_version="1.20"), "misspelled-key").fix == "did you mean execution.checkpointing.incremental?"

    records = tmp_path / "records.tsv"
    state_model.write_records(state_model.read_records(REPO / "fixtures" / "flink-1.20-default" / "records.tsv")[:300], records)
    settings = JobSettings(checkpoint_dir=tmp_path / "checkpoints", incremental=False, rocksdb_local_dir=tmp_path / "rocksdb",
                           extra_conf={misspelled: "true"})
    run_fixture_job(ensure_flink("1.20.3"), "generate", settings, {"--records": str(records), "--log": str(tmp_path / "run.json")})

    metadata = sorted((tmp_path / "checkpoints").glob("*/chk-*/_metadata"), key=lambda p: int(p.parent.name[4:]))
    assert metadata, "the job took no checkpoint"
    keyed = [sub.managed_keyed_state for op in decode_metadata(metadata[-1].read_bytes()).operators
             for sub in op.subtasks if sub.managed_keyed_state is not None]
    # A full RocksDB checkpoint is a native one that shares nothing: every SST is private to it.
    assert keyed and all(isinstance(h, IncrementalKeyedHandle) for h in keyed)
    assert not any(h.shared for h in keyed), "Flink took incremental checkpoints: it read the misspelled key"
    assert any(f.local_path.endswith(".sst") for h in keyed for f in h.private)
