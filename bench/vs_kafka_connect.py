"""Side by side with the incumbent: Iceberg's Kafka Connect sink vs `frazil run`, same topic.

One private broker, one pre-produced payments topic (default 5,000,000 records, 4
partitions). Then, alternating, each round runs

* the Kafka Connect sink (Iceberg 1.11, standalone Connect 4.1 worker) through the peer
  harness in ``../shared/peers/kafka-connect/run.sh`` (table laid out like frazil's:
  ``KC_LAYOUT=payments``, 1 s commit interval, 2 tasks by default), and
* ``frazil run --until-caught-up`` as a subprocess (``trigger: 1s``,
  ``max_offsets_per_trigger: 500000``, ``days(created_at)``, Parquet zstd),

each from process start into a new table, measured the same way: the end is the commit of
the snapshot that brings the table to every record (that snapshot's own ``timestamp-ms``),
CPU seconds are utime+stime of every process of the tool (``/proc``) when that snapshot is
seen, peak RSS is the sum of their VmHWM (processes that live across two polls: a helper the
JVM spawns shares its memory until it execs). The table is then checked: row count and distinct
ids equal the records produced.

``--first-batch-off`` adds a third job per round, ``frazil-first-batch-off``: frazil with
``first_batch_max_offsets: 0`` (no early first commit, its first batch as large as the others),
the baseline of the time to first commit as it was before the early first commit (2173abf,
2026-11-26).

Usage: .venv/bin/python -m bench.vs_kafka_connect [--records 5000000] [--rounds 2]
       [--partitions 4] [--kc-tasks 2] [--per-trigger 500000] [--first-batch-off] [--tag NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from bench.common import (
    BENCH_DIR,
    WORK_DIR,
    descendants,
    open_table,
    payments_config,
    start_broker,
    start_frazil_run,
    table_metadata,
    write_result,
)
from frazil.config.pipeline import DEFAULT_FIRST_BATCH_MAX_OFFSETS
from frazil.generate.producer import ensure_topic, produce_events

#: The peer harness (not copied into this repository); KC_PEER_DIR overrides where it is.
PEER = Path(
    os.environ.get("KC_PEER_DIR", BENCH_DIR.parent.parent / "shared" / "peers" / "kafka-connect")
)
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and of its children it has reaped (a process of the tree is
    counted alive or, once it exits, in its parent's: the sum over a tree only grows)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / _TICK


def _hwm_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class TableWatch(threading.Thread):
    """Polls an Iceberg JDBC/SQLite catalog (read-only) for a table's snapshots."""

    def __init__(self, catalog_db: Path, namespace: str, name: str, expected: int, root: int):
        super().__init__(daemon=True)
        self.catalog_db, self.namespace, self.name = catalog_db, namespace, name
        self.expected, self.root = expected, root
        self.first_commit_ms: int | None = None
        self.last_commit_ms: int | None = None
        self.cpu_s: float | None = None
        self._cpu_seen: float | None = None
        self.peak_rss_mib = 0.0
        # Peak RSS per process seen in two polls in a row. A helper the JVM spawns (Hadoop's
        # chmod) shares the JVM's memory until it execs, so a poll that catches it at that
        # moment would count the JVM twice; such helpers live for milliseconds.
        self._hwm: dict[int, float] = {}
        self._previous: set[int] = set()
        self.snapshots: list[dict[str, Any]] = []
        self.done = threading.Event()
        self.stop = threading.Event()

    def _metadata(self) -> dict[str, Any] | None:
        return table_metadata(self.catalog_db, self.namespace, self.name)

    def run(self) -> None:
        while not self.stop.is_set():
            if self._poll():
                return
            time.sleep(0.2)
        # The run may end within a poll's interval of its last commit: one more look.
        self._poll()

    def _poll(self) -> bool:
        """One look at the processes and the table: whether it holds every record."""
        pids = descendants(self.root)
        for pid in set(pids) & self._previous:
            self._hwm[pid] = max(self._hwm.get(pid, 0.0), _hwm_mib(pid))
        self._previous = set(pids)
        self.peak_rss_mib = sum(self._hwm.values())
        # After the run's exit its CPU is gone (or a zombie's): the largest reading stands.
        self._cpu_seen = max(self._cpu_seen or 0.0, sum(_cpu_s(p) for p in pids))
        try:
            meta = self._metadata()
        except (OSError, ValueError, sqlite3.Error):  # a file or row being written: next poll
            return False
        if not meta or meta.get("current-snapshot-id") in (None, -1):
            return False
        snaps = sorted(meta.get("snapshots", []), key=lambda s: s["timestamp-ms"])
        data = [s for s in snaps if int(s["summary"].get("added-records", "0")) > 0]
        if data and self.first_commit_ms is None:
            self.first_commit_ms = int(data[0]["timestamp-ms"])
        current = next(s for s in snaps if s["snapshot-id"] == meta["current-snapshot-id"])
        if int(current["summary"].get("total-records", "0")) < self.expected:
            return False
        self.cpu_s = self._cpu_seen
        self.last_commit_ms = int(data[-1]["timestamp-ms"]) if data else None
        self.snapshots = data
        self.done.set()
        return True


def run_frazil(
    work: Path,
    bootstrap: str,
    topic: str,
    records: int,
    per_trigger: int,
    pipeline_extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``frazil run --until-caught-up`` from process start to the commit of the last record."""
    table = f"frazil_{uuid.uuid4().hex[:6]}"
    config = payments_config(
        work,
        bootstrap,
        topic,
        table,
        max_offsets_per_trigger=per_trigger,
        trigger="1s",
        table_properties={"write.parquet.compression-codec": "zstd"},
        **(pipeline_extra or {}),
    )
    path = work / f"{table}.yaml"
    path.write_text(yaml.safe_dump(config))
    started_ms = int(time.time() * 1000)
    process = start_frazil_run(path)
    watch = TableWatch(work / "lake" / "catalog.db", "bench", table, records, process.pid)
    watch.start()
    _, err = process.communicate(timeout=1800)
    watch.stop.set()
    watch.join(5)
    if process.returncode != 0 or watch.last_commit_ms is None:
        raise RuntimeError(f"frazil run failed ({process.returncode}):\n{err[-3000:]}")
    seconds = (watch.last_commit_ms - started_ms) / 1000
    first = (watch.first_commit_ms or watch.last_commit_ms) - started_ms
    rows_after_first = records - int(watch.snapshots[0]["summary"]["added-records"])
    steady = (watch.last_commit_ms - (watch.first_commit_ms or 0)) / 1000
    return {
        "tool": "frazil" if not pipeline_extra else "frazil-first-batch-off",
        "table": f"bench.{table}",
        "seconds": seconds,
        "first_commit_s": first / 1000,
        "events_per_s": records / seconds,
        "events_per_s_after_first_commit": rows_after_first / steady if steady > 0 else None,
        "cpu_s": watch.cpu_s,
        "peak_rss_mib": watch.peak_rss_mib,
        "snapshots": len(watch.snapshots),
        "warehouse": str(work / "lake"),
    }


def run_kafka_connect(work: Path, bootstrap: str, topic: str, tasks: int) -> dict[str, Any]:
    table = f"bench.kc_{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "KC_LAYOUT": "payments", "KC_VERIFY": "0"}
    done = subprocess.run(
        [str(PEER / "run.sh"), bootstrap, topic, table, str(work / "kc"), "1000", str(tasks)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"kafka connect run failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return {
        "tool": "kafka-connect",
        "table": table,
        "seconds": result["seconds"],
        "first_commit_s": result.get("first_commit_s"),
        "events_per_s": result["events_per_s"],
        "events_per_s_after_first_commit": result.get("events_per_s_after_first_commit"),
        "cpu_s": result.get("cpu_s"),
        "peak_rss_mib": result.get("peak_rss_mib"),
        "snapshots": result.get("snapshots"),
        "warehouse": str(work / "kc"),
    }


def verify(run: dict[str, Any], records: int) -> dict[str, int]:
    """Rows and distinct ids in the table, read with PyIceberg."""
    catalog = "lake" if run["tool"].startswith("frazil") else "iceberg"
    table = open_table(catalog, Path(run["warehouse"]), run["table"])
    ids = table.scan(selected_fields=("id",)).to_arrow()["id"]
    return {"rows": len(ids), "distinct_ids": len(set(ids.to_pylist()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kc-tasks", type=int, default=2)
    parser.add_argument("--per-trigger", type=int, default=500_000)
    parser.add_argument(
        "--first-batch-off",
        action="store_true",
        help="also run frazil with first_batch_max_offsets: 0 (no early first commit)",
    )
    parser.add_argument("--tag", default="", help="results file suffix: vs_kafka_connect_<tag>")
    args = parser.parse_args()
    tools = ["kafka-connect", "frazil"] + (
        ["frazil-first-batch-off"] if args.first_batch_off else []
    )
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"vs-kc-{run_id}"
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(PEER / "fetch.sh")], check=True, capture_output=True)
    broker = start_broker(f"vs-kc-{run_id}")
    runs: list[dict[str, Any]] = []
    try:
        topic = f"vs-kc-{run_id}"
        ensure_topic(broker.bootstrap, topic, partitions=args.partitions)
        produce_events(broker.bootstrap, topic, args.records, seed=1)
        for round_no in range(1, args.rounds + 1):
            for tool in tools:
                if tool.startswith("frazil"):
                    off = {"first_batch_max_offsets": 0} if tool != "frazil" else None
                    result = run_frazil(
                        work, broker.bootstrap, topic, args.records, args.per_trigger, off
                    )
                else:
                    result = run_kafka_connect(work, broker.bootstrap, topic, args.kc_tasks)
                result["round"] = round_no
                result["verify"] = verify(result, args.records)
                assert result["verify"] == {"rows": args.records, "distinct_ids": args.records}
                runs.append(result)
                console.print(
                    f"round {round_no} {tool}: {result['seconds']:.1f}s, "
                    f"{result['events_per_s']:,.0f} events/s, {result['cpu_s']:.1f} CPU s"
                )
    finally:
        broker.down()

    def median(tool: str, key: str) -> float:
        # A run committed in one snapshot has no rate after its first commit.
        values = [float(r[key]) for r in runs if r["tool"] == tool and r[key] is not None]
        return statistics.median(values) if values else float("nan")

    out = Table(title=f"{args.records:,} payments, {args.partitions} partitions, same broker")
    columns = ("tool", "round", "wall s", "1st commit s", "events/s", "after 1st commit",
               "CPU s", "µCPU/rec", "peak RSS MiB", "snapshots")  # fmt: skip
    for column in columns:
        out.add_column(column, justify="right")
    for r in runs:
        out.add_row(
            r["tool"], str(r["round"]), f"{r['seconds']:.1f}",
            f"{r['first_commit_s'] or 0:.1f}", f"{r['events_per_s']:,.0f}",
            f"{r['events_per_s_after_first_commit'] or 0:,.0f}", f"{r['cpu_s']:.1f}",
            f"{r['cpu_s'] / args.records * 1e6:.1f}", f"{r['peak_rss_mib']:,.0f}",
            str(r["snapshots"]),
        )  # fmt: skip
    console.print(out)
    ratios = {
        "events_per_s": median("frazil", "events_per_s") / median("kafka-connect", "events_per_s"),
        "events_per_s_after_first_commit": median("frazil", "events_per_s_after_first_commit")
        / median("kafka-connect", "events_per_s_after_first_commit"),
        "cpu_s": median("frazil", "cpu_s") / median("kafka-connect", "cpu_s"),
        "peak_rss": median("frazil", "peak_rss_mib") / median("kafka-connect", "peak_rss_mib"),
        "first_commit_s": median("frazil", "first_commit_s")
        / median("kafka-connect", "first_commit_s"),
    }
    if args.first_batch_off:
        # The early first commit against frazil without it, in the same run.
        ratios["first_commit_s_vs_first_batch_off"] = median("frazil", "first_commit_s") / median(
            "frazil-first-batch-off", "first_commit_s"
        )
    for key, value in ratios.items():
        console.print(f"frazil / kafka-connect, median {key}: [bold]{value:.2f}×[/]")
    path = write_result(
        "vs_kafka_connect" + (f"_{args.tag}" if args.tag else ""),
        {
            "records": args.records,
            "partitions": args.partitions,
            "kc_tasks": args.kc_tasks,
            "frazil_max_offsets_per_trigger": args.per_trigger,
            "frazil_first_batch_max_offsets": DEFAULT_FIRST_BATCH_MAX_OFFSETS,
            "runs": runs,
            "ratios_frazil_to_kafka_connect": ratios,
            "goals": {
                "events_per_s": 1.0,
                "cpu_s": 1.0,
                "after_first_commit": 1.3,
                "first_commit_s": 1.0,
            },
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
