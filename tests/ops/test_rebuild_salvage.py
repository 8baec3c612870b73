"""``repair rebuild-manifest --salvage``: a damaged shared SST replaced by what its sound blocks hold.

The damage is a byte flipped in the properties block (every data block intact: nothing may be lost) or
in a data block of the per-user ``count`` SST of the newest checkpoint (tests/ops/test_rebuild.py picks it:
its newest entries cannot be shadowed, so losing them shows). The expected entries come from sst_dump's
view of the intact file. Real Flink (slow tests) restores the salvaged checkpoint: with the properties
damaged the state is exactly the expected state; with one block of a multi-block copy of that SST
damaged, exactly the keys of that block's entries differ.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from fixtures.salvage_matrix import differing_states
from repair.cli.app import main
from repair.formats.bytes.random_access import BytesSource
from repair.formats.flink.handles import FileHandle
from repair.formats.flink.metadata import decode_metadata, encode_metadata
from repair.formats.rocksdb.table.block import InternalKey
from repair.formats.rocksdb.table.sst import BlockKind, open_table
from repair.formats.rocksdb.table.writer import build_table, rewrite_options
from repair.ops.rebuild import rebuild_manifest
from repair.ops.verify.engine import verify
from tests import damage
from tests.conftest import FIXTURES, fixture_info
from tests.rebuild_testlib import (
    FIXTURES_WITH_FILES,
    SstFacts,
    _newest,
    pick_count_sst,
    restore_fixture_checkpoint,
    rocksdb_key_prefix,
    sst_dump_facts,
)
from tests.rocksdb_testlib import needs_sst_dump

pytestmark = needs_sst_dump


def _damaged(name: str, tmp_path: Path, target: SstFacts, block: str) -> Path:
    """A copy of the fixture whose ``target`` SST has a byte flipped in its properties or first data block."""
    copy = damage.copy_fixture(name, tmp_path / "damaged")
    root, metadata_path = _newest(name)
    path = damage.checkpoint_root(copy) / target.file.relative_to(root)
    data = bytearray(path.read_bytes())
    table = open_table(BytesSource(bytes(data)))
    kind = BlockKind.PROPERTIES if block == "properties" else BlockKind.DATA
    handle = next(b.handle for b in table.iter_block_handles() if b.kind == kind)
    data[handle.offset + 3] ^= 0x20
    path.write_bytes(bytes(data))
    return damage.checkpoint_root(copy) / metadata_path.parent.name


@pytest.mark.parametrize("name", FIXTURES_WITH_FILES)
def test_damaged_properties_lose_nothing_and_a_damaged_data_block_no_more_than_dropping(tmp_path, read_only_guard, name):
    target = pick_count_sst(sst_dump_facts(name, tmp_path))
    checkpoint = _damaged(name, tmp_path, target, "properties")
    result = rebuild_manifest(str(checkpoint), str(tmp_path / "out"), salvage=True)
    assert result.ok and result.status == "rebuilt" and result.lost == []
    (item,) = result.salvaged
    assert (item.local_name, item.column_family, item.entries_kept, item.entries_lost) == (target.local_name, "count", target.entries, 0)
    assert item.verified and item.sst_dump_verified
    new_file = tmp_path / "out" / checkpoint.name / item.new_file
    assert new_file.stat().st_size == item.new_size
    assert verify(str(tmp_path / "out" / checkpoint.name)).ok

    checkpoint = _damaged(name, tmp_path / "data", target, "data")
    salvaged = rebuild_manifest(str(checkpoint), str(tmp_path / "out-data"), salvage=True)
    dropped = rebuild_manifest(str(checkpoint), str(tmp_path / "out-drop"), drop_missing=True)
    # A Flink SST this small has one data block: with it damaged nothing is sound, and the file is dropped
    # whole, as --drop-missing drops it, its loss counted exactly.
    assert salvaged.salvaged == [] and salvaged.status == dropped.status == "rebuilt_with_losses"
    (lost,) = salvaged.lost
    assert (lost.local_name, lost.entries) == (target.local_name, target.entries)
    assert any("no data block of it is sound" in p for p in lost.problems)


def test_the_json_document_lists_what_was_salvaged(tmp_path, capsys):
    name = FIXTURES_WITH_FILES[1]
    target = pick_count_sst(sst_dump_facts(name, tmp_path))
    checkpoint = _damaged(name, tmp_path, target, "properties")
    code = main(["rebuild-manifest", str(checkpoint), "--out", str(tmp_path / "out"), "--salvage", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["status"] == "rebuilt"
    (item,) = doc["salvaged"]
    assert (item["local_name"], item["entries_lost"], item["entries_kept"], item["sst_dump_verified"]) == (target.local_name, 0, target.entries, True)
    assert item["damaged_metadata"] and item["lost"] == []


@pytest.mark.slow
def test_real_flink_restores_a_checkpoint_salvaged_from_damaged_properties_exactly(tmp_path):
    """Every entry kept: the restored state is exactly the expected state (Flink 2.1; the multi-block test
    below restores our writer's files in Flink 1.20 too)."""
    name = FIXTURES_WITH_FILES[1]
    target = pick_count_sst(sst_dump_facts(name, tmp_path))
    checkpoint = _damaged(name, tmp_path, target, "properties")
    result = rebuild_manifest(str(checkpoint), str(tmp_path / "out"), salvage=True)
    assert result.ok and result.salvaged[0].entries_lost == 0
    restored, expected = restore_fixture_checkpoint(name, tmp_path / "out" / checkpoint.name)
    assert restored["operator"] == expected["operator"] and differing_states(restored, expected) == []


def _multi_block_damaged(name: str, tmp_path: Path, target: SstFacts, at=lambda block: block.offset + 3) -> tuple[Path, list[bytes], int]:
    """A fixture copy whose ``target`` SST is rewritten (same entries, format and properties) in blocks of
    64 bytes, with a byte flipped in a middle data block (at ``at(its handle)``); returns chk-N of the copy,
    the user keys of the entries of that block (read from the intact rewrite), and how many data blocks
    the rewrite has."""
    copy = damage.copy_fixture(name, tmp_path / "damaged")
    root, metadata_path = _newest(name)
    path = damage.checkpoint_root(copy) / target.file.relative_to(root)
    table = open_table(BytesSource(path.read_bytes()))
    options = rewrite_options(table)
    options.block_size = 64  # a few entries per block: the count SST holds one entry per user
    entries = [(InternalKey(e.user_key, e.seqno, e.value_type), bytes(e.value)) for e in table.entries()]
    rewritten = build_table(entries, options)
    blocks = [b.handle for b in open_table(BytesSource(rewritten)).iter_block_handles() if b.kind == BlockKind.DATA]
    victim = blocks[len(blocks) // 2]
    lost = [bytes(key[:-8]) for _, key, _ in open_table(BytesSource(rewritten)).block_reader(victim, BlockKind.DATA).entries()]
    damaged = bytearray(rewritten)
    damaged[at(victim)] ^= 0x20
    path.write_bytes(bytes(damaged))
    # _metadata records each file's size: the rewrite's, as if Flink had written it so.
    checkpoint = damage.checkpoint_root(copy) / metadata_path.parent.name
    metadata = decode_metadata((checkpoint / "_metadata").read_bytes())
    metadata.map_stream_handles(lambda h: replace(h, size=len(rewritten)) if isinstance(h, FileHandle) and h.path.endswith("/" + path.name) else h)
    (checkpoint / "_metadata").write_bytes(encode_metadata(metadata))
    return checkpoint, lost, len(blocks)


@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURES_WITH_FILES)
def test_real_flink_loses_exactly_the_entries_of_the_damaged_block(tmp_path, name):
    """The per-user ``count`` SST in several blocks, one damaged: real Flink restores every key with its
    expected state except exactly the keys of the lost block's entries (which lose their newest count)."""
    target = pick_count_sst(sst_dump_facts(name, tmp_path))
    checkpoint, lost_keys, blocks = _multi_block_damaged(name, tmp_path, target)
    assert blocks > 3 and 0 < len(lost_keys) < target.entries
    result = rebuild_manifest(str(checkpoint), str(tmp_path / "out"), salvage=True)
    assert result.written_clean and result.lost == []
    (item,) = result.salvaged
    assert (item.entries_lost, item.entries_kept) == (len(lost_keys), target.entries - len(lost_keys))
    (block,) = item.lost
    assert all(block.after.user_key < key <= block.up_to.user_key for key in lost_keys)
    dropped = rebuild_manifest(str(checkpoint), str(tmp_path / "out-drop"), drop_missing=True)
    assert dropped.lost[0].entries == target.entries > item.entries_lost  # dropping loses the whole file
    max_parallelism = fixture_info(FIXTURES / name)["spec"]["max_parallelism"]
    restored, expected = restore_fixture_checkpoint(name, tmp_path / "out" / checkpoint.name)
    assert restored["operator"] == expected["operator"]
    lost_users = {key for key in expected["keyed"]["per-user"]
                  if any(lost.startswith(rocksdb_key_prefix("per-user", key, max_parallelism)) for lost in lost_keys)}
    assert lost_users
    assert set(differing_states(restored, expected)) == {("per-user", key, "count") for key in lost_users}


def test_list_lost_keys_names_each_lost_key_in_text_and_json(tmp_path, capsys):
    """A Flink 2.1 SST's only data block flipped: its bytes still read, so every lost entry's key is listed
    (complete), each lost for good: no other file holds its window contents."""
    from fixtures.damage_matrix import Cell, prepare
    from tests.json_schemas import schema_problems

    prepared = prepare(Cell("flink-2.1-p3-external-xxh3-zstd", "sst-data", "flipped"), tmp_path / "damaged")
    assert main(["rebuild-manifest", str(prepared.chk_dir), "--salvage", "--list-lost-keys", "--out", str(tmp_path / "out")]) == 1
    text = capsys.readouterr().out
    assert "keys of the lost entries (all of them;" in text and '"user-13"  (key group 0): lost' in text
    doc = json.loads(json.dumps(rebuild_manifest(str(prepared.chk_dir), str(tmp_path / "out-json"), salvage=True,
                                                 list_lost_keys=True).to_json()))
    assert schema_problems(doc, "rebuild-manifest") == []
    (lost,) = doc["lost"]
    listed = lost["lost_keys"]
    assert listed["complete"] and len(listed["keys"]) == lost["entries"] == 8
    assert {k["fate"] for k in listed["keys"]} == {"lost"} and "user-13" in {k["key"] for k in listed["keys"]}


@pytest.mark.parametrize("name", FIXTURES_WITH_FILES)
def test_a_lost_block_lists_its_keys_and_the_older_values_that_come_back(tmp_path, name):
    """A byte of a middle block's stored checksum flipped: the block is lost (its checksum fails), but its
    bytes still read, so --list-lost-keys lists exactly its keys; older files of the state overlapping
    its bounds are reported, and each key they hold shows its older value (real Flink 1.20 restores the
    older counts: the slow test above)."""
    target = pick_count_sst(sst_dump_facts(name, tmp_path))
    checkpoint, lost_keys, _ = _multi_block_damaged(name, tmp_path, target, at=lambda block: block.offset + block.size + 2)
    result = rebuild_manifest(str(checkpoint), str(tmp_path / "out"), salvage=True, list_lost_keys=True)
    (item,) = result.salvaged
    listed = item.lost_keys
    assert listed.complete and [k.key.user_key for k in listed.keys] == lost_keys
    older = {o.local_name for o in item.overlaps if o.relation in ("older", "both")}
    assert {k.fate for k in listed.keys} == {"older_value_back"}  # an older count of each key is in an older file
    assert older and {k.other_file for k in listed.keys} <= older
