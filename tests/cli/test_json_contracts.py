"""docs/json-contracts.md held against real output: each documented ``--json`` example has exactly the
fields a real run of that command prints, at every level (objects in lists too), on inputs chosen so
that the lists the example shows are not empty. The field tables of the doc are not repeated here:
the example documents are the contract, and a field added to a command without its doc fails."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from repair.cli.app import main
from tests import damage
from tests.conftest import FIXTURES, REPO
from tests.json_schemas import SCHEMAS, schema_name, schema_problems
from tests.samples import ROOT_120, SEED_TRACE, UPGRADE_SOURCE

CONTRACTS = REPO / "docs" / "json-contracts.md"
SECTION = re.compile(r"^## `repair ([a-z-]+) ([^`]*)`\n(.*?)(?=^## |\Z)", re.S | re.M)
EXAMPLE = re.compile(r"^```json\n(.*?)^```", re.S | re.M)
#: Object keys that are field names; other keys (subtask numbers, file names, state names, "...") are
#: data, and such an object is a map whose values are compared with each other.
FIELD_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
#: Objects that are maps by meaning although their keys look like field names: the per-column decisions
#: of an export (``key``, ``value``...) and the per-severity counts of doctor; their values are alike.
MAP_FIELDS = ("columns", "counts")


def documented() -> dict[str, list]:
    """``{"<command> <arguments>": [example documents]}`` in the order of the doc."""
    return {f"{m[1]} {m[2]}": [json.loads(block) for block in EXAMPLE.findall(m[3])] for m in SECTION.finditer(CONTRACTS.read_text())}


def shape_differences(doc, real, where: str = "$") -> list[str]:
    """Where the fields of ``real`` differ from the documented example ``doc`` (values are not compared,
    and ``null`` on either side matches anything: "not applicable" or "not known")."""
    if doc is None or real is None:
        return []
    if isinstance(doc, dict) and isinstance(real, dict):
        is_map = where.rpartition(".")[2] in MAP_FIELDS
        if is_map or not all(FIELD_NAME.match(k) for k in doc) or not all(FIELD_NAME.match(k) for k in real):
            return _values_alike(list(doc.values()), list(real.values()), where + "{}")
        problems = [f"{where}.{k}: printed but not documented" for k in real if k not in doc]
        problems += [f"{where}.{k}: documented but not printed" for k in doc if k not in real]
        for key in doc.keys() & real.keys():
            problems += shape_differences(doc[key], real[key], f"{where}.{key}")
        return problems
    if isinstance(doc, list) and isinstance(real, list):
        return _values_alike(doc, real, where + "[]")
    if isinstance(doc, (dict, list)) != isinstance(real, (dict, list)):
        return [f"{where}: documented as {type(doc).__name__}, printed as {type(real).__name__}"]
    return []


def _values_alike(doc: list, real: list, where: str) -> list[str]:
    """Elements of a list (or values of a map): every printed object field is documented in some
    example element, and every documented one is printed by some element."""
    doc_objects = [d for d in doc if isinstance(d, dict)]
    real_objects = [r for r in real if isinstance(r, dict)]
    if not doc_objects or not real_objects:
        return [] if not doc or not real else shape_differences(doc[0], real[0], where)
    merged_doc: dict = {}
    for d in doc_objects:
        for k, v in d.items():
            if merged_doc.get(k) is None:
                merged_doc[k] = v
    merged_real: dict = {}
    for r in real_objects:
        for k, v in r.items():
            if merged_real.get(k) is None:
                merged_real[k] = v
    return shape_differences(merged_doc, merged_real, where)


def _run(capsys, *args: str) -> dict:
    main([*args, "--json"])
    out, err = capsys.readouterr()
    assert out, err
    return json.loads(out)


def _damaged(tmp_path: Path, kind: str, fixture: str = "flink-1.20-p3-external-xxhash-lz4") -> Path:
    return damage.damaged_copy(fixture, tmp_path, kind).root


def _properties_damaged(tmp_path: Path) -> Path:
    """The newest checkpoint of a fixture copy whose first SST has a byte flipped in its properties block."""
    from repair.formats.bytes.random_access import BytesSource
    from repair.formats.rocksdb.table.sst import open_table

    root = damage.checkpoint_root(damage.copy_fixture("flink-1.20-p3-external-xxhash-lz4", tmp_path))
    newest = max(damage.checkpoint_ids(root))
    sst = damage.referenced_files(root, newest, damage.is_sst)[0]
    data = bytearray(sst.read_bytes())
    data[open_table(BytesSource(bytes(data))).metaindex["rocksdb.properties"].offset + 3] ^= 0x20
    sst.write_bytes(bytes(data))
    return root / f"chk-{newest}"


def _replaced_from_older(tmp_path: Path, capsys) -> dict:
    """``rebuild-manifest --older``'s ``replaced[0]``: in a copy of the older-copies fixture, an SST of the
    restored job's checkpoint that the first job's root holds byte for byte gets a data byte flipped."""
    import hashlib

    from repair.formats.bytes.random_access import BytesSource
    from repair.formats.rocksdb.table.sst import BlockKind, open_table

    base = tmp_path / "older-copies"
    shutil.copytree(FIXTURES / "older_copies" / "flink-1.20-no-claim", base)
    first, second = json.loads((base / "fixture.json").read_text())["runs"]
    root_a, root_b = base / "checkpoints" / first["job_id"], base / "checkpoints" / second["job_id"]
    in_a = {hashlib.sha1(p.read_bytes()).digest() for p in (root_a / "shared").iterdir()}
    sst = next(p for p in sorted((root_b / "shared").iterdir()) if hashlib.sha1(p.read_bytes()).digest() in in_a
               and p.read_bytes()[-8:] == bytes.fromhex("f7cff485b741e288"))  # a table (block-based magic), not a MANIFEST
    data = bytearray(sst.read_bytes())
    data[next(b.handle.offset for b in open_table(BytesSource(bytes(data))).iter_block_handles() if b.kind == BlockKind.DATA) + 3] ^= 0x20
    sst.write_bytes(bytes(data))
    chk = root_b / f"chk-{second['retained_checkpoints'][-1]}"
    return _run(capsys, "rebuild-manifest", str(chk), "--out", str(tmp_path / "out-older"), "--older", str(root_a))["replaced"][0]


def _real_documents(command: str, tmp_path: Path, capsys) -> list:
    """The documents a real run prints for ``command``'s section, one per example block."""
    if command == "inspect PATH --json":
        return [_run(capsys, "inspect", str(ROOT_120))]
    if command == "verify PATH --json":
        return [_run(capsys, "verify", str(_damaged(tmp_path, "missing_sst")))]
    if command == "fallback ROOT --json":
        return [_run(capsys, "fallback", str(_damaged(tmp_path, "sst_flipped_byte")))]
    if command == "orphans ROOT --json":
        root = damage.checkpoint_root(damage.copy_fixture("flink-1.20-default", tmp_path))
        (root / "shared" / "left-behind-by-a-failed-checkpoint").write_bytes(b"x" * 10)
        return [_run(capsys, "orphans", str(root))]
    if command == "size PATH --json":
        return [_run(capsys, "size", str(_damaged(tmp_path, "missing_sst", "flink-2.1-p3-external-xxh3-zstd")), "--top", "2")]
    if command == "size PATH --deep --json":
        root = damage.checkpoint_root(FIXTURES / "flink-2.1-growth")
        return [_run(capsys, "size", str(root), "--deep", "--ttl", "recent=1s", "--top", "1")]
    if command == "size ROOT --history --json":
        root = damage.checkpoint_root(FIXTURES / "flink-2.1-growth")
        return [_run(capsys, "size", str(root), "--history", "--top", "2")]
    if command == "diff OLD NEW --json":
        root = damage.checkpoint_root(FIXTURES / "flink-2.1-p3-external-xxh3-zstd")
        return [_run(capsys, "diff", str(root / "chk-4"), str(root / "chk-5"), "--top", "1")]
    if command == "compat OLD NEW --json":
        return [_run(capsys, "compat", str(FIXTURES / "compat" / "flink-1.20" / "old"), str(FIXTURES / "compat" / "flink-1.20" / "state-renamed"))]
    if command == "relocate CHECKPOINT --to NEW_ROOT --json":
        moved = tmp_path / "moved" / ROOT_120.name
        shutil.copytree(ROOT_120, moved)
        return [_run(capsys, "relocate", str(moved / "chk-5"), "--to", str(tmp_path / "relocated"), "--copy")]
    if command == "rebuild-manifest CHECKPOINT --out NEW_ROOT --json":
        root = _damaged(tmp_path, "missing_sst")
        newest = max(damage.checkpoint_ids(root))
        document = _run(capsys, "rebuild-manifest", str(root / f"chk-{newest}"), "--out", str(tmp_path / "out"), "--drop-missing")
        salvaged = _run(capsys, "rebuild-manifest", str(_properties_damaged(tmp_path / "salvage")), "--out", str(tmp_path / "out-salvaged"), "--salvage")
        return [document, document["lost"][0], salvaged["salvaged"][0], _replaced_from_older(tmp_path, capsys)]
    if command == "rebuild-manifest DB_DIR --out NEW_DB --json":
        from tests.flink_instances import flink_instances

        db = flink_instances("flink-1.20-p3-external-xxhash-lz4", tmp_path)[0]
        for manifest in db.glob("MANIFEST-*"):
            manifest.unlink()
        return [_run(capsys, "rebuild-manifest", str(db), "--out", str(tmp_path / "new-db"))]
    if command == "diagnose [FILE|-] --json":
        return [_run(capsys, "diagnose", str(SEED_TRACE))]
    if command == "doctor [CONFIG|-] --json":
        config = tmp_path / "flink-conf.yaml"
        config.write_text("state.backend.type: rocksdb\nstate.checkpoints.num-retained: 1\nstate.backend.rocksdb.localdir: /tmp/rocks\n")
        return [_run(capsys, "doctor", str(config), "--flink", "1.20")]
    if command == "export CHECKPOINT --out OUT --json":
        return [_run(capsys, "export", str(ROOT_120), "--out", str(tmp_path / "export"))]
    if command == "triage ROOT --json":
        return [_run(capsys, "triage", str(_damaged(tmp_path, "missing_sst")))]
    if command == "write-savepoint EXPORT_DIR --out SAVEPOINT --json":
        main(["export", str(ROOT_120), "--out", str(tmp_path / "export")])
        capsys.readouterr()
        return [_run(capsys, "write-savepoint", str(tmp_path / "export"), "--out", str(tmp_path / "savepoint"))]
    if command == "edit CHECKPOINT --out NEW_ROOT --json":
        return [_run(capsys, "edit", str(ROOT_120 / "chk-5"), "--out", str(tmp_path / "edited"), "--rename-uid", "per-type=gone")]
    if command == "rescale CHECKPOINT --out SAVEPOINT --json":
        return [_run(capsys, "rescale", str(ROOT_120), "--out", str(tmp_path / "rescaled"), "--max-parallelism", "256")]
    if command == "watch ROOT --once --json":
        from tests.watch_testlib import IDS, flip_new_sst, live_root

        root = live_root(tmp_path, IDS)
        flip_new_sst(root)
        return [_run(capsys, "watch", str(root), "--once", "--state-dir", str(tmp_path / "state"), "--on-bad", "true", "--workers", "1")]
    if command == "upgrade CHECKPOINT --to RELEASE --out SAVEPOINT --json":
        return [_run(capsys, "upgrade", str(UPGRADE_SOURCE), "--to", "2.1", "--out", str(tmp_path / "for-2.1"),
                     "--drop-state", "upgrade/profile")]
    raise AssertionError(f"docs/json-contracts.md documents {command!r}, which this test does not run: add it")


@pytest.mark.parametrize("command", list(documented()))
def test_the_documented_json_is_what_the_command_prints(command, tmp_path, capsys):
    examples = documented()[command]
    reals = _real_documents(command, tmp_path, capsys)
    assert len(examples) == len(reals)
    problems = [p for example, real in zip(examples, reals) for p in shape_differences(example, real)]
    assert problems == []
    assert schema_problems(reals[0], schema_name(command)) == []  # the schema is the contract


@pytest.mark.parametrize("command", list(documented()))
def test_the_documented_example_follows_the_schema(command):
    """docs/json-contracts.md held against docs/schema/: each example validates, and documents exactly
    the top-level fields the schema requires (the schema allows no others)."""
    example = documented()[command][0]
    schema = json.loads((SCHEMAS / f"{schema_name(command)}.json").read_text())
    if "$ref" in schema:  # rescale: write-savepoint's document
        schema = json.loads((SCHEMAS / schema["$ref"]).read_text())
    elided = [key for key, value in example.items() if isinstance(value, dict) and list(value) == ["..."]]  # {"...": "the X document"}
    assert [p for p in schema_problems(example, schema_name(command)) if p.partition(":")[0] not in elided] == []
    assert sorted(example) == sorted(schema["required"]) == sorted(schema["properties"])
    assert schema["additionalProperties"] is False


def test_the_documented_error_documents_follow_the_schema():
    errors = re.search(r"^## Errors.*?(?=^## )", CONTRACTS.read_text(), re.S | re.M)[0]
    examples = [json.loads(block) for block in EXAMPLE.findall(errors)]
    assert len(examples) == 2
    assert [schema_problems(example, "error") for example in examples] == [[], []]


def test_the_schema_catches_a_broken_document():
    """The validation the tests rely on fails where the contract is broken."""
    example = documented()["verify PATH --json"][0]
    assert schema_problems({**example, "surprise": 1}, "verify")
    assert schema_problems({**example, "source": "relative/path"}, "verify")
    finding = {**example["findings"][0], "kind": "kebab-case-kind"}
    assert schema_problems({**example, "findings": [finding]}, "verify")
    assert schema_problems({"schema_version": 1, "ok": False, "command": "verify",
                            "error": {"type": "UsageError", "message": "x", "source": None, "exit_code": 1}}, "error")


WRITING = {"relocate", "rebuild-manifest", "export", "write-savepoint", "edit", "rescale", "upgrade"}
JUDGING = {"inspect", "verify", "fallback", "triage", "orphans", "size", "diff", "compat", "relocate", "rebuild-manifest", "diagnose", "doctor",
           "watch"}


@pytest.mark.parametrize("command", list(documented()))
def test_every_document_has_the_common_fields(command, tmp_path, capsys):
    """One contract: ``source`` everywhere, ``out`` where the command writes, and ``findings`` in the
    common shape (kind, severity, message) where it judges its input."""
    from repair.findings import Severity

    name = command.split()[0]
    document = _real_documents(command, tmp_path, capsys)[0]
    assert list(document)[:2] == ["schema_version", "ok"]
    assert isinstance(document["source"], str) and document["source"]
    assert ("out" in document) == (name in WRITING)
    if name in WRITING:
        assert isinstance(document["out"], str) and document["out"]
    assert ("findings" in document) == (name in JUDGING)
    for finding in document.get("findings", []):
        assert isinstance(finding["kind"], str) and isinstance(finding["message"], str) and finding["message"]
        assert finding["severity"] in {s.value for s in Severity}


def test_findings_are_not_empty_where_the_input_is_damaged(tmp_path, capsys):
    """The common-field test above would pass on empty lists: here each judging command sees damage."""
    root = _damaged(tmp_path, "missing_sst")
    newest = max(damage.checkpoint_ids(root))
    for args in (("verify", str(root)), ("fallback", str(root)), ("triage", str(root)), ("orphans", str(root)), ("size", str(root)),
                 ("relocate", str(root / f"chk-{newest}"), "--to", str(tmp_path / "relocated")),
                 ("rebuild-manifest", str(root / f"chk-{newest}"), "--out", str(tmp_path / "rebuilt"))):
        exit_code = main([*args, "--json"])
        document = json.loads(capsys.readouterr().out)
        assert schema_problems(document, args[0]) == []
        kinds = {f["kind"] for f in document["findings"]}
        assert "missing_file" in kinds, (args[0], kinds)
        # fallback and triage find a way back (an older checkpoint); the others report the problem
        assert exit_code == (0 if args[0] in ("fallback", "triage") else 1), args[0]


def test_every_command_with_json_output_has_a_contract():
    import typer.main

    from repair.cli.app import app

    with_json = {name for name, command in typer.main.get_command(app).commands.items()
                 if any("--json" in param.opts for param in command.params)}
    assert with_json == {command.split()[0] for command in documented()}


@pytest.mark.parametrize(
    "doc, real, problem",
    [
        ({"a": 1}, {"a": 1, "b": 2}, "$.b: printed but not documented"),
        ({"a": 1, "b": 2}, {"a": 1}, "$.b: documented but not printed"),
        ({"xs": [{"a": 1}]}, {"xs": [{"a": 1, "c": 3}]}, "$.xs[].c: printed but not documented"),
        ({"m": {"0": {"a": 1}}}, {"m": {"7": {"b": 1}}}, "$.m{}.b: printed but not documented"),
    ],
)
def test_the_comparison_finds_a_changed_field(doc, real, problem):
    assert problem in shape_differences(doc, real)


def _emitted_kinds() -> dict[str, str]:
    """Every finding kind the code writes as a literal, with where: the first argument of ``Problem``,
    ``BlockProblem``, ``CheckpointFinding``, the one constructor from errors (``from_error``) and the
    cross-check's ``finding``. Kinds of
    MANIFEST and log records (repair/formats/rocksdb) reach verify's output as ``manifest_<kind>``."""
    import ast

    kinds: dict[str, str] = {}
    for path in sorted((REPO / "repair").rglob("*.py")):
        manifest_level = path.parent.name == "rocksdb" and path.stem in ("manifest", "log_format")
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            position = {"Problem": 0, "BlockProblem": 0, "finding": 0, "CheckpointFinding": 0, "from_error": 0}.get(name)
            if position is None:
                continue
            values = [node.args[position]] if len(node.args) > position else []
            values += [k.value for k in node.keywords if k.arg == "kind"]
            for value in values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    kind = f"manifest_{value.value}" if manifest_level else value.value
                    kinds.setdefault(kind, f"{path.relative_to(REPO)}:{node.lineno}")
    return kinds


def test_every_finding_kind_the_code_emits_is_documented():
    doc = CONTRACTS.read_text()
    kinds = _emitted_kinds()
    assert len(kinds) > 20  # the scan finds them
    assert {kind: where for kind, where in kinds.items() if f"`{kind}`" not in doc} == {}
