"""A real S3-compatible server for tests: moto's server, on a free loopback port.

Used by fixtures in the test modules (``tests/io/test_storage.py``); it is a plain module rather than a
conftest fixture so that it does not collide with other fixtures. Only ever binds to 127.0.0.1.
"""

from __future__ import annotations

import socket
import time
import uuid
from dataclasses import dataclass

LOOPBACK = "127.0.0.1"
REGION = "us-east-1"
ACCESS_KEY = "test-access-key"
SECRET_KEY = "test-secret-key"


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def _wait_until_listening(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((LOOPBACK, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


@dataclass
class S3Server:
    """A running moto server; ``endpoint`` is ``http://127.0.0.1:<port>``."""

    server: object
    port: int
    #: Whether moto's backend is this process's (:func:`start_s3_server`): buckets are then filled
    #: directly (:meth:`new_bucket`).
    in_process: bool = False

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def client(self):
        """A boto3 S3 client talking to this server only."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def new_bucket(self, files: dict[str, bytes] | None = None) -> str:
        """Creates a bucket with a fresh name holding ``files`` (key -> bytes); returns its name.

        The bucket is created by a request. Its objects are the tests' set-up, not what they test: with
        the server in this process they are put into moto's backend directly (what moto does once it
        has parsed a PutObject request: the same objects, for about a hundredth of the CPU time of a
        signed request each, moto's handling and boto3's together: a fixture's 700 files cost 5 s);
        with a server process of its own, by a request each."""
        name = f"test-{uuid.uuid4().hex[:20]}"
        client = self.client()
        client.create_bucket(Bucket=name)
        if self.in_process:
            backend = _moto_backend_of(name)
            for key, data in (files or {}).items():
                backend.put_object(name, key, data)
        else:
            for key, data in (files or {}).items():
                client.put_object(Bucket=name, Key=key, Body=data)
        return name

    def keys(self, bucket: str) -> list[str]:
        """All keys in ``bucket``, sorted."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))

    def stop(self) -> None:
        self.server.stop()


def start_s3_server() -> S3Server:
    """Starts moto's threaded server on a free loopback port and waits until it accepts connections."""
    from moto.server import ThreadedMotoServer

    port = _free_loopback_port()
    server = ThreadedMotoServer(ip_address=LOOPBACK, port=port, verbose=False)
    server.start()
    _wait_until_listening(port)
    return S3Server(server, port, in_process=True)


def _moto_backend_of(bucket: str):
    """The S3 backend of this process's moto holding ``bucket`` (its account and partition)."""
    from moto.s3.models import s3_backends

    partition, account = s3_backends.bucket_accounts[bucket]
    return s3_backends[account][partition]


class _ServerProcess:
    """A moto server running as its own process (``python -m moto.server``)."""

    def __init__(self, process):
        self.process = process

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def start_s3_server_process() -> S3Server:
    """Starts moto's server in a process of its own on a free loopback port (the benchmarks: it then
    does not share the interpreter lock of the process that starts it) and waits until it listens."""
    import subprocess
    import sys

    port = _free_loopback_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_until_listening(port, timeout=30)
    except BaseException:
        process.kill()
        raise
    return S3Server(_ServerProcess(process), port)


def storage_for(endpoint: str, retry_budget: float = 30.0):
    """A :class:`repair.io.storage.Storage` that talks to the S3 server (or proxy) at ``endpoint``."""
    from repair.io.storage import Storage, StorageOptions

    return Storage(StorageOptions(s3_endpoint=endpoint, s3_region=REGION, s3_access_key=ACCESS_KEY, s3_secret_key=SECRET_KEY,
                                  retry_budget=retry_budget))


def tree(root, prefix: str) -> dict[str, bytes]:
    """Every file below the local directory ``root`` as ``{prefix/relative path: bytes}``, for :meth:`S3Server.new_bucket`."""
    return {f"{prefix}/{p.relative_to(root)}": p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def start_s3_server_or_skip() -> S3Server:
    """:func:`start_s3_server`, werkzeug's request log quiet; the test is skipped when moto[server] is not installed."""
    import logging

    import pytest

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    try:
        return start_s3_server()
    except ImportError as error:
        pytest.skip(f"missing tool: moto[server] is not installed: {error}")


def serving_tree(root, prefix: str = "job"):
    """A module fixture's body: a loopback S3 server holding every file below ``root`` under
    ``s3://<bucket>/<prefix>/``; yields ``(server, bucket)`` and stops the server afterwards."""
    server = start_s3_server_or_skip()
    try:
        yield server, server.new_bucket(tree(root, prefix))
    finally:
        server.stop()
