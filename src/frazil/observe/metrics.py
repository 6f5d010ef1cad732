"""Prometheus metrics of ``frazil run`` (``metrics: {port: 9464}`` or ``--metrics-port``).

Counters and gauges are read from the running pipelines when Prometheus scrapes (a collector,
so nothing is counted twice and nothing costs a thing between scrapes); durations are
histograms fed by the engine's commit events. Lag is computed at scrape time from Kafka's
latest offsets and the offsets in the tables. Names follow Prometheus conventions: the
``frazil_`` prefix, base units in names, ``_total`` counters.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from frazil.progress import freshness
from frazil.progress.events import CommitEvent, Event, MaintenanceDone, SchemaEvolved
from frazil.reasons import reason_label
from frazil.source.clients import AuthenticationWatch
from frazil.source.offsets import TopicOffsets
from frazil.source.options import DEFAULT_ISOLATION_LEVEL

log = logging.getLogger(__name__)

#: Commit durations (seconds since the batch began), from sub-second to minutes.
BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)


@dataclass(frozen=True)
class TableSample:
    """One table of a pipeline, as the run last saw it."""

    table: str
    data_files: int
    snapshots: int
    offsets: TopicOffsets
    max_timestamps: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass(frozen=True)
class PipelineSample:
    """One pipeline's counters and state at a scrape."""

    pipeline: str
    up: bool
    records: int
    batches: int
    skipped_batches: int
    unmatched: int
    schema_changes: int
    #: Records dropped as configured (a filter, ``tombstones: skip``).
    filtered: int
    dead_letters: dict[tuple[str, str], int]
    last_commit_wall_ms: int | None
    valid_through_ms: int | None
    restarts: int
    tables: list[TableSample]


def lowest_offsets(tables: list[TableSample]) -> TopicOffsets:
    """Per partition, the smallest offset over the tables: every record below it is in all."""
    return freshness.lowest_offsets(sample.offsets for sample in tables)


class FrazilCollector:
    """A prometheus-client collector over the running pipelines.

    Args:
        samples: Returns each pipeline's current sample.
        latest: Returns Kafka's latest offsets of the partitions asked for.
    """

    def __init__(
        self,
        samples: Callable[[], list[PipelineSample]],
        latest: Callable[[TopicOffsets], TopicOffsets] | None = None,
    ) -> None:
        self._samples = samples
        self._latest = latest

    def describe(self) -> list[Any]:
        return []  # collected on demand only (no registration-time scrape)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        now_ms = time.time() * 1000
        samples = self._samples()
        up = GaugeMetricFamily("frazil_up", "1 while the pipeline runs", labels=["pipeline"])
        read = CounterMetricFamily(
            "frazil_records_read",
            "Records read from Kafka and handled (written, dead-lettered, unmatched or filtered)",
            labels=["pipeline"],
        )
        written = CounterMetricFamily(
            "frazil_records_written", "Records committed to the tables", labels=["pipeline"]
        )
        dead = CounterMetricFamily(
            "frazil_records_dead_lettered",
            "Records sent to the dead-letter queue",
            labels=["pipeline", "stage", "reason"],
        )
        unmatched = CounterMetricFamily(
            "frazil_records_unmatched",
            "Records no route matched (default: skip)",
            labels=["pipeline"],
        )
        filtered = CounterMetricFamily(
            "frazil_records_filtered",
            "Records dropped as configured (a transform's filter, tombstones: skip)",
            labels=["pipeline"],
        )
        batches = CounterMetricFamily(
            "frazil_batches", "Micro-batches handled", labels=["pipeline"]
        )
        skipped = CounterMetricFamily(
            "frazil_batches_skipped",
            "Micro-batches already in their tables (replays), not read",
            labels=["pipeline"],
        )
        changes = CounterMetricFamily(
            "frazil_schema_changes", "Table schema changes made", labels=["pipeline"]
        )
        restarts = CounterMetricFamily(
            "frazil_restarts", "Streaming query restarts from the tables", labels=["pipeline"]
        )
        last = GaugeMetricFamily(
            "frazil_last_commit_timestamp_seconds",
            "When the pipeline last committed (Unix time)",
            labels=["pipeline"],
        )
        since = GaugeMetricFamily(
            "frazil_time_since_last_commit_seconds",
            "Seconds since the pipeline last committed",
            labels=["pipeline"],
        )
        fresh = GaugeMetricFamily(
            "frazil_freshness_seconds",
            "Now minus valid-through: every record older than this is in the tables",
            labels=["pipeline"],
        )
        files = GaugeMetricFamily(
            "frazil_table_data_files", "Data files in the table", labels=["pipeline", "table"]
        )
        snaps = GaugeMetricFamily(
            "frazil_table_snapshots", "Snapshots kept by the table", labels=["pipeline", "table"]
        )
        lag = GaugeMetricFamily(
            "frazil_lag_records",
            "Records in Kafka not yet in the tables",
            labels=["pipeline", "topic", "partition"],
        )
        lag_s = GaugeMetricFamily(
            "frazil_lag_seconds",
            "For a lagging partition: now minus the newest committed record's Kafka timestamp",
            labels=["pipeline", "topic", "partition"],
        )
        for s in samples:
            p = s.pipeline
            up.add_metric([p], 1.0 if s.up else 0.0)
            lost = sum(s.dead_letters.values())
            read.add_metric([p], float(s.records + lost + s.unmatched + s.filtered))
            written.add_metric([p], float(s.records))
            kinds: dict[tuple[str, str], int] = {}
            for (stage, reason), n in s.dead_letters.items():
                kind = (stage, reason_label(reason))
                kinds[kind] = kinds.get(kind, 0) + n
            for (stage, label), n in sorted(kinds.items()):
                dead.add_metric([p, stage, label], float(n))
            unmatched.add_metric([p], float(s.unmatched))
            filtered.add_metric([p], float(s.filtered))
            batches.add_metric([p], float(s.batches))
            skipped.add_metric([p], float(s.skipped_batches))
            changes.add_metric([p], float(s.schema_changes))
            restarts.add_metric([p], float(s.restarts))
            if s.last_commit_wall_ms is not None:
                last.add_metric([p], s.last_commit_wall_ms / 1000)
                since.add_metric([p], max(0.0, (now_ms - s.last_commit_wall_ms) / 1000))
            seconds = freshness.freshness_seconds(s.valid_through_ms, now_ms)
            if seconds is not None:
                fresh.add_metric([p], seconds)
            for t in s.tables:
                files.add_metric([p, t.table], float(t.data_files))
                snaps.add_metric([p, t.table], float(t.snapshots))
            self._add_lag(s, lag, lag_s, now_ms)
        yield from (up, read, written, dead, unmatched, filtered, batches, skipped, changes)
        yield restarts
        yield from (last, since, fresh, files, snaps, lag, lag_s)

    def _add_lag(self, s: PipelineSample, lag: Any, lag_s: Any, now_ms: float) -> None:
        committed = lowest_offsets(s.tables)
        if not committed or self._latest is None:
            return
        try:
            latest = self._latest(committed)
        except Exception as exc:  # Kafka unreachable: no lag this scrape, the rest stands
            log.debug("lag of %s unavailable: %s", s.pipeline, exc)
            return
        stamps: dict[tuple[str, int], int] = {}
        for t in s.tables:
            for tp, ts in t.max_timestamps.items():
                stamps[tp] = max(ts, stamps.get(tp, ts))
        for topic, parts in sorted(committed.items()):
            for partition, offset in sorted(parts.items()):
                end = latest.get(topic, {}).get(partition)
                if end is None:
                    continue
                behind = freshness.lag_records(offset, end)
                labels = [s.pipeline, topic, str(partition)]
                lag.add_metric(labels, float(behind))
                newest = stamps.get((topic, partition))
                lag_s.add_metric(labels, freshness.lag_seconds(behind, newest, now_ms))


class CommitHistograms:
    """Histograms and counters fed by the engine's events."""

    def __init__(self, registry: Any) -> None:
        from prometheus_client import Counter, Histogram

        self.commit_seconds = Histogram(
            "frazil_commit_duration_seconds",
            "From a micro-batch's start to its commit of one table",
            ["pipeline", "table"],
            buckets=BUCKETS,
            registry=registry,
        )
        self.committed = Counter(
            "frazil_table_records_committed",
            "Records committed per table",
            ["pipeline", "table"],
            registry=registry,
        )
        self.bytes_written = Counter(
            "frazil_table_bytes_written",
            "Bytes of data files committed per table",
            ["pipeline", "table"],
            registry=registry,
        )
        self.evolved = Counter(
            "frazil_table_schema_changes",
            "Schema changes per table",
            ["pipeline", "table"],
            registry=registry,
        )
        self.maintenance = Counter(
            "frazil_table_maintenance_actions",
            "Inline maintenance actions per table, by outcome (done, failed, skipped)",
            ["table", "action", "outcome"],
            registry=registry,
        )

    def on_event(self, event: Event) -> None:
        """Record one engine event."""
        if isinstance(event, CommitEvent):
            self.commit_seconds.labels(event.pipeline, event.table).observe(event.seconds)
            self.committed.labels(event.pipeline, event.table).inc(event.records)
            self.bytes_written.labels(event.pipeline, event.table).inc(event.bytes_written)
        elif isinstance(event, SchemaEvolved):
            self.evolved.labels(event.pipeline, event.table).inc(len(event.changes))
        elif isinstance(event, MaintenanceDone):
            outcome = "failed" if event.error else "skipped" if event.skipped else "done"
            self.maintenance.labels(event.table, event.action, outcome).inc()


class MetricsServer:
    """The ``/metrics`` endpoint: a registry with the collector and the histograms."""

    def __init__(
        self,
        samples: Callable[[], list[PipelineSample]],
        latest: Callable[[TopicOffsets], TopicOffsets] | None,
    ) -> None:
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(FrazilCollector(samples, latest))
        self.histograms = CommitHistograms(self.registry)
        self._server: Any = None

    def start(self, host: str, port: int) -> None:
        """Serve on ``http://host:port/metrics`` from a thread of its own."""
        from prometheus_client import start_http_server

        self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        log.info("metrics on http://%s:%d/metrics", host, port)

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def kafka_latest(
    admin_conf: dict[str, Any], isolation: str = DEFAULT_ISOLATION_LEVEL
) -> Callable[..., TopicOffsets]:
    """A function reading Kafka's latest offsets (or, given ``earliest=True``, the earliest)
    with one admin client kept open.

    Args:
        admin_conf: The librdkafka admin client's settings.
        isolation: The pipelines' isolation level: with ``read_committed`` "latest" is the
            last stable offset, where Spark's source stops, so an open transaction is not lag.

    The function raises :class:`frazil.errors.KafkaError` naming Kafka's address and the cause
    when Kafka does not answer (a timeout alone carries no message to show).
    """
    from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

    from frazil import errors

    watch = AuthenticationWatch(admin_conf)
    admin = AdminClient(watch.client_conf())
    where = f"Kafka at {admin_conf.get('bootstrap.servers', '?')}"
    level = IsolationLevel[isolation.upper()]
    _NO_SUCH_PARTITION = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION}

    def latest(partitions: TopicOffsets, earliest: bool = False) -> TopicOffsets:
        # ``earliest``: the first offsets Kafka keeps instead (where a new partition is read
        # from).
        spec = OffsetSpec.earliest() if earliest else OffsetSpec.latest()  # type: ignore[no-untyped-call]
        asked = {
            TopicPartition(topic, partition): spec
            for topic, parts in partitions.items()
            for partition in parts
        }
        found: TopicOffsets = {}
        for tp, future in admin.list_offsets(
            asked, isolation_level=level, request_timeout=5
        ).items():
            try:
                offset = int(future.result(timeout=5).offset)
            except TimeoutError:
                refusal = watch.message(admin)
                raise errors.KafkaError(refusal or f"{where} did not answer within 5 s") from None
            except KafkaException as exc:
                # Markers keep the offsets of deleted topics: they have no lag to show.
                error = exc.args[0] if exc.args else None
                if isinstance(error, KafkaError) and error.code() in _NO_SUCH_PARTITION:
                    continue
                reason = error.str() if isinstance(error, KafkaError) else str(exc)
                refusal = watch.message(admin)
                if refusal is not None:
                    raise errors.KafkaError(refusal) from None
                raise errors.KafkaError(f"{where}: {reason or type(exc).__name__}") from exc
            found.setdefault(tp.topic, {})[tp.partition] = offset
        return found

    return latest
