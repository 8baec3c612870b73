# Shared set-up for scripts/example.sh and scripts/test.sh (sourced, not run).
# Creates .venv (if missing) and installs the package into it; idempotent and quick when done.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
PYTHON_BIN="${PYTHON:-python3}"

ensure_venv() {  # ensure_venv [extra]: the package (with the given extra) installed in $VENV
  local extra="${1:-}"
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON_BIN" -m venv "$VENV"
  fi
  local spec="$REPO"
  [ -n "$extra" ] && spec="$REPO[$extra]"
  local stamp="$VENV/.installed-${extra:-base}"
  # Reinstall when pyproject.toml changed since the last install.
  if [ ! -f "$stamp" ] || [ "$REPO/pyproject.toml" -nt "$stamp" ]; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec"
    touch "$stamp"
  fi
}

ensure_rocksdb_tools() {  # Debian's sst_dump and ldb, a second opinion in differential tests
  if command -v sst_dump >/dev/null && command -v ldb >/dev/null; then return 0; fi
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq rocksdb-tools >/dev/null
}

ensure_chromium() {  # Debian's headless Chromium: the browser test of size --html's page (tests/ops/test_size_html.py)
  if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then return 0; fi
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
}

ensure_flink() {  # ensure_flink VERSION...: Flink jars from PyPI into the cache (reused across runs)
  "$VENV/bin/python" - "$@" <<'PY'
import sys
sys.path.insert(0, ".")
from fixtures.flink_harness import ensure_flink
for version in sys.argv[1:]:
    print(f"Flink {version}: {ensure_flink(version).dist_jar}")
PY
}

only_quick_tests() {  # only_quick_tests PYTEST_ARG...: true when a -m marker expression deselects the slow tests
  local previous=""
  for arg in "$@"; do
    case "$previous" in -m) [[ "$arg" == *"not slow"* ]] && return 0 ;; esac
    [[ "$arg" == "-mnot slow"* ]] && return 0
    previous="$arg"
  done
  return 1
}
