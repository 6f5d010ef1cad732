"""Atomic multi-table commits: a routed pipeline against a REST catalog, one transaction per
batch vs one commit per table, same run.

The routing benchmark's topic and pipeline (payments with a ``kind`` field taking 20 values in
turn; ``route: {field: kind, table: "bench.<name>_{value}"}``, ``days(created_at)``) on
local[2], against Iceberg's REST catalog server on local files (its reference adapter over a
JDBC catalog on SQLite). Two Spark catalogs in one session point at that server: ``lake``
commits each batch's 20 tables in one ``transactions/commit`` (``catalog.atomic_commits``, the
default), ``lake_pt`` commits each table on its own (``atomic_commits: false``). Rounds
alternate after a warm-up round, each with fresh pipeline and table names; the figure is the
ratio of median events/s (atomic / per table), and per batch the seconds the one job's
commits took (frazil's debug line). Row counts are checked.

Goal: atomic ≥ 0.9× per table.

Usage: .venv/bin/python -m bench.atomic_commits [--records 200000] [--rounds 2]
    [--per-trigger 20000]
"""

from __future__ import annotations

import argparse
import logging
import re
import statistics
import time
import uuid
from typing import Any

from rich.console import Console
from rich.table import Table
from tests.integration.rest_server import rest_server

from bench.common import WORK_DIR, start_broker, write_result
from bench.routing import KINDS, routed_factory
from frazil.config import parse_config
from frazil.engine.catalog_conf import catalog_spark_conf
from frazil.engine.runner import run
from frazil.engine.session import build_spark
from frazil.generate.payments import PAYMENTS_SCHEMA
from frazil.generate.producer import ensure_topic, produce_events

GOAL = 0.9
_COMMITS = re.compile(r"written to (\d+) table\(s\) in one job \(([\d.]+) s; commits ([\d.]+) s\)")


class CommitTimes(logging.Handler):
    """The one job's batches: tables and seconds of their commits (frazil's debug line)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.batches: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = _COMMITS.search(record.getMessage())
        if found:
            self.batches.append(
                {
                    "tables": int(found[1]),
                    "job_s": float(found[2]),
                    "commits_s": float(found[3]),
                }
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds per mode")
    parser.add_argument("--per-trigger", type=int, default=20_000)
    args = parser.parse_args()
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"atomic-{run_id}"
    broker = start_broker(f"atomic-{run_id}")
    schema = {**PAYMENTS_SCHEMA, "kind": "string"}
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    try:
        with rest_server(work / "rest") as rest:
            topic = f"bench-atomic-{run_id}"
            ensure_topic(broker.bootstrap, topic, partitions=4)
            produced = produce_events(
                broker.bootstrap, topic, args.records, event_factory=routed_factory(1, KINDS)
            )
            console.print(f"produced {produced.count:,} events; REST catalog at {rest.uri}")

            def config_for(atomic: bool, name: str) -> Any:
                catalog = {
                    "name": "lake" if atomic else "lake_pt",
                    "type": "rest",
                    "uri": rest.uri,
                    "warehouse": rest.warehouse,
                    "atomic_commits": atomic,
                }
                pipeline: dict[str, Any] = {
                    "name": name,
                    "topics": [topic],
                    "schema": dict(schema),
                    "partition_by": ["days(created_at)"],
                    "max_offsets_per_trigger": args.per_trigger,
                    "route": {"field": "kind", "table": f"bench.{name}_{{value}}"},
                }
                return parse_config(
                    {
                        "catalog": catalog,
                        "kafka": {"bootstrap_servers": broker.bootstrap},
                        "state_dir": str(work / "state"),
                        "spark": {"master": "local[2]", "driver_memory": "2g"},
                        "pipelines": [pipeline],
                    }
                )

            spark = build_spark(config_for(True, "warmup"))
            # The second catalog, per table, registered beside the session's own.
            for key, value in catalog_spark_conf(config_for(False, "warmup").catalog).items():
                spark.conf.set(key, value)
            batch_log = logging.getLogger("frazil.engine.batch")
            batch_log.setLevel(logging.DEBUG)
            for round_no in range(args.rounds + 1):
                for atomic in (True, False):
                    mode = "atomic" if atomic else "per_table"
                    name = f"{mode}_{round_no}_{run_id}"
                    times = CommitTimes()
                    batch_log.addHandler(times)
                    t0 = time.monotonic()
                    try:
                        report = run(config_for(atomic, name), until_caught_up=True, spark=spark)[0]
                    finally:
                        batch_log.removeHandler(times)
                    seconds = time.monotonic() - t0
                    tables = dict(report.tables)
                    written = sum(tables.values())
                    per_table = args.records // KINDS
                    if (
                        written != args.records
                        or len(tables) != KINDS
                        or any(n != per_table for n in tables.values())
                    ):
                        problems.append(
                            f"{name}: {len(tables)} tables holding {written:,} rows "
                            f"(expected {KINDS} × {per_table:,})"
                        )
                    commits = [b["commits_s"] for b in times.batches]
                    rows.append(
                        {
                            "mode": mode,
                            "round": round_no,
                            "records": report.records_ingested,
                            "rows_written": written,
                            "tables": len(tables),
                            "batches": report.batches,
                            "one_job_batches": times.batches,
                            "median_commit_s": statistics.median(commits) if commits else None,
                            "seconds": seconds,
                        }
                    )
                    console.print(
                        f"{mode} round {round_no}: {written:,} rows in {len(tables)} tables, "
                        f"{report.batches} batches, {seconds:.1f}s; one-job commits "
                        f"{', '.join(f'{c:.2f}' for c in commits)} s"
                    )
            spark.stop()
    finally:
        broker.down()

    def median(mode: str, key: str) -> float:
        return float(
            statistics.median(
                r[key] if key != "rate" else r["records"] / r["seconds"]
                for r in rows
                if r["mode"] == mode and r["round"] > 0 and r[key if key != "rate" else "records"]
            )
        )

    atomic_rate, per_table_rate = median("atomic", "rate"), median("per_table", "rate")
    ratio = atomic_rate / per_table_rate
    atomic_commit, per_table_commit = (
        median("atomic", "median_commit_s"),
        median("per_table", "median_commit_s"),
    )
    table = Table(
        title=f"atomic commits, {args.records:,} events, {KINDS} tables, "
        f"{args.per_trigger:,}/batch, local[2], REST catalog"
    )
    for column in ("mode", "round", "batches", "seconds", "events/s", "median commit s"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r["mode"], str(r["round"]) if r["round"] else "0 (warm-up)", str(r["batches"]),
            f"{r['seconds']:.1f}", f"{r['records'] / r['seconds']:,.0f}",
            f"{r['median_commit_s']:.2f}" if r["median_commit_s"] is not None else "-",
        )  # fmt: skip
    console.print(table)
    console.print(
        f"atomic / per table (median events/s): [bold]{ratio:.2f}×[/] (goal ≥ {GOAL}×): "
        f"{'met' if ratio >= GOAL else '[red]not met[/]'}; median commit of a batch's "
        f"{KINDS} tables: {atomic_commit:.2f} s atomic, {per_table_commit:.2f} s per table"
    )
    for problem in problems:
        console.print(f"[red]row count mismatch[/] {problem}")
    path = write_result(
        "atomic_commits",
        {
            "records": args.records,
            "kinds": KINDS,
            "partitions": 4,
            "master": "local[2]",
            "catalog": "Iceberg RESTCatalogServer 1.11.0 (JDBC on SQLite, local files)",
            "max_offsets_per_trigger": args.per_trigger,
            "runs": rows,
            "atomic_events_per_s": atomic_rate,
            "per_table_events_per_s": per_table_rate,
            "atomic_median_commit_s": atomic_commit,
            "per_table_median_commit_s": per_table_commit,
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
