"""Storage faults: what is worth another try, and how long to keep trying.

A file that could not be read is not a damaged file. Object stores throttle (``503 SlowDown``), reset
connections, time out and cut bodies short, most of all during the outages this toolkit is used in.
Like the AWS SDKs' *standard* retry mode and RocksDB's ``Env`` error handling, reads tell apart:

* **transient** faults: 5xx answers, throttling, connection resets and refusals, timeouts, and a read
  that returned fewer bytes than the file is known to hold. Retried with capped exponential backoff
  and full jitter, until the time budget (:attr:`RetryPolicy.budget_seconds`) is spent;
* **permanent** ones: not found (a missing key or bucket), access denied, missing or invalid credentials,
  bad request, a host name that does not resolve (a mistyped endpoint or bucket: DNS answers the same
  next time; only ``EAI_AGAIN``, "temporary failure in name resolution", is transient), and everything
  else. Raised at once.

What stays unreadable is raised as :class:`~repair.errors.StorageError` with ``transient`` set when
the last failure was transient, so that verification can call the verdict *unknown*, never broken.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import field
from typing import Callable, TypeVar

from repair.formats.records import record

T = TypeVar("T")

#: Default time budget of one read's retries, in seconds (``--retry-budget``, ``REPAIR_RETRY_BUDGET``).
DEFAULT_BUDGET_SECONDS = 60.0
#: What an error's text says when the store will likely answer next time (pyarrow's S3, GCS, Azure
#: and HDFS messages, curl's and the OS's).
_TRANSIENT = re.compile(
    r"\b(?:5\d\d)\b|SLOW_DOWN|SlowDown|Throttl|TooManyRequests|RequestTimeout|REQUEST_TIMEOUT|"
    r"INTERNAL_FAILURE|InternalError|SERVICE_UNAVAILABLE|ServiceUnavailable|NETWORK_CONNECTION|"
    r"[Cc]onnection (?:reset|refused|aborted|closed)|[Bb]roken pipe|[Tt]imed? ?out|curlCode: (?:7|18|28|52|55|56)|"
    r"[Pp]artial file|Transferred a partial file|[Tt]emporar|EOF occurred|Empty reply|[Uu]nexpected end",
)
#: What says the answer will not change: checked first, so "403 ... timeout" is still permanent.
_PERMANENT = re.compile(
    r"\b(?:400|401|403|404|405|409|412|416)\b|ACCESS_DENIED|AccessDenied|NoSuchKey|NoSuchBucket|"
    r"RESOURCE_NOT_FOUND|NOT_FOUND|[Nn]ot found|[Pp]ermission denied|InvalidAccessKeyId|SignatureDoesNotMatch|"
    r"ExpiredToken|InvalidToken|MISSING_AUTHENTICATION_TOKEN|[Nn]o credentials|[Uu]nable to locate credentials|"
    # a name that does not resolve: curl's code 6 (pyarrow's S3 and GCS), the OS's getaddrinfo, Java's (HDFS)
    r"curlCode: 6\b|[Cc]ould(?:n't| not) resolve host|Name or service not known|nodename nor servname|"
    r"No address associated with hostname|UnknownHostException",
)


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` (from pyarrow, the OS or a short read) is worth another try."""
    if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False
    if isinstance(error, (ConnectionError, TimeoutError, ShortRead)):
        return True
    text = str(error)
    if _PERMANENT.search(text):
        return False
    return bool(_TRANSIENT.search(text))


class ShortRead(OSError):
    """A read returned fewer bytes than the file is known to hold: the connection, not the file."""


@record(frozen=True)
class RetryPolicy:
    """Capped exponential backoff with full jitter, within a time budget per operation."""

    budget_seconds: float = DEFAULT_BUDGET_SECONDS
    first_delay: float = 0.05
    max_delay: float = 5.0
    #: Injected by tests; the real clock and sleep otherwise.
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)
    jitter: Callable[[float], float] = field(default=lambda cap: random.uniform(0, cap), compare=False, repr=False)

    def call(self, operation: Callable[[], T]) -> T:
        """``operation()``, tried again after transient failures until the budget is spent; the last
        failure propagates (transient or not)."""
        deadline = self.clock() + self.budget_seconds
        attempt = 0
        while True:
            try:
                return operation()
            except Exception as error:  # noqa: BLE001 - classified right below, re-raised unless transient
                if not is_transient(error):
                    raise
                delay = self.jitter(min(self.max_delay, self.first_delay * (2 ** attempt)))
                if self.clock() + delay > deadline:
                    raise
                attempt += 1
                self.sleep(delay)
