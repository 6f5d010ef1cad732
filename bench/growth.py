"""Cost as the work grows: more partitions, and a day of 1 s commits compressed in time.

Part ``partitions``: the same payments (default 1,000,000, the ``throughput`` topic's records)
in one topic of 4, 16 and 64 partitions, each read from the start by
``run(config, until_caught_up=True)`` (the code path of ``frazil run --until-caught-up``) on
local[2] into a ``days(created_at)`` table, ``max_offsets_per_trigger`` 100,000. One warm-up
run (not counted), then rounds over the partition counts with fresh pipelines. Per count:
records, batches, wall seconds, events/s, the median batch (frazil's ``BatchDone`` seconds,
each run's small first batch left out) and both against 4 partitions.

Part ``day``: one table committed as often as frazil commits a trickle (``--rate`` payments/s,
default 20, from a ``frazil generate`` subprocess into 4 partitions; ``trigger`` at
``--seconds-per-commit``, default 500ms), a few records per commit, with
``maintenance: {mode: inline}``. One commit stands for one second of a day of 1 s commits
(86,400 commits); the policy is written in that simulated time and its durations are scaled
to the wall clock by ``--seconds-per-commit``:

    interval 1m (``--interval``), expire {older_than: 1m (``--expire``), retain_last: 20};
    compaction, manifests and orphans at their defaults (min_small_files 5, min_manifests
    20); budget 60s (wall: it bounds what a pass's Spark actions may take, which is not
    compressed)

Every ``--every`` commits (default: 20 samples, at most 100 commits apart) a sampler thread
records, for the commits since the sample before: frazil's commit time (``CommitEvent``
seconds: the batch's start to its commit; median and p95) and the commits' spacing; the
metadata bytes each ingest commit wrote (its metadata.json + manifest list + the manifests it
added: median over its newest commits, whose files are all still there), and every new byte
in the table's ``metadata/`` folder per commit (maintenance's writes included); the folder's
size and files; snapshots kept, data files; and a fixed query's time, run once (more runs
would take the commits' CPU on a small machine): PyIceberg scanning ``type = 'debit' AND
amount >= 50000`` (count and sum of ``amount``), which reads the manifests and data files
the same way each time. At the end the table is compacted in full (Spark's
``rewrite_data_files`` with ``rewrite-all`` and ``rewrite_manifests``) and the query is
timed on the snapshot before and after, alternating (median of 5 each).

Criteria: commit time, metadata bytes per commit and the metadata folder's size stay flat
(the median of the last quarter of samples within :data:`FLAT` × that of the second quarter:
the first quarter holds the JVM's warm-up and the filling of the expiry window); the query
within :data:`QUERY_GOAL` × the compacted table's.

Results: ``bench/results/<--name>.json`` (default ``growth``) and the plots
``docs/growth-partitions.svg`` and ``docs/growth-day.svg``; ``--plot RESULT`` redraws them
from a results file.

Usage: .venv/bin/python -m bench.growth [--part partitions|day|both] [--records 1000000]
           [--partitions 4,16,64] [--rounds 2] [--per-trigger 100000]
           [--commits 400] [--every N] [--rate 20] [--seconds-per-commit 0.5]
           [--interval 1m] [--expire 1m]
       .venv/bin/python -m bench.growth --part day --commits 86400   # the whole day
       .venv/bin/python -m bench.growth --part day --commits 86400 --expire 1h  # frazil's
           default expiry
       .venv/bin/python -m bench.growth --plot bench/results/growth.json
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import queue
import statistics
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.common import (
    BENCH_DIR,
    WORK_DIR,
    metadata_location,
    payments_config,
    start_broker,
    start_frazil,
    stop_process,
    write_result,
)
from bench.routing import Timeline
from bench.svg import ORANGE, Series, document, panel, top_of
from frazil.config import parse_config
from frazil.config.durations import parse_duration
from frazil.engine.runner import run
from frazil.engine.session import build_spark
from frazil.generate.producer import ensure_topic, produce_events
from frazil.local.broker import LocalBroker
from frazil.progress.events import CommitEvent, Event
from frazil.progress.markers import OFFSETS

DOCS = BENCH_DIR.parent / "docs"
PARTITIONS = (4, 16, 64)
#: Commits in a day of 1 s commits.
DAY = 86_400
#: The day's maintenance, in simulated time (one commit = one second); see the module's doc.
INTERVAL = "1m"
EXPIRE_OLDER_THAN = "1m"
EXPIRE_RETAIN_LAST = 20
#: The query on the maintained table against the same table compacted in full.
QUERY_GOAL = 1.2
#: "Flat": the last quarter's median within this many times the second quarter's.
FLAT = 1.2
#: Whatever the length of the run, samples at most this many commits apart: the folder watch
#: sees every file that lives longer (metadata.json files live 100 commits, see
#: ``write.metadata.previous-versions-max``; manifests and lists until their snapshots expire).
MAX_EVERY = 100
KIB, MIB = 1024, 1024**2


@dataclass(frozen=True)
class Commit:
    """One ingest commit as frazil reported it.

    Attributes:
        at: ``time.monotonic()`` when the commit was reported.
        seconds: From the batch's start to its commit (``CommitEvent.seconds``).
        records: Records it committed.
    """

    at: float
    seconds: float
    records: int


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 < q ≤ 1) of ``values`` (not empty)."""
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))])


def window_stats(commits: Sequence[Commit], start: int, end: int) -> dict[str, float]:
    """Commit times of ``commits[start:end]``: median and p95 seconds, the mean spacing between
    commits (from the commit before the window, when there is one) and records per commit."""
    chosen = commits[start:end]
    seconds = [c.seconds for c in chosen]
    first = commits[start - 1].at if start > 0 else chosen[0].at
    spaced = len(chosen) if start > 0 else len(chosen) - 1
    return {
        "commit_s_median": statistics.median(seconds),
        "commit_s_p95": percentile(seconds, 0.95),
        "spacing_s": (chosen[-1].at - first) / spaced if spaced > 0 else float("nan"),
        "records_per_commit": sum(c.records for c in chosen) / len(chosen),
    }


def metadata_file_for(timestamp_ms: int, files: Sequence[tuple[int, str]]) -> str | None:
    """The metadata file a commit wrote, among ``(last-updated-ms, path)`` pairs (the table's
    metadata log and its current file): Iceberg stamps the file that adds a snapshot with the
    snapshot's own timestamp. None when it is no longer listed."""
    return next((path for ts, path in files if ts == timestamp_ms), None)


def new_bytes(before: Mapping[str, int], after: Mapping[str, int]) -> int:
    """Bytes of the files in ``after`` (name → size) that ``before`` did not hold."""
    return sum(size for name, size in after.items() if name not in before)


def growth(values: Sequence[float]) -> float | None:
    """The median of the last quarter of ``values`` over that of the second quarter (the
    first holds warm-up); None with fewer than 8 values or a second quarter at zero."""
    n = len(values)
    if n < 8:
        return None
    second = statistics.median(values[n // 4 : n // 2])
    last = statistics.median(values[n - n // 4 :])
    return last / second if second else None


def scaled(duration: str, seconds_per_commit: float) -> str:
    """``duration`` of simulated time (one second per commit) on the wall clock."""
    return f"{max(1, round(parse_duration(duration) * seconds_per_commit * 1000))}ms"


def day_policy(
    seconds_per_commit: float, interval: str = INTERVAL, expire: str = EXPIRE_OLDER_THAN
) -> dict[str, Any]:
    """The top-level ``maintenance:`` of the day part, scaled to the wall clock.

    Args:
        interval: Between passes, in simulated time.
        expire: Snapshots older than this (simulated) may be expired.
    """
    return {
        "mode": "inline",
        "interval": scaled(interval, seconds_per_commit),
        "expire": {
            "older_than": scaled(expire, seconds_per_commit),
            "retain_last": EXPIRE_RETAIN_LAST,
        },
    }


def sample_every(commits: int) -> int:
    """Commits between samples: about 20 samples, at least 10 and at most :data:`MAX_EVERY`
    commits apart."""
    return max(10, min(MAX_EVERY, commits // 20))


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def _commit_of_code() -> str | None:
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=7"],
            cwd=BENCH_DIR,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


# --- part 1: partitions ------------------------------------------------------------------


def measure_partitions(
    spark: Any, broker: LocalBroker, work: Path, args: argparse.Namespace, console: Console
) -> dict[str, Any]:
    """Ingest the same records from topics of each partition count; rows and a summary."""
    counts: list[int] = args.partitions
    topics: dict[int, str] = {}
    for n in counts:
        topics[n] = f"growth-p{n}-{work.name}"
        ensure_topic(broker.bootstrap, topics[n], partitions=n)
        produced = produce_events(broker.bootstrap, topics[n], args.records, seed=1)
        console.print(
            f"produced {produced.count:,} events to {n} partitions in {produced.seconds:.1f}s"
        )

    def config_for(name: str, n: int) -> Any:
        data = payments_config(
            work, broker.bootstrap, topics[n], name, max_offsets_per_trigger=args.per_trigger
        )
        return parse_config({**data, "spark": SPARK})

    load_start = _load()
    rows: list[dict[str, Any]] = []
    # Round 0 (4 partitions only) warms the JVM up and is not counted.
    plan = [(0, counts[0])] + [(r, n) for r in range(1, args.rounds + 1) for n in counts]
    for round_no, n in plan:
        name = f"p{n}_{round_no}"
        timeline = Timeline()
        t0 = time.monotonic()
        report = run(config_for(name, n), until_caught_up=True, spark=spark,
                     on_event=timeline.on_event)[0]  # fmt: skip
        seconds = time.monotonic() - t0
        batches = [timeline.done[b] for b in sorted(timeline.done)]
        rows.append(
            {
                "partitions": n,
                "round": round_no,
                "records": report.records_ingested,
                "table_rows": report.table_rows,
                "batches": report.batches,
                "batch_seconds": batches,
                "data_files": report.data_files,
                "seconds": seconds,
            }
        )
        console.print(
            f"{n} partitions, round {round_no}: {report.records_ingested:,} records in "
            f"{seconds:.1f}s, {report.batches} batches, {report.data_files} data files"
        )
    summary: dict[str, dict[str, Any]] = {}
    for n in counts:
        measured = [r for r in rows if r["partitions"] == n and r["round"] > 0]
        warm = [s for r in measured for s in r["batch_seconds"][1:]]
        summary[str(n)] = {
            "records": measured[0]["records"],
            "batches": statistics.median(r["batches"] for r in measured),
            "seconds": statistics.median(r["seconds"] for r in measured),
            "events_per_s": statistics.median(r["records"] / r["seconds"] for r in measured),
            "batch_s_median": statistics.median(warm) if warm else None,
            "data_files": statistics.median(r["data_files"] for r in measured),
        }
    base = summary[str(counts[0])]
    for s in summary.values():
        s["events_ratio"] = s["events_per_s"] / base["events_per_s"]
        s["batch_ratio"] = (
            s["batch_s_median"] / base["batch_s_median"]
            if s["batch_s_median"] and base["batch_s_median"]
            else None
        )
    problems = [
        f"{r['partitions']} partitions, round {r['round']}: {r['records']:,} records"
        for r in rows
        if r["records"] != args.records
    ]
    return {
        "records": args.records,
        "partitions": counts,
        "rounds": args.rounds,
        "max_offsets_per_trigger": args.per_trigger,
        "master": SPARK["master"],
        "load_start": load_start,
        "load_end": _load(),
        "runs": rows,
        "summary": summary,
        "row_count_problems": problems,
    }


def show_partitions(result: dict[str, Any], console: Console) -> None:
    view = Table(
        title=f"partitions: {result['records']:,} events, "
        f"{result['max_offsets_per_trigger']:,}/batch, {result['master']}, "
        f"median of {result['rounds']} round(s)"
    )
    for column in (
        "partitions", "records", "batches", "wall s", "events/s", "batch s (median)",
        "data files", "events/s × 4p", "batch s × 4p",
    ):  # fmt: skip
        view.add_column(column, justify="right")
    for n, s in sorted(result["summary"].items(), key=lambda item: int(item[0])):
        view.add_row(
            n, f"{s['records']:,}", f"{s['batches']:g}", f"{s['seconds']:.1f}",
            f"{s['events_per_s']:,.0f}", _num(s["batch_s_median"], ".2f"),
            f"{s['data_files']:g}", f"{s['events_ratio']:.2f}", _num(s["batch_ratio"], ".2f"),
        )  # fmt: skip
    console.print(view)
    for problem in result["row_count_problems"]:
        console.print(f"[red]row count mismatch[/] {problem}")


def plot_partitions(result: dict[str, Any]) -> str:
    """The partitions part's SVG: events/s and the median batch per partition count."""
    summary = result["summary"]
    # By count: a results file read back has its keys sorted as text ("16" before "4").
    names = sorted(summary, key=int)
    ticks = [(i + 0.5, f"{n} partitions") for i, n in enumerate(names)]
    panels = []
    for i, (key, title, spec) in enumerate(
        (
            ("events_per_s", "events/s (median of rounds)", ",.0f"),
            ("batch_s_median", "median batch, s (the first batch of each run left out)", ".2f"),
        )
    ):
        points = [
            (t, summary[n][key])
            for (t, _), n in zip(ticks, names, strict=True)
            if summary[n][key] is not None
        ]
        drawn = panel(
            top_of(i),
            title,
            [Series(points, dots=True)],
            len(names),
            x_label="",
            x_ticks=ticks,
            value_format=spec,
        )
        panels.append(drawn)
    caption = (
        f"growth: {result['records']:,} payments from one topic, "
        f"{result['max_offsets_per_trigger']:,} per batch, {result['master']}"
    )
    return document(panels, caption)


# --- part 2: a day of 1 s commits ---------------------------------------------------------


class Recorder:
    """frazil's commits to the day's table, and a sample requested every ``every`` of them;
    the stop requested once ``commits`` are in (the batch in flight still commits)."""

    def __init__(self, commits: int, every: int, stop: threading.Event) -> None:
        self.commits: list[Commit] = []
        self.wanted = commits
        self.every = every
        self.stop = stop
        self.requests: queue.Queue[int | None] = queue.Queue()
        self.requested = 0

    def on_event(self, event: Event) -> None:
        # Called on the batch's own thread: only note and hand on, never read files here.
        if not isinstance(event, CommitEvent):
            return
        self.commits.append(Commit(time.monotonic(), event.seconds, event.records))
        n = len(self.commits)
        if n % self.every == 0:
            self.request(n)
        if n >= self.wanted:
            self.stop.set()

    def request(self, n: int) -> None:
        """Ask for a sample at ``n`` commits."""
        self.requested = n
        self.requests.put(n)


class PassLog(logging.Handler):
    """frazil's maintenance lines (what each pass did, skipped or failed), each with the
    commits in by then."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__(logging.INFO)
        self.recorder = recorder
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(
            {"commits": len(self.recorder.commits), "message": record.getMessage()[:500]}
        )


@dataclass
class Sampler:
    """Reads the day's table every time the recorder asks, on a thread of its own.

    Attributes:
        catalog_db: The warehouse's SQLite catalog.
        recorder: Whose commits are sampled.
        samples: One dict per sample, in order.
        maintenance: Maintenance commits seen, by action (each snapshot once).
    """

    catalog_db: Path
    recorder: Recorder
    samples: list[dict[str, Any]] = field(default_factory=list)
    maintenance: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _files: dict[str, int] = field(default_factory=dict)
    _seen: set[int] = field(default_factory=set)
    _last: int = 0
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="growth-sampler", daemon=True)
        self._thread.start()

    def finish(self) -> None:
        """Take the requested samples, then one at the last commit, and stop."""
        n = len(self.recorder.commits)
        if n > self.recorder.requested:
            self.recorder.request(n)
        self.recorder.requests.put(None)
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while (n := self.recorder.requests.get()) is not None:
            try:
                self.samples.append(self.sample(n))
            except Exception as exc:  # a sample lost is reported, the run goes on
                self.errors.append(f"sample at {n}: {exc!r}")
            self._last = n

    def table(self) -> Any:
        from pyiceberg.table import StaticTable

        location = metadata_location(self.catalog_db, "bench", "day")
        if location is None:
            raise RuntimeError("the day's table is not in the catalog")
        return StaticTable.from_metadata(str(location))

    def sample(self, n: int) -> dict[str, Any]:
        """The table and the commits ``(last sample, n]``."""
        commits = self.recorder.commits
        table = self.table()
        folder = Path(table.metadata.location.removeprefix("file:")) / "metadata"
        files = _folder(folder)
        added = new_bytes(self._files, files) if self._files else None
        self._files = files
        per_commit = self._commit_bytes(table)
        current = table.current_snapshot()
        summary = current.summary if current is not None else {}
        query_s, rows = run_query(table)
        return {
            "commits": n,
            "at_s": commits[n - 1].at - commits[0].at,
            **window_stats(commits, self._last, n),
            "metadata_bytes_per_commit": statistics.median(per_commit) if per_commit else None,
            "metadata_commits_read": len(per_commit),
            "new_metadata_bytes_per_commit": added / (n - self._last) if added else None,
            "metadata_dir_bytes": sum(files.values()),
            "metadata_dir_files": len(files),
            "metadata_json_files": sum(1 for f in files if f.endswith(".metadata.json")),
            "snapshots": len(table.metadata.snapshots),
            "data_files": int(summary.get("total-data-files") or 0),
            "table_rows": int(summary.get("total-records") or 0),
            "query_s": query_s,
            "query_rows": rows,
        }

    def _commit_bytes(self, table: Any) -> list[int]:
        """Metadata bytes written by each ingest commit not seen before whose metadata file
        is still there; counts the maintenance commits among the new snapshots."""
        metadata = table.metadata
        written = [(e.timestamp_ms, e.metadata_file) for e in metadata.metadata_log]
        written.append((metadata.last_updated_ms, table.metadata_location))
        out = []
        for snapshot in metadata.snapshots:
            if snapshot.snapshot_id in self._seen:
                continue
            self._seen.add(snapshot.snapshot_id)
            summary = snapshot.summary or {}
            action = summary.get("frazil.maintenance")
            if action:
                self.maintenance[action] = self.maintenance.get(action, 0) + 1
            if not summary.get(OFFSETS):
                continue
            path = metadata_file_for(snapshot.timestamp_ms, written)
            if path is None:
                continue
            try:
                own = sum(
                    m.manifest_length
                    for m in snapshot.manifests(table.io)
                    if m.added_snapshot_id == snapshot.snapshot_id
                )
                out.append(_size(path) + _size(snapshot.manifest_list) + own)
            except FileNotFoundError:
                continue  # expired meanwhile
        return out


def _size(path: str) -> int:
    return os.stat(path.removeprefix("file:")).st_size


def _folder(folder: Path) -> dict[str, int]:
    """Name → size of the files in ``folder``; a file deleted while listing is left out."""
    out = {}
    for entry in os.scandir(folder):
        try:
            out[entry.name] = entry.stat().st_size
        except FileNotFoundError:
            continue
    return out


def run_query(table: Any, snapshot_id: int | None = None) -> tuple[float, int]:
    """Seconds and matching rows of the fixed query (count and sum of ``amount`` of debits of
    at least 50,000), read by PyIceberg: manifests pruned, data files read and filtered."""
    import pyarrow.compute as pc
    from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual

    started = time.perf_counter()
    rows = table.scan(
        row_filter=And(EqualTo("type", "debit"), GreaterThanOrEqual("amount", 50_000)),
        selected_fields=("type", "amount"),
        snapshot_id=snapshot_id,
    ).to_arrow()
    pc.sum(rows["amount"]).as_py()
    return time.perf_counter() - started, rows.num_rows


def measure_day(
    spark: Any, broker: LocalBroker, work: Path, args: argparse.Namespace, console: Console
) -> dict[str, Any]:
    """Commit a trickle ``args.commits`` times with inline maintenance, sampling the table;
    then compact it in full and compare the query."""
    topic = f"growth-day-{work.name}"
    ensure_topic(broker.bootstrap, topic, partitions=4)
    trigger = f"{round(args.seconds_per_commit * 1000)}ms"
    policy = day_policy(args.seconds_per_commit, args.interval, args.expire)
    data = payments_config(work, broker.bootstrap, topic, "day", trigger=trigger)
    config = parse_config({**data, "spark": SPARK, "maintenance": policy})
    every = args.every or sample_every(args.commits)
    stop = threading.Event()
    recorder = Recorder(args.commits, every, stop)
    sampler = Sampler(work / "lake" / "catalog.db", recorder)
    # More than the run can take; the producer is stopped once the commits are in.
    count = int(args.rate * (args.commits * args.seconds_per_commit * 10 + 600))
    producer = start_frazil(
        "generate", "-t", topic, "-n", str(count), "-r", str(args.rate), "-b", broker.bootstrap
    )
    console.print(
        f"committing {args.commits:,} times (trigger {trigger}, {args.rate} payments/s, "
        f"maintenance {policy}), a sample every {every} commits"
    )
    load_start = _load()
    passes = PassLog(recorder)
    maintenance_log = logging.getLogger("frazil.maintenance")
    level = maintenance_log.level
    maintenance_log.setLevel(logging.INFO)
    maintenance_log.addHandler(passes)
    sampler.start()
    t0 = time.monotonic()
    try:
        report = run(config, spark=spark, stop_event=stop, on_event=recorder.on_event)[0]
    finally:
        producer_exit = stop_process(producer)
        sampler.finish()
        maintenance_log.removeHandler(passes)
        maintenance_log.setLevel(level)
    seconds = time.monotonic() - t0
    load_end = _load()
    commits = recorder.commits
    console.print(
        f"{len(commits):,} commits in {seconds:.0f}s, {report.table_rows:,} rows; "
        f"{len(sampler.samples)} samples, maintenance commits {sampler.maintenance}"
    )
    for error in sampler.errors:
        console.print(f"[red]{error}[/]")
    for line in passes.lines:
        console.print(f"  at {line['commits']:,} commits: {line['message']}", highlight=False)

    before = sampler.table()
    before_id = before.current_snapshot().snapshot_id
    t1 = time.monotonic()
    spark.sql(
        "CALL lake.system.rewrite_data_files(table => 'lake.bench.day', "
        "options => map('rewrite-all', 'true'))"
    ).collect()
    spark.sql("CALL lake.system.rewrite_manifests(table => 'lake.bench.day')").collect()
    compact_s = time.monotonic() - t1
    after = sampler.table()
    after_id = after.current_snapshot().snapshot_id
    # Alternating, the machine quiet now: its noise falls on both alike.
    maintained, compacted, counts = [], [], set()
    for _ in range(5):
        for snapshot_id, times in ((before_id, maintained), (after_id, compacted)):
            s, rows = run_query(after, snapshot_id)
            times.append(s)
            counts.add(rows)
    data_files_after = int(after.current_snapshot().summary.get("total-data-files") or 0)
    final = sampler.samples[-1] if sampler.samples else {}
    query_ratio = statistics.median(maintained) / statistics.median(compacted)
    series = {
        key: [s[key] for s in sampler.samples if s.get(key) is not None]
        for key in (
            "commit_s_median",
            "metadata_bytes_per_commit",
            "new_metadata_bytes_per_commit",
            "metadata_dir_bytes",
            "data_files",
            "snapshots",
        )
    }
    flat = {key: growth(values) for key, values in series.items()}
    return {
        "commits_asked": args.commits,
        "commits": len(commits),
        "seconds_per_commit": args.seconds_per_commit,
        "trigger": trigger,
        "rate": args.rate,
        "partitions": 4,
        "every": every,
        "policy_simulated": {
            "interval": args.interval,
            "expire": {"older_than": args.expire, "retain_last": EXPIRE_RETAIN_LAST},
        },
        "maintenance": policy,
        "seconds": seconds,
        "spacing_s": (commits[-1].at - commits[0].at) / (len(commits) - 1),
        "table_rows": report.table_rows,
        "records_ingested": report.records_ingested,
        "producer_exit": producer_exit,
        "load_start": load_start,
        "load_end": load_end,
        "samples": sampler.samples,
        "sample_errors": sampler.errors,
        "maintenance_commits": sampler.maintenance,
        "maintenance_log": passes.lines,
        "growth": flat,
        "flat_limit": FLAT,
        "final": final,
        "compaction_s": compact_s,
        "data_files_after_compaction": data_files_after,
        "query_maintained_s": statistics.median(maintained),
        "query_compacted_s": statistics.median(compacted),
        "query_rows_agree": len(counts) == 1,
        "query_ratio": query_ratio,
        "query_goal": QUERY_GOAL,
        "query_goal_met": query_ratio <= QUERY_GOAL,
    }


def show_day(result: dict[str, Any], console: Console) -> None:
    view = Table(
        title=f"a day of 1 s commits, compressed: {result['commits']:,} commits "
        f"({result['commits'] / 3600:.2f} simulated h) in {result['seconds']:.0f}s, "
        f"{result['rate']} payments/s, inline maintenance"
    )
    for column in (
        "commits", "commit s p50", "p95", "spacing s", "meta B/commit", "new meta B/commit",
        "metadata/", "files", "snapshots", "data files", "query ms",
    ):  # fmt: skip
        view.add_column(column, justify="right")
    for s in result["samples"]:
        view.add_row(
            f"{s['commits']:,}", f"{s['commit_s_median']:.3f}", f"{s['commit_s_p95']:.3f}",
            f"{s['spacing_s']:.3f}", _num(s["metadata_bytes_per_commit"], ",.0f"),
            _num(s["new_metadata_bytes_per_commit"], ",.0f"),
            f"{s['metadata_dir_bytes'] / MIB:.1f} MiB", str(s["metadata_dir_files"]),
            str(s["snapshots"]), str(s["data_files"]), f"{s['query_s'] * 1000:.0f}",
        )  # fmt: skip
    console.print(view)
    for key, ratio in result["growth"].items():
        verdict = "-" if ratio is None else ("flat" if ratio <= FLAT else "[red]grows[/]")
        console.print(f"{key}: last quarter / second quarter {_num(ratio, '.2f')}× ({verdict})")
    met = "met" if result["query_goal_met"] else "[red]not met[/]"
    console.print(
        f"query: maintained {result['query_maintained_s'] * 1000:.0f} ms, compacted in full "
        f"{result['query_compacted_s'] * 1000:.0f} ms ({result['data_files_after_compaction']} "
        f"data files): [bold]{result['query_ratio']:.2f}×[/] (goal ≤ {QUERY_GOAL}×) {met}"
    )


def plot_day(result: dict[str, Any]) -> str:
    """The day part's SVG: each sampled figure against the commits so far."""
    samples = result["samples"]
    end = samples[-1]["commits"] if samples else 1

    def line(key: str, scale: float = 1.0, **style: Any) -> Series:
        points = [(s["commits"], s[key] / scale) for s in samples if s.get(key) is not None]
        return Series(points, **style)

    compacted = result["query_compacted_s"] * 1000 * QUERY_GOAL
    specs: list[tuple[str, list[Series], str]] = [
        (
            "commit time, s: median (blue) and p95 (orange) of each window",
            [line("commit_s_median"), line("commit_s_p95", color=ORANGE)],
            ".2f",
        ),
        (
            "metadata KiB per ingest commit (blue); all new metadata KiB per commit (orange)",
            [
                line("metadata_bytes_per_commit", KIB),
                line("new_metadata_bytes_per_commit", KIB, color=ORANGE),
            ],
            ",.0f",
        ),
        ("metadata folder, MiB", [line("metadata_dir_bytes", MIB)], ",.1f"),
        (
            "data files (blue), snapshots kept (orange)",
            [line("data_files"), line("snapshots", color=ORANGE)],
            ",.0f",
        ),
        (
            f"query, ms (blue); {QUERY_GOAL}× the table compacted in full (orange)",
            [line("query_s", 1 / 1000), Series([(0, compacted), (end, compacted)], ORANGE, True)],
            ",.0f",
        ),
    ]
    label = f"{end:,} commits = {end / 3600:.2f} simulated h"
    panels = [
        panel(top_of(i), title, lines, end, x_label=label, value_format=spec)
        for i, (title, lines, spec) in enumerate(specs)
    ]
    policy = result["policy_simulated"]
    caption = (
        f"growth: 1 s commits compressed to {result['spacing_s']:.2f} s, "
        f"{result['rate']} payments/s; inline maintenance every {policy['interval']}, expiry "
        f"{policy['expire']['older_than']} (simulated)"
    )
    return document(panels, caption)


# --- the run ------------------------------------------------------------------------------

#: One Spark application for both parts, throughput's settings.
SPARK = {"master": "local[2]", "driver_memory": "4g"}


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _duration(text: str) -> str:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"a duration longer than zero, got {text!r}")
    return text


def _counts(text: str) -> list[int]:
    counts = sorted({int(n) for n in text.split(",") if n.strip()})
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"partition counts from 1, got {text!r}")
    return counts


def write_plots(result: dict[str, Any], console: Console) -> None:
    for part, draw in (("partitions", plot_partitions), ("day", plot_day)):
        if part in result:
            path = DOCS / f"growth-{part}.svg"
            path.write_text(draw(result[part]))
            console.print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("partitions", "day", "both"), default="both")
    parser.add_argument("--records", type=int, default=1_000_000, help="partitions: per topic")
    parser.add_argument("--partitions", type=_counts, default=list(PARTITIONS))
    parser.add_argument("--rounds", type=int, default=2, help="partitions: measured rounds")
    parser.add_argument("--per-trigger", type=int, default=100_000, help="partitions")
    parser.add_argument("--commits", type=int, default=400, help=f"day: {DAY:,} is a day")
    parser.add_argument("--every", type=int, default=0, help="day: commits between samples")
    parser.add_argument("--rate", type=int, default=20, help="day: payments/s produced")
    parser.add_argument(
        "--seconds-per-commit",
        type=float,
        default=0.5,
        help="day: the trigger, and wall seconds standing for one simulated second",
    )
    parser.add_argument(
        "--interval", type=_duration, default=INTERVAL, help="day: between passes, simulated"
    )
    parser.add_argument(
        "--expire",
        type=_duration,
        default=EXPIRE_OLDER_THAN,
        help="day: expire snapshots older than this, simulated (frazil's default: 1h)",
    )
    parser.add_argument("--name", default="growth", help="result file: bench/results/<name>.json")
    parser.add_argument("--plot", type=Path, help="redraw the plots from this results file")
    args = parser.parse_args()
    console = Console()
    if args.plot:
        import json

        write_plots(json.loads(args.plot.read_text()), console)
        return
    if args.commits < 8:
        parser.error("--commits: at least 8")
    parts = ["partitions", "day"] if args.part == "both" else [args.part]
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"growth-{run_id}"
    broker = start_broker(f"growth-{run_id}")
    result: dict[str, Any] = {"code": _commit_of_code()}
    try:
        spark = None
        for part in parts:
            if spark is None:
                # Every config of the run has the same warehouse, so one session serves all.
                first = payments_config(work, broker.bootstrap, "warmup", "warmup")
                spark = build_spark(parse_config({**first, "spark": SPARK}))
            measure = measure_partitions if part == "partitions" else measure_day
            result[part] = measure(spark, broker, work, args, console)
        if spark is not None:
            spark.stop()
    finally:
        broker.down()
    if "partitions" in result:
        show_partitions(result["partitions"], console)
    if "day" in result:
        show_day(result["day"], console)
    path = write_result(args.name, result)
    console.print(f"wrote {path}")
    write_plots(result, console)


if __name__ == "__main__":
    main()
