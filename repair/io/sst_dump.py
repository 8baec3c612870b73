"""RocksDB's own reader as a second opinion on a table we wrote: ``sst_dump --verify_checksum``.

Used before a salvaged SST is published (``rebuild-manifest --salvage``). The tool is optional: where it
is not installed (or is too old for the table's format_version) the verdict is ``None`` and says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from repair.io.resolved import scratch_directory, scratch_write_errors

#: Longest an sst_dump run may take (a salvaged SST is at most a few hundred MB).
TIMEOUT_SECONDS = 600


def sst_dump_verdict(data: bytes) -> tuple[bool | None, str]:
    """``(True, ...)`` when ``sst_dump --command=verify --verify_checksum`` reads every block of ``data``,
    ``(False, its message)`` when it refuses the table, ``(None, why)`` when it cannot tell."""
    tool = shutil.which("sst_dump")
    if tool is None:
        return None, "sst_dump is not installed"
    with scratch_directory("sst-dump") as directory:
        path = os.path.join(directory, "table.sst")
        with scratch_write_errors(path), open(path, "xb") as out:
            out.write(data)
        try:
            run = subprocess.run([tool, f"--file={path}", "--command=verify", "--verify_checksum"],
                                 capture_output=True, text=True, errors="replace", timeout=TIMEOUT_SECONDS)
        except (OSError, subprocess.TimeoutExpired) as error:
            return None, f"sst_dump did not run: {error}"
    output = (run.stdout + run.stderr).replace(path, "the table")
    if "format_version" in output and "unsupported" in output.lower():
        return None, "this sst_dump is older than the table's format_version"
    if run.returncode == 0 and "The file is ok" in output and "corrupt" not in output.lower():
        return True, "sst_dump: the file is ok"
    return False, " ".join(output.split())[:300]
