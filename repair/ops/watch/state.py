"""``repair watch``'s state directory: what it has judged, kept across restarts.

``DIR/watch.sqlite3`` (SQLite, Python's own) holds the files verified (:mod:`.cache`), every
checkpoint judged (its ``_metadata``'s size and time, so that a ``chk-N`` written anew is judged anew)
and the undecodable ``_metadata`` files seen once (a checkpoint perhaps still being written). Each
change is one transaction: a watch stopped at any moment leaves the database as it was before or after.

``DIR/last-good.json`` (the newest checkpoint judged good) and ``DIR/history.json`` (the latest
verdicts, newest first) are for people and for ``repair fallback``/``triage --state-dir``; each is
written under a temporary name and renamed into place. The state directory is never inside the watched
root (the watch refuses that before it starts).
"""

from __future__ import annotations

import json
import os
import sqlite3

from repair.errors import UsageError
from repair.io import storage as st
from repair.ops.watch.cache import SCHEMA as FILES_SCHEMA
from repair.ops.watch.cache import CheckedFileCache

DATABASE = "watch.sqlite3"
LAST_GOOD = "last-good.json"
HISTORY = "history.json"
#: How many verdicts history.json keeps (the database keeps them all).
HISTORY_LENGTH = 500

SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    root TEXT NOT NULL,
    name TEXT NOT NULL,             -- chk-N
    checkpoint INTEGER NOT NULL,    -- N
    metadata_size INTEGER NOT NULL,
    metadata_mtime REAL,
    verdict TEXT NOT NULL,          -- good | bad
    document TEXT NOT NULL,         -- the verdict's JSON (as logged and in history.json)
    judged_at REAL NOT NULL,
    PRIMARY KEY (root, name)
);
CREATE TABLE IF NOT EXISTS unfinished (
    root TEXT NOT NULL,
    name TEXT NOT NULL,
    metadata_size INTEGER NOT NULL,
    metadata_mtime REAL,
    PRIMARY KEY (root, name)
);
"""


def connect(state_dir: str | None) -> sqlite3.Connection:
    """The state database in ``state_dir`` (created with it), or one in memory for a run without one."""
    if state_dir is None:
        path = ":memory:"
    else:
        try:
            os.makedirs(state_dir, exist_ok=True)
        except FileExistsError:  # exist_ok covers a directory only
            raise UsageError("--state-dir is a file, not a directory", source=state_dir) from None
        path = os.path.join(state_dir, DATABASE)
    db = sqlite3.connect(path, timeout=30)
    with db:
        db.executescript(FILES_SCHEMA + SCHEMA)
    return db


class WatchState:
    """The verdicts of one watched root in a state database (see the module doc)."""

    def __init__(self, db: sqlite3.Connection, root: str, state_dir: str | None, storage: st.Storage):
        self.db = db
        self.root = root
        self.state_dir = state_dir
        self._storage = storage

    def judged(self, name: str, info: st.FileInfo) -> bool:
        """Whether ``name`` with this ``_metadata`` (size and time) has its verdict already."""
        row = self.db.execute("SELECT metadata_size, metadata_mtime FROM verdicts WHERE root = ? AND name = ?",
                              (self.root, name)).fetchone()
        return row is not None and row[0] == info.size and row[1] == info.mtime

    def seen_unfinished(self, name: str, info: st.FileInfo) -> bool:
        """Whether ``name``'s ``_metadata`` was undecodable before with this very size and time; else
        remembers that it is now."""
        row = self.db.execute("SELECT metadata_size, metadata_mtime FROM unfinished WHERE root = ? AND name = ?",
                              (self.root, name)).fetchone()
        if row is not None and row[0] == info.size and row[1] == info.mtime:
            return True
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO unfinished VALUES (?, ?, ?, ?)", (self.root, name, info.size, info.mtime))
        return False

    def record(self, name: str, checkpoint: int, info: st.FileInfo, verdict: str, document: dict, judged_at: float) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (self.root, name, checkpoint, info.size, info.mtime, verdict, json.dumps(document), judged_at))
            self.db.execute("DELETE FROM unfinished WHERE root = ? AND name = ?", (self.root, name))

    def last(self, verdict: str | None = None) -> dict | None:
        """The verdict document of the newest checkpoint judged (``verdict``: only those judged so)."""
        query = "SELECT document FROM verdicts WHERE root = ?" + (" AND verdict = ?" if verdict else "")
        row = self.db.execute(query + " ORDER BY checkpoint DESC LIMIT 1",
                              (self.root, verdict) if verdict else (self.root,)).fetchone()
        return json.loads(row[0]) if row else None

    def history(self, limit: int = HISTORY_LENGTH) -> list[dict]:
        rows = self.db.execute("SELECT document FROM verdicts WHERE root = ? ORDER BY judged_at DESC, checkpoint DESC LIMIT ?",
                               (self.root, limit)).fetchall()
        return [json.loads(row[0]) for row in rows]

    def publish(self) -> None:
        """``last-good.json`` and ``history.json`` written anew, each atomically (nothing without a state dir)."""
        if self.state_dir is None:
            return
        last_good = {"root": self.root, "last_good": self.last("good")}
        history = {"root": self.root, "verdicts": self.history()}
        for name, document in ((LAST_GOOD, last_good), (HISTORY, history)):
            self._storage.write_atomic(os.path.join(self.state_dir, name), json.dumps(document, indent=2).encode() + b"\n",
                                       overwrite=True)


def read_last_good(state_dir: str) -> dict | None:
    """The ``last_good`` verdict a watch wrote into ``state_dir`` (None when there is none yet)."""
    path = os.path.join(state_dir, LAST_GOOD)
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file).get("last_good")
    except FileNotFoundError:
        return None


def files_verified_by_watch(state_dir: str, storage: st.Storage | None = None) -> CheckedFileCache:
    """The SSTs a ``repair watch`` with this ``state_dir`` verified, for ``fallback``/``triage --state-dir``:
    those unchanged since (same size and time) are not read again; anything changed or new is. A usage
    error when ``state_dir`` holds no watch state."""
    path = os.path.join(state_dir, DATABASE)
    try:
        db = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=30)
        db.execute("SELECT 1 FROM checked_files LIMIT 1")
    except sqlite3.Error:
        raise UsageError(f"{state_dir} holds no repair watch state ({DATABASE})", source=state_dir) from None
    return CheckedFileCache(db, storage or st.default_storage())
