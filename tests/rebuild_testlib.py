"""Facts about a fixture's SSTs from ``sst_dump``, and restoring a rebuilt checkpoint in real Flink."""

from __future__ import annotations

import json
import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from fixtures import state_model
from fixtures.restore import restore_state
from repair.formats.flink.handles import (
    IncrementalKeyedHandle,
)
from repair.formats.flink.keygroups import assign_key_group, java_long_hash, java_string_hash, operator_id_for_uid
from repair.formats.flink.metadata import decode_metadata
from tests import damage
from tests._flink_state_files import local_file
from tests.conftest import FIXTURES, fixture_info
from tests.rocksdb_testlib import sst_dump, sst_dump_properties
from tests.state_testlib import _string_value

FIXTURES_WITH_FILES = ["flink-1.20-p3-external-xxhash-lz4", "flink-2.1-p3-external-xxh3-zstd"]


def instances(metadata_path):
    metadata = decode_metadata(metadata_path.read_bytes())
    for op in metadata.operators:
        for sub in op.subtasks:
            if isinstance(sub.managed_keyed_state, IncrementalKeyedHandle):
                yield op.operator_id, sub.index, sub.managed_keyed_state


@dataclass
class SstFacts:
    """One SST of the newest checkpoint as ``sst_dump`` sees it."""

    operator_id: str
    subtask: int
    local_name: str
    file: Path  # in the committed fixture
    column_family: str
    entries: int
    first: bytes  # user keys
    last: bytes
    seqnos: tuple[int, int]


def _newest(name: str) -> tuple[Path, Path]:
    root = damage.checkpoint_root(FIXTURES / name)
    return root, root / f"chk-{damage.checkpoint_ids(root)[-1]}" / "_metadata"


def sst_dump_facts(name: str, tmp_path: Path) -> list[SstFacts]:
    """sst_dump's view of every SST of every keyed instance of the fixture's newest checkpoint."""
    _root, metadata_path = _newest(name)
    facts = []
    for op_id, index, handle in instances(metadata_path):
        for entry in handle.shared:
            file = local_file(FIXTURES / name, metadata_path, entry.handle)
            named = tmp_path / "sst_dump" / f"{op_id}-{index}" / entry.local_path  # sst_dump wants a .sst name
            named.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, named)
            props = sst_dump_properties(named)
            scan = sst_dump(f"--file={named}", "--command=scan", "--output_hex")
            assert scan.returncode == 0, scan.stderr
            rows = re.findall(r"'([0-9A-F]*)' seq:(\d+), type:(\d+) =>", scan.stdout)
            seqnos = [int(seq) for _, seq, _ in rows]
            facts.append(SstFacts(
                op_id, index, entry.local_path, file, props["column family name"], int(props["# entries"]),
                bytes.fromhex(rows[0][0]), bytes.fromhex(rows[-1][0]), (min(seqnos), max(seqnos)),
            ))
    return facts


def pick_count_sst(facts: list[SstFacts]) -> SstFacts:
    """The SST to drop: the per-user ``count`` file holding the newest entries (most entries on a tie).

    ``count`` is a value state that changes with every record, so an older version of a key never
    equals its newest one; the newest ``count`` entries of an instance cannot be shadowed by another
    file. Dropping this file therefore really loses state (the test is not vacuous): in the Flink 1.20
    fixture its keys fall back to older counts that other files still hold (the resurrection case), in
    the Flink 2.1 fixture (one fully compacted file per state) they lose their count.
    """
    per_user = operator_id_for_uid("per-user")
    return max((f for f in facts if f.operator_id == per_user and f.column_family == "count"),
               key=lambda f: (f.seqnos[1], f.entries))


def restore_fixture_checkpoint(name: str, checkpoint: Path) -> tuple[dict, dict]:
    """``checkpoint`` (a repaired copy of fixture ``name``'s) restored in the fixture's real Flink: the
    restored state and the fixture's expected state."""
    info = fixture_info(FIXTURES / name)
    records = state_model.read_records(FIXTURES / name / "records.tsv")
    restored = restore_state(info["flink_version"], checkpoint, records,
                             parallelism=info["parallelism"], max_parallelism=info["spec"]["max_parallelism"])
    return restored, json.loads((FIXTURES / name / "expected.json").read_text())


def rocksdb_key_prefix(operator: str, key: str, max_parallelism: int) -> bytes:
    """Key group and serialized key: how every RocksDB key of ``key`` in a value/list/map state begins."""
    if operator == "per-user":
        key_group, serialized = assign_key_group(java_string_hash(key), max_parallelism), _string_value(key)
    else:
        key_group, serialized = assign_key_group(java_long_hash(int(key)), max_parallelism), struct.pack(">q", int(key))
    return key_group.to_bytes(2 if max_parallelism > 128 else 1, "big") + serialized

