"""An HTTP proxy on loopback that makes an S3 server misbehave, deterministically by seed.

It sits between the toolkit and the moto server (:mod:`tests.s3_server`) and, for GET requests (the
reads of object bodies), answers ``503 SlowDown``, resets the connection, cuts the body midway after
announcing its full length, or waits first, each with the given probability; objects whose key ends
with one of ``always_fail`` answer ``500 InternalError`` every time. Writes (PUT of an object or of a
multipart upload's part, POST creating or completing a multipart upload) answer ``503 SlowDown`` or
are reset with their own probabilities, and all of them fail with ``500 InternalError`` from the
``writes_fail_after``-th on (a store that becomes unwritable midway). Other requests (listings,
HEAD, DELETE and the batch delete ``POST ?delete``) pass unchanged.
``latency_seconds`` delays the answer to every request (any method), as a remote store's time to the
first byte; ``max_in_flight`` is the most requests the proxy was serving at once, ``by_object`` counts
the requests by method and object.
Only ever binds to 127.0.0.1 and forwards only to the given loopback server.
"""

from __future__ import annotations

import http.client
import random
import socket
import struct
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOOPBACK = "127.0.0.1"
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclass(frozen=True)
class Faults:
    """What to inject into GET requests (probabilities per request)."""

    error_rate: float = 0.0  # 503 SlowDown
    reset_rate: float = 0.0  # the connection closed with a reset, no answer
    cut_rate: float = 0.0  # the body cut in the middle, its full length announced
    delay_seconds: float = 0.0  # before every GET
    always_fail: tuple[str, ...] = ()  # key suffixes whose GETs always answer 500
    write_error_rate: float = 0.0  # PUT/POST answering 503 SlowDown
    write_reset_rate: float = 0.0  # PUT/POST reset before an answer (the write may or may not have landed)
    writes_fail_after: int | None = None  # writes after this many answer 500, every time
    seed: int = 0
    latency_seconds: float = 0.0  # before the answer to every request (time to the first byte)


class FaultProxy:
    """``with FaultProxy(upstream_endpoint, Faults(...)) as proxy:`` then use ``proxy.endpoint``."""

    def __init__(self, upstream: str, faults: Faults):
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.hostname != LOOPBACK:
            raise ValueError(f"the proxy forwards to loopback servers only, not {upstream}")
        self.upstream = (parsed.hostname, parsed.port)
        self.faults = faults
        self.injected: Counter[str] = Counter()
        self.writes_seen = 0
        self.requests = 0
        #: Requests served, by ``(method, object key)`` (the key without the query: a listing counts under its prefix).
        self.by_object: Counter[tuple[str, str]] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self._random = random.Random(faults.seed)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((LOOPBACK, 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def __enter__(self) -> "FaultProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def choose(self, method: str, path: str) -> str | None:
        """The fault for this request: ``error``, ``reset``, ``cut``, ``always`` or None."""
        if method in ("PUT", "POST") and not _is_batch_delete(path):
            return self._choose_write()
        if method != "GET" or "?" in path and "list-type" in path:  # listings pass; object reads misbehave
            return None
        key = urllib.parse.urlsplit(path).path
        if any(key.endswith(suffix) for suffix in self.faults.always_fail):
            return "always"
        with self._lock:
            draw = self._random.random()
        f = self.faults
        for name, rate in (("error", f.error_rate), ("reset", f.reset_rate), ("cut", f.cut_rate)):
            if draw < rate:
                return name
            draw -= rate
        return None


    def _choose_write(self) -> str | None:
        f = self.faults
        with self._lock:
            self.writes_seen += 1
            if f.writes_fail_after is not None and self.writes_seen > f.writes_fail_after:
                return "always"
            draw = self._random.random()
        if draw < f.write_error_rate:
            return "error"
        if draw < f.write_error_rate + f.write_reset_rate:
            return "reset"
        return None


def _is_batch_delete(path: str) -> bool:
    """``POST /bucket?delete``: S3's DeleteObjects, a delete sent as a POST (passes unchanged)."""
    query = urllib.parse.urlsplit(path).query
    return "delete" in urllib.parse.parse_qs(query, keep_blank_values=True)


def _handler(proxy: FaultProxy):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _body(self) -> bytes | None:
            """The request's body, from its Content-Length or its HTTP chunks (the AWS SDK sends
            parts with ``Transfer-Encoding: chunked``; their aws-chunked content is passed on as is)."""
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                body = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline().strip():  # trailers, up to the blank line
                            pass
                        return bytes(body)
                    body += self.rfile.read(size)
                    self.rfile.readline()  # the CRLF after each chunk
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else None

        def _forward(self) -> tuple[int, list[tuple[str, str]], bytes]:
            body = self._body()
            upstream = http.client.HTTPConnection(*proxy.upstream, timeout=30)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                return response.status, response.getheaders(), response.read()
            finally:
                upstream.close()

        def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes, *, send: int | None = None) -> None:
            self.send_response(status)
            for name, value in headers:  # HEAD keeps the upstream's length: the object's, not the empty body's
                if name.lower() not in _HOP_BY_HOP and (name.lower() != "content-length" or self.command == "HEAD"):
                    self.send_header(name, value)
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body if send is None else body[:send])

        def _error(self, status: int, code: str) -> None:
            body = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
            self._answer(status, [("Content-Type", "application/xml")], body)

        def _reset(self) -> None:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True

        def _handle(self) -> None:
            with proxy._lock:
                proxy.requests += 1
                proxy.by_object[(self.command, urllib.parse.urlsplit(self.path).path)] += 1
                proxy.in_flight += 1
                proxy.max_in_flight = max(proxy.max_in_flight, proxy.in_flight)
            try:
                if proxy.faults.latency_seconds:
                    time.sleep(proxy.faults.latency_seconds)
                self._misbehave()
            finally:
                with proxy._lock:
                    proxy.in_flight -= 1

        def _misbehave(self) -> None:
            fault = proxy.choose(self.command, self.path)
            if fault is not None:
                with proxy._lock:
                    proxy.injected[fault] += 1
            if self.command == "GET" and proxy.faults.delay_seconds:
                time.sleep(proxy.faults.delay_seconds)
            if fault in ("error", "always"):
                self._body()
                self._error(503 if fault == "error" else 500, "SlowDown" if fault == "error" else "InternalError")
                return
            if fault == "reset":
                self._reset()
                return
            status, headers, body = self._forward()
            if fault == "cut" and len(body) > 1:
                self._answer(status, headers, body, send=len(body) // 2)
                self._reset()
                return
            self._answer(status, headers, body)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle

    return Handler
