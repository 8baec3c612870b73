"""``repair watch`` next to a real running Flink job: bytes read per checkpoint against bytes the
checkpoint added, memory over hundreds of checkpoints, and false alarms (none expected) while Flink
subsumes and deletes checkpoints continuously.

The fixture job (Flink 1.20, RocksDB incremental, ``--parallelism`` subtasks, every file external) takes
a checkpoint every ``--interval-ms`` and keeps 3; its source pauses ``--run-s`` seconds before its last
wave, so the job runs that long taking checkpoints. The watch passes over the root every
``--pass-s`` seconds in this process. Per checkpoint judged:

* bytes read: what the pass read from storage (every ``read`` on a file it opened, counted by a
  storage wrapper), divided among the checkpoints the pass judged by what each added;
* bytes added: the sizes of the files its ``_metadata`` records that no checkpoint judged before
  recorded, plus its ``_metadata``.

Prints one JSON document: checkpoints judged, verdicts, the ratio of bytes read to bytes added (all
passes, and the worst single pass), and the peak resident memory after every 50 checkpoints.

    python -m bench.watch_live --run-s 120 --interval-ms 200
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from repair.io.storage import Storage


class CountingStorage(Storage):
    """A Storage that counts the bytes every file it opens gives out."""

    def __init__(self):
        super().__init__()
        self.bytes_read = 0
        self._lock = threading.Lock()

    def open_input(self, uri, *, scan=False):
        return _Counted(super().open_input(uri, scan=scan), self)

    def counted(self, n: int) -> None:
        with self._lock:
            self.bytes_read += n


class _Counted:
    def __init__(self, file, storage: CountingStorage):
        self._file, self._storage = file, storage

    def read(self, offset: int, length: int):
        data = self._file.read(offset, length)
        self._storage.counted(len(data))
        return data

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._file.close()


def _recorded(metadata_path: Path) -> dict[str, int]:
    """Every file a ``_metadata`` records (local path -> size now), the ``_metadata`` itself included."""
    from repair.formats.flink.metadata import decode_metadata
    from repair.io.snapshot import recorded_paths

    data = metadata_path.read_bytes()
    files = {str(metadata_path): len(data)}
    for path in recorded_paths(decode_metadata(data)):
        local = path.removeprefix("file:")
        try:
            files[local] = os.path.getsize(local)
        except FileNotFoundError:
            pass
    return files


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-s", type=int, default=120, help="how long the job keeps taking checkpoints")
    parser.add_argument("--interval-ms", type=int, default=200, help="Flink's checkpoint interval")
    parser.add_argument("--pass-s", type=float, default=1.0, help="seconds between two passes of the watch")
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args()

    from fixtures import state_model
    from fixtures.flink_harness import JobSettings, ensure_flink, run_fixture_job
    from repair.ops.watch import Watcher

    work = Path(tempfile.mkdtemp(prefix="watch-live-"))
    records = work / "records.tsv"
    state_model.write_records(state_model.make_records(waves=3), records)
    job_id = "be0c0ffee0be0c0ffee0be0c0ffee000"
    settings = JobSettings(parallelism=args.parallelism, checkpoint_dir=work / "checkpoints", num_retained=3,
                           interval_ms=args.interval_ms, job_id=job_id, inline_threshold="0b", rocksdb_local_dir=work / "rocksdb",
                           extra_conf={"fixture.late-wave-pause-ms": str(args.run_s * 1000)})
    failure: list[BaseException] = []

    def run() -> None:
        try:
            run_fixture_job(ensure_flink("1.20.3"), "generate", settings, {"--records": str(records), "--log": str(work / "run.json"),
                                                                          "--timeout-s": str(args.run_s + 300)},
                            timeout_s=args.run_s + 600)
        except BaseException as error:  # noqa: BLE001 - reported below
            failure.append(error)

    job = threading.Thread(target=run, name="flink-job")
    job.start()
    root = work / "checkpoints" / job_id
    while job.is_alive() and not any(root.glob("chk-*/_metadata")):
        time.sleep(0.2)
    storage = CountingStorage()
    watcher = Watcher(str(root), state_dir=str(work / "state"), storage=storage, workers=1, relist_after=0.5)
    verdicts: Counter[str] = Counter()
    seen_files: set[str] = set()
    total_read = total_added = 0
    worst = 0.0
    memory = []
    judged = 0
    started = time.monotonic()
    while job.is_alive():
        before = storage.bytes_read
        result = watcher.run_pass()
        read = storage.bytes_read - before
        added = 0
        for checkpoint in result.checkpoints:
            verdicts[checkpoint["verdict"]] += 1
            if checkpoint["verdict"] not in ("good", "bad"):
                continue
            judged += 1
            try:
                files = _recorded(root / checkpoint["name"] / "_metadata")
            except FileNotFoundError:  # subsumed since: its files are not measured
                continue
            added += sum(size for path, size in files.items() if path not in seen_files)
            seen_files.update(files)
            if judged % 50 == 0:
                memory.append({"checkpoints": judged, "rss_mib": round(_rss_mib(), 1),
                               "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)})
        total_read += read  # every pass's reads count, also those of passes that judged nothing
        total_added += added
        if added:
            worst = max(worst, read / added)
        time.sleep(args.pass_s)
    watcher.close()
    print(json.dumps({
        "flink_failed": repr(failure[0]) if failure else None,
        "seconds": round(time.monotonic() - started, 1),
        "verdicts": dict(verdicts),
        "checkpoints_judged": judged,
        "bytes_read": total_read,
        "bytes_added": total_added,
        "read_per_added": round(total_read / total_added, 3) if total_added else None,
        "worst_pass_read_per_added": round(worst, 3),
        "memory": memory,
    }, indent=2))


if __name__ == "__main__":
    main()
