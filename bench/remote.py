#!/usr/bin/env python3
"""verify, fallback and export from an object store with latency, against the same work on local disk.

Usage::

    python bench/remote.py --dir ~/.cache/flink-checkpoint-repair/bench/<name>   # a bench/make_checkpoint.py directory
    python bench/remote.py --dir ... --runs 5 --latency-ms 30
    python bench/remote.py --dir ... --server go,moto-process   # both servers, side by side in one run

The generated checkpoint's job root is served by one or more S3 servers on loopback (``--server``):

* ``go``: ``bench/s3server`` (Go, gofakes3; :mod:`fast_s3`, built on first use), holding the files in
  memory and waiting ``--latency-ms`` before each answer of its delayed endpoint itself: the server
  costs the machine little, as a user's remote S3 costs the user's machine nothing;
* ``moto``: moto's server (:mod:`tests.s3_server`) in this process, behind :mod:`tests.fault_proxy`,
  which delays each answer (``moto-process``, or ``--server-process``: moto in a process of its own).
  Both are Python, on the cores the command runs on.

Each variant is the ``repair`` command in its own process with ``--workers 1``. The variants: on
local disk; per server, from S3 without added latency (what the loopback server and the HTTP client
cost by themselves), from S3 with the latency (the time to the first byte of a remote store; 30 ms
by default), the same with ``REPAIR_IN_FLIGHT=1`` (one request at a time, as before reads
overlapped); with ``--compare-code DIR``, the same from S3 with the latency running the ``repair``
package of another checkout (e.g. ``git worktree add /tmp/before <commit>``), for a before and after
in one run. Runs go round robin; the median of the runs counts (the machine is shared: compare the
ratios, measured side by side, not the seconds). Beside the command's CPU seconds the output gives
the server's (its process: gofakes3, or moto in a process of its own) and this process's (the
latency proxy, moto when in-process, and the bench's own sampling) for each run, so that what the
servers cost the machine is visible. The server (or the proxy) counts the requests of each run by
object: the output says, per variant, how many requests each SST and each other file took.
Verify and export read the newest checkpoint ``chk-N`` named by ``bench.json`` (not the job root:
a subsumed ``chk-M`` Flink was still deleting could be there); fallback reads the job root.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import resource
import shutil
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Callable

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from common import Variant, json_document, machine, print_speedups, repair_command, run_all, write_results  # noqa: E402

SERVERS = ("go", "moto", "moto-process")
#: How each server is named in the variants.
_LABELS = {"go": "gofakes3", "moto": "moto", "moto-process": "moto"}


def _s3_env(endpoint: str) -> list[str]:
    from tests import s3_server

    return ["env", f"AWS_ENDPOINT_URL={endpoint}", f"AWS_REGION={s3_server.REGION}", f"AWS_ACCESS_KEY_ID={s3_server.ACCESS_KEY}",
            f"AWS_SECRET_ACCESS_KEY={s3_server.SECRET_KEY}", "AWS_EC2_METADATA_DISABLED=true"]


class _Served:
    """One S3 server holding the job root: its endpoints, its requests counted, its own CPU seconds."""

    def __init__(self, label: str, bucket: str, endpoint: str, delayed_endpoint: str,
                 counts: Callable[[], Counter], cpu: Callable[[], float] | None):
        self.label, self.bucket, self.endpoint, self.delayed_endpoint = label, bucket, endpoint, delayed_endpoint
        self.counts, self.cpu = counts, cpu


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _start_go(stack: contextlib.ExitStack, job_root: Path, latency: float) -> _Served:
    import fast_s3

    server = fast_s3.start(job_root, "bench", "job", latency)
    stack.callback(server.stop)
    print(f"gofakes3 (bench/s3server, pid {server.process.pid}) holds {job_root} as s3://bench/job")
    return _Served("gofakes3", "bench", server.endpoint, server.delayed_endpoint, lambda: server.by_object,
                   server.cpu_seconds)


def _start_moto(stack: contextlib.ExitStack, job_root: Path, files: list[Path], latency: float, *, own_process: bool) -> _Served:
    from tests import s3_server
    from tests.fault_proxy import FaultProxy, Faults

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = s3_server.start_s3_server_process() if own_process else s3_server.start_s3_server()
    stack.callback(server.stop)
    client = server.client()
    bucket = server.new_bucket()
    for p in files:
        client.upload_file(str(p), bucket, f"job/{p.relative_to(job_root)}")
    print(f"uploaded {len(files)} files ({sum(p.stat().st_size for p in files) / 1e6:.0f} MB) to moto: s3://{bucket}/job")
    proxy = stack.enter_context(FaultProxy(server.endpoint, Faults(latency_seconds=latency)))
    stack.callback(lambda: print(f"requests through moto's proxy: {proxy.requests}, at most {proxy.max_in_flight} at once"))
    cpu = (lambda: _process_cpu(server.server.process.pid)) if own_process else None  # in-process: in this process's
    return _Served("moto", bucket, server.endpoint, proxy.endpoint, lambda: Counter(proxy.by_object), cpu)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, required=True, help="a directory written by bench/make_checkpoint.py")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=30.0)
    parser.add_argument("--server", default="moto",
                        help=f"the S3 servers, comma-separated, measured side by side: {', '.join(SERVERS)} (default: moto)")
    parser.add_argument("--only", default=None, help="run only the variants whose name contains this")
    parser.add_argument("--skip", default=None,
                        help="leave out the variants whose name contains this (e.g. 'one request at a time'); several, comma-separated")
    parser.add_argument("--results", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--in-flight", type=int, default=None,
                        help="also run the S3 + latency variants with REPAIR_IN_FLIGHT set to this (the default: 16, repair.io.resolved.IN_FLIGHT)")
    parser.add_argument("--server-process", action="store_true",
                        help="moto's server in a process of its own (the same as --server moto-process)")
    parser.add_argument("--compare-code", type=Path, default=None,
                        help="also run the S3 + latency variants with the repair package of this checkout (PYTHONPATH)")
    args = parser.parse_args(argv)
    servers = [name.strip() for name in args.server.split(",") if name.strip()]
    if args.server_process:
        servers = ["moto-process" if name == "moto" else name for name in servers]
    unknown = [name for name in servers if name not in SERVERS]
    if unknown or len({_LABELS[name] for name in servers}) != len(servers):
        parser.error(f"--server takes {', '.join(SERVERS)} (one moto at most), not {args.server}")

    info = json.loads((args.dir / "bench.json").read_text())
    job_root = args.dir / "checkpoints" / info["job_id"]
    newest = args.dir / info["checkpoint"]
    files = sorted(p for p in job_root.rglob("*") if p.is_file())
    sst_bytes = info["sst_bytes"]
    latency_seconds = args.latency_ms / 1000
    with contextlib.ExitStack() as stack:
        served = [_start_go(stack, job_root, latency_seconds) if name == "go" else
                  _start_moto(stack, job_root, files, latency_seconds, own_process=name == "moto-process") for name in servers]
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-remote-"))
        repair = repair_command()
        latency = f"S3 + {args.latency_ms:g} ms"
        where: dict[str, tuple[list[str], str, str, _Served | None]] = {"local disk": ([], str(newest), str(job_root), None)}
        for s in served:
            remote_root = f"s3://{s.bucket}/job"
            remote_newest = f"{remote_root}/{newest.name}"
            delayed = _s3_env(s.delayed_endpoint)
            where[f"{s.label}: S3, no added latency"] = (_s3_env(s.endpoint), remote_newest, remote_root, s)
            where[f"{s.label}: {latency}"] = (delayed, remote_newest, remote_root, s)
            where[f"{s.label}: {latency}, one request at a time"] = ([*delayed, "REPAIR_IN_FLIGHT=1"], remote_newest, remote_root, s)
            if args.in_flight:
                where[f"{s.label}: {latency}, {args.in_flight} in flight"] = (
                    [*delayed, f"REPAIR_IN_FLIGHT={args.in_flight}"], remote_newest, remote_root, s)
            if args.compare_code:
                where[f"{s.label}: {latency}, code of {args.compare_code}"] = (
                    [*delayed, f"PYTHONPATH={args.compare_code.resolve()}"], remote_newest, remote_root, s)
        variants = []
        server_of: dict[str, _Served | None] = {}
        for place, (env, checkpoint, root, s) in where.items():
            variants.append(Variant(f"verify, {place}", "1", [[*env, *repair, "verify", checkpoint, "--workers", "1", "--json"]],
                                    json_document("ok"), ok_codes=(0, 1)))
            variants.append(Variant(f"fallback, {place}", "1", [[*env, *repair, "fallback", root, "--workers", "1", "--json"]],
                                    json_document(), ok_codes=(0, 1)))
            out = Path(scratch) / f"export-{len(variants)}"  # deleted after each run
            variants.append(Variant(f"export, {place}", "1", [[*env, *repair, "export", checkpoint, "--out", str(out), "--workers", "1",
                                                               "--json"]], json_document(), note=str(out)))
            server_of.update({v.name: s for v in variants[-3:]})
        if args.only:
            variants = [v for v in variants if args.only in v.name]
        if args.skip:
            skipped = [part.strip() for part in args.skip.split(",") if part.strip()]
            variants = [v for v in variants if not any(part in v.name for part in skipped)]
        counted = {s.label: s.counts() for s in served}
        cpu_before = {s.label: s.cpu() for s in served if s.cpu}
        own_before = _own_cpu()
        requests: dict[str, list[Counter]] = {}
        #: Per variant and run: the server process's CPU seconds, and this process's (proxy, in-process moto, sampling).
        server_cpus: dict[str, list[float]] = {}
        bench_cpus: dict[str, list[float]] = {}

        def after_run(v: Variant, _) -> None:
            nonlocal own_before
            own = _own_cpu()
            bench_cpus.setdefault(v.name, []).append(own - own_before)
            s = server_of[v.name]
            if s is not None:
                now = s.counts()
                if now != counted[s.label]:
                    requests.setdefault(v.name, []).append(now - counted[s.label])
                counted[s.label] = now
                if s.cpu:
                    server_cpus.setdefault(v.name, []).append(s.cpu() - cpu_before[s.label])
            if v.note:
                shutil.rmtree(v.note, ignore_errors=True)
            cpu_before.update({other.label: other.cpu() for other in served if other.cpu})  # idle between runs: not a run's
            own_before = _own_cpu()

        load_before, load_after = run_all(variants, args.runs, after_run=after_run)
        bucket_of = {s.label: s.bucket for s in served}
    per_file = {name: _requests_per_file(runs[0], _kinds(job_root, files, bucket_of[name.split(", ", 1)[1].split(":")[0]]))
                for name, runs in requests.items()}
    results = {"machine": machine(), "load": [load_before, load_after], "sst_bytes": sst_bytes, "checkpoint": str(newest),
               "latency_ms": args.latency_ms, "servers": servers,
               "variants": {v.name: {"walls": v.walls, "cpus": v.cpus, "server_cpus": server_cpus.get(v.name),
                                     "bench_cpus": bench_cpus.get(v.name), "loads": v.loads, "error": v.error,
                                     "requests": per_file.get(v.name)} for v in variants}}
    print()
    print(f"load average: {load_before:.2f} before, {load_after:.2f} after")
    for name, counts in per_file.items():
        print(f"{name:50s} requests of one run: " + "; ".join(
            f"{kind}: {c['files']} files, {c['requests']} requests ({c['GET']} GET, {c['HEAD']} HEAD), {c['per_file']:.1f} per file"
            for kind, c in counts.items()))
    print("CPU seconds, medians: the command's; the server process's (gofakes3, or moto in a process of its own); this process's "
          "(the latency proxy, moto when in-process, the bench's sampling)")
    for v in variants:
        if v.walls:
            median = statistics.median(v.walls)
            server = f"  server {statistics.median(server_cpus[v.name]):5.2f}" if v.name in server_cpus else " " * 14
            print(f"{v.name:50s} median {median:6.2f} s {sst_bytes / 1e6 / median:6.1f} MB/s  CPU {statistics.median(v.cpus):5.2f}"
                  f"{server}  bench {statistics.median(bench_cpus[v.name]):5.2f}  load {statistics.median(v.loads):5.1f}  "
                  f"runs {', '.join(f'{w:.2f}' for w in v.walls)}")
    print_speedups(variants, [(f"{work}: {v.name.split(', ', 1)[1]} / local throughput", f"{work}, local disk", v.name)
                              for work in ("verify", "fallback", "export") for v in variants
                              if v.name.startswith(work + ",") and v.name != f"{work}, local disk"])
    write_results(args.results, results)
    return 0


_SST_MAGICS = ((0x88E241B785F4CFF7).to_bytes(8, "little"), (0xDB4775248B80FB57).to_bytes(8, "little"))


def _kinds(job_root: Path, files: list[Path], bucket: str) -> dict[str, str]:
    """The kind of each object of the job root (``/bucket/job/...``), see :func:`_kind`."""
    return {f"/{bucket}/job/{p.relative_to(job_root)}": _kind(p) for p in files}


def _kind(path: Path) -> str:
    """What a file of the job root is, for counting requests: ``sst``, ``_metadata`` or ``other``
    (MANIFEST, CURRENT, OPTIONS, backend meta data, operator state; Flink names them all by UUID)."""
    if path.name == "_metadata":
        return "_metadata"
    with path.open("rb") as f:
        f.seek(max(path.stat().st_size - 8, 0))
        return "sst" if f.read(8) in _SST_MAGICS else "other"


def _requests_per_file(counts: Counter, kinds: dict[str, str]) -> dict[str, dict]:
    """Requests of one run by kind of file: files touched, requests (GET, HEAD), requests per file;
    requests naming no file (listings, the bucket) under ``listings``."""
    out: dict[str, dict] = {}
    for (method, key), n in counts.items():
        kind = kinds.get(key, "listings")
        entry = out.setdefault(kind, {"files": set(), "requests": 0, "GET": 0, "HEAD": 0})
        entry["files"].add(key)
        entry["requests"] += n
        if method in ("GET", "HEAD"):
            entry[method] += n
    for entry in out.values():
        entry["files"] = len(entry["files"])
        entry["per_file"] = entry["requests"] / entry["files"]
    return dict(sorted(out.items()))


if __name__ == "__main__":
    sys.exit(main())
