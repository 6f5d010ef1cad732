"""Read-only commands: seconds from process start to answer, with the tables' metadata read by
PyIceberg (the default) vs through Spark's metadata tables (``FRAZIL_READS=spark``), same run.

For each table count N (``--tables``, default ``1,100``) one routed pipeline writes N tables
(``route: {field: kind, table: "ro<N>.t_{value}"}``) and a dead-letter table: ``--records``
payments per table (kinds ``k00`` … in turn) and, after every 50th, one that does not decode, in two
runs of ``--until-caught-up`` (so each table holds a few snapshots and a marker). Then each
command runs ``--repeat`` times as a user runs it, a fresh ``frazil`` process with ``-o
json``, and the median wall time is reported:

* ``tables``, ``table health T``, ``optimize --dry-run``, ``dlq show``: PyIceberg and Spark;
* ``status`` (PyIceberg only: it never started Spark);
* ``plan`` (it resolves the transforms with Spark's analyzer): by default on a session without
  a catalog, the tables read through Iceberg's catalog API; ``FRAZIL_READS=spark`` on the run's
  full session, the tables read through Spark's catalog.

Each command's answer is checked: N tables (plus the dead-letter table) listed, the dead
letters counted as produced.

Goal: ≤ 3 s on the quickstart's warehouse (N = 1)
and ≤ 10 s for 100 tables.

Usage: .venv/bin/python -m bench.readonly [--tables 1,100] [--records 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Producer
from rich.console import Console
from rich.table import Table

from bench.common import WORK_DIR, start_broker, write_result
from bench.routing import routed_factory
from frazil.generate.payments import PAYMENTS_SCHEMA
from frazil.generate.producer import ensure_topic

FRAZIL = str(Path(sys.executable).parent / "frazil")
#: One record in this many does not decode (the dead-letter table has rows to group).
BAD_EVERY = 50


def _produce(bootstrap: str, topic: str, tables: int, count: int, seed: int) -> int:
    """Produce ``count`` records over ``tables`` kinds; return how many are bad."""
    ensure_topic(bootstrap, topic, partitions=4)
    make = routed_factory(seed, tables)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    bad = 0
    for i in range(count):
        key, value = make()
        producer.produce(topic, value, key)
        if i % BAD_EVERY == BAD_EVERY - 1:  # besides, so every kind gets its records
            producer.produce(topic, b"{not json")
            bad += 1
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(30)
    return bad


def _timed(args: list[str], env: dict[str, str]) -> tuple[float, Any]:
    started = time.perf_counter()
    done = subprocess.run(
        [FRAZIL, *args, "-o", "json"], env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"frazil {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")
    return seconds, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", default="1,100")
    parser.add_argument("--records", type=int, default=200, help="records per table")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    counts = [int(n) for n in args.tables.split(",")]
    work = WORK_DIR / "readonly"
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    broker = start_broker("readonly")
    console = Console()
    results: list[dict[str, Any]] = []
    try:
        for n in counts:
            topic = f"readonly-{n}"
            config = {
                "catalog": {"warehouse": str(work / "lake")},
                "kafka": {"bootstrap_servers": broker.bootstrap},
                "state_dir": str(work / "state"),
                "pipelines": [
                    {
                        "name": f"ro{n}",
                        "topics": [topic],
                        "schema": {**PAYMENTS_SCHEMA, "kind": "string"},
                        "route": {"field": "kind", "table": f"ro{n}.t_{{value}}"},
                        "partition_by": ["days(created_at)"],
                        "errors": {"tolerance": "all", "dlq_table": f"ro{n}.dead"},
                    }
                ],
            }
            path = work / f"ro{n}.yaml"
            path.write_text(yaml.safe_dump(config))
            bad = 0
            for half in range(2):
                bad += _produce(broker.bootstrap, topic, n, n * args.records // 2, seed=half)
                subprocess.run(
                    [FRAZIL, "run", "-c", str(path), "--until-caught-up", "-o", "json"],
                    check=True, capture_output=True,
                )  # fmt: skip
            ways = {"pyiceberg": dict(os.environ), "spark": {**os.environ, "FRAZIL_READS": "spark"}}
            commands: dict[str, list[str]] = {
                "tables": ["tables"],
                "table health": ["table", "health", f"ro{n}.t_k00"],
                "optimize --dry-run": ["optimize", "--dry-run"],
                "dlq show": ["dlq", "show"],
                "status": ["status"],
                "plan": ["plan"],
            }
            for label, command in commands.items():
                row: dict[str, Any] = {"tables": n, "command": label}
                for way, env in ways.items():
                    if label == "status" and way == "spark":
                        continue
                    times = []
                    for _ in range(args.repeat):
                        seconds, shown = _timed([*command, "-c", str(path)], env)
                        times.append(seconds)
                    _check(label, shown, n, bad)
                    row[way] = statistics.median(times)
                results.append(row)
                console.print(row)
    finally:
        broker.down()
    view = Table(title="read-only commands: seconds from process start (median)")
    for column in ("tables", "command", "default", "FRAZIL_READS=spark", "spark / default"):
        view.add_column(column, justify="right" if column != "command" else "left")
    for r in results:
        ice, spark = r.get("pyiceberg"), r.get("spark")
        ratio = f"{spark / ice:.1f}×" if ice and spark else "—"
        view.add_row(
            str(r["tables"]), r["command"], f"{ice:.2f}" if ice else "—",
            f"{spark:.2f}" if spark else "—", ratio,
        )  # fmt: skip
    console.print(view)
    out = write_result("readonly", {"records_per_table": args.records, "results": results})
    console.print(f"wrote {out}")


def _check(label: str, shown: Any, tables: int, bad: int) -> None:
    """The answer holds what was written: every table, every dead letter."""
    if label == "tables" and len(shown) != tables + 1:
        raise SystemExit(f"tables listed {len(shown)} tables, expected {tables + 1}")
    if label == "dlq show" and sum(g["records"] for g in shown) != bad:
        raise SystemExit(f"dlq show counted {sum(g['records'] for g in shown)}, produced {bad}")
    if label == "optimize --dry-run" and len(shown) != tables + 1:
        raise SystemExit(f"optimize --dry-run planned {len(shown)} tables")


if __name__ == "__main__":
    main()
