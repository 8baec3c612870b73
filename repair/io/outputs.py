"""Whether a command's output may go where the user asked: the one check every writing command makes.

An output goes to a new location (absent, or an empty directory; an earlier run's incomplete output
on an object store counts as new, see :meth:`~repair.io.storage.Storage.is_new_output`) and never
inside an input: inputs are only ever read, and an output inside one would change it (and look like
an orphan). Local paths are compared after resolving symbolic links, so a link into an input counts
as inside. Both refusals are :class:`~repair.errors.UsageError` (exit code 2), before anything is
read or written.
"""

from __future__ import annotations

from collections.abc import Iterable

from repair.errors import UsageError
from repair.io import storage as st


def new_output(
    out: str, inputs: Iterable[str], storage: st.Storage | None = None, *, existing: bool = False, file: bool = False,
) -> None:
    """Refuse ``out`` when it is inside one of ``inputs`` (files or directories read by the command) or,
    unless ``existing`` (a scratch area that receives a new directory of its own), when it already
    exists: a directory output may only be an empty directory; a ``file`` output must not exist at all."""
    for source in inputs:
        if st.is_within(out, source):
            raise UsageError(f"the output {out} is inside the input {source}; inputs are never written to", source=out)
    if existing:
        return
    storage = storage or st.default_storage()
    if file:
        if storage.stat(out) is not None:
            raise UsageError("the output file already exists; outputs are written to a new path, never over a file", source=out)
    elif not storage.is_new_output(out):
        raise UsageError("the output already exists and is not empty; outputs go to a new directory", source=out)
