"""Text inputs of ``repair diagnose`` and ``repair doctor``: a file, or standard input for ``-`` or nothing."""

from __future__ import annotations

import os
import sys

from repair.errors import StorageError

STDIN = "-"


def read_text(path: str | None) -> tuple[str, str]:
    """``(text, source)`` of ``path``: the source is the file's absolute path, or ``-`` when ``None`` or ``-``
    read standard input. Undecodable bytes are replaced."""
    if path is None or path == STDIN:
        return sys.stdin.read(), STDIN
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(), os.path.abspath(path)
    except OSError as error:
        raise StorageError(f"cannot read {path}: {error.strerror or error}") from None
