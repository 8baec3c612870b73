"""A job root that grows checkpoint by checkpoint under a test's control, for ``repair watch``."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests import damage

FIXTURE = "flink-1.20-p3-external-xxhash-lz4"
SOURCE = damage.checkpoint_root(damage.fixture_path(FIXTURE))
IDS = damage.checkpoint_ids(SOURCE)  # 1..5


def live_root(tmp_path: Path, completed: list[int]) -> Path:
    """A job root holding every state file of the fixture and the ``_metadata`` of ``completed`` only."""
    root = tmp_path / "job" / SOURCE.name
    shutil.copytree(SOURCE, root, ignore=lambda d, names: ["_metadata"] if Path(d).name.startswith("chk-") else [])
    for n in completed:
        complete(root, n)
    return root


def complete(root: Path, n: int) -> None:
    """Flink completes chk-n: its ``_metadata`` appears (written under another name, then renamed)."""
    shutil.copyfile(SOURCE / f"chk-{n}" / "_metadata", root / f"chk-{n}" / "_metadata.tmp")
    os.replace(root / f"chk-{n}" / "_metadata.tmp", root / f"chk-{n}" / "_metadata")


@functools.cache
def sst_names(n: int) -> frozenset[str]:
    """The names of the SSTs checkpoint ``n``'s ``_metadata`` names (found by their unique names in its bytes)."""
    return frozenset(p.name for p in damage.referenced_files(SOURCE, n, damage.is_sst))


def new_sst(n: int) -> str:
    """The name of an SST checkpoint ``n`` is the first to reference."""
    older = set().union(*(sst_names(m) for m in IDS if m < n))
    return sorted(sst_names(n) - older)[0]


def metrics_of(text: str) -> dict[tuple, float]:
    """``{(name, labels...): value}`` of a Prometheus text exposition, read with the client's own parser."""
    return {(s.name, *sorted(s.labels.items())): s.value for family in text_string_to_metric_families(text) for s in family.samples}


def flip_new_sst(root: Path) -> str:
    path = root / "shared" / new_sst(5)
    data = bytearray(path.read_bytes())
    data[7] ^= 0xFF  # inside the first data block
    path.write_bytes(bytes(data))
    return "block_checksum_mismatch"

