"""Upsert/CDC: changes/s applied with MERGE vs plain appends of the same topic, same run.

One topic (4 partitions, keyed by id) holds N changes (default 1,000,000) over K keys
(default 100,000): each key's first change inserts it, later ones update it (80%) or delete
it (20%), and a change to a deleted key re-inserts it. Two pipelines read it with the same
declared schema on local[2] with an AvailableNow trigger and the same
``max_offsets_per_trigger`` (250,000: a 5 s trigger at 50,000 changes/s):

* append: every change becomes a row (``write`` left at append);
* cdc: ``write: {mode: cdc, key: [id], op_field: op}`` — changes collapse per key and
  apply as one MERGE per batch on a merge-on-read table (position deletes, format 2).

Rounds alternate after a warm-up round, with fresh pipelines and tables; the figure is the
ratio of median changes/s. The cdc table is checked row for row against the stream replayed
in Python. Afterwards the last cdc table is compacted with Iceberg's ``rewrite_data_files``
(data files with deletes rewritten), then ``rewrite_position_delete_files``: delete files
before and after.

Goal (the upsert/CDC issue): cdc ≥ 0.5× append.

Usage: .venv/bin/python -m bench.changes [--records 1000000] [--keys 100000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import random
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
from frazil.generate.producer import ensure_topic, produce_events

GOAL = 0.5
SCHEMA = {"id": "long", "op": "string", "seq": "long", "name": "string", "amount": "double"}


Factory = Callable[[], tuple[bytes | None, bytes]]


def changes(seed: int, keys: int) -> tuple[Factory, dict[int, Any]]:
    """A change factory and the table it leaves (filled as changes are made)."""
    rng = random.Random(seed)
    live: dict[int, Any] = {}
    seq = 0

    def make() -> tuple[bytes | None, bytes]:
        nonlocal seq
        key = seq if seq < keys else rng.randrange(keys)
        seq += 1
        if key not in live:
            change = {"id": key, "op": "I", "seq": seq, "name": f"n{seq}", "amount": seq / 4}
            live[key] = (seq, change["name"], change["amount"])
        elif rng.random() < 0.2:
            change = {"id": key, "op": "D"}
            del live[key]
        else:
            change = {"id": key, "op": "U", "seq": seq, "name": f"u{seq}", "amount": -seq / 4}
            live[key] = (seq, change["name"], change["amount"])
        return str(key).encode(), json.dumps(change, separators=(",", ":")).encode()

    return make, live


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds per pipeline")
    parser.add_argument("--per-trigger", type=int, default=250_000)
    args = parser.parse_args()
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"changes-{run_id}"
    broker = start_broker(f"changes-{run_id}")
    try:
        topic = f"bench-changes-{run_id}"
        ensure_topic(broker.bootstrap, topic, partitions=4)
        factory, expected = changes(1, args.keys)
        started = time.monotonic()
        produced = produce_events(broker.bootstrap, topic, args.records, event_factory=factory)
        produce_seconds = time.monotonic() - started
        console.print(
            f"produced {produced.count:,} changes over {args.keys:,} keys "
            f"({len(expected):,} live at the end) in {produce_seconds:.1f}s"
        )

        def config_for(mode: str, name: str) -> Any:
            pipeline: dict[str, Any] = {
                "name": name,
                "topics": [topic],
                "schema": dict(SCHEMA),
                "table": f"bench.{name}",
                "max_offsets_per_trigger": args.per_trigger,
                "trigger": "5s",
            }
            if mode == "cdc":
                pipeline["write"] = {"mode": "cdc", "key": ["id"], "op_field": "op"}
            return parse_config(
                {
                    "catalog": {"warehouse": str(work / "lake")},
                    "kafka": {"bootstrap_servers": broker.bootstrap},
                    "state_dir": str(work / "state"),
                    "spark": {"master": "local[2]", "driver_memory": "4g"},
                    "pipelines": [pipeline],
                }
            )

        spark = build_spark(config_for("append", "warmup"))
        rows: list[dict[str, Any]] = []
        problems: list[str] = []
        last_cdc = ""
        for round_no in range(args.rounds + 1):  # round 0 warms the JVM up
            for mode in ("append", "cdc"):
                name = f"{mode}_{round_no}_{run_id}"
                t0 = time.monotonic()
                reports = run(config_for(mode, name), until_caught_up=True, spark=spark)
                seconds = time.monotonic() - t0
                report = reports[0]
                table = f"lake.bench.{name}"
                count = int(spark.table(table).count())
                if mode == "cdc":
                    last_cdc = table
                    got = {
                        int(r[0]): (r[1], r[2], r[3])
                        for r in spark.table(table).select("id", "seq", "name", "amount").collect()
                    }
                    if got != expected:
                        problems.append(f"{name}: the table is not the replayed stream")
                elif count != args.records:
                    problems.append(f"{name}: {count:,} rows, expected {args.records:,}")
                rows.append(
                    {
                        "pipeline": mode,
                        "round": round_no,
                        "records": report.records_ingested,
                        "rows": count,
                        "batches": report.batches,
                        "snapshots": report.snapshots,
                        "data_files": report.data_files,
                        "seconds": seconds,
                    }
                )
                console.print(
                    f"{mode} round {round_no}: {report.records_ingested:,} changes, "
                    f"{count:,} rows, {report.batches} batches, {seconds:.1f}s"
                )
        deletes_before = int(spark.sql(f"SELECT count(*) FROM {last_cdc}.delete_files").first()[0])
        data_before = int(spark.sql(f"SELECT count(*) FROM {last_cdc}.data_files").first()[0])
        t0 = time.monotonic()
        spark.sql(
            f"CALL lake.system.rewrite_data_files(table => '{last_cdc}', options => map("
            "'delete-file-threshold', '1', 'remove-dangling-deletes', 'true', "
            "'rewrite-all', 'true'))"
        ).collect()
        # Position deletes left pointing at files no longer live are dropped by this one.
        spark.sql(
            f"CALL lake.system.rewrite_position_delete_files(table => '{last_cdc}', "
            "options => map('rewrite-all', 'true'))"
        ).collect()
        compact_seconds = time.monotonic() - t0
        deletes_after = int(spark.sql(f"SELECT count(*) FROM {last_cdc}.delete_files").first()[0])
        data_after = int(spark.sql(f"SELECT count(*) FROM {last_cdc}.data_files").first()[0])
        after = {
            int(r[0]): (r[1], r[2], r[3])
            for r in spark.table(last_cdc).select("id", "seq", "name", "amount").collect()
        }
        if after != expected:
            problems.append("after compaction the table is not the replayed stream")
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

    append, cdc = median_rate("append"), median_rate("cdc")
    ratio = cdc / append
    table = Table(
        title=f"changes: {args.records:,} over {args.keys:,} keys, 4 partitions, "
        f"{args.per_trigger:,}/batch, local[2]"
    )
    for column in ("pipeline", "round", "rows", "batches", "seconds", "changes/s"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r["pipeline"], str(r["round"]) if r["round"] else "0 (warm-up)", f"{r['rows']:,}",
            str(r["batches"]), f"{r['seconds']:.1f}", f"{r['records'] / r['seconds']:,.0f}",
        )  # fmt: skip
    console.print(table)
    console.print(
        f"cdc / append (median changes/s): [bold]{ratio:.2f}×[/] (goal ≥ {GOAL}×): "
        f"{'met' if ratio >= GOAL else '[red]not met[/]'}"
    )
    console.print(
        f"delete files: {deletes_before} before compaction, {deletes_after} after "
        f"(data files {data_before} → {data_after}, {compact_seconds:.1f}s)"
    )
    for problem in problems:
        console.print(f"[red]mismatch[/] {problem}")
    path = write_result(
        "changes",
        {
            "records": args.records,
            "keys": args.keys,
            "live_keys_at_end": len(expected),
            "partitions": 4,
            "master": "local[2]",
            "max_offsets_per_trigger": args.per_trigger,
            "produce_seconds": produce_seconds,
            "runs": rows,
            "append_changes_per_s": append,
            "cdc_changes_per_s": cdc,
            "ratio": ratio,
            "goal_ratio": GOAL,
            "goal_met": ratio >= GOAL,
            "delete_files_before_compaction": deletes_before,
            "delete_files_after_compaction": deletes_after,
            "data_files_before_compaction": data_before,
            "data_files_after_compaction": data_after,
            "compaction_seconds": compact_seconds,
            "problems": problems,
        },
    )
    console.print(f"wrote {path}")
    if problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
