"""``repair diagnose``: real incident reports (tests/data/seeds, kept as found), traces captured from real
Flink (tests/data/traces), several incidents in one log, wrapped and garbled pastes, unknown traces.

The slow test damages a freshly generated checkpoint, restores it in real Flink and diagnoses Flink's
own exception text.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest

from repair.ops.diagnose import rules as diagnose_rules
from repair.ops.diagnose.incidents import NO_KNOWN_INCIDENT, diagnose
from tests.conftest import DATA, REPO

SEEDS = DATA / "seeds"
TRACES = DATA / "traces"


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _by_cause(result) -> dict[str, list]:
    found: dict[str, list] = {}
    for incident in result.incidents:
        found.setdefault(incident.cause_id, []).append(incident)
    return found


def test_seed_000_missing_manifest_in_the_local_dir_per_job_and_subtask():
    result = diagnose(_read(SEEDS / "000_7d51caae2bf38c34.txt"))
    causes = _by_cause(result)
    assert set(causes) == {"manifest-missing", "small-state-inline"}
    first, second = causes["manifest-missing"]
    assert first.job_id == "d781983f4967703b0480c7943e8100af"
    assert (first.operator, first.operator_id) == ("KeyedProcessOperator", "b9daf26d7397cd4b00184cc833054139")
    assert (first.subtasks, first.parallelism, first.count) == ([27], 60, 1)
    assert first.files == ["MANIFEST-000006"]
    assert first.paths[0].endswith("__27_60__uuid_dee7e33b-9bce-42f3-909a-f6fa4ab52d8c/db/MANIFEST-000006")
    # the grep of the JobManager log: 13 lines, 8 distinct subtasks of one job: one incident, counted
    assert second.job_id == "03a4b302f44a8d9f5b31693a80bde30c"
    assert second.subtasks == [1, 2, 4, 5, 6, 9, 13, 40]
    assert second.count == 13 and len(second.paths) == 8
    assert first.phase == "checkpoint"  # Checkpoint.createCheckpoint in the stack: the local dir lost it
    assert first.next_command.to_shell() == "repair doctor <flink-conf.yaml>"
    assert first.runbook == "repair/runbooks/manifest-missing.md"
    assert causes["small-state-inline"][0].kind == "question"


def test_seed_001_hard_links_not_supported():
    result = diagnose(_read(SEEDS / "001_80391559a6aa6771.txt"))
    (incident,) = result.incidents
    assert incident.cause_id == "hard-link-not-supported"
    assert (incident.operator, incident.subtasks, incident.parallelism) == ("testOperator", [1], 2)
    assert incident.checkpoint_ids == [1]
    assert incident.files == ["000022.sst"]
    assert incident.phase == "checkpoint"
    assert incident.next_command.to_shell() == "repair doctor <flink-conf.yaml>"


def test_seed_002_checksum_mismatch_on_restore_names_the_task():
    (incident,) = diagnose(_read(SEEDS / "002_9f05c2d9aa2afda0.txt")).incidents
    assert incident.cause_id == "checksum-mismatch"
    assert (incident.operator, incident.operator_id) == ("KeyedMapBundleOperator", "44cfc1ca74b40bb44eed1f38f72b3ea9")
    assert (incident.subtasks, incident.parallelism) == ([71], 300)
    assert incident.phase == "restore"
    assert incident.next_command.to_shell() == "repair triage <checkpoint-root>"


def test_seed_003_four_incidents_in_one_report():
    result = diagnose(_read(SEEDS / "003_101fbd5754fb6c45.txt"))
    causes = _by_cause(result)
    assert list(causes) == ["tolerable-failure-threshold", "bad-sst", "metadata-already-exists", "kafka-offset-commit"]
    assert all(len(v) == 1 for v in causes.values())
    root = "/opt/flink/pm/checkpoint/000000006e6b13320000000000000000"
    bad = causes["bad-sst"][0]
    assert (bad.operator, bad.subtasks, bad.parallelism, bad.files) == ("WindowOperator", [1], 2, ["000210.sst"])
    assert bad.job_id == "000000006e6b13320000000000000000"
    assert bad.count == 3  # the heading lines name nothing else: the same incident
    exists = causes["metadata-already-exists"][0]
    assert exists.paths == [f"{root}/chk-1/_metadata"]  # wrapped after chk-1 in the report
    assert exists.checkpoint_root == root and exists.checkpoint_ids == [1]
    assert exists.next_command.to_shell() == f"repair triage {root}"
    kafka = causes["kafka-offset-commit"][0]
    assert kafka.checkpoint_ids == [4] and kafka.count == 2
    assert result.to_json()["known"] is True


def test_seed_004_design_review_is_no_known_incident():
    result = diagnose(_read(SEEDS / "004_84d7dcd0ccbf68b4.txt"))
    assert result.incidents == [] and not result.known
    assert result.message == NO_KNOWN_INCIDENT


def test_every_seed_runbook_exists():
    for seed in SEEDS.glob("*.txt"):
        for incident in diagnose(_read(seed)).incidents:
            assert (REPO / incident.runbook).is_file(), incident.runbook
    for rule in diagnose_rules.RULES:
        assert (REPO / rule.runbook).is_file(), rule.runbook


def test_real_flink_missing_manifest_trace():
    (incident,) = diagnose(_read(TRACES / "flink-1.20-restore-missing-manifest.txt")).incidents
    root = ("/tmp/capture/flink-1.20-p3-external-xxhash-lz4/staging/checkpoints/flink-1.20-p3-external-xxhash-lz4/"
            "7f725960ff6eb2ce5516f53d7277aa03")
    assert incident.cause_id == "checkpoint-file-missing"
    assert incident.runbook == "repair/runbooks/manifest-missing.md"
    assert incident.count == 2  # wrapped IOException and its cause: one incident
    assert incident.files == ["1a93f2d5-567e-484d-86f1-f614326e4268"]
    assert (incident.operator, incident.subtasks, incident.parallelism) == ("KeyedProcessOperator", [1], 3)
    assert incident.checkpoint_root == root and incident.phase == "restore"
    assert incident.next_command.to_shell() == f"repair triage {root}"
    assert [c.to_shell() for c in incident.also] == [f"repair verify {root}", "repair rebuild-manifest <checkpoint> --out <new-root>",
                                                   f"repair fallback {root}"]  # triage first, fallback after it


def test_a_task_name_and_the_backend_name_of_one_operator_are_one_incident():
    """A log that names the failing task by its name only ("Sink: Unnamed (1/3)#0" with an attempt id that does
    not name the vertex, as Flink 1.15 logs it) and, in the real Flink 1.20 trace, by the keyed backend's
    "KeyedProcessOperator_<id>": one missing file, one incident (it was reported twice)."""
    trace = _read(TRACES / "flink-1.20-restore-missing-manifest.txt")
    missing = re.search(r"FileNotFoundException: (\S+) \(No such file", trace).group(1)
    task_line = (f"2026-11-25 05:34:35,165 WARN  org.apache.flink.runtime.taskmanager.Task [] - Sink: Unnamed (1/3)#0 "
                 f"(5b2f6c0e8d1a4f3b9c7e2d1a0f9e8d7c) switched from INITIALIZING to FAILED with failure cause: "
                 f"java.io.FileNotFoundException: {missing} (No such file or directory)\n")
    for text in (task_line + trace, trace + task_line):
        (incident,) = diagnose(text).incidents
        assert incident.cause_id == "checkpoint-file-missing" and incident.count == 3
        assert (incident.operator, incident.operator_id) == ("KeyedProcessOperator", "59227332c1ac82ca63c2f66fa9c4244f")
        assert incident.files == [missing.rsplit("/", 1)[-1]]


def test_operators_named_differently_without_ids_stay_apart():
    """Names are compared with names: two tasks named differently, neither with an id, are two incidents."""
    lines = "".join(
        f"2026-11-25 05:34:3{n},165 WARN  Task [] - {name} (1/3)#0 (5b2f6c0e8d1a4f3b9c7e2d1a0f9e8d7{n}) switched from "
        f"INITIALIZING to FAILED with failure cause: java.io.FileNotFoundException: /ckpt/{'a' * 32}/shared/"
        f"0b8e2f57-2b1c-4d0e-9a51-3f7c2a9e6d10 (No such file or directory)\n"
        for n, name in enumerate(("per-user", "per-type")))
    assert [i.operator for i in diagnose(lines).incidents] == ["per-user", "per-type"]


def test_real_flink_restore_whose_missing_file_flink_did_not_name():
    (incident,) = diagnose(_read(TRACES / "flink-1.20-restore-registry-closed.txt")).incidents
    assert incident.cause_id == "restore-download-failed"
    assert incident.runbook == "repair/runbooks/manifest-missing.md"
    assert incident.operator_id == "a5a30b73b3c5159bcba1edfe5552063c" and incident.subtasks == [1]
    assert incident.next_command.to_shell() == "repair verify <checkpoint-root>"


def test_real_flink_restore_whose_download_channel_was_closed():
    """The same damage (a missing MANIFEST), in a run where the download thread whose channel another's
    failure closed surfaced: a ClosedChannelException, no file named (captured from a CI run)."""
    (incident,) = diagnose(_read(TRACES / "flink-1.20-restore-channel-closed.txt")).incidents
    assert incident.cause_id == "restore-download-failed"
    assert incident.next_command.to_shell() == "repair verify <checkpoint-root>"


def test_real_flink_bad_magic_trace():
    (incident,) = diagnose(_read(TRACES / "flink-1.20-restore-bad-table-magic.txt")).incidents
    assert incident.cause_id == "bad-sst"
    assert (incident.operator, incident.subtasks, incident.parallelism) == ("KeyedProcessOperator", [3], 3)
    assert incident.files == ["000081.sst"] and incident.phase == "restore"


def test_real_flink_2x_restore_of_a_1x_pojo_whose_list_field_changed_serializer():
    """flink-1.20-pojo restored by the same job on Flink 2.1.1 (fixtures/wall_traces.py): its POJO's List and
    Map fields had Kryo in 1.20, Flink's ListSerializer and MapSerializer in 2.x."""
    (incident,) = diagnose(_read(TRACES / "flink-2.1-restore-pojo-list-field-of-1.20.txt")).incidents
    assert incident.cause_id == "state-incompatible" and incident.runbook == "repair/runbooks/state-incompatible.md"
    assert incident.operator_id == "5bc88fda86bdb8b0a2f47aad5b113658" and incident.phase == "restore"
    assert incident.next_command.to_shell() == "repair compat <checkpoint> <new-job-snapshot>"
    assert [c.argv[:2] for c in incident.also] == [("repair", "upgrade"), ("repair", "inspect")]


def test_real_flink_restore_whose_key_type_changed():
    """flink-2.1-default restored with the uids of per-user (String keys) and per-account (Long keys) swapped."""
    (incident,) = diagnose(_read(TRACES / "flink-2.1-restore-key-serializer-changed.txt")).incidents
    assert incident.cause_id == "key-serializer-incompatible"
    assert (incident.operator, incident.operator_id) == ("KeyedProcessOperator", "f40a3056fb7c04a9bff8fb0177a847cf")
    assert incident.next_command.argv[:2] == ("repair", "compat")


def test_real_flink_2x_restore_of_1x_kryo_state_is_no_damaged_state_file():
    """flink-1.20-kryo's canonical savepoint (Kryo 2.24) restored on Flink 2.1.1 (Kryo 5) with the heap backend,
    which reads every value at restore: "Failed when trying to restore heap backend" caused by an EOFException
    in KryoSerializer.deserialize. A Kryo value Kryo 5 cannot read, not a corrupt state file: upgrade first."""
    (incident,) = diagnose(_read(TRACES / "flink-2.1-restore-kryo-of-1.20-heap.txt")).incidents
    assert incident.cause_id == "kryo-unreadable" and incident.phase == "restore"
    assert incident.next_command.argv[:2] == ("repair", "upgrade")
    assert [c.argv[:2] for c in incident.also] == [("repair", "compat"), ("repair", "verify")]


def test_real_flink_21_refusing_a_zeroed_field_descriptor_of_the_trailer():
    """flink-2.1-default's newest checkpoint, the type code of CheckpointProperties' first field descriptor
    zeroed: Flink 2.1 refuses it with "invalid descriptor for field discardCancelled"; inspect names the trailer."""
    (incident,) = diagnose(_read(TRACES / "flink-2.1-restore-trailer-invalid-descriptor.txt")).incidents
    assert incident.cause_id == "metadata-trailer-unreadable"
    assert incident.runbook == "repair/runbooks/metadata-unreadable.md"
    assert incident.next_command.to_shell() == "repair inspect <checkpoint>"
    assert incident.also[0].to_shell() == "repair triage <checkpoint-root>"


def test_several_logs_pasted_together_keep_their_incidents_apart():
    text = "\n\n".join(_read(SEEDS / name) for name in ("001_80391559a6aa6771.txt", "002_9f05c2d9aa2afda0.txt"))
    causes = _by_cause(diagnose(text))
    assert list(causes) == ["hard-link-not-supported", "checksum-mismatch"]
    assert causes["hard-link-not-supported"][0].operator == "testOperator"
    assert causes["checksum-mismatch"][0].operator == "KeyedMapBundleOperator"


def test_wrapped_and_garbled_trace():
    # a chat paste: non-breaking spaces, curly quotes, a path broken over two lines, tabs for line breaks
    text = (
        "2024-02-01 10:00:00,000 WARN  CheckpointFailureManager [] - Failed to trigger or complete checkpoint 7 for job\u00a0"
        "0123456789abcdef0123456789abcdef.\n"
        "Caused by: java.io.IOException: Target file \u201cs3://bucket/ckpt/0123456789abcdef0123456789abcdef/chk-7\n"
        "/_metadata\u201d already exists.\tat org.apache.flink.runtime.state.filesystem.FsCheckpointMetadataOutputStream"
        ".getOutputStreamWrapper(FsCheckpointMetadataOutputStream.java:168)\n"
        "Caused by:\u00a0org.rocksdb.RocksDBException: Bad table\u00a0magic\nnumber: expected 1, found 0 in /data/tm/job_"
        "0123456789abcdef0123456789abcdef_op_StreamGroupedReduceOperator_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa__2_4__uuid_"
        "11111111-2222-3333-4444-555555555555/db/000042.sst\tat org.rocksdb.RocksDB.open(Native Method)"
    )
    causes = _by_cause(diagnose(text))
    exists = causes["metadata-already-exists"][0]
    assert exists.checkpoint_root == "s3://bucket/ckpt/0123456789abcdef0123456789abcdef"
    assert exists.checkpoint_ids == [7] and exists.job_id == "0123456789abcdef0123456789abcdef"
    assert exists.next_command.to_shell() == "repair triage s3://bucket/ckpt/0123456789abcdef0123456789abcdef"
    bad = causes["bad-sst"][0]
    assert (bad.operator, bad.subtasks, bad.parallelism, bad.files) == ("StreamGroupedReduceOperator", [2], 4, ["000042.sst"])


def test_task_name_with_attempt_number():
    text = ("2024-03-05 04:12:09,113 INFO  org.apache.flink.runtime.taskmanager.Task [] - per-user (2/4)#0 "
            "(7c3b1d2e9f0a4b5c6d7e8f9a0b1c2d3e_c27dcf7b54ef6bfd6cff02ca8870b681_1_0) switched from INITIALIZING to "
            "FAILED with failure cause:\njava.io.FileNotFoundException: File hdfs://nn/flink/cp/"
            "aaaabbbbccccddddaaaabbbbccccdddd/shared/0b8e2f57-2b1c-4d0e-9a51-3f7c2a9e6d10 does not exist.\n")
    (incident,) = diagnose(text).incidents
    assert incident.cause_id == "checkpoint-file-missing"
    assert (incident.operator, incident.subtasks, incident.parallelism) == ("per-user", [2], 4)
    assert incident.next_command.to_shell() == "repair triage hdfs://nn/flink/cp/aaaabbbbccccddddaaaabbbbccccdddd"


def test_a_file_missing_from_a_native_savepoint_is_a_missing_checkpoint_file():
    """A native savepoint keeps its RocksDB files in its own directory (damage matrix:
    flink-1.20-default@NATIVE/options/missing, real Flink 1.20's text)."""
    text = ("Caused by: java.io.FileNotFoundException: /sp/savepoint-6ec134-60979fe4a2db/"
            "53db0dbf-1d5d-4536-a32f-1c300760d90a (No such file or directory)\n")
    (incident,) = diagnose(text).incidents
    assert incident.cause_id == "checkpoint-file-missing"
    assert incident.files == ["53db0dbf-1d5d-4536-a32f-1c300760d90a"]


def test_a_whole_log_names_one_failure_once_by_task_name_and_by_operator():
    """The TaskManager's log line names the task ("per-account (2/3)#0" and its attempt id, whose job vertex
    id is the keyed operator's id); the job's exception names the operator ("KeyedProcessOperator_<id>").
    Both are one incident (real Flink 1.20 output, trimmed, with the dates of Flink's default log pattern)."""
    missing = ("java.io.FileNotFoundException: /cp/7f725960ff6eb2ce5516f53d7277aa03/shared/"
               "1db980f5-a35b-43a3-8c46-29d80086f460 (No such file or directory)\n")
    text = ("2026-11-22 05:25:01,686 WARN  Task - per-account (2/3)#0 (c0e56e61cf4623d907cb8124b97f25d3_"
            "f40a3056fb7c04a9bff8fb0177a847cf_1_0) switched from INITIALIZING to FAILED with failure cause:\n"
            "java.lang.Exception: Exception while creating StreamOperatorStateContext.\n"
            "Caused by: " + missing
            + "2026-11-22 05:25:01,901 WARN  CollectResultFetcher - Failed to get job status.\n"
            "Exception in thread main: org.apache.flink.runtime.client.JobExecutionException: Job execution failed.\n"
            "Caused by: org.apache.flink.util.FlinkException: Could not restore keyed state backend for "
            "KeyedProcessOperator_f40a3056fb7c04a9bff8fb0177a847cf_(2/3) from any of the 1 provided restore options.\n"
            "Caused by: " + missing)
    (incident,) = diagnose(text).incidents
    assert incident.cause_id == "checkpoint-file-missing"
    assert incident.operator_id == "f40a3056fb7c04a9bff8fb0177a847cf" and incident.subtasks == [2]
    assert incident.files == ["1db980f5-a35b-43a3-8c46-29d80086f460"]


def test_unknown_trace_says_so_and_shows_the_root_cause():
    text = ("java.lang.RuntimeException: oops\n\tat com.example.Job.main(Job.java:10)\n"
            "Caused by: java.lang.IllegalStateException: the widget is broken\n\tat com.example.Widget.run(Widget.java:3)")
    result = diagnose(text)
    assert not result.known and result.message == NO_KNOWN_INCIDENT
    assert result.unrecognised == ["Caused by: java.lang.IllegalStateException: the widget is broken"]
    document = result.to_json()
    assert document["incidents"] == [] and document["message"] == "no known incident"
    json.dumps(document)


def test_configuration_dump_in_a_log_is_not_a_question():
    text = "INFO GlobalConfiguration - Loading configuration property: state.storage.fs.memory-threshold, 20kb state.backend: rocksdb"
    assert diagnose(text).incidents == []


def test_json_contract():
    document = diagnose(_read(SEEDS / "001_80391559a6aa6771.txt"), source="seed-001").to_json()
    assert set(document) == {"schema_version", "ok", "source", "known", "message", "incidents", "unrecognised", "findings"}
    (incident,) = document["incidents"]
    assert {"cause", "runbook", "evidence", "next_command"} <= set(incident)
    assert set(incident["evidence"]) == {"job_id", "operator", "operator_id", "subtasks", "parallelism", "files",
                                         "paths", "checkpoint_ids", "checkpoint_root", "phase"}
    json.dumps(document)


@pytest.mark.slow
def test_real_flink_restore_failure_is_diagnosed(tmp_path):
    from fixtures import state_model
    from fixtures.flink_harness import FlinkRunError, JobSettings, ensure_flink, no_restarts, run_fixture_job
    from fixtures.generate import SPECS, generate
    from tests import damage
    from tests.conftest import fixture_info

    spec = SPECS["flink-1.20-p3-external-xxhash-lz4"]  # inline threshold 0: MANIFESTs are files
    fresh = generate(spec, tmp_path / "out", staging=tmp_path / "staging")
    info = fixture_info(fresh)
    root = tmp_path / "staging" / "checkpoints" / spec.name / info["job_id"]  # the paths _metadata names
    newest = damage.checkpoint_ids(root)[-1]
    victim = damage.referenced_files(root, newest, damage.is_manifest)[0]
    victim.unlink()

    dist = ensure_flink(spec.flink_version)
    records = state_model.read_records(fresh / "records.tsv")
    with tempfile.TemporaryDirectory(dir=tmp_path) as work:
        dumps = Path(work) / "dumps.tsv"
        state_model.write_records(state_model.dump_records(records), dumps)
        # no restarts: Flink's default with checkpointing retries forever instead of failing
        settings = JobSettings(parallelism=spec.parallelism, max_parallelism=spec.max_parallelism,
                               restore_from=(root / f"chk-{newest}").as_uri(), rocksdb_local_dir=Path(work) / "rocksdb",
                               extra_conf=no_restarts(spec.flink_version))
        with pytest.raises(FlinkRunError) as failure:
            run_fixture_job(dist, "restore", settings, {"--records": str(dumps), "--out": str(Path(work) / "out.jsonl")},
                            timeout_s=300)
    # The whole output, as an engineer pastes the log: the job's final exception alone may be another
    # task's cancelled restore ("registry is already closed"), logged after the real cause.
    result = diagnose(failure.value.output)
    assert len(result.incidents) == 1, f"Flink failed with: {str(failure.value)[-3000:]}"  # the text, should this ever fail
    (incident,) = result.incidents
    if incident.cause_id == "restore-download-failed":
        # about one run in ten: another download thread's error surfaced, the file is not in the log
        assert incident.next_command.to_shell() == "repair verify <checkpoint-root>"
        return
    assert incident.cause_id == "checkpoint-file-missing"
    assert incident.files == [victim.name]
    assert incident.checkpoint_root == str(root)
    assert incident.next_command.to_shell() == f"repair triage {root}"
    assert incident.operator and incident.subtasks and incident.parallelism == spec.parallelism


def test_diagnose_points_at_the_job_root_flink_restored_from_not_the_damaged_one():
    """Flink's JobManager names the checkpoint it restores ("... located at <chk-N>"); the missing file's
    recorded root is another: triage of the restored job root, which tells a damaged path from a lost file."""
    job = "7f725960ff6eb2ce5516f53d7277aa03"
    real = f"file:/data/flink/checkpoints/{job}"
    log = (
        f"2026-11-28 00:20:01,000 INFO org.apache.flink.runtime.checkpoint.CheckpointCoordinator [] - Restoring job {job} "
        f"from Checkpoint 5 @ 1795589669950 for {job} located at {real}/chk-5.\n"
        "2026-11-28 00:20:03,000 WARN org.apache.flink.streaming.api.operators.BackendRestorerProcedure [] - Exception "
        "while restoring keyed state backend for KeyedProcessOperator_59227332c1ac82ca63c2f66fa9c4244f_(1/3)\n"
        f"java.io.FileNotFoundException: /data/glink/checkpoints/{job}/shared/20bab32f-d641-463c-a398-404c6292dd3e "
        "(No such file or directory)\n"
    )
    (incident,) = diagnose(log).incidents
    assert incident.cause_id == "checkpoint-file-missing"
    assert incident.checkpoint_root == f"/data/flink/checkpoints/{job}"
    assert incident.next_command.to_shell() == f"repair triage /data/flink/checkpoints/{job}"
    assert all("/data/glink/" not in command.to_shell() for command in [incident.next_command, *incident.also])
    # A file missing under the job root restored from: the usual advice, for that root.
    (incident,) = diagnose(log.replace("/data/glink/", "/data/flink/")).incidents
    assert incident.next_command.to_shell() == f"repair triage /data/flink/checkpoints/{job}"
    assert f"repair fallback /data/flink/checkpoints/{job}" in [command.to_shell() for command in incident.also]
