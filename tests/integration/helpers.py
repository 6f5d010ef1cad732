"""Shared helpers for integration tests: producing known records, reading tables back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from frazil.generate.payments import PAYMENTS_SCHEMA, generate_payments
from frazil.generate.producer import ensure_topic, produce_events


def produce_payments(
    bootstrap: str, topic: str, count: int, seed: int, partitions: int = 4
) -> list[str]:
    """Produce ``count`` seeded payments and return their ids (in production order)."""
    ensure_topic(bootstrap, topic, partitions=partitions)
    produce_events(bootstrap, topic, count, progress=False, seed=seed)
    return [json.loads(value)["id"] for _, value in generate_payments(count, seed=seed)]


def end_offsets(bootstrap: str, topic: str, partitions: int = 4) -> dict[int, int]:
    """The high watermark (next offset) of every partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "frazil-tests"})
    try:
        result = {}
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            result[p] = high
        return result
    finally:
        consumer.close()


def last_planned_at_ms(config: Any) -> int:
    """When Spark planned the newest batch of the config's first pipeline (its offset log)."""
    offsets = Path(config.checkpoint_for(config.pipelines[0])) / "offsets"
    newest = max((p for p in offsets.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    return int(json.loads(newest.read_text().splitlines()[1])["batchTimestampMs"])


def payments_pipeline(name: str, topic: str, table: str, **extra: Any) -> dict[str, Any]:
    pipeline: dict[str, Any] = {
        "name": name,
        "topics": [topic],
        "table": table,
        "schema": dict(PAYMENTS_SCHEMA),
        "partition_by": ["days(created_at)"],
        "trigger": "1s",
    }
    pipeline.update(extra)
    return pipeline


def drain(spark: Any, config_path: Path, **options: Any) -> list[Any]:
    """Run the config file's pipelines ``--until-caught-up`` in the session's Spark.

    The last restart of a test whose kills and restarts are `frazil run` subprocesses: the
    same engine, checkpoint and table markers as a fresh `frazil run --until-caught-up`, in a
    process other than the killed ones, without a JVM start (15-30 s) of its own. Raises what
    the run raises, where the command would have exited non-zero.

    Args:
        spark: The session's SparkSession.
        config_path: The frazil YAML the test's subprocesses ran.
        **options: More keyword arguments of :func:`frazil.engine.runner.run` (``on_commit``).
    """
    from frazil.config import load_config
    from frazil.engine.runner import run

    return run(load_config(config_path), until_caught_up=True, spark=spark, **options)


def in_one_process(
    *commands: list[str], env: dict[str, str] | None = None, timeout: float = 900
) -> list[subprocess.CompletedProcess[str]]:
    """Several ``frazil`` commands one after the other in one process (one Spark driver JVM
    for all of them: CI time), each as if it had run on its own: its exit code, its stdout,
    its stderr. A command that exits non-zero does not stop the ones after it.

    Args:
        *commands: Each command's arguments after ``frazil`` (``["sql", "-c", path, ...]``).
        env: Variables set for the process, over this one's.
        timeout: For all of them together.
    """
    script = Path(__file__).with_name("cli_in_one_process.py")
    names = [f"c{i}" for i in range(len(commands))]
    args = [w for name, c in zip(names, commands, strict=True) for w in ("---", name, "--", *c)]
    done = subprocess.run(
        [sys.executable, str(script), *args[1:]],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )

    def part(text: str, name: str) -> tuple[str, str]:
        start = text.index(f"=== {name}\n") + len(f"=== {name}\n")
        end = text.index(f"=== {name} exit ", start)
        return text[start:end], text[end:].split("\n", 1)[0].rsplit(" ", 1)[-1]

    results = []
    for name, command in zip(names, commands, strict=True):
        try:
            out, code = part(done.stdout, name)
            err, _ = part(done.stderr, name)
        except ValueError:  # the process died before this command ended
            raise AssertionError(done.stdout[-3000:] + done.stderr[-3000:]) from None
        results.append(subprocess.CompletedProcess(command, int(code), out, err))
    return results


def table_ids(spark: Any, table: str) -> list[str]:
    return [row[0] for row in spark.sql(f"SELECT id FROM lake.{table}").collect()]


def frazil_snapshots(spark: Any, table: str) -> list[dict[str, str]]:
    rows = spark.sql(f"SELECT summary FROM lake.{table}.snapshots ORDER BY committed_at").collect()
    return [dict(row["summary"]) for row in rows]
