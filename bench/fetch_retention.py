"""Driver heap kept after runs: Kafka records fetched but not consumed, by poll size.

One topic (``--partitions``, default 20) of Debezium JSON change events with their embedded
schema and PostgreSQL's ``source`` block (``bench.changes``' ``debezium-json --envelope
postgres`` records, ~2.8 KB each, lz4-compressed by the producer), read by one pipeline with
``max_offsets_per_trigger`` (default 50,000: 2,500 a partition a batch) into one table, run
``--runs`` times one after another in one Spark application (a new pipeline each time, as
tests and benchmarks do). After each run the driver's heap in use is measured after two full
collections. Each ``--max-poll-records`` value (``default``: frazil's own) is measured in a
process (a JVM) of its own, back to back: Spark's Kafka pools live as long as the JVM.

A poll brings up to ``max.poll.records`` records of a partition; what a batch does not read
of them stays decompressed in Spark's Kafka fetched-data pool for the next batch (or 5
minutes), while ``max.partition.fetch.bytes`` bounds only the compressed bytes fetched.

Usage: .venv/bin/python -m bench.fetch_retention [--records 100000] [--partitions 20]
    [--per-trigger 50000] [--runs 2] [--max-poll-records default,2500]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.changes import changes, debezium_json_factory
from bench.common import WORK_DIR, start_broker, write_result
from frazil.config import parse_config
from frazil.engine.runner import run
from frazil.engine.session import build_spark
from frazil.generate.producer import ensure_topic, produce_events


def measure(
    bootstrap: str, topic: str, work: Any, poll: str, runs: int, per_trigger: int
) -> list[dict[str, Any]]:
    """Heap in use after each of ``runs`` pipelines over ``topic``, in one Spark application."""

    def config(name: str) -> Any:
        kafka: dict[str, Any] = {"bootstrap_servers": bootstrap}
        if poll != "default":
            kafka["properties"] = {"max.poll.records": poll}
        pipeline = {
            "name": name,
            "topics": [topic],
            "table": f"bench.{name}",
            "max_offsets_per_trigger": per_trigger,
            "trigger": "5s",
        }
        return parse_config(
            {
                "catalog": {"warehouse": str(work / "lake")},
                "kafka": kafka,
                "state_dir": str(work / "state"),
                "spark": {"master": "local[2]", "driver_memory": "4g"},
                "pipelines": [pipeline],
            }
        )

    spark = build_spark(config("warmup"))
    runtime = spark._jvm.java.lang.Runtime.getRuntime()
    rows = []
    try:
        for i in range(runs):
            name = f"p{poll}_{i}_{uuid.uuid4().hex[:6]}"
            t0 = time.monotonic()
            run(config(name), until_caught_up=True, spark=spark)
            seconds = time.monotonic() - t0
            for _ in range(2):
                spark._jvm.java.lang.System.gc()
                time.sleep(0.5)
            used = (runtime.totalMemory() - runtime.freeMemory()) / 2**20
            rows.append({"max_poll_records": poll, "run": i, "seconds": seconds, "heap_mib": used})
    finally:
        spark.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--per-trigger", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--max-poll-records", default="default,2500")
    # Internal: measure one value on an existing topic, rows as JSON on the last line.
    parser.add_argument(
        "--one", nargs=3, metavar=("BOOTSTRAP", "TOPIC", "WORK"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.one:
        bootstrap, topic, work_dir = args.one
        measured = measure(
            bootstrap, topic, Path(work_dir), args.max_poll_records, args.runs, args.per_trigger
        )
        print(json.dumps(measured))
        return
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    broker = start_broker(f"fetch-retention-{run_id}")
    work = WORK_DIR / f"fetch-retention-{run_id}"
    rows: list[dict[str, Any]] = []
    try:
        topic = f"bench-retention-{run_id}"
        ensure_topic(broker.bootstrap, topic, partitions=args.partitions)
        make, _ = changes(1, args.records // 10)
        factory = debezium_json_factory(make, "items", full_source=True)
        produce_events(broker.bootstrap, topic, args.records, event_factory=factory)
        for poll in args.max_poll_records.split(","):
            found = subprocess.run(
                [sys.executable, "-m", "bench.fetch_retention", "--one", broker.bootstrap, topic,
                 str(work), "--max-poll-records", poll, "--runs", str(args.runs),
                 "--per-trigger", str(args.per_trigger)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            rows += json.loads(found.stdout.strip().splitlines()[-1])
    finally:
        broker.down()
    table = Table(
        title=f"{args.records:,} Debezium JSON records, {args.partitions} partitions, "
        f"{args.per_trigger:,}/batch: driver heap in use after each run"
    )
    for column in ("max.poll.records", "run", "seconds", "heap MiB"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r["max_poll_records"], str(r["run"]), f"{r['seconds']:.1f}", f"{r['heap_mib']:,.0f}"
        )
    console.print(table)
    path = write_result(
        "fetch_retention",
        {
            "records": args.records,
            "partitions": args.partitions,
            "max_offsets_per_trigger": args.per_trigger,
            "runs": rows,
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
