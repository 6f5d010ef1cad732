"""Variant shredding: the same payments as typed columns, as a variant, as a shredded variant.

One topic of payments (JSON, 4 partitions) is landed three times, unpartitioned, in one
Spark session on local[2] (after a warm-up ingest of the typed layout into a table of its
own): by frazil's typed JSON decoder (``typed``: the six columns), whole
into one variant column (``variant``), and whole into one variant column written shredded
(``shredded``: ``table_properties: {write.parquet.shred-variants: "true"}``, Iceberg 1.11
inferring each file's shredded paths from its first rows). Then, per table: its bytes
(the data files' sizes), its files, the ingest's events/s, and the median wall time of
queries that filter on a path (``type``) and read another (``amount``), after a warm-up.

Usage: .venv/bin/python -m bench.variant_shred [--records 200000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.common import WORK_DIR, payments_config, start_broker, write_result
from frazil.config import parse_config
from frazil.engine.runner import run
from frazil.engine.session import build_spark
from frazil.generate.producer import ensure_topic, produce_events

LAYOUTS = ("typed", "variant", "shredded")

#: Per query: its SQL over typed columns, and over the variant column ``payment``.
QUERIES: dict[str, tuple[str, str]] = {
    "count where type": (
        "SELECT count(*) FROM {t} WHERE type = 'debit'",
        "SELECT count(*) FROM {t} WHERE payment:type::string = 'debit'",
    ),
    "sum amount where type": (
        "SELECT sum(amount) FROM {t} WHERE type = 'debit'",
        "SELECT sum(payment:amount::bigint) FROM {t} WHERE payment:type::string = 'debit'",
    ),
    "sum amount (all)": (
        "SELECT sum(amount) FROM {t}",
        "SELECT sum(payment:amount::bigint) FROM {t}",
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of each query")
    args = parser.parse_args()
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"variant-shred-{run_id}"
    broker = start_broker(f"variant-shred-{run_id}")
    topic = f"bench-shred-{run_id}"
    try:
        ensure_topic(broker.bootstrap, topic, partitions=4)
        produce_events(broker.bootstrap, topic, args.records, seed=1)

        def config_for(layout: str) -> Any:
            data = payments_config(work, broker.bootstrap, topic, layout, format="json")
            pipeline = data["pipelines"][0]
            del pipeline["partition_by"]
            if layout in ("typed", "warmup"):
                pipeline["json_decoder"] = "frazil"
            else:
                del pipeline["schema"]
                pipeline["variant"] = "payment"
            if layout == "shredded":
                pipeline["table_properties"] = {"write.parquet.shred-variants": "true"}
            data["spark"] = {"master": "local[2]", "driver_memory": "4g"}
            return parse_config(data)

        spark = build_spark(config_for("typed"))
        # A warm-up ingest, so that no layout pays the JVM's first compilations.
        run(config_for("warmup"), until_caught_up=True, spark=spark)
        result: dict[str, dict[str, Any]] = {}
        for layout in LAYOUTS:
            t0 = time.monotonic()
            (report,) = run(config_for(layout), until_caught_up=True, spark=spark)
            seconds = time.monotonic() - t0
            table = f"lake.bench.{layout}"
            files = spark.sql(
                f"SELECT count(*) AS n, sum(file_size_in_bytes) AS b FROM {table}.files"
            ).first()
            result[layout] = {
                "rows": report.table_rows,
                "ingest_seconds": seconds,
                "ingest_events_per_s": report.table_rows / seconds,
                "files": files["n"],
                "bytes": files["b"],
                "queries": {},
            }
            console.print(f"{layout}: {report.table_rows:,} rows in {seconds:.1f}s")
        answers: dict[str, set[Any]] = {}
        for query, (typed_sql, variant_sql) in QUERIES.items():
            for layout in LAYOUTS:
                sql = (typed_sql if layout == "typed" else variant_sql).format(
                    t=f"lake.bench.{layout}"
                )
                answer = spark.sql(sql).first()[0]  # warm-up, and the answer
                if layout == "shredded" and query == "count where type":
                    scan = spark.sql(f"EXPLAIN {sql}").first()[0]
                    result[layout]["scan"] = [line for line in scan.splitlines() if "Scan" in line]
                answers.setdefault(query, set()).add(answer)
                times = []
                for _ in range(args.repeats):
                    t0 = time.monotonic()
                    spark.sql(sql).collect()
                    times.append(time.monotonic() - t0)
                result[layout]["queries"][query] = statistics.median(times)
        spark.stop()
    finally:
        broker.down()
    for query, found in answers.items():
        assert len(found) == 1, f"{query}: the layouts disagree: {found}"

    shown = Table(title=f"{args.records:,} payments, median of {args.repeats} query runs")
    shown.add_column("layout")
    for column in ("MB", "files", "ingest ev/s", *QUERIES):
        shown.add_column(column, justify="right")
    for layout, r in result.items():
        shown.add_row(
            layout,
            f"{r['bytes'] / 1e6:.2f}",
            str(r["files"]),
            f"{r['ingest_events_per_s']:,.0f}",
            *(f"{r['queries'][q] * 1000:.0f} ms" for q in QUERIES),
        )
    console.print(shown)
    path = write_result(
        "variant_shred",
        {"records": args.records, "repeats": args.repeats, "layouts": result},
    )
    console.print(f"written {path}")


if __name__ == "__main__":
    main()
