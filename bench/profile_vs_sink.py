"""Where the CPU goes in the Kafka Connect sink and in frazil: JFR profiles on one topic.

One private broker, one pre-produced payments topic (default 3,000,000 records, 4
partitions). The sink (the peer harness ``../shared/peers/kafka-connect/run.sh``,
``KC_LAYOUT=payments``, 1 s commit, 2 tasks, its own JVM flags plus JFR in ``KC_JVM_OPTS``)
and then ``frazil run --until-caught-up`` (as in ``bench/vs_kafka_connect.py``, JFR in
``spark.conf: spark.driver.extraJavaOptions``) each read the whole topic into a new table
while JFR samples every Java thread (``settings=profile``: every 10 ms). Each sample is put in
a component by its first frame outside the JDK (native code such as zstd is not sampled), and
the shares are printed side by side.

Usage: .venv/bin/python -m bench.profile_vs_sink [--records 3000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from bench.common import WORK_DIR, payments_config, start_broker, write_result
from bench.vs_kafka_connect import PEER
from frazil.generate.producer import ensure_topic, produce_events

#: The peer harness's default JVM flags (Kafka's ``kafka-run-class.sh``), JFR added to them.
SINK_JVM = (
    "-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
    "-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true"
)
JFR = "-XX:StartFlightRecording=settings=profile,dumponexit=true,filename={}"
#: Components by the package of a sample's first frame outside the JDK, first match wins.
COMPONENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "JSON decoding",
        (
            "com.fasterxml.jackson",
            "dev.frazil.spark.Json",
            "org.apache.spark.sql.catalyst.json",
            "org.apache.kafka.connect.json",
            "org.apache.iceberg.connect.data.RecordConverter",
        ),
    ),
    (
        "Parquet encoding",
        (
            "org.apache.parquet",
            "org.apache.iceberg.shaded.org.apache.parquet",
            "org.apache.iceberg.parquet",
            "org.apache.iceberg.spark.data.SparkParquetWriters",
            "org.apache.iceberg.data.parquet",
            "shaded.parquet",
        ),
    ),
    ("the framework (Connect runtime)", ("org.apache.kafka.connect",)),
    ("Kafka client", ("org.apache.kafka", "org.apache.spark.sql.kafka010")),
    ("Iceberg, other", ("org.apache.iceberg",)),
    ("the framework (Spark)", ("org.apache.spark", "scala.")),
)
_JDK = ("java.", "jdk.", "sun.", "javax.")


def component(frames: list[str]) -> str:
    """The component of a sample whose stack (leaf first) is ``frames``."""
    for frame in frames:
        if frame.startswith(_JDK):
            continue
        for name, prefixes in COMPONENTS:
            if frame.startswith(prefixes):
                return name
        return "other"
    return "other"


def shares(recording: Path) -> dict[str, float]:
    """Each component's share of the recording's Java samples."""
    printed = subprocess.run(
        ["jfr", "print", "--json", "--stack-depth", "64", "--events", "jdk.ExecutionSample",
         str(recording)],
        capture_output=True, check=True, text=True,
    ).stdout  # fmt: skip
    counts: collections.Counter[str] = collections.Counter()
    for event in json.loads(printed)["recording"]["events"]:
        frames = [
            f"{f['method']['type']['name'].replace('/', '.')}.{f['method']['name']}"
            for f in (event["values"].get("stackTrace") or {}).get("frames", [])
        ]
        counts[component(frames)] += 1
    total = sum(counts.values()) or 1
    return {name: counts[name] / total for name in counts}


def run_sink(work: Path, bootstrap: str, topic: str, recording: Path) -> None:
    env = {
        **os.environ,
        "KC_LAYOUT": "payments",
        "KC_VERIFY": "0",
        "KC_JVM_OPTS": f"{SINK_JVM} {JFR.format(recording)}",
    }
    subprocess.run(
        [str(PEER / "run.sh"), bootstrap, topic, "bench.kc_profile", str(work / "kc"), "1000", "2"],
        capture_output=True, check=True, text=True, env=env, timeout=1800,
    )  # fmt: skip


def run_frazil(work: Path, bootstrap: str, topic: str, recording: Path) -> None:
    config = payments_config(
        work,
        bootstrap,
        topic,
        "frazil_profile",
        max_offsets_per_trigger=500_000,
        trigger="1s",
        table_properties={"write.parquet.compression-codec": "zstd"},
    )
    config["spark"] = {"conf": {"spark.driver.extraJavaOptions": JFR.format(recording)}}
    path = work / "frazil.yaml"
    path.write_text(yaml.safe_dump(config))
    subprocess.run(
        [sys.executable, "-m", "frazil.cli.entry", "run", "-c", str(path), "--until-caught-up"],
        capture_output=True, check=True, text=True, timeout=1800,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=3_000_000)
    parser.add_argument("--keep", type=Path, help="keep the two recordings in this folder")
    args = parser.parse_args()
    console = Console()
    work = WORK_DIR / f"profile-vs-sink-{uuid.uuid4().hex[:6]}"
    work.mkdir(parents=True)
    recordings = Path(args.keep or tempfile.mkdtemp(prefix="frazil-jfr-"))
    recordings.mkdir(parents=True, exist_ok=True)
    broker = start_broker(work.name)
    try:
        ensure_topic(broker.bootstrap, "payments", partitions=4)
        produce_events(broker.bootstrap, "payments", args.records)
        console.print("the sink …")
        run_sink(work, broker.bootstrap, "payments", recordings / "sink.jfr")
        console.print("frazil …")
        run_frazil(work, broker.bootstrap, "payments", recordings / "frazil.jfr")
    finally:
        broker.down()
    result = {
        "kafka-connect": shares(recordings / "sink.jfr"),
        "frazil": shares(recordings / "frazil.jfr"),
    }
    table = Table(title=f"share of JFR samples, {args.records:,} payments")
    table.add_column("component")
    table.add_column("Kafka Connect sink", justify="right")
    table.add_column("frazil", justify="right")
    names = [name for name, _ in COMPONENTS] + ["other"]
    for name in names:
        row = [result[tool].get(name, 0.0) for tool in ("kafka-connect", "frazil")]
        table.add_row(name, *(f"{100 * v:.1f}%" for v in row))
    console.print(table)
    path = write_result("profile_vs_sink", {"records": args.records, "shares": result})
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
