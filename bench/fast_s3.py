"""The fast S3 server of the benchmarks: ``bench/s3server`` (Go, gofakes3), built on first use.

moto, the S3 server of the tests, parses every request in Python on the cores the measured command
runs on; a user's S3 costs the user's machine nothing. :func:`start` builds ``bench/s3server`` (Go at
``go`` on the path or ``/usr/local/go/bin/go``; the module ``github.com/johannesboyne/gofakes3`` comes
from the Go proxy), starts it holding a local directory's files under ``s3://<bucket>/<prefix>/`` in
memory, and returns a :class:`FastS3`: two loopback endpoints on the same store (one answering at
once, one waiting ``latency_seconds`` before each answer, so no Python proxy runs beside the command),
the requests served by method and object, and the server's own CPU seconds. Bench only: the package
and the tests never need it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import urllib.request
from collections import Counter
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "s3server"
_GO_CANDIDATES = ("go", "/usr/local/go/bin/go")


def _go() -> str:
    for candidate in _GO_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    raise RuntimeError("the fast S3 server needs Go (go on the path or /usr/local/go/bin/go); use --server moto")


def build() -> Path:
    """The server's binary, built from ``bench/s3server`` unless a build of the same sources is cached."""
    digest = hashlib.sha256(b"".join((SOURCE / name).read_bytes() for name in ("main.go", "go.mod", "go.sum"))).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "flink-checkpoint-repair" / "bench"
    binary = cache / f"s3server-{digest}"
    if not binary.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = binary.with_name(binary.name + f".tmp-{os.getpid()}")
        subprocess.run([_go(), "build", "-o", str(partial), "."], cwd=SOURCE, check=True)
        partial.rename(binary)
    return binary


class FastS3:
    """A running ``bench/s3server``: :attr:`endpoint` answers at once, :attr:`delayed_endpoint` after the latency."""

    def __init__(self, process: subprocess.Popen, ports: dict):
        self.process = process
        self.endpoint = f"http://127.0.0.1:{ports['plain']}"
        self.delayed_endpoint = f"http://127.0.0.1:{ports['delayed']}"

    def _report(self) -> dict:
        with urllib.request.urlopen(f"{self.endpoint}/_bench/requests", timeout=10) as answer:
            return json.load(answer)

    @property
    def by_object(self) -> Counter:
        """Requests served so far (both endpoints), by ``(method, "/bucket/key")``."""
        counts = Counter()
        for name, n in self._report()["requests"].items():
            method, _, path = name.partition(" ")
            counts[(method, path)] += n
        return counts

    def cpu_seconds(self) -> float:
        """The server's CPU seconds so far (user + system)."""
        return self._report()["cpu_seconds"]

    @property
    def max_in_flight(self) -> int:
        return self._report()["max_in_flight"]

    @property
    def requests(self) -> int:
        return self._report()["total"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def start(directory: Path, bucket: str, prefix: str, latency_seconds: float) -> FastS3:
    """Builds (if needed) and starts the server holding ``directory``'s files as ``s3://bucket/prefix/...``."""
    binary = build()
    process = subprocess.Popen([str(binary), "-load", str(directory), "-bucket", bucket, "-prefix", prefix,
                                "-latency", f"{latency_seconds * 1000:g}ms"], stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    if not line:
        process.wait(timeout=10)
        raise RuntimeError(f"bench/s3server exited with code {process.returncode} before listening")
    return FastS3(process, json.loads(line))
