#!/usr/bin/env python3
"""Where the time of one ``repair verify`` or ``repair export`` on Spark goes: a breakdown, in process.

Usage::

    python bench/spark_timeline.py export CHECKPOINT --master 'local[1]'
    python bench/spark_timeline.py verify CHECKPOINT --master 'local[2]' --results t.json

Runs the operation once in this process (as ``repair`` does) and reports, in seconds from the start of
this script's calibration (below): importing repair; planning before Spark; the Spark session (the JVM's start-up, with the JVM's CPU
seconds); from the job's submission to the first task running in a Python worker (workers started,
modules imported); the task phase (first task start to last task end) with each worker's busy
seconds and CPU seconds, the cores the tasks got (task CPU seconds over the task phase) and the tail
(the last worker's end after the first's); what the driver did after the job (publishing); and
stopping the session. Times per task come from the task function itself (``time.time`` and
``time.process_time`` in the worker); Spark's partitions from its event log (written to a temporary
directory through ``SPARK_CONF_DIR``). The machine's load average is printed before and after, and
what two processes get done against one just before the run (a pure-Python loop): on a shared
machine, compare the CPU seconds and the cores got, not only wall times.
"""

from __future__ import annotations

import time

STARTED = time.time()

import argparse  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402

TASK_LOG = "REPAIR_BENCH_TASK_LOG"


class Timed:
    """A task function that appends its start, end and CPU seconds to the file ``$REPAIR_BENCH_TASK_LOG``."""

    def __init__(self, func):
        self.func = func

    def __call__(self, task, **options):
        began, cpu = time.time(), time.process_time()
        result = self.func(task, **options)
        record = {"pid": os.getpid(), "start": began, "end": time.time(), "cpu": time.process_time() - cpu,
                  "task": f"{task.operator_id}[{task.subtask}]" if hasattr(task, "operator_id") else (getattr(task, "uri", None) or "inline")}
        with open(os.environ[TASK_LOG], "a") as log:
            log.write(json.dumps(record) + "\n")
        return result


def _cpu_seconds(pid: int) -> float:
    """CPU seconds of a process and the children it reaped (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _java_cpu() -> float:
    """CPU seconds of the JVMs this process started."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            if stat[stat.index("(") + 1:stat.rindex(")")] == "java" and int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                total += _cpu_seconds(int(entry))
        except (OSError, ValueError):
            continue
    return total


def _spin(n: int = 40_000_000) -> None:
    total = 0
    for i in range(n):
        total += i


def machine_parallelism() -> float:
    """What two processes get done against one on this machine now: a fixed pure-Python loop run alone,
    then twice at once; 2.0 on two idle cores, less the more other work wants them."""
    from multiprocessing import get_context

    def run(count: int) -> float:
        processes = [get_context("fork").Process(target=_spin) for _ in range(count)]
        began = time.time()
        for p in processes:
            p.start()
        for p in processes:
            p.join()
        return time.time() - began

    one = run(1)
    return round(2 * one / run(2), 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["verify", "export"])
    parser.add_argument("checkpoint")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--results", type=Path, default=None, help="write the breakdown as JSON here")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    two_against_one = machine_parallelism()
    global STARTED
    STARTED = time.time()  # the breakdown's zero: after the calibration, before repair is imported
    work = Path(tempfile.mkdtemp(prefix="spark-timeline-"))
    try:
        breakdown = _run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    breakdown["load"] = [load_before, os.getloadavg()[0]]
    breakdown["machine_two_against_one"] = two_against_one
    _print(breakdown)
    if args.results:
        args.results.write_text(json.dumps(breakdown, indent=2) + "\n")
    return 0


def _run(args, work: Path) -> dict:
    events, conf = work / "events", work / "conf"
    events.mkdir()
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\nspark.eventLog.compress false\n")
    os.environ["SPARK_CONF_DIR"] = str(conf)
    os.environ[TASK_LOG] = str(work / "tasks.jsonl")

    from repair.ops import runner

    marks: dict[str, float] = {}
    java_cpu: list[tuple[float, float]] = []  # (time, JVM CPU seconds), sampled while the job runs
    session, run_on_spark = runner.spark_session, runner._run_on_spark

    def timed_session(*a, **k):
        marks.setdefault("session_start", time.time())
        started = session(*a, **k)
        marks.setdefault("session_end", time.time())
        marks.setdefault("java_cpu_at_session_end", _java_cpu())
        return started

    def timed_run(*a, **k):
        marks["run_start"] = time.time()
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.5):
                java_cpu.append((time.time(), _java_cpu()))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            return run_on_spark(*a, **k)
        finally:
            marks["run_end"] = time.time()
            stop.set()
            sampler.join()

    runner.spark_session, runner._run_on_spark = timed_session, timed_run
    out = work / "out"
    marks["operation_start"] = time.time()
    if args.command == "export":
        import repair.ops.export.job as job

        job.export_subtask = Timed(job.export_subtask)
        what = f"{job.export(args.checkpoint, str(out), master=args.master).rows} rows"
    else:
        import repair.ops.verify.engine as engine

        engine.check_file = Timed(engine.check_file)
        what = "ok" if engine.verify(args.checkpoint, master=args.master).ok else "problems found"
    marks["operation_end"] = time.time()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    marks["stopped"] = time.time()
    tasks = [json.loads(line) for line in open(work / "tasks.jsonl")] if (work / "tasks.jsonl").exists() else []
    tasks = [t for t in tasks if t["pid"] != os.getpid()]  # inline files are checked in the driver
    partitions = []
    for name in glob.glob(str(events / "**" / "*"), recursive=True):
        if os.path.isfile(name):
            for line in open(name):
                event = json.loads(line)
                if event["Event"] == "SparkListenerTaskEnd":
                    info = event["Task Info"]
                    partitions.append({"index": info["Index"], "launch": info["Launch Time"] / 1000, "finish": info["Finish Time"] / 1000})
                elif event["Event"] == "SparkListenerJobStart":
                    marks["job_submitted"] = event["Submission Time"] / 1000
    return _breakdown(args, what, marks, tasks, sorted(partitions, key=lambda p: p["index"]), java_cpu)


def _breakdown(args, what: str, marks: dict, tasks: list[dict], partitions: list[dict], java_cpu: list) -> dict:
    def at(t: float) -> float:
        return round(t - STARTED, 2)

    first, last = min(t["start"] for t in tasks), max(t["end"] for t in tasks)
    workers = {}
    for t in tasks:
        w = workers.setdefault(t["pid"], {"tasks": 0, "busy": 0.0, "cpu": 0.0, "first": t["start"], "last": t["end"]})
        w["tasks"] += 1
        w["busy"] += t["end"] - t["start"]
        w["cpu"] += t["cpu"]
        w["first"], w["last"] = min(w["first"], t["start"]), max(w["last"], t["end"])
    ends = sorted(w["last"] for w in workers.values())
    java_in_phase = [cpu for when, cpu in java_cpu if first <= when <= last]
    task_cpu = sum(t["cpu"] for t in tasks)
    return {
        "command": args.command, "master": args.master, "checkpoint": args.checkpoint, "result": what,
        "seconds": {
            "imports": at(marks["operation_start"]),
            "planning": round(marks["session_start"] - marks["operation_start"], 2),
            "spark_session": round(marks["session_end"] - marks["session_start"], 2),
            "to_first_task": round(first - marks["session_end"], 2),
            "task_phase": round(last - first, 2),
            "after_job": round(marks["operation_end"] - last, 2),
            "stop": round(marks["stopped"] - marks["operation_end"], 2),
            "total": at(marks["stopped"]),
        },
        "jvm_cpu": {"start_up": round(marks["java_cpu_at_session_end"], 2),
                    "task_phase": round(max(java_in_phase) - min(java_in_phase), 2) if java_in_phase else None},
        "tasks": len(tasks), "partitions": len(partitions),
        "task_cpu": round(task_cpu, 2), "task_busy": round(sum(t["end"] - t["start"] for t in tasks), 2),
        "cores_got": round(task_cpu / (last - first), 2) if last > first else None,
        "tail": round(ends[-1] - ends[0], 2),
        "workers": [{"tasks": w["tasks"], "busy": round(w["busy"], 2), "cpu": round(w["cpu"], 2), "from": at(w["first"]), "to": at(w["last"])}
                    for w in sorted(workers.values(), key=lambda w: w["first"])],
        "partition_times": [{"index": p["index"], "launch": at(p["launch"]), "finish": at(p["finish"])} for p in partitions],
    }


def _print(b: dict) -> None:
    s = b["seconds"]
    print(f"{b['command']} --master {b['master']} ({b['result']}), load {b['load'][0]:.2f} -> {b['load'][1]:.2f}, "
          f"two processes against one on this machine before the run: {b['machine_two_against_one']:.2f}x")
    print(f"  imports {s['imports']:.2f} s, planning {s['planning']:.2f} s, Spark session (JVM start) {s['spark_session']:.2f} s "
          f"({b['jvm_cpu']['start_up']:.2f} CPU s), to the first task {s['to_first_task']:.2f} s")
    print(f"  task phase {s['task_phase']:.2f} s: {b['tasks']} tasks in {b['partitions']} partitions, {b['task_cpu']:.2f} task CPU s "
          f"({b['task_busy']:.2f} s busy), cores got {b['cores_got']}, tail {b['tail']:.2f} s, JVM CPU in the phase {b['jvm_cpu']['task_phase']}")
    for i, w in enumerate(b["workers"]):
        print(f"    worker {i}: {w['tasks']} tasks, {w['busy']:.2f} s busy, {w['cpu']:.2f} CPU s, {w['from']:.2f}-{w['to']:.2f}")
    print(f"  after the job {s['after_job']:.2f} s, stop {s['stop']:.2f} s, total {s['total']:.2f} s")


if __name__ == "__main__":
    sys.exit(main())
