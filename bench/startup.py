"""Start-up: from `frazil run` process start to its first micro-batch running.

One private broker and a payments topic (by default 1,000 records, 4 partitions). Each round runs
`frazil -v run --until-caught-up` into a new table, once per variant, alternating: by default
with the class-data archive built by `frazil setup` and without it (``FRAZIL_CDS=0``);
``--variants default,scripts`` compares the driver JVM started with its kept command and
through Spark's scripts (``FRAZIL_DRIVER_COMMAND=0``); ``no-directives`` without the local
driver's JIT directives (``FRAZIL_JIT_DIRECTIVES=0``: C2 compiles start-up code too);
``pretouch`` with the driver's heap pages touched at start (``-XX:+AlwaysPreTouch``). The times are
taken from the CLI's own stderr lines as they arrive: the query started (``running ...``), the
first micro-batch started (``batch N started``, logged with ``--verbose``), the first commit,
and the process exit; CPU seconds are those of every process of the run (``/proc``, polled).

Usage: .venv/bin/python -m bench.startup [--rounds 3] [--variants default,no-cds]
       [--records 1000]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from bench.common import WORK_DIR, descendants, payments_config, start_broker, write_result
from frazil.generate.producer import ensure_topic, produce_events

#: First micro-batch running within this many seconds of process start, warm cache.
GOAL_S = 6.0

_MARKS = {
    "query_started_s": re.compile(r"^running "),
    "first_batch_s": re.compile(r"batch \d+ started"),
    "first_commit_s": re.compile(r"batch \d+: [\d,]+ records"),
}


#: Each variant's environment, and its label in the table.
VARIANTS: dict[str, tuple[dict[str, str], str]] = {
    "default": ({}, "with class-data archive"),
    "no-cds": ({"FRAZIL_CDS": "0"}, "FRAZIL_CDS=0"),
    "scripts": ({"FRAZIL_DRIVER_COMMAND": "0"}, "through Spark's scripts"),
    "no-directives": ({"FRAZIL_JIT_DIRECTIVES": "0"}, "C2 on start-up code too"),
    "pretouch": ({}, "heap pages touched at start"),
    "thp": ({}, "heap in transparent huge pages"),
}
#: A variant's driver JVM options (``spark.driver.extraJavaOptions``; the user's win).
JAVA_OPTIONS: dict[str, str] = {
    "pretouch": "-XX:+AlwaysPreTouch",
    "thp": "-XX:+UseTransparentHugePages",
}


def run_once(work: Path, bootstrap: str, topic: str, variant: str) -> dict[str, Any]:
    table = f"startup_{uuid.uuid4().hex[:6]}"
    config = payments_config(work, bootstrap, topic, table)
    if variant in JAVA_OPTIONS:
        spark = config.setdefault("spark", {})
        spark.setdefault("conf", {})["spark.driver.extraJavaOptions"] = JAVA_OPTIONS[variant]
    path = work / f"{table}.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "FRAZIL_CDS": "1", "FRAZIL_DRIVER_COMMAND": "1", **VARIANTS[variant][0]}
    started = time.monotonic()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "frazil.cli.entry",
            "-v",
            "run",
            "-c",
            str(path),
            "--until-caught-up",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stderr is not None
    cpu: dict[int, float] = {}
    done = threading.Event()

    def watch() -> None:
        # Each process's utime+stime, the last seen kept: one that exits keeps its count.
        while not done.is_set():
            for pid in descendants(process.pid):
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                cpu[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            done.wait(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    seen: dict[str, Any] = {"variant": variant, "cds": env["FRAZIL_CDS"] != "0"}
    tail: list[str] = []
    for line in process.stderr:
        tail = [*tail[-40:], line]
        for key, pattern in _MARKS.items():
            if key not in seen and pattern.search(line):
                seen[key] = round(time.monotonic() - started, 2)
    process.wait()
    seen["exit_s"] = round(time.monotonic() - started, 2)
    done.set()
    watcher.join()
    seen["cpu_s"] = round(sum(cpu.values()), 2)
    if process.returncode != 0 or "first_batch_s" not in seen:
        raise RuntimeError(f"frazil run failed ({process.returncode}):\n{''.join(tail)}")
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=1000, help="records in the topic")
    parser.add_argument(
        "--variants",
        default="default,no-cds",
        help=f"comma-separated, alternating each round: {', '.join(VARIANTS)}",
    )
    args = parser.parse_args()
    variants = args.variants.split(",")
    if unknown := [v for v in variants if v not in VARIANTS]:
        parser.error(f"--variants: unknown {', '.join(unknown)}")
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"startup-{run_id}"
    broker = start_broker(f"startup-{run_id}")
    runs: list[dict[str, Any]] = []
    try:
        topic = f"startup_{run_id}"
        ensure_topic(broker.bootstrap, topic, partitions=4)
        produce_events(broker.bootstrap, topic, args.records, seed=1, progress=False)
        for round_no in range(1, args.rounds + 1):
            for variant in variants:
                result = {"round": round_no, **run_once(work, broker.bootstrap, topic, variant)}
                console.print(f"round {round_no} {variant}: {result}")
                runs.append(result)
    finally:
        broker.down()

    def median(variant: str, key: str) -> float:
        return float(
            statistics.median(r[key] for r in runs if r["variant"] == variant and key in r)
        )

    table = Table(title="frazil run: seconds from process start (medians)")
    for col in ("", "query started", "first batch running", "first commit", "exit", "CPU s"):
        table.add_column(col, justify="right")
    summary: dict[str, dict[str, float]] = {}
    for variant in variants:
        label = VARIANTS[variant][1]
        row = {k: median(variant, k) for k in (*_MARKS, "exit_s", "cpu_s")}
        summary[label] = row
        table.add_row(label, *(f"{row[k]:.2f}" for k in (*_MARKS, "exit_s", "cpu_s")))
    console.print(table)
    best = summary[VARIANTS[variants[0]][1]]["first_batch_s"]
    console.print(f"first micro-batch running after {best:.2f} s (goal ≤ {GOAL_S:g} s)")
    path = write_result(
        "startup",
        {
            "goal_s": GOAL_S,
            "rounds": args.rounds,
            "records": args.records,
            "variants": variants,
            "medians": summary,
            "runs": runs,
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
