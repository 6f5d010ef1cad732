"""Hot partitions: a 1-partition topic against the same records on 4 partitions.

Spark reads each Kafka partition's offset range in one task, so one partition carrying all
the traffic would leave a core idle. frazil splits offset ranges across the cores by default
(``minPartitions`` / ``maxRecordsPerPartition``, no shuffle). One broker, the same payments
(default 2,000,000) produced to a 4-partition and a 1-partition topic; each round runs
``frazil run --until-caught-up`` (500k records per trigger, as bench/vs_kafka_connect) on

* the 4-partition topic,
* the 1-partition topic (default: split across the cores),
* the 1-partition topic with ``min_partitions: 1`` (splitting off: one task per batch),

measured from process start to the commit of the last record, and reports the 1-partition
events/s as a ratio of the 4-partition events/s of the same round.

Usage: .venv/bin/python -m bench.hot_partition [--records 2000000] [--rounds 1]
"""

from __future__ import annotations

import argparse
import statistics
import uuid
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.common import WORK_DIR, start_broker, write_result
from bench.vs_kafka_connect import run_frazil, verify
from frazil.generate.producer import ensure_topic, produce_events

#: A 1-partition topic reaches at least this share of the 4-partition events/s.
GOAL_RATIO = 0.8

VARIANTS: dict[str, tuple[int, dict[str, Any]]] = {
    "4 partitions": (4, {}),
    "1 partition, split (default)": (1, {}),
    "1 partition, min_partitions: 1": (1, {"min_partitions": 1}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--per-trigger", type=int, default=500_000)
    args = parser.parse_args()
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"hot-{run_id}"
    work.mkdir(parents=True, exist_ok=True)
    broker = start_broker(f"hot-{run_id}")
    runs: list[dict[str, Any]] = []
    try:
        topics = {}
        for partitions in (4, 1):
            topics[partitions] = f"hot-{run_id}-p{partitions}"
            ensure_topic(broker.bootstrap, topics[partitions], partitions=partitions)
            produce_events(broker.bootstrap, topics[partitions], args.records, seed=1)
        for round_no in range(1, args.rounds + 1):
            for name, (partitions, extra) in VARIANTS.items():
                result = run_frazil(
                    work, broker.bootstrap, topics[partitions], args.records, args.per_trigger,
                    extra,
                )  # fmt: skip
                result.update(round=round_no, variant=name)
                result["verify"] = verify(result, args.records)
                assert result["verify"] == {"rows": args.records, "distinct_ids": args.records}
                runs.append(result)
                console.print(f"round {round_no} {name}: {result['seconds']:.1f}s")
    finally:
        broker.down()

    def median(variant: str, key: str) -> float:
        return statistics.median(float(r[key]) for r in runs if r["variant"] == variant)

    out = Table(title=f"{args.records:,} payments, {args.per_trigger:,} per trigger")
    for column in ("variant", "wall s", "events/s", "after 1st commit", "CPU s", "vs 4 partitions"):
        out.add_column(column, justify="right")
    base = median("4 partitions", "events_per_s")
    ratios = {}
    for name in VARIANTS:
        ratios[name] = median(name, "events_per_s") / base
        out.add_row(
            name, f"{median(name, 'seconds'):.1f}", f"{median(name, 'events_per_s'):,.0f}",
            f"{median(name, 'events_per_s_after_first_commit'):,.0f}",
            f"{median(name, 'cpu_s'):.1f}", f"{ratios[name]:.2f}×",
        )  # fmt: skip
    console.print(out)
    split = ratios["1 partition, split (default)"]
    met = "met" if split >= GOAL_RATIO else "NOT met"
    console.print(f"1 partition / 4 partitions: {split:.2f}× (goal ≥ {GOAL_RATIO}×) {met}")
    path = write_result(
        "hot_partition",
        {
            "records": args.records,
            "per_trigger": args.per_trigger,
            "goal_ratio": GOAL_RATIO,
            "ratios_to_4_partitions": ratios,
            "runs": runs,
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
