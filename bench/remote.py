#!/usr/bin/env python3
"""verify, fallback and export from an object store with latency, against the same work on local disk.

Usage::

    python bench/remote.py --dir ~/.cache/flink-checkpoint-repair/bench/<name>   # a bench/make_checkpoint.py directory
    python bench/remote.py --dir ... --runs 5 --latency-ms 30

The generated checkpoint's job root is uploaded to a real S3 server (moto, :mod:`tests.s3_server`) on
loopback, behind :mod:`tests.fault_proxy`, which delays the answer to every request by
``--latency-ms`` (the time to the first byte of a remote store; 30 ms by default). Each variant is the
``repair`` command in its own process with ``--workers 1``; the server and the proxy run in this
process. The variants: on local disk; from S3 without added latency (what the loopback server itself
costs); from S3 with the latency; the same with ``REPAIR_IN_FLIGHT=1`` (one request at a time, as
before reads overlapped). Runs go round robin; the median of the runs counts (the machine is shared:
compare the ratios, measured side by side, not the seconds).
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
    parser.add_argument("--results", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)

    from tests import s3_server
    from tests.fault_proxy import FaultProxy, Faults

    info = json.loads((args.dir / "bench.json").read_text())
    job_root = args.dir / "checkpoints" / info["job_id"]
    newest = args.dir / info["checkpoint"]
    files = sorted(p for p in job_root.rglob("*") if p.is_file())
    sst_bytes = info["sst_bytes"]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = s3_server.start_s3_server()
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
            load_before, load_after = run_all(variants, args.runs, after_run=lambda v, _: v.note and shutil.rmtree(v.note, ignore_errors=True))
            print(f"requests through the proxy: {proxy.requests}, at most {proxy.max_in_flight} at once")
    finally:
        server.stop()
    results = {"machine": machine(), "load": [load_before, load_after], "sst_bytes": sst_bytes, "checkpoint": str(newest),
               "latency_ms": args.latency_ms, "variants": {v.name: {"walls": v.walls, "cpus": v.cpus, "error": v.error} for v in variants}}
    print()
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


if __name__ == "__main__":
    sys.exit(main())
