"""What ``frazil run`` prints while it runs: one line per micro-batch (a line per table and
batch with ``--verbose``), and on a terminal a progress bar of the backlog when it runs until
caught up."""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

from frazil.progress.events import BatchDone, CommitEvent, MaintenanceDone
from frazil.progress.freshness import freshness_seconds, pipeline_valid_through
from frazil.progress.markers import format_ms


def freshness(valid_through_ms: int | None) -> float | None:
    """Freshness now of a commit's recorded valid-through, in seconds: the same figure as
    ``frazil status``, the metrics and the page (frazil.progress.freshness)."""
    return freshness_seconds(valid_through_ms, time.time() * 1000)


def table_line(event: CommitEvent) -> str:
    """One table's commit of a batch (``--verbose``), in rich markup."""
    valid = format_ms(event.valid_through_ms) if event.valid_through_ms else "-"
    fresh = freshness(event.valid_through_ms)
    tail = "" if fresh is None else f", freshness {fresh:.1f}s"
    if event.lag_records is not None:
        tail += f", lag {event.lag_records:,}"
    return (
        f"[dim]{escape(event.pipeline)}[/] batch {event.batch_id}: {event.records:,} records → "
        f"{escape(event.table)} in {event.seconds:.1f}s (total {event.total_records:,}, "
        f"valid through {valid}{tail})"
    )


def maintenance_line(event: MaintenanceDone) -> str:
    """An inline maintenance action's line, in rich markup: what it did, or why it failed or
    was skipped this pass."""
    head = f"[dim]maintenance[/] {escape(event.table)}: {event.action}"
    if event.error:
        return f"{head} [red]failed[/]: {escape(event.error)}"
    if event.skipped:
        return f"{head} skipped: {escape(event.skipped)}"
    return f"{head} in {event.seconds:.1f}s: {escape(event.detail)}"


@dataclass
class BatchLines:
    """Turns the per-table commits of each batch into one line when the batch is done.

    Commits of a routed batch arrive from several threads; the batch's :class:`BatchDone`
    comes after all of them.
    """

    _commits: dict[tuple[str, int], list[CommitEvent]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def commit(self, event: CommitEvent) -> None:
        """Keep a table's commit until its batch is done."""
        with self._lock:
            self._commits.setdefault((event.pipeline, event.batch_id), []).append(event)

    def done(self, event: BatchDone) -> tuple[str, int]:
        """The batch's line, in rich markup (records, tables, seconds, freshness, lag), and
        the records it wrote."""
        with self._lock:
            commits = self._commits.pop((event.pipeline, event.batch_id), [])
        records = sum(c.records for c in commits)
        target = escape(commits[0].table) if len(commits) == 1 else f"{len(commits):,} tables"
        # Short enough for 80 columns; the totals are in the per-table lines (-v).
        details = []
        # The table furthest behind tells how fresh the whole batch is.
        fresh = freshness(pipeline_valid_through(c.valid_through_ms for c in commits))
        if fresh is not None:
            details.append(f"freshness {fresh:.1f}s")
        if event.lag_records is not None:
            details.append(f"lag {event.lag_records:,}")
        tail = f" ({', '.join(details)})" if details else ""
        # Of several tables, rows: a record routed to two tables is a row in each (as the
        # summary says).
        unit = "records" if len(commits) <= 1 else "rows"
        line = (
            f"[dim]{escape(event.pipeline)}[/] batch {event.batch_id}: {records:,} {unit} → "
            f"{target} in {event.seconds:.1f}s{tail}"
        )
        return line, records


@dataclass
class Backlog:
    """The backlog of the pipelines of a run, from their batches: records read, records
    left in Kafka beyond the tables, and the rate."""

    started: float = field(default_factory=time.monotonic)
    read: int = 0
    _lag: dict[str, int] = field(default_factory=dict)

    def add(self, event: BatchDone, written: int) -> None:
        """Count a batch: its Kafka range if known, otherwise the records it wrote."""
        self.read += event.read if event.read is not None else written
        if event.lag_records is not None:
            self._lag[event.pipeline] = event.lag_records

    @property
    def left(self) -> int | None:
        """Records in Kafka beyond the tables (None until a batch told)."""
        return sum(self._lag.values()) if self._lag else None

    def rate(self, now: float | None = None) -> float:
        """Records read per second since the run started."""
        elapsed = (time.monotonic() if now is None else now) - self.started
        return self.read / elapsed if elapsed > 0 else 0.0

    def eta(self, now: float | None = None) -> float | None:
        """Seconds to catch up at the current rate (None: not known)."""
        rate = self.rate(now)
        left = self.left
        if left is None or rate <= 0:
            return None
        return left / rate


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class BacklogBar:
    """A rich progress bar of the backlog on ``out`` (a terminal): records read of read plus
    left, the rate and the time to catch up. Lines printed on ``out`` go above it."""

    def __init__(self, out: Console) -> None:
        self.backlog = Backlog()
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("catching up"),
            BarColumn(bar_width=None),
            TextColumn("{task.fields[left]}"),
            TextColumn("{task.fields[rate]}"),
            TextColumn("{task.fields[eta]}"),
            console=out,
            transient=True,
        )
        self._moved: list[tuple[logging.StreamHandler[Any], Any]] = []
        self._begun = False
        self._task = self._progress.add_task("backlog", total=None, left="? left", rate="", eta="")

    def __enter__(self) -> BacklogBar:
        original = sys.stderr
        self._progress.start()
        # Log lines go above the bar too: the handlers write to the stderr they were given
        # at start, which the bar's redirection of sys.stderr does not reach.
        if sys.stderr is not original:
            for handler in logging.getLogger().handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream is original:
                    self._moved.append((handler, original))
                    handler.setStream(sys.stderr)
        return self

    def __exit__(self, *exc: object) -> None:
        for handler, stream in self._moved:
            handler.setStream(stream)
        self._moved.clear()
        self._progress.stop()

    def started(self) -> None:
        """A batch began: the rate counts from the first one (not from Spark's start)."""
        if not self._begun:
            self._begun = True
            self.backlog.started = time.monotonic()

    def add(self, event: BatchDone, written: int) -> None:
        """Move the bar by a batch."""
        b = self.backlog
        b.add(event, written)
        left = b.left
        self._progress.update(
            self._task,
            completed=b.read,
            total=None if left is None else b.read + left,
            left="? left" if left is None else f"{left:,} left",
            rate=f"{b.rate():,.0f} records/s",
            eta=f"ETA {_duration(b.eta())}",
        )
