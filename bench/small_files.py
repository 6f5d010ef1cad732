"""What a Parquet file costs beyond its rows: one file against many small ones, apart from Spark.

A routed batch of 380,000 records to 100 tables over two days writes 200 files of ~1,900 rows
where one table writes two; what each file costs beyond its rows is what a warm routed batch
pays on top of the single table's. This benchmark measures it alone: a JVM (no Spark job, no
Kafka) writes the same payments-like rows with Iceberg's writers for Spark rows, as frazil's
routed job does (``dev.frazil.spark.SparkRowWriters``, Parquet zstd, frazil's local file
system), into one file and into ``--files`` small files, with each writer setting in turn, on
one thread, the variants' order rotating each round. Per variant: the median time of a round
after the warm-up rounds, split into opening the writers, writing the rows and closing the
files (the row group's pages, dictionaries or their fallback, the footer), and the bytes
written.

Variants: ``one`` (every row in one file, the table's settings), ``frazil`` (small files with
the writer properties frazil's routed job gives a table expected to get fewer rows than a
page, ``RoutedWrites.SMALL_FILE_PROPERTIES``: no dictionaries), ``dict16k`` (small files with
16 KiB dictionaries, the job's setting before), ``table`` (small files with the table's own
2 MiB dictionaries).

Usage: .venv/bin/python -m bench.small_files [--rows 380000] [--files 200] [--rounds 12]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.common import WORK_DIR, write_result
from frazil.jvm.build import compile_jar
from frazil.jvm.classpath import spark_jars
from frazil.jvm.fetch import java_executable, pyspark_jars_dir

#: The harness's source, compiled against frazil's jars (it uses a package-private class).
SOURCE = Path(__file__).parent / "java" / "dev" / "frazil" / "spark" / "SmallFiles.java"

#: name → writer properties over the table's (Iceberg's names, as a Spark write's options).
VARIANTS: dict[str, dict[str, str]] = {
    "one": {},
    "frazil": {"parquet.enable.dictionary": "false"},
    "dict16k": {"write.parquet.dict-size-bytes": "16384"},
    "table": {},
    "one_nodict": {"parquet.enable.dictionary": "false"},
    "one_dict256k": {"write.parquet.dict-size-bytes": "262144"},
}

#: Rounds not counted: the JIT compiles the writers' code during the first ones.
WARM_UP_ROUNDS = 4


def _variant_arg(name: str) -> str:
    return name + "=" + ",".join(f"{k}:{v}" for k, v in VARIANTS[name].items())


def run_harness(rows: int, files: int, rounds: int, work: Path) -> list[dict[str, Any]]:
    """Compile the harness (once per run) and run it: one dict per variant and round."""
    classpath = [pyspark_jars_dir() / "*", *spark_jars()]
    jar = work / "small-files.jar"
    compile_jar([SOURCE], classpath, jar, "the small-files benchmark")
    cmd = [
        java_executable(),
        "-Xms1g",
        "-Xmx1g",
        "-XX:+UseSerialGC",
        "-cp",
        os.pathsep.join(str(p) for p in [jar, *classpath]),
        "dev.frazil.spark.SmallFiles",
        str(work / "lake"),
        str(rows),
        str(files),
        str(rounds),
        *(_variant_arg(name) for name in VARIANTS),
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=1800, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"the harness failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def summarize(runs: list[dict[str, Any]], warm_up: int) -> dict[str, dict[str, float]]:
    """Medians per variant over the rounds after ``warm_up``, per round and per file."""
    out: dict[str, dict[str, float]] = {}
    for name in VARIANTS:
        measured = [r for r in runs if r["variant"] == name and r["round"] >= warm_up]
        if not measured:
            continue
        files = measured[0]["files"]
        total = [r["open_ms"] + r["write_ms"] + r["close_ms"] for r in measured]
        out[name] = {
            "files": files,
            "rows": measured[0]["rows"],
            "round_ms": statistics.median(total),
            "open_ms_per_file": statistics.median(r["open_ms"] for r in measured) / files,
            "write_ms_per_file": statistics.median(r["write_ms"] for r in measured) / files,
            "close_ms_per_file": statistics.median(r["close_ms"] for r in measured) / files,
            "bytes": statistics.median(r["bytes"] for r in measured),
        }
    one = out.get("one")
    for name, figures in out.items():
        if one is not None and name != "one" and figures["files"] > 1:
            figures["extra_ms_per_file"] = (figures["round_ms"] - one["round_ms"]) / (
                figures["files"] - 1
            )
            figures["round_ratio_to_one"] = figures["round_ms"] / one["round_ms"]
        if "frazil" in out:
            figures["round_ratio_to_frazil"] = figures["round_ms"] / out["frazil"]["round_ms"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=380_000)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=12, help="rounds in all, warm-up included")
    args = parser.parse_args()
    if args.rounds <= WARM_UP_ROUNDS:
        parser.error(f"--rounds must be more than the {WARM_UP_ROUNDS} warm-up rounds")
    work = WORK_DIR / f"small-files-{uuid.uuid4().hex[:6]}"
    work.mkdir(parents=True)
    console = Console()
    try:
        runs = run_harness(args.rows, args.files, args.rounds, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = summarize(runs, WARM_UP_ROUNDS)
    table = Table(
        title=f"{args.rows:,} rows: one file or {args.files} files, one thread "
        f"(median of {args.rounds - WARM_UP_ROUNDS} rounds)"
    )
    for column in ("variant", "files", "round ms", "× frazil", "extra ms/file",
                   "open", "write", "close ms/file", "MB"):  # fmt: skip
        table.add_column(column, justify="right")
    for name, f in summary.items():
        table.add_row(
            name,
            str(f["files"]),
            f"{f['round_ms']:.0f}",
            f"{f.get('round_ratio_to_frazil', 0):.2f}",
            f"{f['extra_ms_per_file']:.2f}" if "extra_ms_per_file" in f else "-",
            f"{f['open_ms_per_file']:.2f}",
            f"{f['write_ms_per_file']:.2f}",
            f"{f['close_ms_per_file']:.2f}",
            f"{f['bytes'] / 1e6:.1f}",
        )
    console.print(table)
    path = write_result(
        "small_files",
        {
            "rows": args.rows,
            "files": args.files,
            "rounds": args.rounds,
            "warm_up_rounds": WARM_UP_ROUNDS,
            "variants": VARIANTS,
            "summary": summary,
            "runs": runs,
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
