"""Freshness: per-record latency from Kafka to a committed Iceberg snapshot.

A steady 5,000 events/s is produced (by a `frazil generate` subprocess) while a job ingests
with a 1 s trigger: first a warm-up (default 15 s: the JVM compiles the micro-batch's code on
its first batches), then the measured 2 minutes. For every record:
latency = commit time of the snapshot that made it visible − its Kafka record timestamp.
Reported as p50 / p99 / max over the measured window, and over everything including the cold
start. Two jobs are measured one after the other in the same run, each on its own topic:
`frazil run` and the minimal hand-written Structured Streaming job (bench/baseline_job.py).

Usage: .venv/bin/python -m bench.freshness [--rate 5000] [--seconds 120] [--jobs frazil,baseline]
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from bench.common import WORK_DIR, start_broker, write_result
from frazil.config import parse_config
from frazil.config.durations import parse_duration
from frazil.engine.session import build_spark
from frazil.generate.payments import PAYMENTS_SCHEMA
from frazil.generate.producer import ensure_topic
from frazil.local.broker import LocalBroker

#: p99 Kafka timestamp → visible in a snapshot, at 5,000 events/s with a 1 s trigger.
GOAL_P99_MS = 2000


def latency_query(table: str, since_ms: int) -> str:
    """Per-record latency: join rows (by data file) to the snapshot that added the file."""
    return f"""
        WITH rows AS (
            SELECT _file AS file, unix_millis(_kafka_timestamp) AS ts FROM {table}
        ),
        added AS (
            -- all_entries: merged manifests re-list old files as EXISTING, so look at every
            -- manifest for the entry that ADDED (status 1) each file.
            SELECT e.data_file.file_path AS file, min(unix_millis(s.committed_at)) AS committed
            FROM {table}.all_entries e JOIN {table}.snapshots s ON e.snapshot_id = s.snapshot_id
            WHERE e.status = 1
            GROUP BY e.data_file.file_path
        ),
        lat AS (
            SELECT committed - ts AS ms, ts FROM rows JOIN added USING (file)
        )
        SELECT count(*) AS n,
               percentile(ms, 0.5) AS p50, percentile(ms, 0.99) AS p99, max(ms) AS max
        FROM lat WHERE ts >= {since_ms}
    """


def _job_command(job: str, work: Path, broker: LocalBroker, topic: str, trigger: str) -> list[str]:
    if job == "frazil":
        config_path = work / "frazil.yaml"
        config_path.write_text(
            yaml.safe_dump(
                {
                    "catalog": {"warehouse": str(work / "lake")},
                    "kafka": {"bootstrap_servers": broker.bootstrap},
                    "state_dir": str(work / "state"),
                    "spark": {"driver_memory": "2g"},
                    "pipelines": [
                        {
                            "name": "fresh",
                            "topics": [topic],
                            "table": "bench.fresh",
                            "schema": dict(PAYMENTS_SCHEMA),
                            "partition_by": ["days(created_at)"],
                            "kafka_metadata": ["timestamp"],
                            "trigger": trigger,
                        }
                    ],
                }
            )
        )
        return [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(config_path)]
    seconds = parse_duration(trigger)
    return [
        sys.executable, "-m", "bench.baseline_job", "--bootstrap", broker.bootstrap,
        "--topic", topic, "--warehouse", str(work / "lake"), "--table", "lake.bench.fresh",
        "--checkpoint", str(work / "checkpoint"), "--trigger-seconds", str(seconds),
    ]  # fmt: skip


def measure(job: str, broker: LocalBroker, args: argparse.Namespace) -> dict[str, Any]:
    """Run one job under a steady load and return its latency figures."""
    work = WORK_DIR / f"freshness-{uuid.uuid4().hex[:6]}-{job}"
    work.mkdir(parents=True, exist_ok=True)
    topic = f"fresh-{work.name}"
    ensure_topic(broker.bootstrap, topic, partitions=4)
    process = subprocess.Popen(
        _job_command(job, work, broker, topic, args.trigger),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:  # wait until the query runs
        if line.startswith("running "):
            break
    time.sleep(3)
    count = args.rate * (args.warmup + args.seconds)
    produce_started_ms = int(time.time() * 1000)
    subprocess.run(
        [sys.executable, "-m", "frazil.cli.main", "generate", "-t", topic, "-n", str(count),
         "-r", str(args.rate), "-b", broker.bootstrap, "--output", "json"],
        check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(8)  # let the last records commit
    process.send_signal(signal.SIGTERM)
    process.wait(120)
    spark = build_spark(
        parse_config(
            {
                "catalog": {"warehouse": str(work / "lake")},
                "pipelines": [{"name": "x", "topics": ["x"], "table": "bench.fresh"}],
            }
        )
    )
    table = "lake.bench.fresh"
    result: dict[str, Any] = {"produced": count}
    windows = (("measured", produce_started_ms + args.warmup * 1000), ("all", 0))
    for label, since in windows:
        row = spark.sql(latency_query(table, since)).first()
        result[label] = {
            "records": int(row["n"]),
            "p50_ms": float(row["p50"]),
            "p99_ms": float(row["p99"]),
            "max_ms": float(row["max"]),
        }
    result["snapshots"] = int(spark.sql(f"SELECT count(*) FROM {table}.snapshots").first()[0])
    result["rows_in_table"] = int(spark.sql(f"SELECT count(*) FROM {table}").first()[0])
    spark.stop()
    assert result["all"]["records"] == result["rows_in_table"], "every row matched a snapshot"
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--trigger", default="1s")
    parser.add_argument("--warmup", type=int, default=15, help="seconds produced before")
    parser.add_argument("--jobs", default="frazil,baseline")
    args = parser.parse_args()
    console = Console()
    broker = start_broker(f"freshness-{uuid.uuid4().hex[:6]}")
    results: dict[str, dict[str, Any]] = {}
    try:
        for job in args.jobs.split(","):
            console.print(f"measuring {job} …")
            results[job] = measure(job, broker, args)
    finally:
        broker.down()

    out = Table(
        title=f"freshness: {args.rate:,} events/s for {args.seconds}s "
        f"(+{args.warmup}s warm-up), trigger {args.trigger}"
    )
    for column in ("job", "window", "records", "p50", "p99", "max", "snapshots"):
        out.add_column(column, justify="right")
    for job, result in results.items():
        for label in ("measured", "all"):
            r = result[label]
            out.add_row(
                job,
                label,
                f"{r['records']:,}",
                f"{r['p50_ms'] / 1000:.2f}s",
                f"{r['p99_ms'] / 1000:.2f}s",
                f"{r['max_ms'] / 1000:.2f}s",
                str(result["snapshots"]),
            )
    console.print(out)
    summary: dict[str, Any] = {}
    if "frazil" in results:
        p99 = results["frazil"]["measured"]["p99_ms"]
        summary["goal_met"] = p99 <= GOAL_P99_MS
        met = "met" if p99 <= GOAL_P99_MS else "NOT met"
        console.print(f"frazil p99 {p99 / 1000:.2f}s: goal ≤ {GOAL_P99_MS / 1000:g} s {met}")
    if "frazil" in results and "baseline" in results:
        ratio = results["frazil"]["measured"]["p99_ms"] / results["baseline"]["measured"]["p99_ms"]
        summary["p99_ratio_frazil_to_baseline"] = ratio
        console.print(f"p99 frazil / baseline: {ratio:.2f}× (lower is fresher)")
    path = write_result(
        "freshness",
        {
            "rate": args.rate,
            "seconds": args.seconds,
            "warmup_seconds": args.warmup,
            "trigger": args.trigger,
            "goal_p99_ms": GOAL_P99_MS,
            "jobs": results,
            **summary,
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
