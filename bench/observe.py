"""Operators' view: what metrics and consumer-group commits cost, and how fast status answers.

1. Overhead: one topic of N payments (default 1,000,000, 4 partitions), ingested by the same
   pipeline with the observers off (``kafka.commit_offsets: false``, no metrics) and on
   (``/metrics`` served and scraped every second by a client thread, group offsets committed
   after every commit), alternating after a warm-up round; 100,000 records per micro-batch so
   that there are commits to observe. Goal: on ≥ 0.97× off (≤ 3% throughput).
2. ``frazil status`` for 20 pipelines (20 topics, 20 tables, a few commits each): the time of
   one status answer (PyIceberg and Kafka, no Spark), median of 5. Goal: ≤ 5 s.

Usage: .venv/bin/python -m bench.observe [--records 1000000] [--rounds 2] [--pipelines 20]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import urllib.request
import uuid
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.common import WORK_DIR, free_port, payments_config, start_broker, write_result
from frazil.config import parse_config
from frazil.engine.runner import run
from frazil.engine.session import build_spark
from frazil.generate.producer import ensure_topic, produce_events

OVERHEAD_GOAL = 0.97
STATUS_GOAL_S = 5.0


def _scraper(port: int, stop: threading.Event, counts: list[int]) -> None:
    while not stop.wait(1.0):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
            counts[0] += 1
        except OSError:
            continue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pipelines", type=int, default=20)
    parser.add_argument("--per-trigger", type=int, default=100_000)
    args = parser.parse_args()
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"observe-{run_id}"
    broker = start_broker(f"observe-{run_id}")
    rows: list[dict[str, Any]] = []
    try:
        topic = f"bench-observe-{run_id}"
        ensure_topic(broker.bootstrap, topic, partitions=4)
        produce_events(broker.bootstrap, topic, args.records)

        def config_for(name: str, observed: bool, port: int) -> Any:
            data = payments_config(
                work, broker.bootstrap, topic, name, max_offsets_per_trigger=args.per_trigger
            )
            data["kafka"]["commit_offsets"] = observed
            if observed:
                data["metrics"] = {"port": port, "host": "127.0.0.1"}
            data["spark"] = {"master": "local[2]", "driver_memory": "2g"}
            return parse_config(data, base_dir=work)

        spark = build_spark(config_for("warm", False, 0))
        for round_no in range(args.rounds + 1):  # round 0 warms the JVM up
            for observed in (False, True):
                name = f"{'on' if observed else 'off'}_{round_no}_{run_id}"
                port = free_port()
                stop, scrapes = threading.Event(), [0]
                scraper = threading.Thread(target=_scraper, args=(port, stop, scrapes), daemon=True)
                if observed:
                    scraper.start()
                t0 = time.monotonic()
                (report,) = run(config_for(name, observed, port), until_caught_up=True, spark=spark)
                seconds = time.monotonic() - t0
                stop.set()
                rows.append(
                    {
                        "observers": "on" if observed else "off",
                        "round": round_no,
                        "records": report.records_ingested,
                        "batches": report.batches,
                        "seconds": seconds,
                        "scrapes": scrapes[0],
                    }
                )
                console.print(
                    f"observers {'on ' if observed else 'off'} round {round_no}: "
                    f"{report.records_ingested:,} records in {seconds:.1f}s"
                    + (f", {scrapes[0]} scrapes" if observed else "")
                )

        # Status of many pipelines.
        topics = [f"bench-status-{run_id}-{i}" for i in range(args.pipelines)]
        for t in topics:
            ensure_topic(broker.bootstrap, t, partitions=2)
            produce_events(broker.bootstrap, t, 2_000, progress=False)
        many: dict[str, Any] = payments_config(work, broker.bootstrap, topics[0], "st0")
        many["pipelines"] = [
            payments_config(
                work, broker.bootstrap, t, f"st{i}_{run_id}", max_offsets_per_trigger=700
            )["pipelines"][0]
            for i, t in enumerate(topics)
        ]
        many["state_dir"] = str(work / "state-many")
        config = parse_config(many, base_dir=work)
        run(config, until_caught_up=True, spark=spark)
        spark.stop()
        from frazil.observe.catalog import pyiceberg_catalog
        from frazil.observe.status import read_status

        times = []
        for _ in range(5):
            t0 = time.monotonic()
            found = read_status(config, catalog=pyiceberg_catalog(config))
            times.append(time.monotonic() - t0)
        status_s = statistics.median(times)
        assert len(found) == args.pipelines and all(s.tables for s in found)
    finally:
        broker.down()

    def median_rate(kind: str) -> float:
        return float(
            statistics.median(
                r["records"] / r["seconds"]
                for r in rows
                if r["observers"] == kind and r["round"] > 0
            )
        )

    off, on = median_rate("off"), median_rate("on")
    ratio = on / off
    view = Table(title=f"observers, {args.records:,} events, {args.per_trigger:,}/batch")
    for column in ("observers", "round", "batches", "seconds", "events/s", "scrapes"):
        view.add_column(column, justify="right")
    for r in rows:
        view.add_row(
            r["observers"], str(r["round"]) if r["round"] else "0 (warm-up)", str(r["batches"]),
            f"{r['seconds']:.1f}", f"{r['records'] / r['seconds']:,.0f}", str(r["scrapes"]),
        )  # fmt: skip
    console.print(view)
    console.print(
        f"metrics + group offsets on / off: [bold]{ratio:.3f}×[/] (goal ≥ {OVERHEAD_GOAL}×); "
        f"frazil status for {args.pipelines} pipelines: [bold]{status_s:.2f}s[/] "
        f"(goal ≤ {STATUS_GOAL_S}s)"
    )
    path = write_result(
        "observe",
        {
            "records": args.records,
            "max_offsets_per_trigger": args.per_trigger,
            "runs": rows,
            "off_events_per_s": off,
            "on_events_per_s": on,
            "ratio": ratio,
            "overhead_goal_met": ratio >= OVERHEAD_GOAL,
            "status_pipelines": args.pipelines,
            "status_seconds": status_s,
            "status_times": times,
            "status_goal_met": status_s <= STATUS_GOAL_S,
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
