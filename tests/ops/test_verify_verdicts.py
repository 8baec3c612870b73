"""The two verdicts real Flink contradicted before the damage matrix, end to end through the CLI.

- A ``_metadata`` whose V4+ ``CheckpointProperties`` trailer is cut short or has bytes zeroed: Flink's
  JobMaster cannot load it (``EOFException``, ``ClassNotFoundException``, ... inside
  ``MetadataV4Serializer``), so verify fails (exit 1) naming the trailer and its offset, and fallback
  does not choose the checkpoint.
- A garbled ``OPTIONS-*`` file: Flink 1.20 and 2.x restore exact state (RocksDB is opened with the
  options Flink passes), so verify warns (exit 0) with the reason, and fallback chooses the checkpoint.

The slow tests restore the same damaged checkpoints in real Flink.
"""

from __future__ import annotations

import json

import pytest

from fixtures.damage_matrix import Cell, prepare, restore_cell
from repair.cli.app import main
from repair.formats.flink.metadata import decode_metadata
from repair.ops.fallback import fallback


def run(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, " ".join(capsys.readouterr().out.split())  # the table wraps long messages


@pytest.mark.parametrize("fixture", ["flink-1.20-default", "flink-2.1-p3-external-xxh3-zstd"])
@pytest.mark.parametrize("role, damage", [("metadata-trailer", "truncated"), ("metadata-trailer", "zeroed"),
                                          ("metadata-trailer", "flipped"), ("metadata-trailer-uid", "flipped")])
def test_a_damaged_trailer_fails_verify_naming_it_and_its_offset(capsys, tmp_path, fixture, role, damage):
    prepared = prepare(Cell(fixture, role, damage), tmp_path)
    start = decode_metadata((prepared.chk_dir / "_metadata").read_bytes()).trailer_offset  # the operators still decode
    code, out = run(capsys, "verify", str(prepared.chk_dir))
    assert code == 1
    assert "CheckpointProperties trailer" in out and f"offset {start}" in out
    code, out = run(capsys, "verify", "--json", str(prepared.chk_dir))
    doc = json.loads(out)
    (finding,) = [f for f in doc["findings"] if f["kind"] == "metadata_trailer_undecodable"]
    assert code == 1 and not doc["ok"] and finding["severity"] == "error" and finding["offset"] == start
    assert finding["local_name"] == "_metadata"
    assert fallback(str(prepared.root)).chosen is None


@pytest.mark.parametrize("damage", ["truncated", "zeroed"])
def test_inspect_reports_a_damaged_trailer_as_verify_does(capsys, tmp_path, damage):
    """inspect shows the operators (they decode) but does not call a _metadata Flink cannot load fine."""
    prepared = prepare(Cell("flink-1.20-default", "metadata-trailer", damage), tmp_path)
    start = decode_metadata((prepared.chk_dir / "_metadata").read_bytes()).trailer_offset
    code, out = run(capsys, "inspect", "--json", str(prepared.chk_dir))
    doc = json.loads(out)
    (finding,) = [f for f in doc["findings"] if f["kind"] == "metadata_trailer_undecodable"]
    assert code == 1 and not doc["ok"] and doc["operators"]
    assert finding["severity"] == "error" and finding["offset"] == start and finding["path"].endswith("_metadata")
    code, out = run(capsys, "inspect", str(prepared.chk_dir))
    assert code == 1 and "CheckpointProperties trailer" in out and f"offset {start}" in out
    intact = prepare(Cell("flink-1.20-default", "metadata-trailer-flags", "flipped"), tmp_path / "intact")
    code, out = run(capsys, "inspect", "--json", str(intact.chk_dir))
    assert code == 0 and json.loads(out)["ok"] and json.loads(out)["findings"] == []


@pytest.mark.parametrize("fixture", ["flink-1.20-default", "flink-2.1-p3-external-xxh3-zstd"])
def test_a_trailer_flag_byte_other_than_0_or_1_passes_as_in_java(capsys, tmp_path, fixture):
    """``ObjectInputStream`` reads any non-zero boolean byte as true; Flink restores such a checkpoint."""
    prepared = prepare(Cell(fixture, "metadata-trailer-flags", "flipped"), tmp_path)
    code, out = run(capsys, "verify", str(prepared.chk_dir))
    assert code == 0 and "trailer" not in out


@pytest.mark.parametrize("cell", [Cell("flink-1.20-p3-external-xxhash-lz4", "options", "garbled"),
                                  Cell("flink-1.20-default", "inline-options", "garbled"),
                                  Cell("flink-2.1-p3-external-xxh3-zstd", "options", "truncated")])
def test_a_garbled_options_file_is_a_warning(capsys, tmp_path, cell):
    prepared = prepare(cell, tmp_path)
    code, out = run(capsys, "verify", str(prepared.chk_dir))
    assert code == 0
    assert "OPTIONS" in out and "Flink restores without reading it" in out
    code, out = run(capsys, "verify", "--json", str(prepared.chk_dir))
    doc = json.loads(out)
    assert code == 0 and doc["ok"]
    options = [f for f in doc["findings"] if (f["local_name"] or "").startswith("OPTIONS-")]
    assert options and {f["severity"] for f in options} == {"warning"}
    assert all("Flink restores without reading it" in f["message"] for f in options)
    chosen = fallback(str(prepared.root)).chosen
    assert chosen is not None and chosen.name == prepared.chk_dir.name


@pytest.mark.slow
@pytest.mark.parametrize("cell", [Cell("flink-1.20-default", "metadata-trailer", "truncated"),
                                  Cell("flink-2.1-p3-external-xxh3-zstd", "metadata-trailer", "zeroed")])
def test_real_flink_refuses_a_damaged_trailer(cell):
    record = restore_cell(cell)
    assert not record["flink"]["restored"]
    assert any(c["class"].startswith("java.io.") or c["class"] == "java.lang.ClassNotFoundException"
               for c in record["flink"]["causes"])


@pytest.mark.slow
@pytest.mark.parametrize("cell", [Cell("flink-1.20-p3-external-xxhash-lz4", "options", "garbled"),
                                  Cell("flink-2.1-p3-external-xxh3-zstd", "options", "garbled")])
def test_real_flink_restores_exact_state_past_a_garbled_options_file(cell):
    record = restore_cell(cell)
    assert record["flink"]["restored"] and record["flink"]["state_equal"]


def test_a_damaged_bloom_filter_block_is_a_warning(capsys, tmp_path):
    """RocksDB ignores a filter block it cannot read (every key 'may match'), and real Flink 1.20 restores exact
    state from an SST whose filter block has a byte flipped; the same flip in the index block stays an error."""
    prepared = prepare(Cell("flink-1.20-bloom-filter", "sst-filter", "flipped"), tmp_path / "filter")
    code, out = run(capsys, "verify", "--json", str(prepared.chk_dir))
    doc = json.loads(out)
    (finding,) = [f for f in doc["findings"] if f["kind"] == "block_checksum_mismatch"]
    assert code == 0 and finding["severity"] == "warning" and "RocksDB ignores a filter block" in finding["message"]
    assert fallback(str(prepared.root)).chosen.name == prepared.chk_dir.name
    prepared = prepare(Cell("flink-1.20-bloom-filter", "sst-index", "flipped"), tmp_path / "index")
    code, out = run(capsys, "verify", "--json", str(prepared.chk_dir))
    assert code == 1 and {f["severity"] for f in json.loads(out)["findings"] if f["kind"] == "block_checksum_mismatch"} == {"error"}
