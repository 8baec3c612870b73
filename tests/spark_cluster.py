"""A Spark standalone cluster on loopback for tests: one master and one worker from the pyspark package.

``with standalone_cluster(workdir) as cluster:`` starts ``org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker`` with ``$SPARK_HOME/bin/spark-class`` (``SPARK_HOME`` = pyspark's package
directory) on 127.0.0.1 and free ports, waits until the worker has registered (the master UI's
``/json/``), and on the way out stops the Spark session using the cluster and kills both JVMs and
everything they started (executors): each runs in its own process group, which is signalled as a whole,
so no JVM outlives the test even when it fails. Executors run this interpreter (``PYSPARK_PYTHON``).
The master and the worker get the Java options the tests give Spark's drivers (``SPARK_SUBMIT_OPTS``:
the class archive of tests/spark_archive.py, when the test asked for it).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

LOOPBACK = "127.0.0.1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _master_state(ui_port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{ui_port}/json/", timeout=2) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def _stop(process: subprocess.Popen, timeout: float = 20.0) -> None:
    """SIGTERM the process group of ``process`` (it is its leader), then SIGKILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; members (executors) may still be shutting down
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class Cluster:
    """A running cluster: ``url`` is ``spark://127.0.0.1:<port>``."""

    url: str
    ui_port: int

    def state(self) -> dict | None:
        """The master's status document (workers, applications)."""
        return _master_state(self.ui_port)


@contextlib.contextmanager
def standalone_cluster(workdir: Path, *, cores: int = 1, memory: str = "1g", timeout: float = 120.0) -> Iterator[Cluster]:
    """A running master and worker."""
    workdir.mkdir(parents=True, exist_ok=True)
    home = _spark_home()
    spark_class = str(home / "bin" / "spark-class")
    port, ui_port, worker_ui_port = _free_port(), _free_port(), _free_port()
    url = f"spark://{LOOPBACK}:{port}"
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP=LOOPBACK, SPARK_LOG_DIR=str(workdir),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_DAEMON_JAVA_OPTS=os.environ.get("SPARK_SUBMIT_OPTS", ""))
    env.pop("SPARK_CONF_DIR", None)  # Spark's default, $SPARK_HOME/conf, absent from pyspark's package: no
    # configuration, and the driver's class path, so the JVMs can use the drivers' class archive
    processes: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> Path:
        log = workdir / f"{name}.log"
        with open(log, "wb") as out:
            processes.append(subprocess.Popen([spark_class, *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                                              cwd=workdir, start_new_session=True))
        return log

    def wait(what: str, log: Path, ready) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in processes):
                raise RuntimeError(f"a Spark process ended while waiting for {what}:\n{_tail(log)}")
            state = _master_state(ui_port)
            if state is not None and ready(state):
                return
            time.sleep(0.5)
        raise TimeoutError(f"no {what} after {timeout} s:\n{_tail(log)}")

    try:
        log = start("master", "org.apache.spark.deploy.master.Master", "--host", LOOPBACK, "--port", str(port),
                    "--webui-port", str(ui_port))
        wait("master", log, lambda state: state.get("status") == "ALIVE")
        log = start("worker", "org.apache.spark.deploy.worker.Worker", url, "--host", LOOPBACK, "--cores", str(cores),
                    "--memory", memory, "--webui-port", str(worker_ui_port), "--work-dir", str(workdir / "work"))
        wait("registered worker", log, lambda state: state.get("aliveworkers", 0) >= 1)
        yield Cluster(url, ui_port)
    finally:
        _stop_session(url)
        for process in reversed(processes):
            _stop(process)


def _stop_session(url: str) -> None:
    try:
        from pyspark.sql import SparkSession
    except ImportError:  # pragma: no cover
        return
    session = SparkSession.getActiveSession()
    if session is not None and session.sparkContext.master == url:
        session.stop()
