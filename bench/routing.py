"""Routing: one pipeline fanning out to N tables vs the same records into one table, same run.

One topic (4 partitions) per table count N holds the same payments (default 1,000,000), each
with a ``kind`` field taking N values (``k00`` … ) in turn, so every table gets 1/N of the
records. Pipelines read them with the same declared schema and layout (``days(created_at)``)
on local[2] with an AvailableNow trigger and the same ``max_offsets_per_trigger``:

* single: ``table: bench.single_<round>`` (the first table count's topic);
* routed N: ``route: {field: kind, table: "bench.routed<N>_<round>_{value}"}`` (N tables
  created on first sight; each batch is written to all of its tables in one Spark job, and
  each table committed once, a new one created in the same transaction).

Rounds run single, then each table count, after a warm-up round, each with fresh pipeline
and table names (so each reads its whole topic). Figures, each against the single table in
the same run: the ratio of median events/s, and the median time of a warm batch (one that
creates no table and is not the run's early first batch, after the warm-up round: the same
offsets in every pipeline; frazil's ``BatchDone`` seconds), split into the
one job writing the files and the commits (frazil's debug line) and the rest (reading the
tables' markers, planning). Row counts are checked: N tables holding all records, 1/N each.

Goals: routed (20 tables) ≥ 0.7× single events/s; a warm batch routed to 100 tables ≤ 1.5×
one table's (e.g. ``--tables 1,100 --records 300000 --per-trigger 50000``).

With ``--process-rounds N`` each pipeline then runs N more times as a user runs it, ``frazil
run --until-caught-up`` in a process of its own, timed from process start to exit (JVM and
Spark start, table creation, every batch, the run's end): the end-to-end time a user sees,
e.g. ``--tables 1,100 --records 400000 --per-trigger 50000 --process-rounds 2`` (``--per-trigger
0``: the pipeline's default batches, a short first batch and then all the rest).

Between in-process rounds Spark's pools of Kafka consumers and of the records they fetched
ahead are emptied, as in a new process: a stopped query's entries stay there for minutes, and
each later round carried all earlier rounds' records (~250 MB after two rounds of three
pipelines), which made the later rounds' garbage collections longer than the first's.
``--spark-conf KEY=VALUE`` sets a Spark setting of the in-process rounds (e.g. an event log).

With ``--jfr DIR`` each measured round is recorded with Java Flight Recorder (the JVM's
"profile" settings, started and stopped around the round through py4j) into
``DIR/<pipeline>_<round>.jfr``; ``python -m bench.jfr_summary`` reads them by phase. With
``--cprofile DIR`` the driver's Python is profiled likewise (``DIR/<pipeline>_<round>.pstats``).

Usage: .venv/bin/python -m bench.routing [--records 1000000] [--rounds 2]
    [--per-trigger 500000] [--tables 20] [--process-rounds 0] [--name routing] [--jfr DIR]
    [--cprofile DIR]
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import re
import sqlite3
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from bench.common import (
    WORK_DIR,
    start_broker,
    start_frazil_run,
    table_metadata,
    write_result,
)
from frazil.config import parse_config
from frazil.engine.runner import run
from frazil.engine.session import build_spark
from frazil.generate.payments import PAYMENTS_SCHEMA, PaymentGenerator
from frazil.generate.producer import ensure_topic, produce_events
from frazil.progress.events import BatchDone, BatchStarted, CommitEvent, Event

#: The routed pipeline's table count by default (bench.atomic_commits routes to as many).
KINDS = 20
GOAL = 0.7
#: Goal for a warm batch's time, routed to 100 tables against one table.
BATCH_GOAL = 1.5
#: frazil's debug line after the one job's commits.
_ONE_JOB = re.compile(
    r"batch (\d+) written to (\d+) table\(s\) in one job \(([\d.]+) s; commits ([\d.]+) s\)"
)


class Timeline(logging.Handler):
    """When each batch started and ended, tables were created (frazil logs it) and committed,
    and the one job's split of the batch (its debug line)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.started: dict[int, float] = {}
        self.done: dict[int, float] = {}
        self.commits: dict[int, list[float]] = {}
        self.creates: list[float] = []
        self.split: dict[int, tuple[float, float]] = {}
        self.read: dict[int, int | None] = {}

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "created table" in message:
            self.creates.append(time.monotonic())
        found = _ONE_JOB.search(message)
        if found:
            self.split[int(found[1])] = (float(found[3]), float(found[4]))

    def on_event(self, event: Event) -> None:
        if isinstance(event, BatchStarted):
            self.started[event.batch_id] = time.monotonic()
        elif isinstance(event, CommitEvent):
            self.commits.setdefault(event.batch_id, []).append(time.monotonic())
        elif isinstance(event, BatchDone):
            self.done[event.batch_id] = event.seconds
            self.read[event.batch_id] = event.read

    def phases(self) -> list[dict[str, Any]]:
        """Per batch: seconds from its start to its last commit and to its end, tables
        created, commits, and the one job's write and commit seconds (None: another way)."""
        out = []
        for batch_id in sorted(self.commits):
            start, commits = self.started[batch_id], self.commits[batch_id]
            creates = [t for t in self.creates if start <= t <= max(commits)]
            job, commit = self.split.get(batch_id, (None, None))
            out.append(
                {
                    "batch": batch_id,
                    "records": self.read.get(batch_id),
                    "total_s": round(max(commits) - start, 3),
                    "batch_s": round(self.done.get(batch_id, max(commits) - start), 3),
                    "write_files_s": job,
                    "commits_s": commit,
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


def _table_records(catalog_db: Path, name: str) -> dict[str, int]:
    """Rows of each table ``bench.<name>`` or ``bench.<name>_*`` holds (its current
    snapshot's ``total-records``), read from the SQLite catalog."""
    con = sqlite3.connect(f"file:{catalog_db}?mode=ro", uri=True)
    try:
        found = con.execute(
            "SELECT table_name FROM iceberg_tables WHERE table_namespace = 'bench' "
            "AND table_name LIKE ?",
            (f"{name}%",),
        ).fetchall()
    finally:
        con.close()
    held = {}
    for (table,) in found:
        if table != name and not table.startswith(f"{name}_"):
            continue
        metadata = table_metadata(catalog_db, "bench", table) or {}
        current = metadata.get("current-snapshot-id")
        summary: dict[str, str] = next(
            (s["summary"] for s in metadata.get("snapshots", []) if s["snapshot-id"] == current),
            {},
        )
        held[table] = int(summary.get("total-records", 0))
    return held


def _drop_kafka_caches(spark: Any) -> None:
    """Empty Spark's pools of Kafka consumers and of the records they fetched ahead, as a new
    process starts: a stopped query's entries stay there for minutes (their group is the
    query's own), so each round would carry every earlier round's records (~400,000, some
    250 MB, after two rounds of three pipelines), and the later rounds' collections copy
    them again and again."""
    jvm = spark.sparkContext._jvm
    module = jvm.java.lang.Class.forName(
        "org.apache.spark.sql.kafka010.consumer.KafkaDataConsumer$"
    )
    instance = module.getField("MODULE$").get(None)
    for name in ("fetchedDataPool", "consumerPool"):
        field = module.getDeclaredField(name)
        field.setAccessible(True)
        field.get(instance).reset()


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _start_jfr(spark: Any, sample_ms: int | None = None) -> Any:
    """A JFR recording with the JVM's "profile" settings, started in the driver JVM; Java
    samples every ``sample_ms`` (None: the settings' 10 ms)."""
    jvm = spark.sparkContext._jvm
    recording = jvm.jdk.jfr.Recording(jvm.jdk.jfr.Configuration.getConfiguration("profile"))
    if sample_ms:
        recording.enable("jdk.ExecutionSample").withPeriod(
            jvm.java.time.Duration.ofMillis(sample_ms)
        )
    recording.start()
    return recording


def _stop_jfr(spark: Any, recording: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    recording.stop()
    recording.dump(spark.sparkContext._jvm.java.io.File(str(path.resolve())).toPath())
    recording.close()


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
    parser.add_argument(
        "--tables",
        default=str(KINDS),
        help="table counts of the routed pipelines, comma-separated (e.g. 1,10,50,100)",
    )
    parser.add_argument(
        "--table-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an Iceberg table property of every table (repeatable), e.g. "
        "write.parquet.compression-codec=snappy",
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting of the in-process rounds (repeatable), e.g. "
        "spark.eventLog.enabled=true",
    )
    parser.add_argument(
        "--process-rounds",
        type=int,
        default=0,
        help="rounds per pipeline run as `frazil run --until-caught-up` processes, timed from "
        "process start (after the in-process rounds)",
    )
    parser.add_argument("--name", default="routing", help="result file: bench/results/<name>.json")
    parser.add_argument(
        "--jfr", type=Path, default=None, help="record each measured round with JFR in this folder"
    )
    parser.add_argument(
        "--jfr-sample-ms", type=int, default=None, help="with --jfr: Java samples every N ms"
    )
    parser.add_argument(
        "--cprofile",
        type=Path,
        default=None,
        help="profile the driver's Python in each measured round (cProfile stats in this folder)",
    )
    args = parser.parse_args()
    counts = sorted({int(n) for n in args.tables.split(",")})
    if not counts or counts[0] < 1 or counts[-1] > 1000:
        parser.error("--tables: counts from 1 to 1000")
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"routing-{run_id}"
    broker = start_broker(f"routing-{run_id}")
    schema = {**PAYMENTS_SCHEMA, "kind": "string"}
    modes = ["single", *(f"routed{n}" for n in counts)]
    try:
        topics: dict[int, str] = {}
        produce_seconds = 0.0
        for n in counts:
            topics[n] = f"bench-routing-{run_id}-{n}"
            ensure_topic(broker.bootstrap, topics[n], partitions=4)
            started = time.monotonic()
            produced = produce_events(
                broker.bootstrap, topics[n], args.records, event_factory=routed_factory(1, n)
            )
            produce_seconds += time.monotonic() - started
            console.print(
                f"produced {produced.count:,} events ({produced.bytes / produced.count:.0f} B "
                f"each) with {n} kinds in {time.monotonic() - started:.1f}s"
            )

        def raw_config_for(mode: str, name: str) -> dict[str, Any]:
            n = counts[0] if mode == "single" else int(mode.removeprefix("routed"))
            pipeline: dict[str, Any] = {
                "name": name,
                "topics": [topics[n]],
                "schema": dict(schema),
                "partition_by": ["days(created_at)"],
            }
            if args.per_trigger:
                pipeline["max_offsets_per_trigger"] = args.per_trigger
            if args.table_property:
                pipeline["table_properties"] = dict(p.split("=", 1) for p in args.table_property)
            if mode == "single":
                pipeline["table"] = f"bench.{name}"
            else:
                pipeline["route"] = {"field": "kind", "table": f"bench.{name}_{{value}}"}
            spark_settings: dict[str, Any] = {"master": "local[2]", "driver_memory": "4g"}
            spark_conf = dict(p.split("=", 1) for p in args.spark_conf)
            if args.jfr:
                # Spark's and Iceberg's stacks are deeper than JFR's default 64 frames.
                spark_conf["spark.driver.extraJavaOptions"] = (
                    "-XX:FlightRecorderOptions:stackdepth=256"
                )
            if spark_conf:
                spark_settings["conf"] = spark_conf
            return {
                "catalog": {"warehouse": str(work / "lake")},
                "kafka": {"bootstrap_servers": broker.bootstrap},
                "state_dir": str(work / "state"),
                "spark": spark_settings,
                "pipelines": [pipeline],
            }

        def config_for(mode: str, name: str) -> Any:
            return parse_config(raw_config_for(mode, name))

        spark = build_spark(config_for("single", "warmup"))
        # Both log "created table" at INFO: the general way, and the one job (with the rows);
        # the one job logs its split at DEBUG.
        table_logs = [
            logging.getLogger("frazil.sink.table"),
            logging.getLogger("frazil.engine.batch"),
        ]
        levels = [table_log.level for table_log in table_logs]
        table_logs[0].setLevel(logging.INFO)
        table_logs[1].setLevel(logging.DEBUG)
        rows: list[dict[str, Any]] = []
        process_rows: list[dict[str, Any]] = []
        problems: list[str] = []
        # Round 0 warms the JVM up (JIT, class loading) for all pipelines and is not counted.
        for round_no in range(args.rounds + 1):
            for mode in modes:
                name = f"{mode}_{round_no}"
                timeline = Timeline()
                for table_log in table_logs:
                    table_log.addHandler(timeline)
                recording = (
                    _start_jfr(spark, args.jfr_sample_ms) if args.jfr and round_no > 0 else None
                )
                profile = cProfile.Profile() if args.cprofile and round_no > 0 else None
                if profile is not None:
                    profile.enable()
                t0 = time.monotonic()
                try:
                    reports = run(config_for(mode, name), until_caught_up=True, spark=spark,
                                  on_event=timeline.on_event)  # fmt: skip
                finally:
                    _drop_kafka_caches(spark)
                    for table_log in table_logs:
                        table_log.removeHandler(timeline)
                    if recording is not None:
                        _stop_jfr(spark, recording, args.jfr / f"{name}.jfr")
                    if profile is not None:
                        profile.disable()
                        args.cprofile.mkdir(parents=True, exist_ok=True)
                        profile.dump_stats(args.cprofile / f"{name}.pstats")
                seconds = time.monotonic() - t0
                phases = timeline.phases()
                report = reports[0]
                tables = dict(report.tables)
                written = sum(tables.values())
                expected_tables = 1 if mode == "single" else int(mode.removeprefix("routed"))
                per_table = args.records // expected_tables
                if (
                    report.records_ingested != args.records
                    or written != args.records
                    or len(tables) != expected_tables
                    or any(abs(n - per_table) > 1 for n in tables.values())
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
                    split = (
                        f" (files {b['write_files_s']:.2f}s, commits {b['commits_s']:.2f}s)"
                        if b["write_files_s"] is not None
                        else ""
                    )
                    console.print(
                        f"  batch {b['batch']}: {b['batch_s']:.2f}s{split}, "
                        f"{b['commits']} commit(s){created}"
                    )
        spark.stop()
        for table_log, level in zip(table_logs, levels, strict=True):
            table_log.setLevel(level)
        # From process start: `frazil run --until-caught-up` as a user runs it (JVM and Spark
        # start, table creation, every batch, the run's end), each mode in turn per round.
        for round_no in range(1, args.process_rounds + 1):
            for mode in modes:
                name = f"{mode}_p{round_no}"
                raw = raw_config_for(mode, name)
                raw["spark"].pop("conf", None)
                path = work / f"{name}.yaml"
                path.write_text(yaml.safe_dump(raw))
                t0 = time.monotonic()
                process = start_frazil_run(path)
                _, stderr = process.communicate()
                seconds = time.monotonic() - t0
                if process.returncode != 0:
                    raise SystemExit(f"{name}: frazil run failed:\n{stderr[-3000:]}")
                held = _table_records(work / "lake" / "catalog.db", name)
                expected_tables = 1 if mode == "single" else int(mode.removeprefix("routed"))
                if len(held) != expected_tables or sum(held.values()) != args.records:
                    problems.append(
                        f"{name}: {len(held)} tables holding {sum(held.values()):,} rows "
                        f"(expected {expected_tables} × {args.records // expected_tables:,})"
                    )
                process_rows.append(
                    {"pipeline": mode, "round": round_no, "tables": len(held), "seconds": seconds}
                )
                console.print(
                    f"{mode} from process start, round {round_no}: {sum(held.values()):,} rows "
                    f"in {len(held)} table(s), {seconds:.1f}s"
                )
    finally:
        broker.down()

    def measured(mode: str) -> list[dict[str, Any]]:
        return [r for r in rows if r["pipeline"] == mode and r["round"] > 0]

    def warm(mode: str, key: str) -> float | None:
        """Median over the measured rounds' batches that created no table, the run's first
        batch aside: every pipeline's first batch is its early commit's (20,000 records, not
        a full batch), so each mode's warm batches cover the same offsets. (Up to 2026-11-30
        the single table's first batch counted too: its median mixed a 20,000-record batch
        with full ones, ~0.9 s against ~1.3 s for the full batch alone.)"""
        values = [
            b[key]
            for r in measured(mode)
            for b in r["batch_phases"]
            if not b["tables_created"]
            # The first only where later batches follow (a run of one batch has no other).
            and (b["batch"] > 0 or len(r["batch_phases"]) == 1)
            and b[key] is not None
        ]
        return _median(values)

    summary: dict[str, dict[str, Any]] = {}
    for mode in modes:
        summary[mode] = {
            "events_per_s": _median([r["records"] / r["seconds"] for r in measured(mode)]),
            "warm_batch_s": warm(mode, "batch_s"),
            "warm_write_files_s": warm(mode, "write_files_s"),
            "warm_commits_s": warm(mode, "commits_s"),
            "process_s": _median([r["seconds"] for r in process_rows if r["pipeline"] == mode]),
        }
    single = summary["single"]
    for mode in modes:
        s = summary[mode]
        s["events_ratio"] = (s["events_per_s"] or 0) / (single["events_per_s"] or 1)
        s["batch_ratio_single"] = (s["warm_batch_s"] or 0) / (single["warm_batch_s"] or 1)
        s["process_ratio_single"] = (
            s["process_s"] / single["process_s"]
            if s["process_s"] is not None and single["process_s"]
            else None
        )
        one = summary.get("routed1")
        s["batch_ratio_routed1"] = (
            (s["warm_batch_s"] or 0) / one["warm_batch_s"] if one and one["warm_batch_s"] else None
        )
    batch = f"{args.per_trigger:,}/batch" if args.per_trigger else "one batch"
    table = Table(
        title=f"routing, {args.records:,} events, tables {args.tables}, 4 partitions, {batch}, "
        "local[2]"
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
    warm_table = Table(
        title="warm batches (median; created no table, not the first; measured rounds)"
    )
    for column in (
        "pipeline", "events/s", "× single", "batch s", "files s", "commits s",
        "batch × single", "batch × 1 routed", "process s", "process × single",
    ):  # fmt: skip
        warm_table.add_column(column, justify="right")

    def fmt(value: float | None, spec: str = ".2f") -> str:
        return "-" if value is None else format(value, spec)

    for mode in modes:
        s = summary[mode]
        warm_table.add_row(
            mode, fmt(s["events_per_s"], ",.0f"), fmt(s["events_ratio"]), fmt(s["warm_batch_s"]),
            fmt(s["warm_write_files_s"]), fmt(s["warm_commits_s"]),
            fmt(s["batch_ratio_single"]), fmt(s["batch_ratio_routed1"]),
            fmt(s["process_s"], ".1f"), fmt(s["process_ratio_single"]),
        )  # fmt: skip
    console.print(warm_table)
    goals: dict[str, Any] = {}
    if "routed20" in summary:
        ratio = summary["routed20"]["events_ratio"]
        goals["routed20_events_ratio"] = {"goal": GOAL, "value": ratio, "met": ratio >= GOAL}
    if "routed100" in summary:
        base = summary.get("routed1", single)
        ratio = (summary["routed100"]["warm_batch_s"] or 0) / (base["warm_batch_s"] or 1)
        goals["routed100_batch_ratio"] = {
            "goal": BATCH_GOAL,
            "against": "routed1" if "routed1" in summary else "single",
            "value": ratio,
            "met": ratio <= BATCH_GOAL,
        }
        process = summary["routed100"]["process_ratio_single"]
        if process is not None:
            goals["routed100_process_ratio"] = {
                "goal": BATCH_GOAL,
                "against": "single",
                "value": process,
                "met": process <= BATCH_GOAL,
            }
    for key, goal in goals.items():
        met = "met" if goal["met"] else "[red]not met[/]"
        console.print(f"{key}: [bold]{goal['value']:.2f}×[/] (goal {goal['goal']}×): {met}")
    for problem in problems:
        console.print(f"[red]row count mismatch[/] {problem}")
    path = write_result(
        args.name,
        {
            "records": args.records,
            "tables": counts,
            "partitions": 4,
            "master": "local[2]",
            "max_offsets_per_trigger": args.per_trigger or None,
            "produce_seconds": produce_seconds,
            "runs": rows,
            "process_runs": process_rows,
            "summary": summary,
            "goals": goals,
            "row_count_problems": problems,
        },
    )
    console.print(f"wrote {path}")
    if problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
