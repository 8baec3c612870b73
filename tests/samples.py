"""Well-known inputs several test modules run commands on (a real checkpoint, a 1.x savepoint, a seed trace)."""

from __future__ import annotations

from tests.conftest import FIXTURES, REPO, canonical_savepoint, fixture_info

ROOT_120 = FIXTURES / "flink-1.20-default" / "checkpoints" / fixture_info(FIXTURES / "flink-1.20-default")["job_id"]
UPGRADE_SOURCE = canonical_savepoint("flink-1.20-upgrade")  # Flink 1.20: Kryo 2.24 values, a POJO with collections
SEED_TRACE = REPO / "tests" / "data" / "seeds" / "002_9f05c2d9aa2afda0.txt"  # a real incident report, kept in the repository

