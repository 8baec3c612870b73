"""The OPTIONS file a checkpoint's rebuilt RocksDB instance gets when its own is missing or broken.

``repair rebuild-manifest`` (:mod:`repair.ops.rebuild.checkpoint`) keeps an instance's OPTIONS file; when the
instance has none (or verify finds it missing or unparseable), one is written from the footers and
properties of the instance's SSTs (:mod:`repair.formats.rocksdb.options_writer`) and stored inline in the
new ``_metadata``, next to the rebuilt MANIFEST and CURRENT.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from repair.formats.flink.handles import IncrementalKeyedHandle
from repair.formats.rocksdb.options_writer import (
    ROCKSDB_VERSION_FOR_FORMAT,
    TableFacts,
    options_file_name,
    options_for_column_families,
    render_options,
)
from repair.formats.rocksdb.table.sst import open_table
from repair.io import storage as st
from repair.io.resolved import close, open_resolved
from repair.io.snapshot import LoadedSnapshot


def is_options_name(local_name: str) -> bool:
    return local_name.startswith("OPTIONS-")


def options_number_if_missing(kept_private: Iterable[str], numbers: Iterable[int]) -> int | None:
    """A file number for a new OPTIONS file when none of ``kept_private`` is one; ``None`` otherwise.

    Above every number in ``numbers`` (the instance's SSTs and private files), so that the rebuilt
    MANIFEST's next file number lies above it.
    """
    if any(is_options_name(name) for name in kept_private):
        return None
    return max(numbers, default=0) + 1


def instance_options(snapshot: LoadedSnapshot, handle: IncrementalKeyedHandle, column_families: Sequence[tuple[int, str]],
                     format_: str, storage: st.Storage) -> bytes:
    """OPTIONS text for ``column_families`` (``(id, name)`` by id) from the footers and properties of ``handle``'s SSTs."""
    facts = []
    for entry in handle.sst_files:
        source = open_resolved(storage, snapshot.resolver.resolve(entry.handle))
        try:
            facts.append(TableFacts.from_table(open_table(source)))
        finally:
            close(source)
    derived = options_for_column_families(facts, [name for _, name in sorted(column_families)])
    return render_options(ROCKSDB_VERSION_FOR_FORMAT[format_], derived)


__all__ = ["instance_options", "is_options_name", "options_file_name", "options_number_if_missing"]
