"""frazil's JSON decoder alone: CPU per value, one jar against another, apart from Spark.

A steady run's decoding is a few percent of its CPU, below what rounds of whole runs can tell
apart on this machine (their spread is ±10%). This benchmark decodes the same payments
(``frazil.generate.payments``, seed 1, written one a line to a file) with
``dev.frazil.spark.JsonDecoder.decodeValue`` on one thread of a JVM of its own, round after
round, and reads the thread's CPU time: no Kafka, no Spark task, no Parquet. With
``--against JAR`` (frazil's jar of another commit: ``frazil.jvm.build.frazil_jar()`` run from
that commit's tree) the two jars' JVMs alternate, ``--runs`` each; per JVM the median of the
rounds after the warm-up ones. The checksum of the decoded rows must match between jars.

Usage: .venv/bin/python -m bench.json_decode [--records 200000] [--rounds 20] [--runs 3]
       [--threads 1] [--against PATH/frazil-jvm.jar] [--tag NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.common import WORK_DIR, write_result
from frazil.jvm.build import compile_jar, frazil_jar
from frazil.jvm.classpath import spark_jars
from frazil.jvm.fetch import java_executable, pyspark_jars_dir

SOURCE = Path(__file__).parent / "java" / "dev" / "frazil" / "spark" / "DecodeLoop.java"

#: Rounds not counted: the JIT compiles the decoder during the first ones.
WARM_UP_ROUNDS = 8


def _values(path: Path, records: int) -> None:
    from frazil.generate.payments import PaymentGenerator

    make = PaymentGenerator(seed=1)
    with path.open("wb") as out:
        for _ in range(records):
            out.write(make()[1] + b"\n")


def _schema_json() -> str:
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    types = {"string": StringType(), "timestamp": TimestampType(), "long": LongType()}
    from frazil.generate.payments import PAYMENTS_SCHEMA

    return StructType([StructField(n, types[t]) for n, t in PAYMENTS_SCHEMA.items()]).json()


def _run(jar: Path, harness: Path, values: Path, rounds: int, threads: int) -> list[dict[str, Any]]:
    others = [p for p in spark_jars() if "frazil-jvm" not in str(p)]
    classpath = [harness, jar, pyspark_jars_dir() / "*", *others]
    cmd = [
        java_executable(), "-Xms1g", "-Xmx1g", "-XX:+UseSerialGC",
        "-cp", os.pathsep.join(str(p) for p in classpath),
        "dev.frazil.spark.DecodeLoop", str(values), _schema_json(), str(rounds), str(threads),
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=1800, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"the harness failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="decoding threads (Spark's tasks)")
    parser.add_argument("--against", type=Path, help="another commit's frazil jar")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()

    work = WORK_DIR / "json-decode"
    work.mkdir(parents=True, exist_ok=True)
    values = work / "payments.jsonl"
    _values(values, args.records)
    mine = frazil_jar()
    harness = work / "decode-loop.jar"
    compile_jar([SOURCE], [pyspark_jars_dir() / "*", *spark_jars()], harness, "the decode loop")
    jars = {"this": mine, **({"against": args.against} if args.against else {})}
    runs: list[dict[str, Any]] = []
    for run in range(args.runs):
        for name, jar in jars.items():
            rounds = _run(jar, harness, values, args.rounds, args.threads)
            kept = [r["cpu_ns_per_value"] for r in rounds if r["round"] >= WARM_UP_ROUNDS]
            runs.append(
                {"jar": name, "run": run + 1, "cpu_ns_per_value": statistics.median(kept),
                 "checksum": rounds[-1]["checksum"]}
            )  # fmt: skip
            print(f"run {run + 1} {name}: {runs[-1]['cpu_ns_per_value']:.0f} ns-CPU a value")
    out = Table(title=f"{args.records:,} payments decoded, {args.threads} thread(s)")
    for col in ("jar", "run", "ns-CPU/value", "checksum"):
        out.add_column(col, justify="right")
    for r in runs:
        out.add_row(r["jar"], str(r["run"]), f"{r['cpu_ns_per_value']:.0f}", str(r["checksum"]))
    Console().print(out)
    result: dict[str, Any] = {
        "records": args.records, "rounds": args.rounds, "threads": args.threads,
        "warm_up_rounds": WARM_UP_ROUNDS,
        "jars": {k: str(v) for k, v in jars.items()}, "runs": runs,
    }  # fmt: skip
    if args.against:
        med = {n: statistics.median(r["cpu_ns_per_value"] for r in runs if r["jar"] == n)
               for n in jars}  # fmt: skip
        result["ratio_this_to_against"] = med["this"] / med["against"]
        print(f"this / against: {result['ratio_this_to_against']:.3f}x ns-CPU a value (medians)")
        if len({r["checksum"] for r in runs}) != 1:
            raise SystemExit("the jars decode the values differently: checksums differ")
    path = write_result("json_decode" + (f"_{args.tag}" if args.tag else ""), result)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
