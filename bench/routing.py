"""Routing: one pipeline fanning out to 20 tables vs the same pipeline into one table, same run.

One topic (4 partitions) holds N payments (default 1,000,000), each with a ``kind`` field
taking 20 values (``k00`` … ``k19``) in turn, so every table gets N/20 records. Two pipelines
read it with the same declared schema and layout (``days(created_at)``) on local[2] with an
AvailableNow trigger and the same ``max_offsets_per_trigger``:

* single: ``table: bench.single_<round>``;
* routed: ``route: {field: kind, table: "bench.routed_<round>_{value}"}`` (20 tables created on
  first sight; each batch is written to all of its tables in one Spark job, and each table
  committed once, a new one created in the same transaction).

Rounds alternate single/routed after a warm-up round, each with fresh pipeline and table
names (so each reads the whole topic); the figure is the ratio of median events/s. Row counts
are checked: the single table holds N rows, the routed tables N in all, N/20 each.

Goal (the routing issue): routed ≥ 0.7× single.

Usage: .venv/bin/python -m bench.routing [--records 1000000] [--rounds 2] [--per-trigger 500000]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.common import WORK_DIR, start_broker, write_result
from frazil.config import parse_config
from frazil.engine.runner import run
from frazil.engine.session import build_spark
from frazil.generate.payments import PAYMENTS_SCHEMA, PaymentGenerator
from frazil.generate.producer import ensure_topic, produce_events
from frazil.progress.events import BatchStarted, CommitEvent, Event

KINDS = 20
GOAL = 0.7


class Timeline(logging.Handler):
    """When each batch started, each table was created (frazil logs it) and committed."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.started: dict[int, float] = {}
        self.commits: dict[int, list[float]] = {}
        self.creates: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "created table" in record.getMessage():
            self.creates.append(time.monotonic())

    def on_event(self, event: Event) -> None:
        if isinstance(event, BatchStarted):
            self.started[event.batch_id] = time.monotonic()
        elif isinstance(event, CommitEvent):
            self.commits.setdefault(event.batch_id, []).append(time.monotonic())

    def phases(self) -> list[dict[str, Any]]:
        """Per batch: seconds from its start to its last commit, tables created, commits."""
        out = []
        for batch_id in sorted(self.commits):
            start, commits = self.started[batch_id], self.commits[batch_id]
            creates = [t for t in self.creates if start <= t <= max(commits)]
            out.append(
                {
                    "batch": batch_id,
                    "total_s": round(max(commits) - start, 2),
                    "tables_created": len(creates),
                    "commits": len(commits),
                }
            )
        return out


def routed_factory(seed: int, kinds: int) -> Callable[[], tuple[bytes | None, bytes]]:
    """Payments with a ``kind`` field (``k00``…), cycling through ``kinds`` values."""
    generator = PaymentGenerator(seed)
    suffixes = [f',"kind":"k{i:02d}"}}'.encode() for i in range(kinds)]
    count = 0

    def make() -> tuple[bytes | None, bytes]:
        nonlocal count
        key, value = generator()
        suffix = suffixes[count % kinds]
        count += 1
        return key, value[:-1] + suffix  # the compact JSON object ends with "}"

    return make


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds per pipeline")
    parser.add_argument(
        "--per-trigger",
        type=int,
        default=500_000,
        help="max_offsets_per_trigger of both pipelines (0: no limit, one batch)",
    )
    args = parser.parse_args()
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"routing-{run_id}"
    broker = start_broker(f"routing-{run_id}")
    schema = {**PAYMENTS_SCHEMA, "kind": "string"}
    try:
        topic = f"bench-routing-{run_id}"
        ensure_topic(broker.bootstrap, topic, partitions=4)
        started = time.monotonic()
        produced = produce_events(
            broker.bootstrap, topic, args.records, event_factory=routed_factory(1, KINDS)
        )
        produce_seconds = time.monotonic() - started
        console.print(
            f"produced {produced.count:,} events ({produced.bytes / produced.count:.0f} B each) "
            f"in {produce_seconds:.1f}s"
        )

        def config_for(mode: str, name: str) -> Any:
            pipeline: dict[str, Any] = {
                "name": name,
                "topics": [topic],
                "schema": dict(schema),
                "partition_by": ["days(created_at)"],
            }
            if args.per_trigger:
                pipeline["max_offsets_per_trigger"] = args.per_trigger
            if mode == "single":
                pipeline["table"] = f"bench.{name}"
            else:
                pipeline["route"] = {"field": "kind", "table": f"bench.{name}_{{value}}"}
            return parse_config(
                {
                    "catalog": {"warehouse": str(work / "lake")},
                    "kafka": {"bootstrap_servers": broker.bootstrap},
                    "state_dir": str(work / "state"),
                    "spark": {"master": "local[2]", "driver_memory": "4g"},
                    "pipelines": [pipeline],
                }
            )

        spark = build_spark(config_for("single", "warmup"))
        # Both log "created table" at INFO: the general way, and the one job (with the rows).
        table_logs = [
            logging.getLogger("frazil.sink.table"),
            logging.getLogger("frazil.engine.batch"),
        ]
        for table_log in table_logs:
            table_log.setLevel(logging.INFO)
        rows: list[dict[str, Any]] = []
        problems: list[str] = []
        # Round 0 warms the JVM up (JIT, class loading) for both pipelines and is not counted.
        for round_no in range(args.rounds + 1):
            for mode in ("single", "routed"):
                name = f"{mode}_{round_no}"
                timeline = Timeline()
                for table_log in table_logs:
                    table_log.addHandler(timeline)
                t0 = time.monotonic()
                try:
                    reports = run(config_for(mode, name), until_caught_up=True, spark=spark,
                                  on_event=timeline.on_event)  # fmt: skip
                finally:
                    for table_log in table_logs:
                        table_log.removeHandler(timeline)
                seconds = time.monotonic() - t0
                phases = timeline.phases()
                report = reports[0]
                tables = dict(report.tables)
                written = sum(tables.values())
                expected_tables = 1 if mode == "single" else KINDS
                per_table = args.records // expected_tables
                if (
                    report.records_ingested != args.records
                    or written != args.records
                    or len(tables) != expected_tables
                    or any(n != per_table for n in tables.values())
                ):
                    problems.append(
                        f"{name}: ingested {report.records_ingested:,}, {len(tables)} tables "
                        f"holding {written:,} rows (expected {expected_tables} × {per_table:,})"
                    )
                rows.append(
                    {
                        "pipeline": mode,
                        "round": round_no,
                        "records": report.records_ingested,
                        "rows_written": written,
                        "tables": len(tables),
                        "batches": report.batches,
                        "batch_phases": phases,
                        "snapshots": report.snapshots,
                        "data_files": report.data_files,
                        "seconds": seconds,
                    }
                )
                console.print(
                    f"{mode} round {round_no}: {report.records_ingested:,} records, "
                    f"{len(tables)} table(s), {written:,} rows, {seconds:.1f}s, "
                    f"{report.data_files} data files"
                )
                for b in phases:
                    created = (
                        f", {b['tables_created']} table(s) created" if b["tables_created"] else ""
                    )
                    console.print(
                        f"  batch {b['batch']}: {b['total_s']:.1f}s, "
                        f"{b['commits']} commit(s){created}"
                    )
        spark.stop()
    finally:
        broker.down()

    def median_rate(mode: str) -> float:
        return float(
            statistics.median(
                r["records"] / r["seconds"]
                for r in rows
                if r["pipeline"] == mode and r["round"] > 0
            )
        )

    single, routed = median_rate("single"), median_rate("routed")
    ratio = routed / single
    batch = f"{args.per_trigger:,}/batch" if args.per_trigger else "one batch"
    table = Table(
        title=f"routing, {args.records:,} events, {KINDS} kinds, 4 partitions, {batch}, local[2]"
    )
    for column in ("pipeline", "round", "tables", "rows", "batches", "seconds", "events/s"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r["pipeline"], str(r["round"]) if r["round"] else "0 (warm-up)", str(r["tables"]),
            f"{r['rows_written']:,}", str(r["batches"]), f"{r['seconds']:.1f}",
            f"{r['records'] / r['seconds']:,.0f}",
        )  # fmt: skip
    console.print(table)
    console.print(
        f"routed ({KINDS} tables) / single (median events/s): [bold]{ratio:.2f}×[/] "
        f"(goal ≥ {GOAL}×): {'met' if ratio >= GOAL else '[red]not met[/]'}"
    )
    for problem in problems:
        console.print(f"[red]row count mismatch[/] {problem}")
    path = write_result(
        "routing",
        {
            "records": args.records,
            "kinds": KINDS,
            "partitions": 4,
            "master": "local[2]",
            "max_offsets_per_trigger": args.per_trigger or None,
            "produce_seconds": produce_seconds,
            "runs": rows,
            "single_events_per_s": single,
            "routed_events_per_s": routed,
            "ratio": ratio,
            "goal_ratio": GOAL,
            "goal_met": ratio >= GOAL,
            "row_count_problems": problems,
        },
    )
    console.print(f"wrote {path}")
    if problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
