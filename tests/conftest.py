"""Shared test fixtures: the committed real-Flink fixtures and a read-only guard for inputs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fixtures.state_model import window_key
from repair.formats.flink.handles import ChangelogBackendHandle
from tests.spark_archive import spark_class_archive  # noqa: F401  (the class archive of the tests' Spark JVMs)
from tests.write_commands import write_inputs, write_outputs  # noqa: F401  (fixtures of the write fault tests)

#: The per-test CPU recorder, idle unless REPAIR_TEST_TIMES names a directory (so `.ci/run` can record).
pytest_plugins = ["tests.cpu_times"]

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
TESTS = REPO / "tests"
#: Committed test inputs (configs, traces, fuzz regressions, hand-built samples).
DATA = TESTS / "data"

#: Skip reasons of tests that need a tool the machine lacks start with this.
MISSING_TOOL = "missing tool:"
#: Set by scripts/test.sh, which installs every tool: a test that would skip for a missing tool fails.
REQUIRE_TOOLS = os.environ.get("REPAIR_REQUIRE_TOOLS") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With REPAIR_REQUIRE_TOOLS=1, a skip for a missing tool (sst_dump, ldb, librocksdb, Java, the
    Flink jars, moto) is a failure: CI must not pass by not running what it was meant to run."""
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_TOOLS and report.skipped and MISSING_TOOL in str(report.longrepr):
        report.outcome = "failed"
        report.longrepr = f"{report.longrepr}: REPAIR_REQUIRE_TOOLS=1 makes a missing tool a failure"


@pytest.hookimpl(trylast=True)  # after pytest's own reordering (by fixture parameters), which it keeps
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist's ``--dist loadgroup`` (scripts/test.sh), the modules longest first
    (tests/scheduling.py); a run without workers keeps pytest's order."""
    if getattr(config.option, "loadgroup", False):  # what xdist tells its workers (their "dist" is "no")
        from tests.scheduling import order_modules

        order_modules(items)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent without it
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: each module (or part of one) to one worker (tests/scheduling.py)."""
    if config.getvalue("dist") == "loadgroup":
        from tests.scheduling import module_scheduling

        return module_scheduling(config, log)
    return None



def _job(fixture_json: Path) -> str:
    spec = json.loads(fixture_json.read_text())["spec"]
    for job in ("sql", "kryo", "scala", "avro", "pojo", "growth", "upgrade"):
        if spec.get(job):
            return job
    return "datastream"


#: Every committed fixture of the DataStream fixture job (a directory with fixture.json), by name.
FIXTURE_NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/fixture.json") if _job(p) == "datastream")
#: The fixtures of the Flink SQL job (fixtures/extra_jobs, state in sql_state_model.py): other states.
SQL_FIXTURE_NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/fixture.json") if _job(p) == "sql")
#: The fixtures of the Kryo job (fixtures/extra_jobs, state in kryo_state_model.py).
KRYO_FIXTURE_NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/fixture.json") if _job(p) == "kryo")
#: The fixtures of the Scala job (fixtures/extra_jobs/scala, state in scala_state_model.py).
SCALA_FIXTURE_NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/fixture.json") if _job(p) == "scala")
#: The fixtures of the Avro job (fixtures/extra_jobs/avro, state in avro_state_model.py).
AVRO_FIXTURE_NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/fixture.json") if _job(p) == "avro")
#: The fixtures of the POJO job (fixtures/extra_jobs, state in pojo_state_model.py).
POJO_FIXTURE_NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/fixture.json") if _job(p) == "pojo")
#: The fixtures of the growth job (fixtures/extra_jobs, state in growth_state_model.py): checkpoints that grow.
GROWTH_FIXTURE_NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/fixture.json") if _job(p) == "growth")
#: The fixtures of the upgrade job (fixtures/extra_jobs, state in upgrade_state_model.py): Flink 1.x state for 2.x.
UPGRADE_FIXTURE_NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/fixture.json") if _job(p) == "upgrade")


def tree_digest(path: Path) -> dict[str, str]:
    """sha256 of every file below ``path`` (or of ``path`` itself), by relative name."""
    path = Path(path)
    if path.is_file():
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def read_only_guard():
    """Call ``guard(path)`` before a command; at teardown the test fails if anything below changed."""
    watched: list[tuple[Path, dict[str, str]]] = []

    def guard(path: Path) -> Path:
        watched.append((Path(path), tree_digest(path)))
        return path

    yield guard
    for path, before in watched:
        assert tree_digest(path) == before, f"a command modified its input {path}"


@pytest.fixture(params=FIXTURE_NAMES)
def fixture_dir(request) -> Path:
    """Each committed fixture directory in turn."""
    return FIXTURES / request.param


def expected_shape(value):
    """A decoded value (row decoder or Parquet ``to_pylist``) in expected.json's shape, which is the
    restore output's (``fixtures/job/.../Json.java``): a Tuple (a struct of exactly ``f0``..``fn``) is
    a list, a map (a list of ``(key, value)`` tuples) a dict, a byte[] lower-case hex; Rows (``kind``
    plus fields) and POJOs stay dicts. Nested values are converted too."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        if value and list(value) == [f"f{i}" for i in range(len(value))]:
            return [expected_shape(v) for v in value.values()]
        return {k: expected_shape(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(item, tuple) for item in value):
            return {str(k): expected_shape(v) for k, v in value}
        return [expected_shape(item) for item in value]
    return value


def namespaced(entry: dict, state: str, namespace, raw: bytes | None = None) -> tuple[dict, str]:
    """Where a decoded row of ``state`` in ``namespace`` goes in one key's entry of expected.json:
    ``entry[state]``, or, in a TimeWindow namespace, ``entry[state][window]`` (``state_model.window_key``;
    VoidNamespace and GlobalWindow decode as None). ``raw``: the row's namespace bytes (timer rows have
    none of their own), checked against the decoded namespace."""
    if raw is not None:
        window = b"\x00" if namespace is None else struct.pack(">qq", namespace["start"], namespace["end"])
        assert raw == window, (namespace, raw)
    if namespace is None:
        return entry, state
    return entry.setdefault(state, {}), window_key(namespace)


def fixture_info(path: Path) -> dict:
    return json.loads((path / "fixture.json").read_text())


def canonical_savepoint(name: str) -> Path:
    """The canonical savepoint of the committed fixture ``name``."""
    return FIXTURES / name / fixture_info(FIXTURES / name)["savepoints"]["CANONICAL"]


def checkpoint_parallelism(info: dict, checkpoint_id: int | None) -> int:
    """The parallelism a fixture's checkpoint (None: a savepoint) was taken at: a rescaled fixture's job
    directory also holds the first run's checkpoint, at the parallelism it was rescaled from."""
    rescaled = info.get("rescaled")
    if rescaled and checkpoint_id is not None and checkpoint_id <= rescaled["restored_checkpoint"]:
        return rescaled["from_parallelism"]
    return info["parallelism"]


#: FixtureSpec fields newer than some committed fixture.json files, with the generator's defaults.
SPEC_DEFAULTS = {"state_backend": "rocksdb", "incremental": True, "snapshot_compression": False}


def job_root(name: str) -> str:
    """The job directory (``checkpoints/<job-id>``) of the committed fixture ``name``."""
    return str(FIXTURES / name / "checkpoints" / fixture_info(FIXTURES / name)["job_id"])


def newest_and_savepoints(names: list[str]) -> list:
    """``pytest.param((fixture, what))`` of each fixture's newest checkpoint (``what`` = ``checkpoint``)
    and of each of its savepoints (``what`` = the savepoint format), which hold the same state."""
    return [pytest.param((name, what), id=f"{name}-{what.lower()}") for name in names
            for what in ("checkpoint", *sorted(fixture_info(FIXTURES / name)["savepoints"]))]


def export_of(name: str, what: str, tmp_path_factory) -> tuple[str, Path, dict]:
    """``(fixture, export directory, expected.json)`` of ``repair export`` of one of
    :func:`newest_and_savepoints`' snapshots."""
    from repair.cli.app import main

    path = job_root(name) if what == "checkpoint" else str(FIXTURES / name / fixture_info(FIXTURES / name)["savepoints"][what])
    out = tmp_path_factory.mktemp(name) / "out"
    assert main(["export", path, "--out", str(out), "--workers", "1"]) == 0
    return name, out, json.loads((FIXTURES / name / "expected.json").read_text())


def verify_exit_codes(name: str) -> list[int]:
    """``repair verify --json`` exit codes of the fixture's checkpoints and of its canonical savepoint."""
    from repair.cli.app import main

    savepoint = FIXTURES / name / fixture_info(FIXTURES / name)["savepoints"]["CANONICAL"]
    return [main(["verify", path, "--json", "--workers", "1"]) for path in (job_root(name), str(savepoint))]


def written_back_with_edits(name: str, tmp_path: Path, edits: dict, key=lambda k: k, rows_per_part: int = 2) -> dict:
    """Export the fixture's newest checkpoint, change the values of the first ``rows_per_part`` rows of
    each part of every state in ``edits`` (``state -> change(value)``; value and map states: one row per
    key), ``write-savepoint`` the result,
    check it verifies clean, export it again and check every state of ``edits`` exports exactly as edited
    (keys, key groups and the other states as before). Returns the changed values by (state, key)."""
    import pyarrow as pa

    from repair.ops.export.job import export
    from repair.ops.verify.engine import verify
    from repair.ops.write_savepoint import write_savepoint
    from tests.writeback_testlib import export_rows

    first = tmp_path / "first"
    export(job_root(name), str(first))
    changed = {}
    for state, change in edits.items():
        for part in sorted(first.glob(f"operator=*/state={state}/*.parquet")):
            table = pq.read_table(part)
            rows = table.to_pylist()
            for row in rows[:rows_per_part]:
                row["value"] = change(row["value"])
                changed[(state, key(row["key"]))] = row["value"]
            pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), part)
    write_savepoint(str(first), str(tmp_path / "savepoint"))
    report = verify(str(tmp_path / "savepoint"), workers=1)
    assert report.ok and not report.findings, [f.to_json() for f in report.findings]
    export(str(tmp_path / "savepoint"), str(tmp_path / "second"))

    def values(out: Path) -> dict:
        return {(state, key(row["key"])): row["value"] for state in edits for row in exported_rows(out, state)}

    edited = values(first)  # the Parquet as changed above
    assert values(tmp_path / "second") == edited and all(edited[k] == v for k, v in changed.items())
    drop = ("value", "value_raw")  # the changed rows' values (compared above); keys and key groups are the same
    assert export_rows(tmp_path / "second", drop=drop) == export_rows(first, drop=drop)
    return changed


def exported_rows(out: Path, state: str) -> list[dict]:
    """Every row of ``state`` in the export at ``out`` (all operators and parts, in part order)."""
    rows = []
    for part in sorted(out.glob(f"operator=*/state={state.replace('/', '%2F')}/*.parquet")):
        rows += pq.read_table(part).to_pylist()
    return rows


def fixture_spec(path: Path) -> dict:
    """The generator's spec of the fixture at ``path`` (``fixtures/generate.py`` FixtureSpec fields)."""
    return {**SPEC_DEFAULTS, **fixture_info(path)["spec"]}


def writes_rocksdb_instances(path: Path) -> bool:
    """Whether the fixture's checkpoints and native savepoints hold RocksDB instances (the RocksDB
    backend, incremental or full: both native since Flink 1.15; ForSt, a RocksDB fork, in the same
    handles), not key-group streams (the heap backend) nor a changelog over them."""
    return fixture_spec(path)["state_backend"] in ("rocksdb", "forst") and not logs_state_changes(path)


def logs_state_changes(path: Path) -> bool:
    """Whether the fixture ran the changelog state backend: its checkpoints' keyed state is a
    ``ChangelogBackendHandle`` (a materialized RocksDB snapshot, if any yet, plus DSTL change sets)."""
    return bool(fixture_spec(path).get("changelog"))


def materialized(handle):
    """The keyed handle a test reads: a changelog handle's first materialized one (None before the first
    materialization), any other handle itself."""
    if isinstance(handle, ChangelogBackendHandle):
        return next((h for h in handle.materialized if h is not None), None)
    return handle


def timers_in_raw_keyed_state(path: Path) -> bool:
    """Whether the fixture's checkpoints keep timers in raw keyed state (RocksDB with timers on the heap;
    its canonical savepoints write them as keyed state, ``_timer_state/...``, as usual)."""
    return fixture_spec(path).get("extra", {}).get("state.backend.rocksdb.timer-service.factory") == "HEAP"


#: The fixtures whose checkpoints hold RocksDB instances (not the heap backend's key-group streams).
ROCKSDB_FIXTURE_NAMES = [name for name in FIXTURE_NAMES if writes_rocksdb_instances(FIXTURES / name)]


@pytest.fixture
def copied_fixture(tmp_path):
    """``copied_fixture(name)`` copies a committed fixture into a temp dir and returns the copy."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(FIXTURES / name, target)
        return target

    return copy


@pytest.fixture(scope="session")
def s3():
    """A real S3-compatible server (moto) on a free loopback port, for the whole session."""
    from tests import s3_server

    try:
        server = s3_server.start_s3_server()
    except ImportError as error:
        pytest.skip(f"missing tool: moto[server] is not installed: {error}")
    yield server
    server.stop()


@pytest.fixture
def s3_storage(s3):
    """A :class:`repair.io.storage.Storage` that talks to the loopback S3 server."""
    from repair.io.storage import Storage, StorageOptions
    from tests import s3_server

    return Storage(
        StorageOptions(
            s3_endpoint=s3.endpoint,
            s3_region=s3_server.REGION,
            s3_access_key=s3_server.ACCESS_KEY,
            s3_secret_key=s3_server.SECRET_KEY,
        )
    )


@pytest.fixture(scope="module")
def local_spark(request):
    """One local[2] Spark session for the module's Spark exports (export reuses it)."""
    from repair.ops.runner import spark_session

    request.getfixturevalue("spark_class_archive")

    session = spark_session("local[2]", "repair-tests")
    yield "local[2]"
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def _restores_in_one_jvm():
    """Real-Flink runs of the fixture jobs (restores, resnapshots, generated fixtures) run in long-lived
    JVMs, one per Flink version, job class path and worker (``fixtures/restore_server.py``): each run as in
    a JVM of its own, without the JVM's start and Flink's class loading each time (docs/testing.md). A
    run with no real-Flink run starts none."""
    from fixtures.restore import restores_in_one_jvm

    with restores_in_one_jvm():
        yield
