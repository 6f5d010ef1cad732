"""Freshness: per-record latency from Kafka to a committed Iceberg snapshot.

A steady 5,000 events/s is produced (by a `frazil generate` subprocess) while a `frazil run`
subprocess ingests with ``trigger: 1s``: first a warm-up (default 15 s: the JVM compiles the
micro-batch's code on its first batches), then the measured 2 minutes. For every record:
latency = commit time of the snapshot that made it visible − its Kafka record timestamp.
Reported as p50 / p99 / max over the measured window, and over everything including the cold
start for reference.

Usage: .venv/bin/python -m bench.freshness [--rate 5000] [--seconds 120]
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from bench.common import WORK_DIR, start_broker, write_result
from frazil.config import load_config
from frazil.engine.session import build_spark
from frazil.generate.payments import PAYMENTS_SCHEMA
from frazil.generate.producer import ensure_topic


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--trigger", default="1s")
    parser.add_argument("--warmup", type=int, default=15, help="seconds produced before")
    args = parser.parse_args()
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"freshness-{run_id}"
    work.mkdir(parents=True, exist_ok=True)
    broker = start_broker(f"freshness-{run_id}")
    topic = f"fresh-{run_id}"
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
                        "trigger": args.trigger,
                    }
                ],
            }
        )
    )
    try:
        ensure_topic(broker.bootstrap, topic, partitions=4)
        frazil = subprocess.Popen(
            [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(config_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert frazil.stdout is not None
        for line in frazil.stdout:  # wait until the query runs
            if line.startswith("running "):
                break
        time.sleep(3)
        count = args.rate * (args.warmup + args.seconds)
        produce_started_ms = int(time.time() * 1000)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "frazil.cli.main",
                "generate",
                "-t",
                topic,
                "-n",
                str(count),
                "-r",
                str(args.rate),
                "-b",
                broker.bootstrap,
                "--output",
                "json",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        time.sleep(8)  # let the last records commit
        frazil.send_signal(signal.SIGTERM)
        frazil.wait(120)
        config = load_config(config_path)
        spark = build_spark(config)
        table = "lake.bench.fresh"
        results: dict[str, Any] = {}
        windows = (("measured", produce_started_ms + args.warmup * 1000), ("all", 0))
        for label, since in windows:
            row = spark.sql(latency_query(table, since)).first()
            results[label] = {
                "records": int(row["n"]),
                "p50_ms": float(row["p50"]),
                "p99_ms": float(row["p99"]),
                "max_ms": float(row["max"]),
            }
        snapshots = int(spark.sql(f"SELECT count(*) FROM {table}.snapshots").first()[0])
        total = int(spark.sql(f"SELECT count(*) FROM {table}").first()[0])
        spark.stop()
    finally:
        broker.down()

    out = Table(
        title=f"freshness: {args.rate:,} events/s for {args.seconds}s, trigger {args.trigger}"
    )
    for column in ("records", "p50", "p99", "max"):
        out.add_column(column, justify="right")
    out.add_column("window")
    for label, r in results.items():
        out.add_row(
            f"{r['records']:,}",
            f"{r['p50_ms'] / 1000:.2f}s",
            f"{r['p99_ms'] / 1000:.2f}s",
            f"{r['max_ms'] / 1000:.2f}s",
            label,
        )
    console.print(out)
    assert results["all"]["records"] == total, "every row must be matched to its snapshot"
    met = results["measured"]["p99_ms"] <= 5000
    console.print(
        f"rows in table {total:,} of {count:,} produced; {snapshots} snapshots; "
        f"goal p99 ≤ 5 s over the measured window: {'met' if met else 'NOT met'}"
    )
    path = write_result(
        "freshness",
        {
            "rate": args.rate,
            "seconds": args.seconds,
            "trigger": args.trigger,
            "produced": count,
            "rows_in_table": total,
            "snapshots": snapshots,
            "latency": results,
            "goal_p99_ms": 5000,
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
