"""Write an OPTIONS file for a DB whose own is gone, from what its SSTs record.

Pure: table footers and properties in, OPTIONS text out.

RocksDB writes ``OPTIONS-<number>`` (``PersistRocksDBOptions``, ``options/options_parser.cc``) as
sections ``[Version]``, ``[DBOptions]`` and, for every column family in creation order,
``[CFOptions "<name>"]`` and ``[TableOptions/BlockBasedTable "<name>"]``; the parser
(``RocksDBOptionsParser``) takes any key it omits as its default. This module writes the settings
that decide how the data is read, each derived from the SSTs:

* ``comparator``, ``merge_operator`` (Flink's is ``StringAppendTESTOperator``), ``prefix_extractor``
  and ``compression``: the SST properties ``rocksdb.comparator``, ``rocksdb.merge.operator``,
  ``rocksdb.prefix.extractor.name`` and ``rocksdb.compression``;
* ``format_version`` and ``checksum``: the table footer;
* ``index_type`` and ``whole_key_filtering``: the block-based table properties.

``block_size``, ``filter_policy`` and ``num_levels`` are not recorded in an SST: RocksDB's (and
Flink's) defaults are written and marked as such. Filter blocks in the SSTs stay readable; without a
``filter_policy`` they are just not consulted. Column families without SSTs get the settings their
siblings agree on (Flink configures every state alike).

:func:`without_db_option` edits a kept OPTIONS file (its ``wal_dir`` names the directory it was
written for).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from repair.formats.rocksdb.files import escape_option_string
from repair.formats.rocksdb.table.checksum import ChecksumType

#: The RocksDB release whose OPTIONS layout is written for each MANIFEST builder format.
ROCKSDB_VERSION_FOR_FORMAT = {"frocksdb6": "6.20.3", "frocksdb8": "8.10.0"}
OPTIONS_FILE_VERSION = "1.1"

#: ``rocksdb.compression`` (``CompressionTypeToString``) -> OPTIONS value (``compression_type_string_map``).
COMPRESSION_OPTION = {
    "NoCompression": "kNoCompression", "Snappy": "kSnappyCompression", "Zlib": "kZlibCompression",
    "BZip2": "kBZip2Compression", "LZ4": "kLZ4Compression", "LZ4HC": "kLZ4HCCompression",
    "Xpress": "kXpressCompression", "ZSTD": "kZSTD", "ZSTDNotFinal": "kZSTDNotFinalCompression",
}
#: Footer checksum type -> OPTIONS value (``checksum_type_string_map``).
CHECKSUM_OPTION = {
    ChecksumType.NONE: "kNoChecksum", ChecksumType.CRC32C: "kCRC32c", ChecksumType.XXHASH32: "kxxHash",
    ChecksumType.XXHASH64: "kxxHash64", ChecksumType.XXH3: "kXXH3",
}
#: ``rocksdb.block.based.table.index.type`` -> OPTIONS value (``BlockBasedTableOptions::IndexType``).
INDEX_TYPE_OPTION = {0: "kBinarySearch", 1: "kHashSearch", 2: "kTwoLevelIndexSearch", 3: "kBinarySearchWithFirstKey"}

#: Settings no SST records: RocksDB's defaults, which Flink keeps.
DEFAULTS_CF = {"num_levels": "7"}
DEFAULTS_TABLE = {"block_size": "4096", "filter_policy": "nullptr"}

_HEADER = (
    "# This is a RocksDB option file.\n"
    "#\n"
    "# For detailed file format spec, please refer to the example file\n"
    "# in examples/rocksdb_option_file_example.ini\n"
    "#\n"
    "# Written by flink-checkpoint-repair from the properties and footers of the DB's SST files.\n"
    "\n"
)


@dataclass(frozen=True)
class TableFacts:
    """What one SST records about the options it was written with (``None``: not recorded)."""

    column_family: str | None
    comparator: str | None
    merge_operator: str | None
    prefix_extractor: str | None
    compression: str | None
    format_version: int
    checksum_type: int
    index_type: int | None
    whole_key_filtering: str | None
    filter_policy: str | None

    @classmethod
    def from_table(cls, table) -> "TableFacts":
        """From an opened :class:`repair.formats.rocksdb.table.sst.Table` (its footer and properties block)."""
        props = table.properties
        get = (lambda name: getattr(props, name)) if props is not None else (lambda name: None)
        return cls(get("column_family_name"), get("comparator"), get("merge_operator"), get("prefix_extractor"), get("compression"),
                   table.format_version, table.checksum_type, get("index_type"), get("whole_key_filtering"),
                   get("filter_policy"))

    def cf_options(self) -> dict[str, str]:
        out = {}
        if self.comparator:
            out["comparator"] = self.comparator
        if self.merge_operator:
            out["merge_operator"] = self.merge_operator
        if self.prefix_extractor:
            out["prefix_extractor"] = self.prefix_extractor
        if self.compression in COMPRESSION_OPTION:
            out["compression"] = COMPRESSION_OPTION[self.compression]
        return out

    def table_options(self) -> dict[str, str]:
        out = {"format_version": str(self.format_version)}
        if self.checksum_type in CHECKSUM_OPTION:
            out["checksum"] = CHECKSUM_OPTION[self.checksum_type]
        if self.index_type in INDEX_TYPE_OPTION:
            out["index_type"] = INDEX_TYPE_OPTION[self.index_type]
        if self.whole_key_filtering in ("0", "1"):
            out["whole_key_filtering"] = "true" if self.whole_key_filtering == "1" else "false"
        return out


@dataclass
class ColumnFamilyOptions:
    """The options written for one column family, and where each value comes from."""

    name: str
    cf_options: dict[str, str] = field(default_factory=dict)
    table_options: dict[str, str] = field(default_factory=dict)
    #: key -> where its value comes from ("SST properties of 3 files", "RocksDB default", ...).
    sources: dict[str, str] = field(default_factory=dict)
    #: Settings on which the SSTs disagree (the most common value is written).
    conflicts: list[str] = field(default_factory=list)
    #: Settings the SSTs record that the file cannot express (a filter policy's bits per key ...).
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _agree(name: str, values: Sequence[dict[str, str]], out: dict[str, str], sources: dict[str, str],
           conflicts: list[str], what: str) -> None:
    """Put the most common value of each key over ``values`` into ``out``; record disagreements."""
    keys = sorted({k for v in values for k in v})
    for key in keys:
        counts = Counter(v[key] for v in values if key in v)
        value, n = counts.most_common(1)[0]
        out[key] = value
        sources[key] = f"{what} of {n} file(s)" if len(counts) == 1 else f"{what}: most common of {sum(counts.values())} file(s)"
        if len(counts) > 1:
            conflicts.append(f"{name}: {key} differs between files ({', '.join(f'{v} x{c}' for v, c in counts.most_common())}); wrote {value}")


def derive_column_family_options(name: str, facts: Iterable[TableFacts]) -> ColumnFamilyOptions:
    """The options of column family ``name`` from the facts of its SSTs (possibly none)."""
    facts = list(facts)
    result = ColumnFamilyOptions(name)
    _agree(name, [f.cf_options() for f in facts], result.cf_options, result.sources, result.conflicts, "SST properties")
    _agree(name, [f.table_options() for f in facts], result.table_options, result.sources, result.conflicts, "SST footer and properties")
    policies = sorted({f.filter_policy for f in facts if f.filter_policy})
    if policies:
        result.notes.append(f"the SSTs hold filter blocks ({', '.join(policies)}); bits per key are not recorded, "
                            "so filter_policy=nullptr is written: reads are correct, the filters are not consulted")
    return result


def fill_from_siblings(options: ColumnFamilyOptions, siblings: Sequence[ColumnFamilyOptions]) -> None:
    """Give a column family without SSTs the settings every sibling with SSTs agrees on."""
    for attr in ("cf_options", "table_options"):
        mine = getattr(options, attr)
        values = [getattr(s, attr) for s in siblings if s.sources]
        for key in sorted({k for v in values for k in v} - set(mine)):
            found = {v.get(key) for v in values}
            if len(found) == 1 and None not in found:
                mine[key] = found.pop()
                options.sources[key] = "the column families with SSTs (all agree)"


def complete(options: ColumnFamilyOptions) -> ColumnFamilyOptions:
    """Add what no SST records: RocksDB's defaults for the remaining relevant keys."""
    defaults = {"comparator": "leveldb.BytewiseComparator", "merge_operator": "nullptr", "prefix_extractor": "nullptr",
                **DEFAULTS_CF}
    for attr, table in (("cf_options", defaults), ("table_options", DEFAULTS_TABLE)):
        mine = getattr(options, attr)
        for key, value in table.items():
            if key not in mine:
                mine[key] = value
                options.sources[key] = "RocksDB default (not recorded in the SSTs)"
    options.cf_options.setdefault("table_factory", "BlockBasedTable")
    return options


def options_for_column_families(facts: Iterable[TableFacts], cf_names: Sequence[str]) -> list[ColumnFamilyOptions]:
    """Complete options for each of ``cf_names`` (in that order) from the facts of the DB's SSTs."""
    by_cf: dict[str | None, list[TableFacts]] = {}
    for f in facts:
        by_cf.setdefault(f.column_family, []).append(f)
    derived = [derive_column_family_options(name, by_cf.get(name, ())) for name in cf_names]
    siblings = [derive_column_family_options(name, group) for name, group in by_cf.items() if name is not None]
    for options in derived:
        if not options.sources:
            fill_from_siblings(options, siblings)
    return [complete(options) for options in derived]


def render_options(rocksdb_version: str, column_families: Sequence[ColumnFamilyOptions],
                   db_options: dict[str, str] | None = None) -> bytes:
    """The OPTIONS file text, laid out as RocksDB writes it; ``column_families`` must start with "default"."""
    if not column_families or column_families[0].name != "default":
        raise ValueError("the first column family of an OPTIONS file is 'default'")
    lines = [_HEADER, "[Version]\n", f"  rocksdb_version={rocksdb_version}\n", f"  options_file_version={OPTIONS_FILE_VERSION}\n", "\n",
             "[DBOptions]\n"]
    lines += [f"  {k}={v}\n" for k, v in (db_options or {}).items()]
    lines.append("  \n")
    return "".join(lines).encode("utf-8") + render_column_family_sections(column_families)


def render_column_family_sections(column_families: Sequence[ColumnFamilyOptions]) -> bytes:
    """The ``[CFOptions]`` and ``[TableOptions/BlockBasedTable]`` sections of ``column_families``."""
    lines = []
    for cf in column_families:
        name = escape_option_string(cf.name)
        lines.append(f'\n[CFOptions "{name}"]\n')
        lines += [f"  {k}={v}\n" for k, v in cf.cf_options.items()]
        lines.append("  \n")
        lines.append(f'[TableOptions/BlockBasedTable "{name}"]\n')
        lines += [f"  {k}={v}\n" for k, v in cf.table_options.items()]
        lines.append("  \n")
    return "".join(lines).encode("utf-8")


def options_file_name(number: int) -> str:
    """``23`` -> ``OPTIONS-000023`` (RocksDB ``OptionsFileName``)."""
    return f"OPTIONS-{number:06d}"


def without_db_option(text: str, key: str) -> tuple[str, str | None]:
    """``text`` without the ``key=...`` line of its ``[DBOptions]`` section, and the value removed.

    Everything else is kept byte for byte. RocksDB 6.20 records ``wal_dir`` even when it is the DB's
    own directory: a copy opened with that file would read and write WAL files in the original.
    """
    out, removed, section = [], None, None
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped
        elif section == "[DBOptions]" and removed is None:
            name, eq, value = stripped.partition("=")
            if eq and name.strip() == key:
                removed = value.strip()
                continue
        out.append(line)
    return "".join(out), removed
