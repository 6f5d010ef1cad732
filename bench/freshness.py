"""Freshness: per-record latency from Kafka to a committed Iceberg snapshot.

A steady 5,000 events/s is produced (by a `frazil generate` subprocess) while a job ingests
with a 1 s trigger: first a warm-up (default 15 s: the JVM compiles the micro-batch's code on
its first batches), then the measured 2 minutes. For every record:
latency = commit time of the snapshot that made it visible − its Kafka record timestamp.
Reported as p50 / p99 / max over the measured window, and over everything including the cold
start. The jobs are measured one after the other in the same run, each on its own topic:
`frazil run`, the minimal hand-written Structured Streaming job (bench/baseline_job.py) and
Iceberg's Kafka Connect sink (``kafka-connect``: the peer harness in
``../shared/peers/kafka-connect``, 2 tasks, committing as often as frazil's trigger unless
``--sink-commit-ms`` says otherwise, each record's Kafka timestamp
added by Kafka Connect's own ``InsertField`` transform). Latencies are read the same way for
every table, with PyIceberg: each data file's rows against the snapshot that added the file.

Usage: .venv/bin/python -m bench.freshness [--rate 5000] [--seconds 120]
       [--jobs frazil,baseline,kafka-connect]
"""

from __future__ import annotations

import argparse
import os
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

from bench.common import WORK_DIR, open_table, start_broker, write_result
from frazil.config.durations import parse_duration
from frazil.generate.payments import PAYMENTS_SCHEMA
from frazil.generate.producer import ensure_topic
from frazil.local.broker import LocalBroker

#: p99 Kafka timestamp → visible in a snapshot, at 5,000 events/s with a 1 s trigger.
GOAL_P99_MS = 2000


def latencies(loaded: Any) -> tuple[list[int], list[int]]:
    """Per-record (Kafka timestamp ms, latency ms) of a PyIceberg table: each data file's rows
    against the commit time of the snapshot that added the file (a manifest entry keeps that
    snapshot's id even when a later commit merges manifests)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    committed = {s.snapshot_id: s.timestamp_ms for s in loaded.metadata.snapshots}
    entries = loaded.inspect.entries().to_pylist()
    stamps: list[int] = []
    lags: list[int] = []
    for entry in entries:
        path = entry["data_file"]["file_path"].removeprefix("file:")
        column = pq.read_table(path, columns=["_kafka_timestamp"]).column(0)
        per_ms = 1
        if pa.types.is_timestamp(column.type):  # frazil's column; the sink's is epoch millis
            per_ms = {"s": 1, "ms": 1, "us": 1000, "ns": 1_000_000}[column.type.unit]
            column = pc.cast(column, pa.int64())
        ts = [v // per_ms for v in column.to_pylist()]
        at = committed[entry["snapshot_id"]]
        stamps.extend(ts)
        lags.extend(at - t for t in ts)
    return stamps, lags


def _summary(stamps: list[int], lags: list[int], since_ms: int) -> dict[str, float]:
    chosen = sorted(lag for t, lag in zip(stamps, lags, strict=True) if t >= since_ms)

    def percentile(q: float) -> float:  # nearest rank
        return float(chosen[min(len(chosen) - 1, max(0, round(q * len(chosen)) - 1))])

    return {
        "records": len(chosen),
        "p50_ms": percentile(0.5),
        "p99_ms": percentile(0.99),
        "max_ms": float(chosen[-1]),
    }


def _job_command(job: str, work: Path, broker: LocalBroker, topic: str, trigger: str) -> list[str]:
    if job == "frazil":
        config_path = work / "frazil.yaml"
        config_path.write_text(
            yaml.safe_dump(
                {
                    "catalog": {"warehouse": str(work / "lake")},
                    "kafka": {"bootstrap_servers": broker.bootstrap},
                    "state_dir": str(work / "state"),
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
        return [sys.executable, "-m", "frazil.cli.entry", "run", "-c", str(config_path)]
    seconds = parse_duration(trigger)
    return [
        sys.executable, "-m", "bench.baseline_job", "--bootstrap", broker.bootstrap,
        "--topic", topic, "--warehouse", str(work / "lake"), "--table", "lake.bench.fresh",
        "--checkpoint", str(work / "checkpoint"), "--trigger-seconds", str(seconds),
    ]  # fmt: skip


def _produce(broker: LocalBroker, topic: str, count: int, rate: int) -> None:
    subprocess.run(
        [sys.executable, "-m", "frazil.cli.entry", "generate", "-t", topic, "-n", str(count),
         "-r", str(rate), "-b", broker.bootstrap, "--output", "json"],
        check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip


def _kafka_connect(
    work: Path, broker: LocalBroker, topic: str, count: int, rate: int, commit_ms: int
) -> None:
    """The sink through the peer harness, which returns once the table holds ``count`` rows;
    it commits every ``commit_ms``."""
    from bench.vs_kafka_connect import PEER

    extra = work / "sink-extra.properties"
    extra.write_text(
        "transforms=kafkaTs\n"
        "transforms.kafkaTs.type=org.apache.kafka.connect.transforms.InsertField$Value\n"
        "transforms.kafkaTs.timestamp.field=_kafka_timestamp\n"
    )
    env = {
        **os.environ,
        "KC_LAYOUT": "payments",
        "KC_VERIFY": "0",
        "KC_EXPECTED_RECORDS": str(count),
        "KC_SINK_EXTRA": str(extra),
    }
    command = [str(PEER / "run.sh"), broker.bootstrap, topic, "bench.fresh", str(work)]
    sink = subprocess.Popen(
        [*command, f"{commit_ms}", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    time.sleep(12)  # the worker starts and joins its consumer group
    _produce(broker, topic, count, rate)
    _out, err = sink.communicate(timeout=600)
    if sink.returncode != 0:
        raise RuntimeError(f"kafka connect run failed:\n{err[-3000:]}")


def sink_commit_ms(args: argparse.Namespace) -> int:
    """The sink's commit interval: ``--sink-commit-ms``, else frazil's trigger (one cadence)."""
    if args.sink_commit_ms is not None:
        return int(args.sink_commit_ms)
    return int(parse_duration(args.trigger) * 1000)


def measure(job: str, broker: LocalBroker, args: argparse.Namespace) -> dict[str, Any]:
    """Run one job under a steady load and return its latency figures."""
    work = WORK_DIR / f"freshness-{uuid.uuid4().hex[:6]}-{job}"
    work.mkdir(parents=True, exist_ok=True)
    topic = f"fresh-{work.name}"
    ensure_topic(broker.bootstrap, topic, partitions=4)
    count = args.rate * (args.warmup + args.seconds)
    produce_started_ms = int(time.time() * 1000)
    if job == "kafka-connect":
        # Its warm-up window starts with production, as for the others.
        produce_started_ms += 12_000
        _kafka_connect(work, broker, topic, count, args.rate, sink_commit_ms(args))
        catalog, warehouse = "iceberg", work
    else:
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
        produce_started_ms = int(time.time() * 1000)
        _produce(broker, topic, count, args.rate)
        time.sleep(8)  # let the last records commit
        process.send_signal(signal.SIGTERM)
        process.wait(120)
        catalog, warehouse = "lake", work / "lake"
    loaded = open_table(catalog, warehouse, "bench.fresh")
    stamps, lags = latencies(loaded)
    result: dict[str, Any] = {"produced": count, "rows_in_table": len(lags)}
    windows = (("measured", produce_started_ms + args.warmup * 1000), ("all", 0))
    for label, since in windows:
        result[label] = _summary(stamps, lags, since)
    result["snapshots"] = len(loaded.metadata.snapshots)
    assert result["rows_in_table"] == count, f"{job}: {result['rows_in_table']} rows of {count}"
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--trigger", default="1s")
    parser.add_argument("--warmup", type=int, default=15, help="seconds produced before")
    parser.add_argument("--jobs", default="frazil,baseline")
    parser.add_argument(
        "--sink-commit-ms",
        type=int,
        default=None,
        help="the Kafka Connect sink's commit interval (default: the trigger's)",
    )
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
        f"(+{args.warmup}s warm-up), trigger {args.trigger}, sink commits every "
        f"{sink_commit_ms(args)} ms"
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
    for other in ("baseline", "kafka-connect"):
        if "frazil" in results and other in results:
            ratio = results["frazil"]["measured"]["p99_ms"] / results[other]["measured"]["p99_ms"]
            summary[f"p99_ratio_frazil_to_{other.replace('-', '_')}"] = ratio
            console.print(f"p99 frazil / {other}: {ratio:.2f}× (lower is fresher)")
    path = write_result(
        "freshness",
        {
            "rate": args.rate,
            "seconds": args.seconds,
            "warmup_seconds": args.warmup,
            "trigger": args.trigger,
            "sink_commit_ms": sink_commit_ms(args),
            "goal_p99_ms": GOAL_P99_MS,
            "jobs": results,
            **summary,
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
