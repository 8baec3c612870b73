"""Run small Java programs (``tests/java/*.java``) against Flink's own jars, for answers from real Flink.

Every ``flink-dist`` jar the fixture harness cached (``~/.cache/flink-checkpoint-repair/flink-*/``), or
the one ``FLINK_DIST_JAR`` names, becomes one test parameter; without a jar, or without ``javac`` and
``java``, the tests are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

JAVA_SOURCES = Path(__file__).parent / "java"
FLINK_CACHE = Path.home() / ".cache" / "flink-checkpoint-repair"


def flink_jars() -> list[Path]:
    configured = os.environ.get("FLINK_DIST_JAR")
    if configured:
        return [Path(configured)]
    return sorted(FLINK_CACHE.glob("flink-*/lib/flink-dist-*.jar"))


def jar_params() -> list:
    """One ``pytest.param`` per flink-dist jar (its stem as the id), or one skipped param saying why."""
    jars = [jar for jar in flink_jars() if jar.is_file()]
    if not jars:
        where = os.environ.get("FLINK_DIST_JAR") or f"{FLINK_CACHE}/flink-*/lib/flink-dist-*.jar"
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"missing tool: no flink-dist jar at {where} (set FLINK_DIST_JAR)"))]
    return [pytest.param(jar, id=jar.stem) for jar in jars]


def compiled(name: str, jar: Path, classes: Path):
    """A function running ``tests/java/<name>.java``, compiled against ``jar`` into ``classes``: it
    takes the program's stdin and returns its stdout."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip(f"missing tool: javac/java not on PATH, cannot run {name}")
    subprocess.run(["javac", "-nowarn", "-cp", str(jar), "-d", str(classes), str(JAVA_SOURCES / f"{name}.java")],
                   check=True, capture_output=True, timeout=120)

    def run(stdin: str = "") -> str:
        return subprocess.run(["java", "-Xshare:auto", "-cp", f"{jar}{os.pathsep}{classes}", name],
                              input=stdin, capture_output=True, text=True, check=True, timeout=120).stdout

    return run
