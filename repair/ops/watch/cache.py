"""Which files ``repair watch`` has verified already: a file unchanged since is not read again.

A file is known by where it is, which bytes of it were checked and how (its :class:`FileTask`), and
what its directory listing says now: size and modification time (the object's LastModified on an
object store, which a new upload of the same key changes). A shared SST that many checkpoints
reference is read once; a file changed in place (a byte flipped, re-uploaded, truncated) has another
size or time and is read again.

Only SSTs are remembered: they are what incremental checkpoints share. A checkpoint's own files
(MANIFEST, CURRENT, OPTIONS, meta data) are read with the checkpoint, whose cross-checks need them
decoded. A result is remembered only when the file was there and read to a verdict: a missing file, or
one that stayed unreadable (a storage fault), is looked at again next time.

:class:`CheckedFileCache` is the :class:`~repair.ops.verify.engine.CheckedFiles` that verify asks; one
is made per pass (it lists each directory holding a file it is asked about once); :meth:`~CheckedFileCache.save`
keeps what the pass read.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from repair.errors import StorageError
from repair.findings import Problem, Severity
from repair.io import storage as st
from repair.ops.verify.file_checks import FileResult, FileTask

#: The kinds of file remembered (see the module doc).
REMEMBERED_KINDS = frozenset({"sst"})

SCHEMA = """
CREATE TABLE IF NOT EXISTS checked_files (
    uri TEXT NOT NULL,
    task TEXT NOT NULL,        -- which bytes of it, checked how (kind, start, size, decompress)
    size INTEGER NOT NULL,     -- as listed when it was checked
    mtime REAL,                -- as listed when it was checked (None: the store reports none)
    created_at INTEGER,        -- the SST's creation time RocksDB recorded in it
    bytes INTEGER NOT NULL,    -- bytes read then
    problems TEXT NOT NULL,    -- JSON list of the problems found then
    PRIMARY KEY (uri, task)
);
"""


def _task_spec(task: FileTask) -> str:
    return json.dumps([task.kind, task.start, task.size, task.whole_file, task.decompress])


def _plain(value):
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


@dataclass
class ReadCount:
    """What a pass read itself (not taken from the cache)."""

    files: int = 0
    bytes: int = 0


class CheckedFileCache:
    """The verified files of a state database, for one pass over one storage (see the module doc)."""

    def __init__(self, db: sqlite3.Connection, storage: st.Storage):
        self._db = db
        self._storage = storage
        self._listings: dict[str, dict[str, st.FileInfo]] = {}
        self.read = ReadCount()
        #: Files taken from the cache in this pass.
        self.reused = 0
        self._pending: list[tuple] = []

    def _listed(self, uri: str) -> st.FileInfo | None:
        """``uri`` as its directory's listing shows it now (each directory listed once per pass)."""
        directory = st.parent(uri)
        if directory not in self._listings:
            try:
                entries = self._storage.list_dir(directory)
            except (StorageError, FileNotFoundError, NotADirectoryError):
                entries = []
            self._listings[directory] = {entry.path: entry for entry in entries if not entry.is_dir}
        return self._listings[directory].get(uri)

    def lookup(self, task: FileTask) -> FileResult | None:
        if task.inline is not None or task.uri is None or task.kind not in REMEMBERED_KINDS:
            return None
        info = self._listed(task.uri)
        if info is None:
            return None
        row = self._db.execute(
            "SELECT size, mtime, created_at, problems FROM checked_files WHERE uri = ? AND task = ?",
            (task.uri, _task_spec(task)),
        ).fetchone()
        if row is None or row[0] != info.size or row[1] != info.mtime:
            return None
        self.reused += 1
        problems = [Problem(p["kind"], p["message"], p.get("offset"), p.get("expected"), p.get("found"), Severity(p["severity"]))
                    for p in json.loads(row[3])]
        return FileResult(task, problems=problems, created_at=row[2])

    def remember(self, result: FileResult) -> None:
        task = result.task
        if task.inline is None:
            self.read.files += 1
        self.read.bytes += result.bytes_checked
        if (task.inline is not None or task.uri is None or task.kind not in REMEMBERED_KINDS or not result.exists
                or any(p.severity == Severity.UNKNOWN for p in result.problems)):
            return
        info = self._listed(task.uri)  # as listed before it was read: a change since makes it read again
        if info is None:
            return
        problems = [{"kind": p.kind, "message": p.message, "offset": p.offset, "expected": _plain(p.expected),
                     "found": _plain(p.found), "severity": p.severity.value} for p in result.problems]
        self._pending.append((task.uri, _task_spec(task), info.size, info.mtime, result.created_at, result.bytes_checked,
                              json.dumps(problems)))

    def save(self) -> None:
        """Keep what this pass read (one transaction: a stop at any moment keeps all of it or none)."""
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO checked_files VALUES (?, ?, ?, ?, ?, ?, ?)", self._pending)
        self._pending.clear()
