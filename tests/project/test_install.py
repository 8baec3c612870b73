"""A fresh ``pip install`` of the package without extras: no Spark, no rocksdict, and still inspect,
verify, fallback, diagnose, doctor, and the library call the README documents; ``master=`` says which
extra it needs in one line."""

from __future__ import annotations

import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from tests.conftest import REPO

ROOT = REPO / "fixtures" / "flink-1.20-default" / "checkpoints" / "6ec13444f9e820ae37839598353ab359"
TRACE = REPO / "tests" / "data" / "seeds" / "002_9f05c2d9aa2afda0.txt"  # a real incident report, kept in the repository


@pytest.fixture(scope="module")
def base_install(tmp_path_factory) -> Path:
    """A new virtual environment with the package installed from a copy of its sources, no extras."""
    work = tmp_path_factory.mktemp("base-install")
    source = work / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "repair", source / "repair", ignore=shutil.ignore_patterns("__pycache__"))
    env = work / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(source)],
                   check=True, capture_output=True, timeout=900)
    return env / "bin"


def _run(bin_dir: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], input=stdin, capture_output=True, text=True, timeout=300, cwd=REPO)


@pytest.mark.slow
def test_the_base_install_has_no_spark_and_no_rocksdict(base_install):
    code = "import importlib.util as u; print(u.find_spec('pyspark') is None, u.find_spec('rocksdict') is None)"
    assert _run(base_install, "python", "-c", code).stdout.split() == ["True", "True"]


@pytest.mark.slow
def test_the_base_install_verifies_falls_back_diagnoses_and_lints(base_install, read_only_guard):
    read_only_guard(ROOT)
    verified = _run(base_install, "repair", "verify", str(ROOT))
    assert verified.returncode == 0, verified.stderr
    chosen = _run(base_install, "repair", "fallback", str(ROOT), "--json")
    assert chosen.returncode == 0 and '"chosen"' in chosen.stdout
    diagnosed = _run(base_install, "repair", "diagnose", "-", "--json", stdin=TRACE.read_text(errors="replace"))
    assert diagnosed.returncode == 0 and "checksum" in diagnosed.stdout
    linted = _run(base_install, "repair", "doctor", "-", stdin="state.checkpoints.num-retained: 1\n")
    assert linted.returncode in (0, 1) and "num-retained" in linted.stdout


@pytest.mark.slow
def test_the_documented_library_call_works_in_the_base_install(base_install):
    done = _run(base_install, "python", "-c", f"import repair; print(repair.verify({str(ROOT)!r}).ok)")
    assert done.stdout.strip() == "True", done.stderr


@pytest.mark.slow
def test_export_in_the_base_install_uses_the_toolkits_own_merge(base_install, tmp_path):
    done = _run(base_install, "repair", "export", str(ROOT), "--out", str(tmp_path / "out"), "--operator", "per-user", "--json")
    assert done.returncode == 0, done.stderr
    assert "rocksdict is not importable" in done.stdout  # the reason auto chose the python engine


@pytest.mark.slow
def test_spark_without_the_extra_is_a_one_line_error(base_install):
    done = _run(base_install, "repair", "verify", str(ROOT), "--master", "local[1]")
    assert done.returncode == 2
    assert "flink-checkpoint-repair[spark]" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_runbooks_ship_with_the_package(base_install):
    listed = _run(base_install, "repair", "runbook")
    assert listed.returncode == 0 and "manifest-missing" in listed.stdout.split()
    page = _run(base_install, "repair", "runbook", "manifest-missing")
    assert page.returncode == 0 and page.stdout == (REPO / "repair" / "runbooks" / "manifest-missing.md").read_text()
