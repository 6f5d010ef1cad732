"""The baseline: a minimal hand-written Structured Streaming job, as a user would write it.

Kafka source -> ``from_json`` -> ``writeStream.format("iceberg")`` (Iceberg's own streaming
sink) into a table of the same layout as frazil's (``PARTITIONED BY days(created_at)``).

Run as a module it streams continuously until SIGTERM (used by bench/freshness.py):
``python -m bench.baseline_job --bootstrap B --topic T --warehouse W --table lake.bench.t``
"""

from __future__ import annotations

import argparse
from typing import Any

from frazil.config import parse_config
from frazil.engine.session import build_spark
from frazil.generate.payments import SPARK_SCHEMA_DDL


def start_baseline(
    spark: Any,
    bootstrap: str,
    topic: str,
    table: str,
    checkpoint: str,
    *,
    trigger_seconds: float | None = None,
    kafka_timestamp: bool = False,
) -> Any:
    """Create the table and start the query; AvailableNow unless ``trigger_seconds`` is set."""
    from pyspark.sql import functions as F

    extra = ", _kafka_timestamp TIMESTAMP" if kafka_timestamp else ""
    spark.sql(
        f"CREATE TABLE {table} ({SPARK_SCHEMA_DDL}{extra}) USING iceberg "
        "PARTITIONED BY (days(created_at))"
    )
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    columns = [F.from_json(F.col("value").cast("string"), SPARK_SCHEMA_DDL).alias("v")]
    if kafka_timestamp:
        columns.append(F.col("timestamp").alias("_kafka_timestamp"))
    parsed = raw.select(*columns).select("v.*", *(["_kafka_timestamp"] if kafka_timestamp else []))
    writer = (
        parsed.writeStream.format("iceberg")
        .outputMode("append")
        .option("checkpointLocation", checkpoint)
    )
    if trigger_seconds is None:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{int(trigger_seconds * 1000)} milliseconds")
    return writer.toTable(table)


def main() -> None:
    parser = argparse.ArgumentParser(description="continuous baseline job (until SIGTERM)")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--trigger-seconds", type=float, default=1.0)
    args = parser.parse_args()
    config = parse_config(
        {
            "catalog": {"warehouse": args.warehouse},
            "spark": {"driver_memory": "2g"},
            "pipelines": [{"name": "baseline", "topics": [args.topic], "table": "bench.x"}],
        }
    )
    spark = build_spark(config)
    query = start_baseline(
        spark,
        args.bootstrap,
        args.topic,
        args.table,
        args.checkpoint,
        trigger_seconds=args.trigger_seconds,
        kafka_timestamp=True,
    )
    print("running baseline", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main()
