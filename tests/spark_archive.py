"""A class-data sharing archive of Spark's driver JVM, for the tests' Spark runs (JDK 13+ dynamic AppCDS).

Most of a Spark JVM's start is loading, parsing and verifying some 10,000 classes from Spark's jars;
a class-data sharing archive holds them parsed and verified, mapped into each JVM that starts with
``-XX:SharedArchiveFile``. The session fixture ``spark_class_archive`` makes the archive once (a
Spark session started by ``repair.ops.runner.spark_session`` with ``-XX:ArchiveClassesAtExit``, one
small job, the JVM left to exit: about 12 CPU s more than a plain start) and puts the option into
``SPARK_SUBMIT_OPTS``, which Spark's launcher adds to the driver's Java options: every Spark JVM the
test session starts then (in the test's process or in a CLI process it starts) uses it. A Spark run
of the tests takes about 6 CPU s instead of 11 (docs/testing.md).

The archive is kept in the Flink cache (``~/.cache/flink-checkpoint-repair/spark-cds``) under a key of
the Java runtime and Spark's jars (names, sizes and times: the JVM refuses an archive whose class
path changed), made under a file lock so that the two pytest-xdist workers make it once; a new key
replaces the old archive. ``-Xshare:auto``: a JVM that cannot use the archive (missing, another JDK)
starts without it, and ``-Xlog:cds*=off`` keeps it from saying so on standard output, which is the
command's. Only the tests' environment changes: what repair starts for its users is the same.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from fixtures.flink_harness import DEFAULT_CACHE, _making

ARCHIVE_DIR = DEFAULT_CACHE / "spark-cds"
REPO = Path(__file__).resolve().parent.parent
#: The environment variable Spark's launcher (bin/spark-class) adds to the Java options of spark-submit's JVM.
SUBMIT_OPTIONS = "SPARK_SUBMIT_OPTS"


def _key() -> str:
    """What the archive was made from: the Java runtime and every jar of pyspark's class path."""
    import pyspark

    digest = hashlib.sha256()
    java = shutil.which("java")
    runtime = Path(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else Path(java or "java")
    digest.update(str(runtime.resolve()).encode())
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    for jar in sorted(jars.glob("*.jar")):
        status = jar.stat()
        digest.update(f"{jar}\0{status.st_size}\0{status.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def java_options(archive: Path) -> str:
    """The driver's Java options using ``archive`` (ignored when the JVM cannot use it)."""
    return f"-XX:SharedArchiveFile={archive} -Xshare:auto -Xlog:cds*=off"


def make_archive(directory: Path = ARCHIVE_DIR) -> Path:
    """The archive of the current Java runtime and Spark, made now unless it exists."""
    archive = directory / f"spark-{_key()}.jsa"
    with _making(archive):
        if archive.is_file():
            return archive
        directory.mkdir(parents=True, exist_ok=True)
        partial = archive.with_suffix(f".partial-{os.getpid()}")
        env = {**os.environ, "PYTHONPATH": str(REPO), SUBMIT_OPTIONS: f"-XX:ArchiveClassesAtExit={partial}"}
        done = subprocess.run([sys.executable, "-m", "tests.spark_archive"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not partial.is_file():
            partial.unlink(missing_ok=True)
            raise RuntimeError(f"no Spark class archive (exit {done.returncode}): {(done.stdout + done.stderr)[-2000:]}")
        for old in directory.glob("spark-*.jsa"):  # another runtime's or Spark's: the JVM would refuse it
            old.unlink()
        partial.rename(archive)
        return archive


def _dump() -> None:
    """The archive's run: a session as repair starts it, one job, then the JVM's own exit (it writes the
    archive then, which takes seconds: ``stop_spark`` would kill it first)."""
    from pyspark import SparkContext

    from repair.ops.runner import run_tasks, spark_session

    session = spark_session("local[2]", "repair-class-archive")
    assert run_tasks(abs, [-1, -2, -3, -4], master="local[2]") == [1, 2, 3, 4]
    gateway = SparkContext._gateway
    session.sparkContext.stop()
    gateway.proc.stdin.close()  # PySpark's JVM exits when its standard input closes
    sys.exit(gateway.proc.wait(timeout=600))


@pytest.fixture(scope="session")
def spark_class_archive():
    """``SPARK_SUBMIT_OPTS`` with the class archive for the rest of the session (see the module's text).
    Requested by the tests that start Spark; a failure to make the archive only costs time."""
    try:
        options = java_options(make_archive())
    except (ImportError, RuntimeError, OSError, subprocess.SubprocessError) as error:  # no pyspark: the test says so itself
        warnings.warn(f"Spark runs start without a class archive: {error}", stacklevel=1)
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SUBMIT_OPTIONS, f"{os.environ.get(SUBMIT_OPTIONS, '')} {options}".strip())
        yield


if __name__ == "__main__":
    _dump()
