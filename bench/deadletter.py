"""Dead-letter queue: 1% bad records against an all-good topic of the same size, same run.

Two topics (4 partitions each) hold N payments (default 1,000,000); in the second, every
100th record is replaced by a bad one (malformed JSON, a wrong type, a tombstone, in turn).
Both pipelines have the same config: a declared schema, ``partition_by: days(created_at)``,
``errors: {tolerance: all, dlq_table: ...}``, AvailableNow with ``max_offsets_per_trigger``.
Rounds alternate good/bad after a warm-up round, each with fresh pipeline and table names;
the figure is the ratio of median records/s (records read, good and bad). Counts are
checked: the all-good table holds N rows and its dead-letter table none; the other holds
99% and its dead-letter table 1%.

Goal: bad ≥ 0.9× good.

Usage: .venv/bin/python -m bench.deadletter [--records 1000000] [--rounds 2]
"""

from __future__ import annotations

import argparse
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

GOAL = 0.9
BAD_EVERY = 100
_BAD: list[bytes | None] = [b'{"id": "broken", "amount": ', b'{"id": "t", "amount": "lots"}', None]


def factory(seed: int, bad: bool) -> Callable[[], tuple[bytes | None, bytes | None]]:
    """Payments; with ``bad``, every ``BAD_EVERY``-th is replaced by a bad record."""
    generator = PaymentGenerator(seed)
    count = 0

    def make() -> tuple[bytes | None, bytes | None]:
        nonlocal count
        count += 1
        key, value = generator()
        if bad and count % BAD_EVERY == 0:
            return key, _BAD[(count // BAD_EVERY) % len(_BAD)]
        return key, value

    return make


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds per topic")
    parser.add_argument("--per-trigger", type=int, default=250_000)
    args = parser.parse_args()
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"deadletter-{run_id}"
    broker = start_broker(f"deadletter-{run_id}")
    try:
        topics = {mode: f"bench-dlq-{mode}-{run_id}" for mode in ("good", "bad")}
        for mode, topic in topics.items():
            ensure_topic(broker.bootstrap, topic, partitions=4)
            produce_events(
                broker.bootstrap,
                topic,
                args.records,
                event_factory=factory(1, mode == "bad"),  # type: ignore[arg-type]
            )
        console.print(f"produced {args.records:,} records to each of {', '.join(topics.values())}")

        def config_for(mode: str, name: str) -> Any:
            return parse_config(
                {
                    "catalog": {"warehouse": str(work / "lake")},
                    "kafka": {"bootstrap_servers": broker.bootstrap},
                    "state_dir": str(work / "state"),
                    "spark": {"master": "local[2]", "driver_memory": "4g"},
                    "pipelines": [
                        {
                            "name": name,
                            "topics": [topics[mode]],
                            "schema": dict(PAYMENTS_SCHEMA),
                            "partition_by": ["days(created_at)"],
                            "table": f"bench.{name}",
                            "max_offsets_per_trigger": args.per_trigger,
                            "errors": {"tolerance": "all", "dlq_table": f"bench.{name}_dlq"},
                        }
                    ],
                }
            )

        spark = build_spark(config_for("good", "warmup"))
        rows: list[dict[str, Any]] = []
        problems: list[str] = []
        expected_bad = args.records // BAD_EVERY
        for round_no in range(args.rounds + 1):
            for mode in ("good", "bad"):
                name = f"{mode}_{round_no}_{run_id}"
                t0 = time.monotonic()
                reports = run(config_for(mode, name), until_caught_up=True, spark=spark)
                seconds = time.monotonic() - t0
                report = reports[0]
                dead = sum(report.dead_letters.values())
                dlq_rows = spark.table(f"lake.bench.{name}_dlq").count()
                want_dead = expected_bad if mode == "bad" else 0
                if report.table_rows + dlq_rows != args.records or dlq_rows != want_dead:
                    problems.append(
                        f"{name}: {report.table_rows:,} rows + {dlq_rows:,} dead letters "
                        f"(expected {args.records - want_dead:,} + {want_dead:,})"
                    )
                rows.append(
                    {
                        "topic": mode,
                        "round": round_no,
                        "records": args.records,
                        "table_rows": report.table_rows,
                        "dead_letters": dlq_rows,
                        "dead_letters_reported": dead,
                        "batches": report.batches,
                        "seconds": seconds,
                    }
                )
                console.print(
                    f"{mode} round {round_no}: {report.table_rows:,} rows, {dlq_rows:,} dead "
                    f"letters, {report.batches} batches, {seconds:.1f}s"
                )
        spark.stop()
    finally:
        broker.down()

    def median_rate(mode: str) -> float:
        return float(
            statistics.median(
                r["records"] / r["seconds"] for r in rows if r["topic"] == mode and r["round"] > 0
            )
        )

    good, bad = median_rate("good"), median_rate("bad")
    ratio = bad / good
    table = Table(
        title=f"dead-letter queue, {args.records:,} records, 1 in {BAD_EVERY} bad, "
        f"{args.per_trigger:,}/batch, local[2]"
    )
    for column in ("topic", "round", "table rows", "dead letters", "seconds", "records/s"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r["topic"], str(r["round"]) if r["round"] else "0 (warm-up)",
            f"{r['table_rows']:,}", f"{r['dead_letters']:,}", f"{r['seconds']:.1f}",
            f"{r['records'] / r['seconds']:,.0f}",
        )  # fmt: skip
    console.print(table)
    console.print(
        f"1% bad / all good (median records/s): [bold]{ratio:.2f}×[/] (goal ≥ {GOAL}×): "
        f"{'met' if ratio >= GOAL else '[red]not met[/]'}"
    )
    for problem in problems:
        console.print(f"[red]count mismatch[/] {problem}")
    path = write_result(
        "deadletter",
        {
            "records": args.records,
            "bad_every": BAD_EVERY,
            "partitions": 4,
            "master": "local[2]",
            "max_offsets_per_trigger": args.per_trigger,
            "runs": rows,
            "good_records_per_s": good,
            "bad_records_per_s": bad,
            "ratio": ratio,
            "goal_ratio": GOAL,
            "goal_met": ratio >= GOAL,
            "count_problems": problems,
        },
    )
    console.print(f"wrote {path}")
    if problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
