"""Real Flink RocksDB instances (a fixture checkpoint's files laid out as DB directories) and what ``ldb`` and rocksdict read from them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from repair.formats.flink.handles import IncrementalKeyedHandle
from repair.io import storage as st
from repair.io.layout import discover
from repair.io.resolved import read_resolved
from repair.io.snapshot import load_snapshot
from tests.conftest import FIXTURES
from tests.rocksdb_testlib import ldb


def ldb_scan(db: Path, cf: str, *extra: str) -> str:
    work = db.parent / (db.name + "-ldb")  # ldb may write into the DB directory: scan a copy
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(db, work)
    out = ldb(f"--db={work}", f"--column_family={cf}", *extra, "scan", "--hex")
    shutil.rmtree(work, ignore_errors=True)
    assert out.returncode == 0, out.stderr + out.stdout
    return out.stdout


def flink_instances(fixture: str, tmp_path: Path) -> list[Path]:
    """Every RocksDB instance of the fixture's last but one checkpoint, materialized under its local file names."""
    storage = st.default_storage()
    root = FIXTURES / fixture / "checkpoints"
    layout = discover(str(root / next(iter(os.listdir(root)))), storage)
    # chk-4 (the last but one): its instances hold L0 flushes over compacted L1 files
    snapshot = load_snapshot(layout.snapshots[-2], layout.root, storage)
    dirs = []
    for op in snapshot.metadata.operators:
        for sub in op.subtasks:
            keyed = sub.managed_keyed_state
            if not isinstance(keyed, IncrementalKeyedHandle):
                continue
            d = tmp_path / f"{len(dirs)}"
            d.mkdir(parents=True)
            for entry in list(keyed.shared) + list(keyed.private):
                name = entry.local_path
                assert "/" not in name and name not in ("", ".", "..")
                (d / name).write_bytes(read_resolved(storage, snapshot.resolver.resolve(entry.handle), max_size=1 << 30))
            dirs.append(d)
    return dirs


def flink_rocksdict_contents(db: Path) -> dict[str, list[tuple[bytes, bytes]]]:
    from rocksdict import AccessType, Options, Rdict

    work = db.parent / (db.name + "-rd")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(db, work)
    options, cf_options = Options.load_latest(str(work), ignore_unknown_options=True)
    options.set_wal_dir(str(work))  # the OPTIONS file names Flink's local directory
    opened = Rdict(str(work), options, column_families=cf_options, access_type=AccessType.read_only(False))
    try:
        out = {}
        for name in cf_options:
            cf = opened.get_column_family(name)
            it = cf.iter()
            it.seek_to_first()
            items = []
            while it.valid():
                items.append((it.key(), it.value()))
                it.next()
            it.status()
            for key, value in items:
                assert cf[key] == value
            out[name] = items
    finally:
        opened.close()
        shutil.rmtree(work, ignore_errors=True)
    return out

