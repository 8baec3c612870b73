"""``repair write-savepoint`` and ``repair rescale``: an export written back as a canonical savepoint
(:mod:`repair.ops.write_savepoint.job`; the Parquet rows to entries: :mod:`~repair.ops.write_savepoint.rows`;
operator state rows: :mod:`~repair.ops.write_savepoint.operator_rows`)."""

from repair.ops.write_savepoint.job import WriteSavepointResult, rescale, upgrade_savepoint, write_savepoint

__all__ = ["WriteSavepointResult", "rescale", "upgrade_savepoint", "write_savepoint"]
