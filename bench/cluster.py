"""A Spark cluster against local[2]: the same records, the same pipeline, one run of each.

With ``--rounds N`` the pair runs N times on the same broker and stack (local[2] first in
each round), into new tables; the ratios are each round's and their median.

One private broker, one pre-produced payments topic (default 1,000,000 records, 4
partitions). Then

* ``local[2]``, the embedded default: the Iceberg JDBC catalog on SQLite, tables and state
  on the local disk, executors inside the driver JVM; and
* the local production-shaped stack (``frazil.local.stack``, on free ports under
  ``bench/work/``): a Spark standalone master and two workers of one core each, the tables
  on the S3-compatible object store through Iceberg's REST catalog (S3FileIO), the
  checkpoints on ``s3a://``,

each ``frazil run --until-caught-up`` as a subprocess from process start into a new table,
measured the same way as ``bench/vs_kafka_connect.py``: the end is the commit of the snapshot
that brings the table to every record (its own ``timestamp-ms``); "after the first commit"
leaves start-up and the first batch out. The tables are read back through PyIceberg (the
SQLite catalog, the REST catalog and the object store) and checked: as many rows and
distinct ids as records produced. While the cluster runs, the process table is watched for
Python workers (``pyspark.daemon``/``pyspark.worker``): frazil runs no Python on executors.

``--modes local,local-stack,cluster`` adds ``local[2]`` against the stack's object store and
REST catalog (checkpoints on ``s3a://`` too): it splits the cluster's cost into what storage
costs and what the driver/executor split costs.

The goal is the cluster at ≥ 0.8× local[2]'s events/s: the cost of the network between
driver and executors and of the object store, on the same two cores.

Usage: .venv/bin/python -m bench.cluster [--records 1000000] [--partitions 4]
       [--per-trigger 250000] [--rounds 1] [--tag NAME]
       [--modes local,local-stack,cluster]
       [--executor-java-options "-XX:+UseSerialGC …"]
       [--variant 'NAME:spark.key=value;spark.key2=value2' …]

``--variant`` adds a cluster run with those Spark settings after the other modes (each
compared with the same round's local[2]): an A/B of settings in one run. A key
``frazil.NAME`` sets frazil's own ``spark.NAME`` (``'cold:frazil.warm_executors=false'``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pyiceberg.catalog import load_catalog
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.common import (
    WORK_DIR,
    free_port,
    open_table,
    payments_config,
    start_broker,
    write_result,
)
from bench.process_watch import Watch
from frazil.generate.producer import ensure_topic, produce_events
from frazil.local import stack as local_stack

# Wide enough for the results table when the output is a pipe or a log (80 columns otherwise).
console = Console(width=None if sys.stdout.isatty() else 120)

#: The goal: the cluster's events/s against local[2]'s.
GOAL = 0.8


def run_frazil(
    label: str,
    config: dict[str, Any],
    path: Path,
    records: int,
    load_table: Callable[[str], Any],
    env: dict[str, str] | None = None,
    workers: set[int] | None = None,
) -> dict[str, Any]:
    """``frazil run --until-caught-up`` from process start to the commit of the last record.

    Every batch line frazil prints is echoed as a progress line.
    """
    path.write_text(yaml.safe_dump(config))
    table = config["pipelines"][0]["table"]
    watch = Watch(workers or set())
    watch.start()
    started_ms = int(time.time() * 1000)
    process = subprocess.Popen(
        [sys.executable, "-m", "frazil.cli.entry", "run", "-c", str(path), "--until-caught-up"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    tail: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        tail = [*tail[-40:], line]
        if " batch " in line:
            console.print(f"  {escape(label)}: {escape(line.strip())}", highlight=False)
    code = process.wait()
    watch.stop.set()
    watch.join(5)
    cpu = watch.cpu_by_role()
    threads = watch.cpu_by_thread()
    archives = ", ".join(f"{r} {p} {'yes' if m else 'NO'}" for p, (r, m) in watch.archives.items())
    console.print(f"  {escape(label)}: frazil's class-data archive mapped: {archives}")
    for role, groups in threads.items():
        shares = ", ".join(f"{g} {s:.1f}" for g, s in groups.items())
        console.print(f"  {escape(label)}: {role} CPU s by thread: {escape(shares)}")
    if code != 0:
        raise RuntimeError(f"frazil run ({label}) failed ({code}):\n{''.join(tail)}")
    handle = load_table(table)
    snapshots = sorted(handle.snapshots(), key=lambda s: s.timestamp_ms)
    # A snapshot without data (a marker commit) has no "added-records" in its summary.
    data = [s for s in snapshots if int((s.summary or {}).get("added-records") or 0) > 0]
    first, last = data[0], data[-1]
    ids = handle.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist()
    seconds = (last.timestamp_ms - started_ms) / 1000
    steady = (last.timestamp_ms - first.timestamp_ms) / 1000
    after_first = records - int(first.summary["added-records"])
    return {
        "mode": label,
        "table": table,
        "rows": len(ids),
        "distinct_ids": len(set(ids)),
        "seconds": seconds,
        "first_commit_s": (first.timestamp_ms - started_ms) / 1000,
        "events_per_s": records / seconds,
        "events_per_s_after_first_commit": after_first / steady if steady > 0 else None,
        "snapshots": len(data),
        "python_workers_seen": len(watch.python_workers) if workers else None,
        "cpu_s_by_role": cpu,
        "cpu_s": round(sum(cpu.values()), 2),
        "cpu_s_by_thread": threads,
        "jvms_mapping_frazils_archive": {
            f"{role} {pid}": mapped for pid, (role, mapped) in sorted(watch.archives.items())
        },
    }


def start_stack(state_dir: Path) -> local_stack.StackAddresses:
    """The object store, the REST catalog and the two-worker cluster, on free ports."""
    ports = local_stack.StackPorts(
        s3=free_port(),
        rest_catalog=free_port(),
        spark_master=free_port(),
        spark_master_ui=free_port(),
        spark_worker_uis=(free_port(), free_port()),
    )
    started = time.monotonic()
    found = local_stack.up(state_dir, [local_stack.SPARK_CLUSTER, local_stack.REST_CATALOG], ports)
    console.print(f"stack up in {time.monotonic() - started:.0f}s: {', '.join(found.addresses())}")
    return found


def worker_pids(state_dir: Path) -> set[int]:
    """The stack's Spark worker JVMs."""
    workers = local_stack.status(state_dir).spark_cluster.workers
    return {int(w["pid"]) for w in workers if w["pid"] is not None}


MODES = ("local", "local-stack", "cluster")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--per-trigger", type=int, default=250_000)
    parser.add_argument("--tag", default=time.strftime("%Y-%m-%d", time.gmtime()))
    parser.add_argument("--rounds", type=int, default=1, help="every mode in turn, this many times")
    parser.add_argument(
        "--modes",
        default="local,cluster",
        help="comma-separated, local first: local (local[2], embedded default), local-stack "
        "(local[2] against the stack's object store and REST catalog), cluster",
    )
    parser.add_argument(
        "--executor-java-options",
        default="",
        help="spark.executor.extraJavaOptions for the cluster's executors (an experiment)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME:key=value;key=value — one more cluster run with these Spark settings",
    )
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or modes[0] != "local" or any(m not in MODES for m in modes):
        parser.error(f"--modes: 'local' first, then any of {', '.join(MODES[1:])}")
    variants: dict[str, dict[str, str]] = {}
    for text in args.variant:
        name, _, settings = text.partition(":")
        pairs = [s.partition("=") for s in settings.split(";") if s.strip()]
        if not name or name in MODES or any(not k or not sep for k, sep, _ in pairs):
            parser.error(f"--variant {text!r}: NAME:key=value;key=value")
        variants[name] = {k.strip(): v.strip() for k, _, v in pairs}
    modes += list(variants)
    run_id = uuid.uuid4().hex[:6]
    work = (WORK_DIR / f"cluster-{run_id}").resolve()
    console.print(f"work folder {work}")
    broker = start_broker(f"cluster-{run_id}")
    rows: list[dict[str, Any]] = []
    try:
        stack = start_stack(work / "stack")
        topic = f"bench-cluster-{run_id}"
        ensure_topic(broker.bootstrap, topic, partitions=args.partitions)
        console.print(f"producing {args.records:,} events on {args.partitions} partitions…")
        started = time.monotonic()
        produce_events(broker.bootstrap, topic, args.records, seed=1)
        console.print(f"produced {args.records:,} events in {time.monotonic() - started:.1f}s")
        pipeline = {"max_offsets_per_trigger": args.per_trigger, "trigger": "1s"}
        catalog = load_catalog("stack", **stack.pyiceberg_properties())
        for n in range(1, args.rounds + 1):
            # Each round: every mode in turn, each into new tables and checkpoints.
            suffix = "" if args.rounds == 1 else f"_r{n}"
            for mode in modes:
                name = f"{mode.replace('-', '_')}{suffix}"
                config = payments_config(work, broker.bootstrap, topic, name, **pipeline)
                if mode == "local":
                    config["spark"] = {"master": "local[2]", "driver_memory": "2g"}
                    console.print(f"round {n}: local[2], the embedded default")
                    row = run_frazil(
                        mode,
                        config,
                        work / f"{name}.yaml",
                        args.records,
                        lambda t: open_table("lake", work / "lake", t),
                    )
                else:
                    config.update(stack.config())  # spark.master, the REST catalog, storage
                    config["state_dir"] = f"s3a://{stack.bucket}/bench-state-{name}"
                    if mode == "local-stack":
                        config["spark"] = {"master": "local[2]", "driver_memory": "2g"}
                    else:
                        # The driver plans and commits; the executors write.
                        config["spark"]["driver_memory"] = "1g"
                        conf = dict(variants.get(mode, {}))
                        for key in [k for k in conf if k.startswith("frazil.")]:
                            # frazil's own spark: keys (e.g. frazil.warm_executors=false)
                            config["spark"][key[len("frazil.") :]] = yaml.safe_load(conf.pop(key))
                        if args.executor_java_options:
                            conf.setdefault(
                                "spark.executor.extraJavaOptions", args.executor_java_options
                            )
                        if conf:
                            config["spark"]["conf"] = conf
                    console.print(f"round {n}: {mode}: {', '.join(stack.addresses())}")
                    row = run_frazil(
                        mode,
                        config,
                        work / f"{name}.yaml",
                        args.records,
                        catalog.load_table,
                        env=stack.aws_environment(),
                        workers=worker_pids(work / "stack") if mode != "local-stack" else None,
                    )
                rows.append({**row, "round": n})
    finally:
        local_stack.down(work / "stack")
        broker.down()

    for row in rows:
        if row["rows"] != args.records or row["distinct_ids"] != args.records:
            raise SystemExit(f"{row['mode']}: {row['rows']:,} rows, {row['distinct_ids']:,} ids")
    # Each mode against the same round's local[2].
    ratios: dict[str, list[tuple[float, float]]] = {m: [] for m in modes[1:]}
    for n in range(1, args.rounds + 1):
        of_round = {r["mode"]: r for r in rows if r["round"] == n}
        base = of_round["local"]
        for mode in modes[1:]:
            ours = of_round[mode]
            after = (ours["events_per_s_after_first_commit"] or 0) / (
                base["events_per_s_after_first_commit"] or 1
            )
            ratios[mode].append((ours["events_per_s"] / base["events_per_s"], after))
    table = Table(title=f"{args.records:,} events, {args.partitions} partitions")
    for column in ("round", "mode", "rows", "seconds", "first commit s", "events/s",
                   "events/s after 1st commit", "snapshots", "Python workers"):  # fmt: skip
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            str(r["round"]),
            r["mode"],
            f"{r['rows']:,}",
            f"{r['seconds']:.1f}",
            f"{r['first_commit_s']:.1f}",
            f"{r['events_per_s']:,.0f}",
            f"{r['events_per_s_after_first_commit'] or 0:,.0f}",
            str(r["snapshots"]),
            "-" if r["python_workers_seen"] is None else str(r["python_workers_seen"]),
        )
    console.print(table)
    cpu_table = Table(title="CPU seconds during each run, by process")
    roles = sorted({role for r in rows for role in r["cpu_s_by_role"]})
    for column in ("round", "mode", *roles, "all"):
        cpu_table.add_column(column, justify="right")
    for r in rows:
        by_role = r["cpu_s_by_role"]
        cells = [f"{by_role[role]:.1f}" if role in by_role else "-" for role in roles]
        cpu_table.add_row(str(r["round"]), r["mode"], *cells, f"{r['cpu_s']:.1f}")
    console.print(cpu_table)
    medians: dict[str, dict[str, float]] = {}
    for mode, pairs in ratios.items():
        for n, (end_to_end, after) in enumerate(pairs, 1):
            console.print(
                f"round {n}: {mode} {end_to_end:.2f}× end to end, {after:.2f}× after the first "
                "commit"
            )
        medians[mode] = {
            "end_to_end": statistics.median(p[0] for p in pairs),
            "after_first_commit": statistics.median(p[1] for p in pairs),
        }
        goal = f" (goal ≥ {GOAL}×)" if mode == "cluster" else ""
        console.print(
            f"{mode} / local[2] (events/s, median of {len(pairs)}): "
            f"[bold]{medians[mode]['end_to_end']:.2f}×[/] end to end, "
            f"{medians[mode]['after_first_commit']:.2f}× after the first commit{goal}"
        )
    cluster = medians.get("cluster", {})
    path = write_result(
        f"cluster-{args.tag}",
        {
            "records": args.records,
            "partitions": args.partitions,
            "per_trigger": args.per_trigger,
            "modes": modes,
            "runs": rows,
            "rounds": args.rounds,
            "ratio": cluster.get("end_to_end"),
            "ratio_after_first_commit": cluster.get("after_first_commit"),
            "ratios_against_local": medians,
            "round_ratios": {
                mode: [{"end_to_end": e, "after_first_commit": a} for e, a in pairs]
                for mode, pairs in ratios.items()
            },
            "goal_ratio": GOAL,
            "executor_java_options": args.executor_java_options,
            "variants": variants,
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
