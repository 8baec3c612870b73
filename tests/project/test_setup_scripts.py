"""scripts/test.sh: the quick variant (``-m "not slow"``) sets up only what the quick tests need.

The real-Flink and Java oracle tests (all marked slow) need five Flink releases (about 1.4 GB downloaded
into ``~/.cache``); the quick tests start no JVM, so ``scripts/test.sh -m "not slow"`` must not fetch them.
Run here with an empty home (no Flink cache) and pip unable to reach any index: fetching a release would
fail the script at once instead of downloading.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture
def offline_setup(tmp_path) -> dict[str, str]:
    """The environment for scripts/test.sh: this interpreter as its venv (already installed), an empty
    home, and pip without an index."""
    if shutil.which("sst_dump") is None or shutil.which("ldb") is None:
        pytest.skip("missing tool: sst_dump and ldb (apt-get install rocksdb-tools); test.sh would install them as root")
    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        pytest.skip("missing tool: chromium (apt-get install chromium); test.sh would install it as root")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    for tool in ("ruff", "mypy"):  # the lint and type checks test.sh runs before pytest, as installed
        (venv / "bin" / tool).symlink_to(Path(sys.executable).parent / tool)
    (venv / ".installed-dev").touch()  # newer than pyproject.toml: ensure_venv installs nothing
    os.utime(venv / ".installed-dev", (4102444800, 4102444800))  # 2100-01-01
    home = tmp_path / "home"
    home.mkdir()
    return {**os.environ, "VENV": str(venv), "HOME": str(home), "PIP_NO_INDEX": "1",
            "PIP_INDEX_URL": "http://127.0.0.1:9/", "PIP_RETRIES": "0", "PIP_TIMEOUT": "1", "PYTHONPATH": str(REPO)}


def test_the_quick_tests_download_no_flink_release(offline_setup, tmp_path):
    quick = subprocess.run([str(REPO / "scripts" / "test.sh"), "-m", "not slow", "--collect-only", "-q",
                            "tests/ops/test_doctor.py"], env=offline_setup, capture_output=True, text=True, timeout=300)
    assert quick.returncode == 0, quick.stdout[-2000:] + quick.stderr[-2000:]
    assert "Flink 1." not in quick.stdout and not (tmp_path / "home" / ".cache" / "flink-checkpoint-repair").exists()


def test_the_full_run_sets_up_the_flink_releases(offline_setup, tmp_path):
    """The other side: without -m "not slow" the script fetches the releases (here it cannot: pip has no index)."""
    full = subprocess.run([str(REPO / "scripts" / "test.sh"), "--collect-only", "-q", "tests/ops/test_doctor.py"],
                          env=offline_setup, capture_output=True, text=True, timeout=300)
    assert full.returncode != 0 and "apache-flink-libraries" in full.stdout + full.stderr
