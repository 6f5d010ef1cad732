"""Lake health: the same ingestion with and without `frazil maintain`, side by side.

Two topics get the same steady rate of payments (default 2,000 events/s each, for 10 minutes)
from `frazil generate` subprocesses. One `frazil run` ingests both at ``trigger: 1s`` into two
tables (``days(created_at)``); a `frazil maintain` process looks after the first table only
(a pass every minute; compaction, delete/manifest rewrites, expiry of snapshots older than
2 minutes beyond the newest 10; orphans). At the end, for both tables: data files, files per
partition, snapshots, metadata files and bytes, and the time of a representative query
(filter + aggregate over the latest day, median of 5). Then the unmaintained table is
compacted once (all files rewritten, manifests rewritten) and the query timed again.

Goals, for the maintained table:
* files per partition ≤ 2 × ⌈partition bytes ÷ target size⌉ + files committed since the last
  compaction;
* the query within 1.2× of the same data compacted once.

Usage: .venv/bin/python -m bench.lake_health [--seconds 600] [--rate 2000]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import uuid
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from bench.common import (
    WORK_DIR,
    payments_config,
    start_broker,
    start_frazil,
    stop_process,
    write_result,
)
from frazil.config import parse_config
from frazil.engine.session import build_spark
from frazil.generate.producer import ensure_topic

MAINTENANCE = {
    "interval": "60s",
    "expire": {"older_than": "2m", "retain_last": 10},
}
QUERY_RATIO_GOAL = 1.2


def _query_seconds(spark: Any, table: str, since: str, rounds: int = 5) -> float:
    query = (
        f"SELECT type, count(*), sum(amount) FROM {table} "
        f"WHERE created_at >= TIMESTAMP '{since}' GROUP BY type"
    )
    spark.sql(query).collect()  # warm: planning caches, JIT
    times = []
    for _ in range(rounds):
        t0 = time.monotonic()
        spark.sql(query).collect()
        times.append(time.monotonic() - t0)
    return float(statistics.median(times))


def _stats(spark: Any, config: Any, table: str) -> dict[str, Any]:
    from frazil.maintenance.passes import TableRef, measure

    pipeline = next(p for p in config.pipelines if p.table == table)
    health = measure(spark, config, TableRef(table, pipeline))
    qualified = f"lake.{table}"
    snapshots = spark.sql(
        f"SELECT summary FROM {qualified}.snapshots ORDER BY committed_at"
    ).collect()
    since = 0
    for row in snapshots:
        summary = row[0] or {}
        if summary.get("frazil.maintenance") == "compaction":
            since = 0
        else:
            since += int(summary.get("added-data-files", "0"))
    return {
        "data_files": health.data_files,
        "data_bytes": health.data_bytes,
        "records": health.records,
        "partitions": [
            {"partition": p.partition, "files": p.data_files, "bytes": p.data_bytes}
            for p in health.partitions
        ],
        "snapshots": health.snapshots,
        "manifests": health.manifests,
        "metadata_files": health.metadata_files,
        "metadata_bytes": health.metadata_bytes,
        "delete_files": health.delete_files,
        "target_file_bytes": health.target_file_bytes,
        "files_since_last_compaction": since,
        "score": health.score,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=600)
    parser.add_argument("--rate", type=int, default=2_000)
    args = parser.parse_args()
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"lake-health-{run_id}"
    work.mkdir(parents=True, exist_ok=True)
    broker = start_broker(f"lake-health-{run_id}")
    count = args.rate * args.seconds
    try:
        topics = {"maintained": f"lh-m-{run_id}", "plain": f"lh-p-{run_id}"}
        for topic in topics.values():
            ensure_topic(broker.bootstrap, topic, partitions=4)
        both: dict[str, Any] = payments_config(
            work, broker.bootstrap, topics["maintained"], "maintained", trigger="1s"
        )
        plain = payments_config(work, broker.bootstrap, topics["plain"], "plain", trigger="1s")
        both["pipelines"] += plain["pipelines"]
        both["state_dir"] = str(work / "state")
        both["maintenance"] = MAINTENANCE
        one = {**both, "pipelines": both["pipelines"][:1]}
        (work / "both.yaml").write_text(yaml.safe_dump(both))
        (work / "maintained.yaml").write_text(yaml.safe_dump(one))
        run = start_frazil("run", "-c", str(work / "both.yaml"))
        time.sleep(20)  # the run's JVM up before events flow
        maintain = start_frazil("maintain", "-c", str(work / "maintained.yaml"))
        generate = ["generate", "-n", str(count), "-r", str(args.rate), "-b", broker.bootstrap]
        generators = [start_frazil(*generate, "-t", topic) for topic in topics.values()]
        started = time.monotonic()
        console.print(
            f"ingesting {args.rate:,} events/s into each of 2 tables for {args.seconds}s, "
            "one of them maintained"
        )
        for g in generators:
            g.wait(args.seconds + 300)
        produce_seconds = time.monotonic() - started
        time.sleep(10)  # the last triggers commit
        codes = {"maintain": stop_process(maintain), "run": stop_process(run)}
        console.print(f"stopped after {produce_seconds:.0f}s of production; exit codes {codes}")

        config = parse_config(both, base_dir=work)
        spark = build_spark(config)
        since = time.strftime("%Y-%m-%d 00:00:00", time.gmtime(time.time() - 3600))
        results: dict[str, Any] = {
            kind: _stats(spark, config, f"bench.{kind}") for kind in ("maintained", "plain")
        }
        results["plain"]["query_s"] = _query_seconds(spark, "lake.bench.plain", since)
        t0 = time.monotonic()
        spark.sql(
            "CALL lake.system.rewrite_data_files(table => 'lake.bench.plain', "
            "options => map('rewrite-all', 'true'))"
        ).collect()
        spark.sql("CALL lake.system.rewrite_manifests(table => 'lake.bench.plain')").collect()
        results["plain"]["compact_once_s"] = time.monotonic() - t0
        # Alternating, after both are warm: the machine's noise falls on both alike.
        maintained_s, compacted_s = [], []
        for _ in range(3):
            maintained_s.append(_query_seconds(spark, "lake.bench.maintained", since, 3))
            compacted_s.append(_query_seconds(spark, "lake.bench.plain", since, 3))
        results["maintained"]["query_s"] = statistics.median(maintained_s)
        results["plain"]["query_after_compaction_s"] = statistics.median(compacted_s)
        results["plain"]["data_files_after_compaction"] = int(
            spark.sql("SELECT count(*) FROM lake.bench.plain.data_files").first()[0]
        )
        spark.stop()
    finally:
        broker.down()

    kept = results["maintained"]
    target = kept["target_file_bytes"]
    bounds = [
        {
            "partition": p["partition"],
            "files": p["files"],
            "bound": 2 * math.ceil(p["bytes"] / target) + kept["files_since_last_compaction"],
        }
        for p in kept["partitions"]
    ]
    files_ok = all(b["files"] <= b["bound"] for b in bounds)
    ratio = kept["query_s"] / results["plain"]["query_after_compaction_s"]
    view = Table(title=f"lake health after {args.seconds}s at {args.rate:,} events/s, trigger 1s")
    for column in ("table", "rows", "data files", "snapshots", "manifests", "metadata", "query"):
        view.add_column(column, justify="right")
    for kind, r in results.items():
        view.add_row(
            kind, f"{r['records']:,}", f"{r['data_files']:,}", f"{r['snapshots']:,}",
            f"{r['manifests']:,}", f"{r['metadata_files']} ({r['metadata_bytes'] / 1024:.0f} KiB)",
            f"{r['query_s'] * 1000:.0f} ms",
        )  # fmt: skip
    plain = results["plain"]
    view.add_row(
        "plain, compacted once", f"{plain['records']:,}",
        f"{plain['data_files_after_compaction']:,}", "", "", "",
        f"{plain['query_after_compaction_s'] * 1000:.0f} ms",
    )  # fmt: skip
    console.print(view)
    console.print(
        f"files per partition within bound: {'met' if files_ok else '[red]not met[/]'} {bounds}"
    )
    console.print(
        f"query, maintained / compacted once: [bold]{ratio:.2f}×[/] (goal ≤ {QUERY_RATIO_GOAL}×)"
    )
    path = write_result(
        "lake_health",
        {
            "seconds": args.seconds,
            "rate": args.rate,
            "trigger": "1s",
            "maintenance": MAINTENANCE,
            "exit_codes": codes,
            "results": results,
            "file_bounds": bounds,
            "files_goal_met": files_ok,
            "query_ratio": ratio,
            "query_goal_met": ratio <= QUERY_RATIO_GOAL,
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
