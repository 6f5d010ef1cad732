"""CPU per record in frazil's steady state: a JFR profile, and A/B runs of settings.

One private broker, one pre-produced payments topic (default 2,000,000 records, 4
partitions). Each run is ``frazil run --until-caught-up`` as a subprocess, configured as in
``bench/vs_kafka_connect.py`` (``trigger: 1s``, ``max_offsets_per_trigger: 500000``,
``days(created_at)``, Parquet zstd), into a new table. While it runs, the table's snapshots
and ``/proc`` are polled every 0.2 s: the CPU seconds of every thread of every process of the
run (utime+stime) are taken when the first commit is seen and when the table holds every
record. The **steady state** is between the two: its CPU per record is
``(CPU at the end - CPU at the first commit) / records committed after the first commit``,
split by process and thread (the tasks, the stream's driver thread, the collector, the JIT,
Python).

``--profile`` first runs frazil once with JFR (``-XX:StartFlightRecording``, method
sampling every 10 ms; native samples every 20 ms), then prints where the steady state's
samples go (``jdk.ExecutionSample`` and ``jdk.NativeMethodSample`` from the first commit on):
top frames (self) and components (inclusive), and the collector's pauses.

``--variants`` runs frazil once per named variant (:data:`VARIANTS`) per round, the order
rotating each round, all on the same topic: the figure is each variant's median steady CPU
per record against ``default``'s, measured in the same run.

Usage: .venv/bin/python -m bench.cpu_profile [--records 2000000] [--profile]
           [--variants default,nodict] [--rounds 2] [--tag NAME]
       .venv/bin/python -m bench.cpu_profile --summarize FILE.jfr [--since-ms MS]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sqlite3
import statistics
import subprocess
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from bench.common import (
    WORK_DIR,
    descendants,
    payments_config,
    start_broker,
    start_frazil_run,
    table_metadata,
    write_result,
)
from frazil.generate.producer import ensure_topic, produce_events

_TICK = os.sysconf("SC_CLK_TCK")

_JIT4X = (
    "-XX:Tier3InvocationThreshold=4000 -XX:Tier3MinInvocationThreshold=2000 "
    "-XX:Tier3CompileThreshold=20000 -XX:Tier4InvocationThreshold=80000 "
    "-XX:Tier4MinInvocationThreshold=20000 -XX:Tier4CompileThreshold=120000"
)

#: Settings tried against frazil's defaults: ``table_properties`` (the pipeline's),
#: ``spark_conf``, ``driver_memory``, ``kafka_properties``, ``pipeline`` (other settings).
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    # Spark's own Kafka partition reader instead of frazil's (dev.frazil.spark.KafkaRecordReader).
    "sparkreader": {"spark_conf": {"spark.frazil.kafka.reader": "spark"}},
    # Parquet's dictionary for every column off (Iceberg has no per-column switch).
    "nodict": {"table_properties": {"parquet.enable.dictionary": "false"}},
    # A smaller dictionary: high-cardinality columns fall back to plain encoding sooner.
    "dict256k": {"table_properties": {"write.parquet.dict-size-bytes": "262144"}},
    # zstd's level (parquet-java's default is 3).
    "zstd1": {"table_properties": {"write.parquet.compression-level": "1"}},
    "snappy": {"table_properties": {"write.parquet.compression-codec": "snappy"}},
    "parallelgc": {"spark_conf": {"spark.driver.extraJavaOptions": "-XX:+UseParallelGC"}},
    "heap2g": {"driver_memory": "2g"},
    # The heap at its full size from the start (the JVM's default initial heap is 1/64 of
    # the machine's memory: the serial collector's young generation stays a third of that).
    # frazil's default for a local driver since this benchmark; "xms384" is the JVM's own.
    "xms": {"spark_conf": {"spark.driver.extraJavaOptions": "-Xms1g"}},
    "xms384": {"spark_conf": {"spark.driver.extraJavaOptions": "-Xms384m"}},
    "young256": {"spark_conf": {"spark.driver.extraJavaOptions": "-Xmn256m"}},
    "young640": {"spark_conf": {"spark.driver.extraJavaOptions": "-Xmn640m"}},
    # The heap's pages touched at start (a young collection that promotes into pages never
    # touched spent ~0.2-0.3 s of system time faulting them in on this machine).
    "pretouch": {"spark_conf": {"spark.driver.extraJavaOptions": "-XX:+AlwaysPreTouch"}},
    # Survivor spaces large enough for a batch's mid-lived data (Kafka's fetched records, a
    # file's buffered pages), so that less of it is promoted into tenured pages.
    "surv4": {"spark_conf": {"spark.driver.extraJavaOptions": "-XX:SurvivorRatio=4"}},
    "young512s4": {"spark_conf": {"spark.driver.extraJavaOptions": "-Xmn512m -XX:SurvivorRatio=4"}},
    # Methods over 8,000 bytes of bytecode compiled too (HotSpot never compiles them by
    # default; a whole stage's generated method can be that large).
    "hugemethods": {"spark_conf": {"spark.driver.extraJavaOptions": "-XX:-DontCompileHugeMethods"}},
    # The heap in transparent huge pages (2 MB: 512 times fewer first-touch faults and TLB
    # misses; the kernel gives them to a JVM that asks, THP's "madvise" mode).
    "thp": {"spark_conf": {"spark.driver.extraJavaOptions": "-XX:+UseTransparentHugePages"}},
    # C1's thresholds at HotSpot's defaults (frazil raises them 5x for a local driver).
    "tier3": {
        "spark_conf": {
            "spark.driver.extraJavaOptions": "-XX:Tier3InvocationThreshold=200 "
            "-XX:Tier3MinInvocationThreshold=100 -XX:Tier3CompileThreshold=2000"
        }
    },
    # Spark's Kafka reader asks the broker for the partition's earliest and latest offsets
    # (two ListOffsets round trips) after every poll; Kafka's default 500 records a poll.
    # frazil's default is 20,000 since this benchmark; "polls500" is Kafka's own default.
    "polls": {"kafka_properties": {"max.poll.records": "20000"}},
    "polls500": {"kafka_properties": {"max.poll.records": "500"}},
    "fetch": {
        "kafka_properties": {
            "max.partition.fetch.bytes": "8388608",
            "fetch.max.bytes": "67108864",
            "receive.buffer.bytes": "1048576",
        }
    },
    # Batches of 1M records instead of 500k: what a batch costs beyond its records.
    "batch1m": {"pipeline": {"max_offsets_per_trigger": 1_000_000}},
    # Batches of 100k records: the per-batch cost five times as often as at 500k.
    "batch100k": {"pipeline": {"max_offsets_per_trigger": 100_000}},
    # C1's and C2's thresholds another 4x higher than frazil's (compilation in the steady state).
    "jit4x": {"spark_conf": {"spark.driver.extraJavaOptions": _JIT4X}},
    "metrics_counts": {"table_properties": {"write.metadata.metrics.default": "counts"}},
}


def proc_stat(path: str) -> tuple[str, float] | None:
    """``(comm, CPU seconds)`` of a /proc stat file."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    head, tail = text.rsplit(")", 1)
    fields = tail.split()
    return head.split("(", 1)[1], (int(fields[11]) + int(fields[12])) / _TICK


def thread_cpu(root: int) -> dict[tuple[int, int], tuple[str, str, float]]:
    """Every thread of ``root`` and its descendants: (pid, tid) → (process, thread, CPU s)."""
    out: dict[tuple[int, int], tuple[str, str, float]] = {}
    for pid in descendants(root):
        proc = proc_stat(f"/proc/{pid}/stat")
        if proc is None:
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            thread = proc_stat(f"/proc/{pid}/task/{tid}/stat")
            if thread is not None:
                out[(pid, int(tid))] = (proc[0], thread[0], thread[1])
    return out


def thread_group(process: str, thread: str) -> str:
    """A thread's group: its name without numbers (Linux keeps 15 characters of it)."""
    if process != "java":
        return f"{process} (process)"
    name = re.sub(r"[#\-\s]*\d+$", "", thread).strip()
    if name.startswith("Executor task"):
        return "Spark tasks"
    if name.startswith("stream executio"):
        return "stream execution (driver)"
    if "CompilerThre" in name:
        # C1 and C2 apart: their costs and the options that move them differ.
        return f"JIT compiler {name[:2]}" if name[:2] in ("C1", "C2") else "JIT compiler"
    if name in ("VM Thread", "GC Thread") or name.startswith("GC "):
        return "VM thread / GC"
    return name


def cpu_by_group(
    before: dict[tuple[int, int], tuple[str, str, float]],
    after: dict[tuple[int, int], tuple[str, str, float]],
) -> dict[str, float]:
    """CPU seconds each thread group spent between two :func:`thread_cpu` readings."""
    groups: dict[str, float] = collections.defaultdict(float)
    for key, (process, thread, cpu) in after.items():
        spent = cpu - (before[key][2] if key in before else 0.0)
        groups[thread_group(process, thread)] += spent
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]))


class RunWatch(threading.Thread):
    """Polls a JDBC/SQLite catalog for a table's snapshots and /proc for the run's CPU."""

    def __init__(self, catalog_db: Path, namespace: str, name: str, expected: int, root: int):
        super().__init__(daemon=True)
        self.catalog_db, self.namespace, self.name = catalog_db, namespace, name
        self.expected, self.root = expected, root
        self.first: dict[str, Any] | None = None
        self.last: dict[str, Any] | None = None
        self.cpu_first: dict[tuple[int, int], tuple[str, str, float]] = {}
        self.cpu_last: dict[tuple[int, int], tuple[str, str, float]] = {}
        self._cpu_seen: dict[tuple[int, int], tuple[str, str, float]] = {}
        self.done = threading.Event()
        self.stop = threading.Event()

    def _snapshots(self) -> list[dict[str, Any]]:
        meta = table_metadata(self.catalog_db, self.namespace, self.name)
        if meta is None:
            return []
        snaps = sorted(meta.get("snapshots", []), key=lambda s: s["timestamp-ms"])
        return [s for s in snaps if int(s["summary"].get("added-records", "0")) > 0]

    def run(self) -> None:
        while not self.stop.is_set():
            if self._poll():
                self.done.set()
                return
            time.sleep(0.2)
        # The run may end within a poll's interval of its last commit: one more look.
        self._poll()

    def _poll(self) -> bool:
        """One look at the threads and the table: whether it holds every record."""
        cpu = thread_cpu(self.root)
        # After the run's exit its threads are gone (or a zombie's): the last reading stands.
        if sum(v[2] for v in cpu.values()) < sum(v[2] for v in self._cpu_seen.values()):
            cpu = self._cpu_seen
        self._cpu_seen = cpu
        try:
            data = self._snapshots()
        except (OSError, ValueError, sqlite3.Error):  # a file or row being written: next poll
            return False
        if data and self.first is None:
            self.first, self.cpu_first = data[0], cpu
        if data and int(data[-1]["summary"].get("total-records", "0")) >= self.expected:
            self.last, self.cpu_last = data[-1], cpu
            return True
        return False


def _config(work: Path, bootstrap: str, topic: str, table: str, variant: dict[str, Any]) -> Any:
    config = payments_config(
        work,
        bootstrap,
        topic,
        table,
        trigger="1s",
        table_properties={
            "write.parquet.compression-codec": "zstd",
            **variant.get("table_properties", {}),
        },
        **{"max_offsets_per_trigger": 500_000, **variant.get("pipeline", {})},
    )
    spark: dict[str, Any] = {}
    if "spark_conf" in variant:
        spark["conf"] = dict(variant["spark_conf"])
    if "driver_memory" in variant:
        spark["driver_memory"] = variant["driver_memory"]
    if spark:
        config["spark"] = spark
    if "kafka_properties" in variant:
        config["kafka"]["properties"] = dict(variant["kafka_properties"])
    return config


def run_frazil(
    work: Path,
    bootstrap: str,
    topic: str,
    records: int,
    variant_name: str,
    jfr: Path | None = None,
) -> dict[str, Any]:
    """One ``frazil run --until-caught-up``: wall and CPU from start, and in the steady state."""
    table = f"p_{variant_name}_{uuid.uuid4().hex[:6]}"
    variant = dict(VARIANTS[variant_name])
    if jfr is not None:
        conf = dict(variant.get("spark_conf", {}))
        opts = conf.get("spark.driver.extraJavaOptions", "")
        conf["spark.driver.extraJavaOptions"] = (
            f"{opts} -XX:StartFlightRecording=settings=profile,dumponexit=true,filename={jfr}"
        ).strip()
        variant["spark_conf"] = conf
    path = work / f"{table}.yaml"
    path.write_text(yaml.safe_dump(_config(work, bootstrap, topic, table, variant)))
    started_ms = int(time.time() * 1000)
    process = start_frazil_run(path)
    watch = RunWatch(work / "lake" / "catalog.db", "bench", table, records, process.pid)
    watch.start()
    _, err = process.communicate(timeout=1800)
    ended_ms = int(time.time() * 1000)
    watch.stop.set()
    watch.join(5)
    if process.returncode != 0 or watch.last is None or watch.first is None:
        raise RuntimeError(f"frazil run failed ({process.returncode}):\n{err[-3000:]}")
    first_ms, last_ms = int(watch.first["timestamp-ms"]), int(watch.last["timestamp-ms"])
    after_first = records - int(watch.first["summary"]["added-records"])
    groups = cpu_by_group(watch.cpu_first, watch.cpu_last)
    steady_cpu = sum(groups.values())
    total_cpu = sum(v[2] for v in watch.cpu_last.values())
    return {
        "variant": variant_name,
        "table": f"bench.{table}",
        "seconds": (last_ms - started_ms) / 1000,
        "process_seconds": (ended_ms - started_ms) / 1000,
        "first_commit_s": (first_ms - started_ms) / 1000,
        "first_commit_ms": first_ms,
        "steady_seconds": (last_ms - first_ms) / 1000,
        "steady_records": after_first,
        "steady_cpu_s": steady_cpu,
        "steady_cpu_us_per_record": steady_cpu / after_first * 1e6,
        "steady_events_per_s": after_first / ((last_ms - first_ms) / 1000),
        "cpu_s": total_cpu,
        "steady_cpu_by_group": groups,
        "snapshots": int(watch.last["sequence-number"]),
        "data_bytes": int(watch.last["summary"].get("total-files-size", "0")),
        "jfr": str(jfr) if jfr else None,
    }


# --- the JFR summary -------------------------------------------------------------------

#: Components, most specific first: a sample counts towards the first whose pattern matches
#: a frame of its stack, searched from the leaf (self by component), and towards every one
#: matching any frame (inclusive).
COMPONENTS: list[tuple[str, str]] = [
    ("zstd (native)", r"^com\.github\.luben\.zstd\.|Zstd"),
    (
        "Parquet dictionary",
        # fastutil's hash maps (shaded into Parquet) are the dictionaries' own.
        r"parquet\.column\.values\.dictionary\.|parquet\.column\.values\.fallback"
        r"|parquet\.shaded\.it\.unimi\.",
    ),
    ("Parquet statistics", r"parquet\.column\.statistics\.|parquet\.internal\.column\.columnindex"),
    ("Parquet encode (other)", r"\.parquet\.(column|hadoop|bytes|io)\."),
    (
        "Iceberg value writers",
        r"org\.apache\.iceberg\.(spark\.data\.SparkParquetWriters|parquet\.ParquetValueWriters)",
    ),
    (
        "Iceberg metrics",
        r"org\.apache\.iceberg\.(parquet\.ParquetMetrics|parquet\.ParquetUtil|MetricsUtil|.*Metrics)",
    ),
    ("Iceberg writer (other)", r"^org\.apache\.iceberg\."),
    ("frazil JSON decoder", r"^dev\.frazil\.spark\.Json"),
    ("frazil JVM (other)", r"^dev\.frazil\."),
    ("Jackson", r"jackson"),
    ("Kafka client (fetch, deserialize)", r"^org\.apache\.kafka\."),
    ("Spark Kafka reader", r"^org\.apache\.spark\.sql\.kafka010\."),
    ("observe (CollectMetrics)", r"CollectMetrics|AggregatingAccumulator"),
    ("Spark generated code", r"GeneratedClass|SpecificUnsafeProjection|GeneratedIterator"),
    ("Spark shuffle", r"\.shuffle\."),
    (
        "Spark planning / analysis",
        r"\.catalyst\.(analysis|optimizer|planning|rules|trees)\."
        r"|\.execution\.(QueryExecution|SparkPlanner|adaptive)|org\.codehaus\.",
    ),
    ("Spark unsafe (UTF8String, Platform)", r"^org\.apache\.spark\.unsafe\."),
    ("Spark SQL / core (other)", r"^org\.apache\.spark\."),
    ("py4j", r"^py4j\."),
    ("JDK", r"^(java|javax|jdk|sun)\."),
]

_UTILITY = {"JDK", "Spark unsafe (UTF8String, Platform)"}

#: Subtrees reported inclusively, whatever else is on the stack.
SUBTREES: list[tuple[str, str]] = [
    ("Kafka source (KafkaDataConsumer)", r"kafka010\.consumer\.KafkaDataConsumer"),
    ("frazil JSON decode", r"^dev\.frazil\.spark\.Json"),
    (
        "Iceberg/Parquet write (SparkWrite writers)",
        r"org\.apache\.iceberg\.(spark\.source\.SparkWrite|io\..*Writer|parquet\.ParquetWriter)",
    ),
    (
        "Parquet page/column-chunk flush (compress)",
        r"parquet\.(hadoop\.ColumnChunkPageWriteStore|column\.impl\.ColumnWriterBase\.writePage"
        r"|column\.impl\.ColumnWriteStoreBase\.flush)",
    ),
    (
        "Parquet dictionary",
        r"parquet\.column\.values\.dictionary\.|parquet\.column\.values\.fallback",
    ),
    ("observe (CollectMetrics)", r"CollectMetrics|AggregatingAccumulator"),
    ("Spark generated code", r"GeneratedClass"),
    ("Spark shuffle", r"\.shuffle\."),
    ("stream execution thread (driver)", r"MicroBatchExecution|StreamExecution"),
    (
        "Spark planning / analysis",
        r"\.catalyst\.(analysis|optimizer)\."
        r"|QueryExecution\.(analyzed|optimizedPlan|sparkPlan|executedPlan)|org\.codehaus\.janino",
    ),
    (
        "Iceberg commit (driver)",
        r"org\.apache\.iceberg\.(SnapshotProducer|BaseTransaction|MergingSnapshotProducer|FastAppend)",
    ),
    ("py4j (calls from Python)", r"^py4j\."),
]


def _frame_name(frame: dict[str, Any]) -> str:
    method = frame.get("method") or {}
    klass = (method.get("type") or {}).get("name", "?").replace("/", ".")
    return f"{klass}.{method.get('name', '?')}"


def _when_ms(value: Any) -> int:
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value)
    # 2026-11-26T15:10:01.123456789Z: Python parses up to microseconds.
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?", text)
    if not match:
        return 0
    base, frac, zone = match.groups()
    stamp = datetime.fromisoformat(
        base + (frac or "")[:7] + ("+00:00" if zone in (None, "Z") else zone)
    )
    return int(stamp.timestamp() * 1000)


def _events(jfr: Path, types: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["jfr", "print", "--json", "--stack-depth", "128", "--events", types, str(jfr)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    events: list[dict[str, Any]] = json.loads(out)["recording"]["events"]
    return events


def summarize(jfr: Path, since_ms: int = 0, until_ms: int | None = None) -> dict[str, Any]:
    """Where the samples of a JFR recording go, from ``since_ms`` on.

    Java samples (``jdk.ExecutionSample``, every 10 ms with the ``profile`` settings) weigh
    1; native ones (``jdk.NativeMethodSample``, every 20 ms) weigh 2 and count only when the
    thread is compressing (zstd, snappy), not in a socket or file call. A sample is a thread
    on its way, not a core's time: on a loaded machine a thread waiting for a core is sampled
    too; the CPU split comes from ``/proc`` (:func:`cpu_by_group`).
    """
    samples: list[tuple[float, str, list[str]]] = []
    for event in _events(jfr, "jdk.ExecutionSample,jdk.NativeMethodSample"):
        values = event["values"]
        at = _when_ms(values.get("startTime"))
        if at < since_ms or (until_ms is not None and at > until_ms):
            continue
        thread = (values.get("sampledThread") or {}).get("javaName") or "?"
        frames = [_frame_name(f) for f in (values.get("stackTrace") or {}).get("frames", [])]
        if not frames:
            continue
        if event["type"] == "jdk.NativeMethodSample":
            top = frames[0]
            # Compression only: a thread in a socket or file call may wait there (or for a
            # core, on a loaded machine) without using the CPU.
            if not re.search(r"zstd|Zstd|Snappy|snappy", top):
                continue
            samples.append((2.0, thread, frames))
        else:
            samples.append((1.0, thread, frames))
    total = sum(w for w, _, _ in samples) or 1.0
    selfs: collections.Counter[str] = collections.Counter()
    components: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    compiled = [(n, re.compile(p)) for n, p in COMPONENTS]
    subtrees = [(n, re.compile(p)) for n, p in SUBTREES]
    for weight, thread, frames in samples:
        selfs[frames[0]] += weight
        threads[re.sub(r"\d+", "N", thread)] += weight
        component = "other"
        for frame in frames:
            hit = next((n for n, p in compiled if p.search(frame)), None)
            # A utility frame (the JDK's, Spark's UTF8String) counts for its caller.
            if hit is not None and not (hit in _UTILITY and frame is not frames[-1]):
                component = hit
                break
        components[component] += weight
        for name, pattern in subtrees:
            if any(pattern.search(f) for f in frames):
                inclusive[name] += weight

    def share(counter: collections.Counter[str], n: int) -> list[tuple[str, float]]:
        return [(k, v / total) for k, v in counter.most_common(n)]

    gcs = [
        e["values"]
        for e in _events(jfr, "jdk.GarbageCollection")
        if _when_ms(e["values"].get("startTime")) >= since_ms
        and (until_ms is None or _when_ms(e["values"].get("startTime")) <= until_ms)
    ]

    def seconds(value: Any) -> float:
        """A JFR duration: ISO-8601 (``PT0.0123S``), ``12.3 ms``, or nanoseconds."""
        if isinstance(value, (int, float)):
            return float(value) / 1e9
        text = str(value).strip()
        iso = re.fullmatch(r"PT(?:([\d.]+)H)?(?:([\d.]+)M)?(?:([\d.]+)S)?", text)
        if iso:
            h, m, sec = (float(x or 0) for x in iso.groups())
            return h * 3600 + m * 60 + sec
        unit = re.fullmatch(r"([\d.]+)\s*(ns|us|µs|ms|s)", text)
        if unit:
            scale = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}[unit.group(2)]
            return float(unit.group(1)) * scale
        return 0.0

    gc_by_name: dict[str, list[float]] = {}
    for gc in gcs:
        gc_by_name.setdefault(str(gc.get("name")), []).append(seconds(gc.get("sumOfPauses")))
    return {
        "samples": total,
        "self": share(selfs, 25),
        "components": share(components, 30),
        "inclusive": share(inclusive, 30),
        "threads": share(threads, 10),
        "gc": {k: {"count": len(v), "pause_s": sum(v)} for k, v in gc_by_name.items()},
    }


def print_summary(console: Console, summary: dict[str, Any]) -> None:
    for key, title in (
        ("components", "component (self: first match from the leaf)"),
        ("inclusive", "subtree (inclusive)"),
        ("self", "top frames (self)"),
        ("threads", "threads"),
    ):
        table = Table(title=f"{title}, {summary['samples']:,.0f} samples")
        table.add_column(title.split(" ")[0])
        table.add_column("share", justify="right")
        for name, value in summary[key]:
            table.add_row(name, f"{value:.1%}")
        console.print(table)
    console.print(f"collections in the window: {summary['gc']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="one JFR run first, summarized")
    parser.add_argument("--variants", default="", help=f"comma-separated: {', '.join(VARIANTS)}")
    parser.add_argument("--summarize", type=Path, help="only summarize this JFR file")
    parser.add_argument("--since-ms", type=int, default=0)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    console = Console()
    if args.summarize:
        print_summary(console, summarize(args.summarize, args.since_ms))
        return
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"cpu-{run_id}"
    work.mkdir(parents=True, exist_ok=True)
    broker = start_broker(f"cpu-{run_id}")
    runs: list[dict[str, Any]] = []
    profile: dict[str, Any] | None = None
    try:
        topic = f"cpu-{run_id}"
        ensure_topic(broker.bootstrap, topic, partitions=4)
        started = time.monotonic()
        produce_events(broker.bootstrap, topic, args.records, seed=1)
        console.print(f"produced {args.records:,} in {time.monotonic() - started:.1f}s")
        if args.profile:
            jfr = work / "steady.jfr"
            result = run_frazil(work, broker.bootstrap, topic, args.records, "default", jfr)
            result["round"] = 0
            runs.append(result)
            console.print(_line(result))
            profile = summarize(jfr, result["first_commit_ms"])
            print_summary(console, profile)
        for round_no in range(1, args.rounds + 1 if variants else 1):
            shift = (round_no - 1) % len(variants)
            for name in variants[shift:] + variants[:shift]:
                result = run_frazil(work, broker.bootstrap, topic, args.records, name)
                result["round"] = round_no
                runs.append(result)
                console.print(_line(result))
    finally:
        broker.down()
    ratios: dict[str, dict[str, float]] = {}
    if variants:
        measured = [r for r in runs if r["round"] > 0]

        def median(name: str, key: str) -> float:
            return statistics.median(float(r[key]) for r in measured if r["variant"] == name)

        table = Table(title=f"{args.records:,} payments, steady state (after the first commit)")
        for column in ("variant", "round", "µCPU-s/record", "events/s", "CPU s", "wall s",
                       "data MB"):  # fmt: skip
            table.add_column(column, justify="right")
        for r in measured:
            table.add_row(
                r["variant"], str(r["round"]), f"{r['steady_cpu_us_per_record']:.2f}",
                f"{r['steady_events_per_s']:,.0f}", f"{r['cpu_s']:.1f}", f"{r['seconds']:.1f}",
                f"{r['data_bytes'] / 1e6:.1f}",
            )  # fmt: skip
        console.print(table)
        base = "default" if "default" in variants else variants[0]
        for name in variants:
            ratios[name] = {key: median(name, key) / median(base, key) for key in _RATIO_KEYS}
            r = ratios[name]
            console.print(
                f"{name} / {base}: steady CPU per record {r['steady_cpu_us_per_record']:.3f}×, "
                f"steady events/s {ratios[name]['steady_events_per_s']:.3f}×, "
                f"CPU s {ratios[name]['cpu_s']:.3f}×, data {ratios[name]['data_bytes']:.3f}×"
            )
    path = write_result(
        "cpu_profile" + (f"_{args.tag}" if args.tag else ""),
        {
            "records": args.records,
            "partitions": 4,
            "max_offsets_per_trigger": 500_000,
            "variants": {v: VARIANTS[v] for v in variants},
            "runs": runs,
            "profile": profile,
            "ratios_to_default": ratios,
            "load": os.getloadavg(),
        },
    )
    console.print(f"wrote {path}")


_RATIO_KEYS = ("steady_cpu_us_per_record", "steady_events_per_s", "cpu_s", "seconds", "data_bytes")


def _line(r: dict[str, Any]) -> str:
    groups = ", ".join(f"{k} {v:.1f}" for k, v in list(r["steady_cpu_by_group"].items())[:6])
    return (
        f"round {r['round']} {r['variant']}: {r['seconds']:.1f}s to the last commit, first "
        f"commit {r['first_commit_s']:.1f}s, steady {r['steady_records']:,} records in "
        f"{r['steady_seconds']:.1f}s, {r['steady_cpu_s']:.1f} CPU s "
        f"({r['steady_cpu_us_per_record']:.2f} µs/record: {groups}), {r['cpu_s']:.1f} CPU s in all"
    )


if __name__ == "__main__":
    main()
