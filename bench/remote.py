#!/usr/bin/env python3
"""verify, fallback and export from an object store with latency, against the same work on local disk.

Usage::

    python bench/remote.py --dir ~/.cache/flink-checkpoint-repair/bench/<name>   # a bench/make_checkpoint.py directory
    python bench/remote.py --dir ... --runs 5 --latency-ms 30

The generated checkpoint's job root is uploaded to a real S3 server (moto, :mod:`tests.s3_server`) on
loopback, behind :mod:`tests.fault_proxy`, which delays the answer to every request by
``--latency-ms`` (the time to the first byte of a remote store; 30 ms by default). Each variant is the
``repair`` command in its own process with ``--workers 1``; the server and the proxy run in this
process (``--server-process``: moto in a process of its own). The variants: on local disk; from S3
without added latency (what the loopback server itself costs); from S3 with the latency; the same with ``REPAIR_IN_FLIGHT=1`` (one request at a time, as
before reads overlapped); with ``--compare-code DIR``, the same from S3 with the latency running the
``repair`` package of another checkout (e.g. ``git worktree add /tmp/before <commit>``), for a before
and after in one run. Runs go round robin; the median of the runs counts (the machine is shared:
compare the ratios, measured side by side, not the seconds). The proxy counts the requests of each
run by object: the output says, per variant, how many requests each SST and each other file took.
Verify and export read the newest checkpoint ``chk-N`` named by ``bench.json`` (not the job root:
a subsumed ``chk-M`` Flink was still deleting could be there); fallback reads the job root.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from common import Variant, json_document, machine, print_speedups, repair_command, run_all, write_results  # noqa: E402


def _s3_env(endpoint: str) -> list[str]:
    from tests import s3_server

    return ["env", f"AWS_ENDPOINT_URL={endpoint}", f"AWS_REGION={s3_server.REGION}", f"AWS_ACCESS_KEY_ID={s3_server.ACCESS_KEY}",
            f"AWS_SECRET_ACCESS_KEY={s3_server.SECRET_KEY}", "AWS_EC2_METADATA_DISABLED=true"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, required=True, help="a directory written by bench/make_checkpoint.py")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=30.0)
    parser.add_argument("--only", default=None, help="run only the variants whose name contains this")
    parser.add_argument("--skip", default=None, help="leave out the variants whose name contains this (e.g. 'one request at a time')")
    parser.add_argument("--results", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--in-flight", type=int, default=None,
                        help="also run the S3 + latency variants with REPAIR_IN_FLIGHT set to this (the default: 16, repair.io.resolved.IN_FLIGHT)")
    parser.add_argument("--server-process", action="store_true",
                        help="run moto's server in a process of its own (default: in this process, beside the proxy)")
    parser.add_argument("--compare-code", type=Path, default=None,
                        help="also run the S3 + latency variants with the repair package of this checkout (PYTHONPATH)")
    args = parser.parse_args(argv)

    from tests import s3_server
    from tests.fault_proxy import FaultProxy, Faults

    info = json.loads((args.dir / "bench.json").read_text())
    job_root = args.dir / "checkpoints" / info["job_id"]
    newest = args.dir / info["checkpoint"]
    files = sorted(p for p in job_root.rglob("*") if p.is_file())
    sst_bytes = info["sst_bytes"]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = s3_server.start_s3_server_process() if args.server_process else s3_server.start_s3_server()
    try:
        client = server.client()
        bucket = server.new_bucket()
        for p in files:
            client.upload_file(str(p), bucket, f"job/{p.relative_to(job_root)}")
        print(f"uploaded {len(files)} files ({sum(p.stat().st_size for p in files) / 1e6:.0f} MB) to s3://{bucket}/job")
        remote_root = f"s3://{bucket}/job"
        remote_newest = f"{remote_root}/{newest.name}"
        with FaultProxy(server.endpoint, Faults(latency_seconds=args.latency_ms / 1000)) as proxy, \
                tempfile.TemporaryDirectory(prefix="bench-remote-") as scratch:
            repair = repair_command()
            latency = f"S3 + {args.latency_ms:g} ms"
            where = {"local disk": ([], str(newest), str(job_root)),
                     "S3, no added latency": (_s3_env(server.endpoint), remote_newest, remote_root),
                     latency: (_s3_env(proxy.endpoint), remote_newest, remote_root),
                     f"{latency}, one request at a time": ([*_s3_env(proxy.endpoint), "REPAIR_IN_FLIGHT=1"], remote_newest, remote_root)}
            if args.in_flight:
                where[f"{latency}, {args.in_flight} in flight"] = (
                    [*_s3_env(proxy.endpoint), f"REPAIR_IN_FLIGHT={args.in_flight}"], remote_newest, remote_root)
            if args.compare_code:
                where[f"{latency}, code of {args.compare_code}"] = (
                    [*_s3_env(proxy.endpoint), f"PYTHONPATH={args.compare_code.resolve()}"], remote_newest, remote_root)
            variants = []
            for place, (env, checkpoint, root) in where.items():
                variants.append(Variant(f"verify, {place}", "1", [[*env, *repair, "verify", checkpoint, "--workers", "1", "--json"]],
                                        json_document("ok"), ok_codes=(0, 1)))
                variants.append(Variant(f"fallback, {place}", "1", [[*env, *repair, "fallback", root, "--workers", "1", "--json"]],
                                        json_document(), ok_codes=(0, 1)))
                out = Path(scratch) / f"export-{len(variants)}"  # deleted after each run
                variants.append(Variant(f"export, {place}", "1", [[*env, *repair, "export", checkpoint, "--out", str(out), "--workers", "1",
                                                                   "--json"]], json_document(), note=str(out)))
            if args.only:
                variants = [v for v in variants if args.only in v.name]
            if args.skip:
                variants = [v for v in variants if args.skip not in v.name]
            counted = Counter(proxy.by_object)
            requests: dict[str, list[Counter]] = {}

            def after_run(v: Variant, _) -> None:
                nonlocal counted
                if v.note:
                    shutil.rmtree(v.note, ignore_errors=True)
                now = Counter(proxy.by_object)
                if now != counted and "local disk" not in v.name:  # this run went through the proxy
                    requests.setdefault(v.name, []).append(now - counted)
                counted = now

            load_before, load_after = run_all(variants, args.runs, after_run=after_run)
            print(f"requests through the proxy: {proxy.requests}, at most {proxy.max_in_flight} at once")
    finally:
        server.stop()
    kinds = {f"/{bucket}/job/{p.relative_to(job_root)}": _kind(p) for p in files}
    per_file = {name: _requests_per_file(runs[0], kinds) for name, runs in requests.items()}
    results = {"machine": machine(), "load": [load_before, load_after], "sst_bytes": sst_bytes, "checkpoint": str(newest),
               "latency_ms": args.latency_ms, "variants": {v.name: {"walls": v.walls, "cpus": v.cpus, "error": v.error,
                                                                    "requests": per_file.get(v.name)} for v in variants}}
    print()
    print(f"load average: {load_before:.2f} before, {load_after:.2f} after")
    for name, counts in per_file.items():
        print(f"{name:40s} requests of one run: " + "; ".join(
            f"{kind}: {c['files']} files, {c['requests']} requests ({c['GET']} GET, {c['HEAD']} HEAD), {c['per_file']:.1f} per file"
            for kind, c in counts.items()))
    for v in variants:
        if v.walls:
            median = statistics.median(v.walls)
            print(f"{v.name:40s} median {median:7.2f} s  {sst_bytes / 1e6 / median:7.1f} MB/s  CPU {statistics.median(v.cpus):6.2f} s  "
                  f"runs {', '.join(f'{w:.2f}' for w in v.walls)}")
    print_speedups(variants, [(f"{work}: {v.name.split(', ', 1)[1]} / local throughput", f"{work}, local disk", v.name)
                              for work in ("verify", "fallback", "export") for v in variants
                              if v.name.startswith(work + ",") and v.name != f"{work}, local disk"])
    write_results(args.results, results)
    return 0


_SST_MAGICS = ((0x88E241B785F4CFF7).to_bytes(8, "little"), (0xDB4775248B80FB57).to_bytes(8, "little"))


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
