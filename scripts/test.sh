#!/usr/bin/env bash
# Set up (first run only) and run the whole test suite, real-Flink restore tests included.
# Extra arguments go to pytest, e.g. scripts/test.sh -m "not slow" for the quick tests only.
# What it downloads and installs, and why: README.md, "Set-up".
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
ensure_venv dev
ensure_rocksdb_tools  # sst_dump and ldb: quick tests compare with them too
ensure_chromium  # headless Chromium: a quick test opens size --html's page in it
cd "$REPO"
# Every release a fixture was written with (about 1.4 GB of downloads, 2.2 GB in ~/.cache): the real-Flink
# tests and the Java oracle tests (tests/java_oracle.py, all marked slow) run against each cached
# flink-dist, so the same tests run on a fresh machine as on one that ran the suite before. The quick
# tests (-m "not slow") start no JVM: they need none of it.
if ! only_quick_tests "$@"; then
  ensure_flink 1.15.4 1.20.3 2.0.2 2.1.1 2.3.0
fi
# Lint and import order (ruff), then the public API's types (mypy): pyproject.toml's [tool.ruff] and
# [tool.mypy]; the dev extra pins both. A finding fails the run before any test starts.
"$VENV/bin/ruff" check --quiet .
"$VENV/bin/mypy"
# Everything the tests need is installed above: a test skipped for a missing tool fails instead.
export REPAIR_REQUIRE_TOOLS=1
# Bytecode cached: with PYTHONDONTWRITEBYTECODE set (some shells and CI images set it), every one of the
# hundreds of `python -m repair.cli` processes the tests start compiles the package again (about 0.25 s
# of CPU each), and each worker rewrites every test module's assertions again.
unset PYTHONDONTWRITEBYTECODE
# Three workers (pytest-xdist) on CI's two cores: a fifth of a worker's time is spent waiting (for a JVM's
# checkpoints, a signal, a simulated latency), which the third fills. Each runs whole groups of tests, the
# longest groups first (tests/scheduling.py, docs/testing.md); -n 0 among the arguments runs everything
# in one process.
exec "$VENV/bin/python" -m pytest -n 3 --dist loadgroup --no-loadscope-reorder "$@"
