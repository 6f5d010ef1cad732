"""What ``frazil run`` shows outside itself while it runs: the ``/metrics`` endpoint and the
consumer-group offsets (:mod:`frazil.observe`), fed from the running pipelines."""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil.config.models import FrazilConfig
from frazil.observe.groups import TIMEOUT_S as GROUP_TIMEOUT_S
from frazil.observe.groups import GroupCommitter
from frazil.observe.metrics import MetricsServer, PipelineSample, TableSample
from frazil.progress import markers
from frazil.progress.events import BatchDone, CommitEvent, Event
from frazil.source.admin import JvmKafkaAdmin
from frazil.source.offsets import TopicOffsets

if TYPE_CHECKING:
    from frazil.engine.pipeline_run import PipelineRun
    from frazil.observe.web import Dashboard

log = logging.getLogger(__name__)


def sample(run: PipelineRun) -> PipelineSample:
    """One pipeline's counters and state, read from its handler and tables."""
    handler = run.handler
    stats = handler.stats
    tables = []
    for name, target in list(handler.targets.items()):
        last = target.last
        try:
            data_files = target.table.current_total("total-data-files")
            snapshots = target.table.snapshot_count()
        except Exception:  # the JVM is going away: report what is known
            data_files = snapshots = 0
        stamps = {
            (topic, partition): ts
            for topic, parts in (last.max_timestamps if last else {}).items()
            for partition, ts in parts.items()
        }
        tables.append(
            TableSample(name, data_files, snapshots, last.offsets if last else {}, stamps)
        )
    query = run.query
    active = query is not None and query.isActive
    return PipelineSample(
        pipeline=run.pipeline.name,
        up=active and handler.error is None,
        records=stats.records,
        batches=stats.batches,
        skipped_batches=stats.skipped_batches,
        unmatched=stats.unmatched,
        filtered=stats.filtered,
        schema_changes=len(stats.evolutions),
        dead_letters=dict(handler.dead_letters.counts) if handler.dead_letters else {},
        last_commit_wall_ms=stats.last_commit_wall_ms,
        valid_through_ms=handler.ledger.valid_through_ms(),
        restarts=run.restarts,
        tables=tables,
    )


@dataclass
class Observers:
    """The metrics server and the group committer of one ``frazil run``."""

    config: FrazilConfig
    runs: list[PipelineRun] = field(default_factory=list)
    metrics: MetricsServer | None = None
    groups: GroupCommitter | None = None
    web: Dashboard | None = None
    latest: LatestOffsets | None = None
    #: Pipelines with commits since their group offsets were last submitted.
    _uncommitted: set[str] = field(default_factory=set)

    @classmethod
    def start(
        cls, config: FrazilConfig, metrics_port: int | None, admin: JvmKafkaAdmin
    ) -> Observers:
        """Start what the config asks for (metrics: ``metrics`` or ``metrics_port``); group
        offsets are committed through ``admin``."""
        observers = cls(config)
        # Kafka's Java client in the driver JVM, not librdkafka's admin client: see
        # frazil.observe.groups on why a run keeps librdkafka's admin out.
        observers.latest = LatestOffsets(admin.latest)
        observers.latest.start()
        if config.kafka.commit_offsets:
            observers.groups = GroupCommitter(
                functools.partial(admin.commit_group_offsets, timeout_s=GROUP_TIMEOUT_S)
            )
            observers.groups.start()
        port = metrics_port or (config.metrics.port if config.metrics else None)
        if port:
            from frazil.observe.web import Dashboard

            host = config.metrics.host if config.metrics else "0.0.0.0"
            observers.metrics = MetricsServer(observers.samples, admin.latest)
            # One port: /metrics for Prometheus, / for people.
            observers.web = Dashboard(config, observers.metrics.registry)
            observers.web.start(host, port)
            log.info("metrics on http://%s:%d/metrics, the status page on /", host, port)
        return observers

    def samples(self) -> list[PipelineSample]:
        """Every running pipeline's sample (for a scrape)."""
        return [sample(r) for r in list(self.runs)]

    def wrap(self, dispatch: Callable[[Event], None]) -> Callable[[Event], None]:
        """``dispatch`` plus the observers: each commit's lag (from Kafka's latest offsets as
        last polled, never waiting for Kafka), histograms, and group offsets after commits."""

        def observed(event: Event) -> None:
            if isinstance(event, CommitEvent | BatchDone) and self.latest is not None:
                event = dataclasses.replace(event, lag_records=self.latest.lag(event.offsets))
            dispatch(event)
            if self.metrics is not None:
                self.metrics.histograms.on_event(event)
            if self.groups is not None:
                # Once a batch, not once a commit: merging every table's marker at each of a
                # batch's commits grew with the square of its tables (1,000 routed tables: a
                # million markers merged a batch). Commits outside a batch (a stop's final
                # markers) are submitted by stop().
                if isinstance(event, CommitEvent):
                    self._uncommitted.add(event.pipeline)
                elif isinstance(event, BatchDone) and event.pipeline in self._uncommitted:
                    self._uncommitted.discard(event.pipeline)
                    self._commit_group(event.pipeline)

        return observed

    def _commit_group(self, pipeline: str) -> None:
        assert self.groups is not None
        run = next((r for r in self.runs if r.pipeline.name == pipeline), None)
        if run is None:
            return
        lowest = markers.merge_markers(
            [t.last for t in run.handler.targets.values() if t.last is not None], lowest=True
        )
        if lowest is not None:
            # Markers keep the offsets of topics the query no longer reads (deleted ones,
            # which Kafka would refuse); the group gets those of the topics read now.
            reading = run.handler.topic_ids_read
            offsets = {t: ps for t, ps in lowest.offsets.items() if not reading or t in reading}
            self.groups.submit(self.config.kafka.group_for(pipeline), offsets)

    def stop(self) -> None:
        """Commit the last offsets and stop serving metrics."""
        if self.latest is not None:
            self.latest.stop.set()
        if self.groups is not None:
            for pipeline in sorted(self._uncommitted):
                self._commit_group(pipeline)
            self._uncommitted.clear()
            self.groups.close()
        if self.web is not None:
            self.web.stop()


class LatestOffsets(threading.Thread):
    """Kafka's latest offsets of the partitions commits name, polled every second on a
    thread of its own, so that a commit's lag never waits for Kafka."""

    def __init__(self, read: Callable[[TopicOffsets], TopicOffsets]) -> None:
        super().__init__(name="frazil-latest-offsets", daemon=True)
        self._read = read
        self._wanted: TopicOffsets = {}
        self._seen: TopicOffsets = {}
        self._lock = threading.Lock()
        self.stop = threading.Event()

    def lag(self, offsets: TopicOffsets) -> int | None:
        """Records beyond ``offsets`` as last polled; None until the partitions were seen."""
        with self._lock:
            for topic, parts in offsets.items():
                self._wanted.setdefault(topic, {}).update(parts)
            seen = self._seen
        known = [
            (seen[t][p], o) for t, parts in offsets.items() for p, o in parts.items()
            if p in seen.get(t, {})
        ]  # fmt: skip
        if not known:
            return None
        return sum(max(0, end - offset) for end, offset in known)

    def run(self) -> None:
        while not self.stop.wait(1.0):
            with self._lock:
                wanted = {t: dict(parts) for t, parts in self._wanted.items()}
            if not wanted:
                continue
            try:
                found = self._read(wanted)
            except Exception as exc:  # Kafka away for a moment: the lag waits
                log.debug("latest offsets unavailable: %s", exc)
                continue
            with self._lock:
                self._seen = found
