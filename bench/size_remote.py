#!/usr/bin/env python3
"""``repair size`` of a checkpoint of about 1,000 files on S3 with 30 ms to the first byte.

Usage::

    python bench/size_remote.py [--copies 7] [--latency-ms 30] [--runs 3] [--results size-remote.json]

The newest checkpoint of the fixture ``flink-2.1-p3-external-xxh3-zstd`` (inline threshold 0: every
file external) is replicated ``--copies`` times by ``bench/replicate_checkpoint.py`` (7 copies: about
1,100 files), uploaded to a moto S3 server on loopback (its own process), and counted by ``repair size``
(in this process, as a library call) through :mod:`tests.fault_proxy`, which delays every answer by
``--latency-ms``: on local disk, from S3 without added latency and from S3 with it. Per variant the
median wall seconds of ``--runs`` runs, the requests the proxy served and the bytes read. The goal
(issue 36): under 10 s for 1,000 files at 30 ms.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from common import machine, write_results  # noqa: E402
from replicate_checkpoint import replicate  # noqa: E402

FIXTURE = "flink-2.1-p3-external-xxh3-zstd"


def _timed(run) -> tuple[float, object]:
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=7)
    parser.add_argument("--latency-ms", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args(argv)

    from repair.io import storage as st
    from repair.ops.size import size
    from tests import s3_server
    from tests.conftest import FIXTURES, fixture_info
    from tests.fault_proxy import FaultProxy, Faults

    info = fixture_info(FIXTURES / FIXTURE)
    source = FIXTURES / FIXTURE / "checkpoints" / info["job_id"] / f"chk-{info['retained_checkpoints'][-1]}"
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="bench-size-remote-") as scratch:
        out = Path(scratch) / "checkpoint"
        bench = replicate(source, args.copies, out, log=lambda *_: None)
        job_root = out / "checkpoints" / bench["job_id"]
        checkpoint = out / bench["checkpoint"]
        local = size(str(checkpoint), storage=st.default_storage())
        files = local.to_json()["checkpoints"][0]["totals"]["files"]
        print(f"{files} files, {local.checkpoints[0].bytes / 1e6:.1f} MB ({args.copies} copies of {FIXTURE}'s chk-{source.name[4:]})")
        server = s3_server.start_s3_server_process()
        try:
            client = server.client()
            bucket = server.new_bucket()
            for p in sorted(job_root.rglob("*")):
                if p.is_file():
                    client.upload_file(str(p), bucket, f"job/{p.relative_to(job_root)}")
            remote = f"s3://{bucket}/job/{checkpoint.name}"
            variants: dict[str, dict] = {}
            with FaultProxy(server.endpoint, Faults(latency_seconds=args.latency_ms / 1000)) as proxy:
                places = {"local disk": (str(checkpoint), st.default_storage),
                          "S3, no added latency": (remote, lambda: s3_server.storage_for(server.endpoint)),
                          f"S3 + {args.latency_ms:g} ms": (remote, lambda: s3_server.storage_for(proxy.endpoint))}
                for name, (where, storage) in places.items():
                    walls = []
                    for _ in range(args.runs):
                        served = sum(proxy.by_object.values())
                        wall, result = _timed(lambda: size(where, storage=storage()))
                        assert result.ok and result.checkpoints[0].bytes == local.checkpoints[0].bytes, result.findings
                        walls.append(wall)
                    requests = (sum(proxy.by_object.values()) - served) if name.startswith("S3 +") else None
                    variants[name] = {"walls": walls, "median": statistics.median(walls), "bytes_read": result.bytes_read,
                                      "requests_last_run": requests}
                    print(f"{name:24} median {statistics.median(walls):6.2f} s of {args.runs} "
                          f"({', '.join(f'{w:.2f}' for w in walls)}), read {result.bytes_read / 1e3:.0f} kB"
                          + (f", {requests} requests" if requests is not None else ""))
        finally:
            server.stop()
    write_results(args.results, {"benchmark": "size_remote", "machine": machine(), "files": files, "copies": args.copies,
                                 "latency_ms": args.latency_ms, "variants": variants})
    return 0


if __name__ == "__main__":
    sys.exit(main())
