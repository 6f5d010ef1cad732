"""Throughput: frazil vs a minimal hand-written Structured Streaming job, same run.

1M pre-produced payments on 4 partitions; both jobs read them from the start with an
AvailableNow trigger on local[2] and write an Iceberg table of the same layout
(``PARTITIONED BY days(created_at)``). Rounds alternate baseline/frazil so JIT warm-up and
machine noise hit both; the ratio of medians is the figure.

Usage: .venv/bin/python -m bench.throughput [--records 1000000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.baseline_job import start_baseline
from bench.common import WORK_DIR, start_broker, write_result
from frazil.config import parse_config
from frazil.engine.runner import run
from frazil.engine.session import build_spark
from frazil.generate.payments import PAYMENTS_SCHEMA
from frazil.generate.producer import ensure_topic, produce_events


def baseline(spark: Any, bootstrap: str, topic: str, table: str, checkpoint: str) -> int:
    """Run the hand-written job until caught up; return the table's row count."""
    start_baseline(spark, bootstrap, topic, table, checkpoint).awaitTermination()
    return int(spark.sql(f"SELECT count(*) FROM {table}").first()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per job")
    args = parser.parse_args()
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"throughput-{run_id}"
    broker = start_broker(f"throughput-{run_id}")
    try:
        topic = f"bench-payments-{run_id}"
        ensure_topic(broker.bootstrap, topic, partitions=4)
        started = time.monotonic()
        produce_events(broker.bootstrap, topic, args.records, seed=1)
        produce_seconds = time.monotonic() - started
        console.print(f"produced {args.records:,} events in {produce_seconds:.1f}s")

        def config_for(name: str) -> Any:
            return parse_config(
                {
                    "catalog": {"warehouse": str(work / "lake")},
                    "kafka": {"bootstrap_servers": broker.bootstrap},
                    "state_dir": str(work / "state"),
                    "spark": {"master": "local[2]", "driver_memory": "4g"},
                    "pipelines": [
                        {
                            "name": name,
                            "topics": [topic],
                            "table": f"bench.{name}",
                            "schema": dict(PAYMENTS_SCHEMA),
                            "partition_by": ["days(created_at)"],
                        }
                    ],
                }
            )

        spark = build_spark(config_for("warmup"))
        rows: list[dict[str, Any]] = []
        # Round 0 warms the JVM up (JIT, class loading) for both jobs and is not counted.
        for round_no in range(args.rounds + 1):
            name = f"baseline_{round_no}"
            t0 = time.monotonic()
            count = baseline(
                spark, broker.bootstrap, topic, f"lake.bench.{name}", str(work / "ckpt" / name)
            )
            seconds = time.monotonic() - t0
            rows.append(
                {"job": "baseline", "round": round_no, "records": count, "seconds": seconds}
            )
            console.print(f"baseline round {round_no}: {count:,} in {seconds:.1f}s")

            name = f"frazil_{round_no}"
            t0 = time.monotonic()
            reports = run(config_for(name), until_caught_up=True, spark=spark)
            seconds = time.monotonic() - t0
            count = reports[0].table_rows
            rows.append({"job": "frazil", "round": round_no, "records": count, "seconds": seconds})
            console.print(f"frazil round {round_no}: {count:,} in {seconds:.1f}s")
        spark.stop()
    finally:
        broker.down()

    def median_rate(job: str) -> float:
        return statistics.median(
            r["records"] / r["seconds"] for r in rows if r["job"] == job and r["round"] > 0
        )

    base, ours = median_rate("baseline"), median_rate("frazil")
    table = Table(title=f"throughput, {args.records:,} events, 4 partitions, local[2]")
    for column in ("job", "round", "records", "seconds", "events/s"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r["job"],
            str(r["round"]) if r["round"] else "0 (warm-up)",
            f"{r['records']:,}",
            f"{r['seconds']:.1f}",
            f"{r['records'] / r['seconds']:,.0f}",
        )
    console.print(table)
    ratio = ours / base
    console.print(f"frazil / baseline (median events/s): [bold]{ratio:.2f}×[/] (goal ≥ 0.95×)")
    path = write_result(
        "throughput",
        {
            "records": args.records,
            "partitions": 4,
            "master": "local[2]",
            "produce_seconds": produce_seconds,
            "runs": rows,
            "baseline_events_per_s": base,
            "frazil_events_per_s": ours,
            "ratio": ratio,
            "goal_ratio": 0.95,
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
