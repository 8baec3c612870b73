"""The settings of the file systems :class:`~repair.io.storage.Storage` creates: plain values only."""

from __future__ import annotations

import ipaddress
import os
import urllib.parse
from dataclasses import field
from typing import Mapping

from repair.errors import StorageError
from repair.formats.records import record
from repair.io.retry import DEFAULT_BUDGET_SECONDS


# -- options -------------------------------------------------------------------------------------
def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _seconds(value: str | None, default: float) -> float:
    if value is None or not value.strip():
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise StorageError(f"REPAIR_RETRY_BUDGET must be a number of seconds, not {value!r}") from None
    if seconds < 0:
        raise StorageError(f"REPAIR_RETRY_BUDGET must not be negative, not {value!r}")
    return seconds


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@record(frozen=True)
class StorageOptions:
    """Settings of the file systems. Plain values only, so a :class:`Storage` pickles cheaply.

    Credentials left ``None`` are found by the cloud SDKs inside pyarrow in their standard places:
    for S3 ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and
    ``~/.aws``, then instance metadata; for GCS ``GOOGLE_APPLICATION_CREDENTIALS``; for Azure the
    ``DefaultAzureCredential`` chain. Credentials given here travel with a pickled :class:`Storage`.
    Objects are read through obstore (:mod:`repair.io.objects`), which finds the same ones except an S3
    profile (``AWS_PROFILE``, ``~/.aws``): with one and no keys given otherwise, pyarrow reads them too.
    """

    #: S3 endpoint, ``host:port`` or ``http(s)://host:port`` (MinIO, Ceph, localstack, moto, ...).
    s3_endpoint: str | None = None
    s3_region: str | None = None
    s3_access_key: str | None = None
    s3_secret_key: str | None = field(default=None, repr=False)
    s3_session_token: str | None = field(default=None, repr=False)
    s3_anonymous: bool = False
    #: Allow ``http://`` to an endpoint that is not a loopback address (loopback is always allowed).
    s3_allow_http: bool = False
    #: GCS endpoint (an emulator), ``host:port`` or ``http(s)://host:port``.
    gcs_endpoint: str | None = None
    gcs_anonymous: bool = False
    azure_account_key: str | None = field(default=None, repr=False)
    #: Seconds within which a read that failed transiently (throttling, a reset, a timeout, a short
    #: read) is tried again (see :mod:`repair.io.retry`); 0 tries once.
    retry_budget: float = DEFAULT_BUDGET_SECONDS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "StorageOptions":
        """Options from the standard environment variables.

        ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``; ``AWS_REGION`` or ``AWS_DEFAULT_REGION``;
        ``AWS_ALLOW_HTTP`` (``true`` allows plain http to non-loopback endpoints);
        ``STORAGE_EMULATOR_HOST`` (a GCS emulator, used anonymously); ``REPAIR_RETRY_BUDGET`` (seconds).
        Credentials are left to the SDKs (see the class).
        """
        env = os.environ if environ is None else environ
        gcs_emulator = env.get("STORAGE_EMULATOR_HOST") or None
        return cls(
            s3_endpoint=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None,
            s3_region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            s3_allow_http=_truthy(env.get("AWS_ALLOW_HTTP")),
            gcs_endpoint=gcs_emulator,
            gcs_anonymous=gcs_emulator is not None,
            retry_budget=_seconds(env.get("REPAIR_RETRY_BUDGET"), DEFAULT_BUDGET_SECONDS),
        )


def parse_endpoint(endpoint: str, *, allow_http: bool, service: str, allow_hint: str) -> tuple[str, str]:
    """``(host:port, scheme)`` of an endpoint URL; plain http only to loopback unless allowed."""
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        scheme, rest = "https", endpoint
    scheme = scheme.lower()
    host_port = rest.split("/", 1)[0]
    try:
        host = urllib.parse.urlsplit(f"//{host_port}").hostname
    except ValueError:
        host = None
    if scheme not in ("http", "https") or not host:
        raise StorageError(f"{service} endpoint {endpoint!r} is not host:port or http(s)://host:port")
    if scheme == "http" and not allow_http and not _is_loopback(host):
        raise StorageError(
            f"{service} endpoint {endpoint!r} uses plain http to a non-loopback host; "
            f"use https, or allow it explicitly ({allow_hint})"
        )
    return host_port, scheme


# -- reading -------------------------------------------------------------------------------------
