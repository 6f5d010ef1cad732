"""``frazil status``: each pipeline's state from Kafka and its tables, without Spark.

The tables already hold the history of every commit (records, offsets, valid-through, commit
time in each snapshot's marker), so the status is rebuilt from them with PyIceberg reading
the catalog, whether or not ``frazil run`` is running, from any machine that reaches Kafka
and the catalog.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.errors import KafkaError, ServiceError
from frazil.maintenance.facts import summary_of
from frazil.observe.catalog import pipeline_tables, pyiceberg_catalog
from frazil.progress import fence, freshness
from frazil.progress.markers import (
    BATCH_ID,
    MAX_TIMESTAMPS,
    OFFSETS,
    PIPELINE,
    QUERY_ID,
    RUN_BY,
    VALID_THROUGH_MS,
)
from frazil.progress.rows import live_rows
from frazil.source.clients import admin_config, list_partitions
from frazil.source.offsets import TopicOffsets, offsets_from_json
from frazil.source.options import isolation_level

#: Commits the throughput is measured over.
RECENT_COMMITS = 20


@dataclass
class TableStatus:
    """One table of a pipeline."""

    table: str
    records: int
    data_files: int
    delete_files: int
    snapshots: int
    last_commit_ms: int | None
    valid_through_ms: int | None
    offsets: TopicOffsets = field(default_factory=dict)


@dataclass
class PipelineStatus:
    """One pipeline: running or not, lag, throughput, freshness, dead letters, tables."""

    pipeline: str
    running: bool
    #: Per topic; None when Kafka's latest offsets could not be read (``problems`` says why).
    lag_records: dict[str, int | None]
    lag_seconds: dict[str, float | None]
    records_per_second: float | None
    freshness_seconds: float | None
    last_commit_ms: int | None
    dead_letters: dict[str, int]
    tables: list[TableStatus]
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A plain dict for ``--output json``."""
        return asdict(self)


def check_reads(config: FrazilConfig, catalog: Any) -> None:
    """Read the metadata file of the config's first existing table through that table's own
    FileIO (the environment's credentials, or those the catalog vends with the table).

    A REST catalog answers a table's metadata without the object store, so without this
    read credentials the store refuses would go unnoticed until a file is read (the
    dead-letter counts), or show figures from the catalog alone. Other errors of the store
    are left to the reads that need it.

    Raises:
        ServiceError: The store refused the credentials (named by their variables, never
            shown).
    """
    from frazil.config.storage import refused_credentials

    for pipeline in config.pipelines:
        names = list(pipeline.static_tables())
        if pipeline.errors.dlq_table is not None:
            names.append(pipeline.errors.dlq_table)
        for name in names:
            try:
                table = catalog.load_table(name)
            except Exception:  # not created yet
                continue
            try:
                table.io.new_input(table.metadata_location).exists()
            except OSError as exc:
                address = config.storage.address() if config.storage else "AWS S3"
                refused = refused_credentials(str(exc), table.metadata_location, address)
                if refused is not None:
                    raise ServiceError(refused) from None
            return


@dataclass(frozen=True)
class Commit:
    """One of a pipeline's commits to one table."""

    #: The commit's time (the snapshot's), in milliseconds.
    at_ms: int
    #: Records it added.
    added: int
    #: The streaming query and batch that made it (the tables of a route commit a batch each,
    #: a few milliseconds apart); None where the snapshot does not say.
    batch: tuple[str, str] | None = None
    #: The Kafka offsets its marker records, per (topic, partition); None without a marker.
    offsets: dict[tuple[str, int], int] | None = None


@dataclass
class _Walk:
    """What one walk of a table's ancestry tells about a pipeline."""

    status: TableStatus
    #: Newest committed Kafka timestamp per (topic, partition), from the newest marker.
    newest: dict[tuple[str, int], int] = field(default_factory=dict)
    #: The pipeline's recent commits of its newest run to the table, newest first.
    window: list[Commit] = field(default_factory=list)
    #: The run that made them (its commits' run id).
    run_by: str | None = None


def _walk(catalog: Any, name: str, pipeline: str) -> _Walk | None:
    """Load a table once and walk its ancestry once: its marker, the newest timestamps and
    the recent commits' throughput."""
    from pyiceberg.table.snapshots import ancestors_of

    try:
        table = catalog.load_table(name)
    except Exception:  # not created yet
        return None
    metadata = table.metadata
    current = table.current_snapshot()
    totals = summary_of(current) if current is not None else {}
    walk = _Walk(
        TableStatus(
            table=name,
            records=live_rows(totals),
            data_files=int(totals.get("total-data-files", 0)),
            delete_files=int(totals.get("total-delete-files", 0)),
            snapshots=len(metadata.snapshots),
            last_commit_ms=None,
            valid_through_ms=None,
        )
    )
    # The throughput is the newest run's: a window across two runs would average in the time
    # between them.
    window_open = True
    for snapshot in ancestors_of(current, metadata):
        found = summary_of(snapshot)
        if found.get(PIPELINE) != pipeline:
            continue
        if walk.run_by is None:
            walk.run_by = found.get(RUN_BY, "")
        window_open &= found.get(RUN_BY, "") == walk.run_by and len(walk.window) <= RECENT_COMMITS
        if window_open:
            query, batch = found.get(QUERY_ID), found.get(BATCH_ID)
            marked = found.get(OFFSETS)
            walk.window.append(
                Commit(
                    int(snapshot.timestamp_ms),
                    int(found.get("added-records", 0)),
                    (query, batch) if query and batch else None,
                    {
                        (topic, int(p)): int(o)
                        for topic, parts in json.loads(marked).items()
                        for p, o in parts.items()
                    }
                    if marked
                    else None,
                )
            )
        status = walk.status
        if status.last_commit_ms is None and found.get(OFFSETS):
            status.last_commit_ms = int(snapshot.timestamp_ms)
            status.offsets = offsets_from_json(found[OFFSETS])
            valid = found.get(VALID_THROUGH_MS)
            status.valid_through_ms = int(valid) if valid else None
        if not walk.newest and found.get(MAX_TIMESTAMPS):
            walk.newest = {
                (topic, int(p)): int(ts)
                for topic, parts in json.loads(found[MAX_TIMESTAMPS]).items()
                for p, ts in parts.items()
            }
        if not window_open and status.last_commit_ms is not None and walk.newest:
            break
    return walk


def records_per_second(windows: list[list[Commit]]) -> float | None:
    """A pipeline's throughput over its recent commits to all of its tables.

    Each window holds one table's recent commits of the pipeline's newest run, newest first.
    A window holding more than RECENT_COMMITS commits was cut short: its oldest commit is where
    that table's view begins, and the pipeline's window opens at the latest such commit. With
    no window cut short every table holds the run's commits to it, and the window opens at the
    run's first commit. The opening batch's records (to every table: a route's tables commit
    a batch a few milliseconds apart) were read before the window and are not counted; the
    records of every later commit, to any table, up to the newest, are. None when no commit
    comes after the opening batch.

    Args:
        windows: Per table, its recent commits, newest first.
    """
    cut = [w[-1] for w in windows if len(w) > RECENT_COMMITS]
    oldest = [w[-1] for w in windows if w]
    if not oldest:
        return None
    opener = max(cut, key=lambda c: c.at_ms) if cut else min(oldest, key=lambda c: c.at_ms)
    counted = [
        c
        for w in windows
        for c in w
        if c.at_ms >= opener.at_ms
        and c is not opener
        and (opener.batch is None or c.batch != opener.batch)
        and (c.at_ms > opener.at_ms or c.batch is not None)
    ]
    if not counted:
        return None
    end = max(c.at_ms for c in counted)
    if end <= opener.at_ms:
        return None
    return _records(opener, counted) / ((end - opener.at_ms) / 1000)


def _records(opener: Commit, counted: list[Commit]) -> int:
    """Kafka records read after the opening batch: how far the markers' offsets moved (a
    MERGE's added rows are its batch's distinct keys, not its records; dead letters and
    records written to several tables count once), else the commits' added rows."""
    start = opener.offsets
    if start is None or any(c.offsets is None for c in counted):
        return sum(c.added for c in counted)
    end: dict[tuple[str, int], int] = {}
    for c in counted:
        assert c.offsets is not None
        for where, offset in c.offsets.items():
            end[where] = max(end.get(where, offset), offset)
    return sum(max(0, end[where] - start[where]) for where in end if where in start)


def _missing_topics(
    config: FrazilConfig,
    pipeline: PipelineConfig,
    committed: TopicOffsets,
    unreachable: list[KafkaError],
) -> list[str]:
    """A problem naming the pipeline's listed topics Kafka does not have, while none of them
    was ever committed (a misspelt topic shows no lag and no commit, nothing else); none
    once the pipeline has committed (its lag is read then). ``unreachable`` holds Kafka's
    failure to answer once one pipeline met it: the others of the same status report it
    without waiting again."""
    if pipeline.topics is None or set(pipeline.topics) & set(committed):
        return []
    if unreachable:
        return [f"topics not checked: {unreachable[0]}"]
    try:
        found = list_partitions(config, pipeline, timeout=5.0)
    except KafkaError as exc:
        unreachable.append(exc)
        return [f"topics not checked: {exc}"]
    missing = [t for t in pipeline.topics if t not in found]
    if not missing:
        return []
    return [f"topic(s) {', '.join(missing)} do not exist at {config.kafka.bootstrap_servers}"]


def _with_unread_partitions(
    config: FrazilConfig,
    pipeline: PipelineConfig,
    committed: TopicOffsets,
    offsets_of: Callable[..., TopicOffsets],
) -> TopicOffsets:
    """The committed offsets and Kafka's partitions of the pipeline's topics they do not name
    yet (a topic its pattern matched since, partitions added), at their earliest offsets:
    Spark's Kafka source reads a partition it meets from its start, so all such a partition
    holds is lag.

    Raises:
        KafkaError: Kafka did not answer.
    """
    found = list_partitions(config, pipeline, timeout=5.0)
    unread = {
        topic: dict.fromkeys((p for p in parts if p not in committed.get(topic, {})), 0)
        for topic, parts in found.items()
    }
    unread = {topic: parts for topic, parts in unread.items() if parts}
    if not unread:
        return committed
    merged = {topic: dict(parts) for topic, parts in committed.items()}
    for topic, parts in offsets_of(unread, earliest=True).items():
        merged.setdefault(topic, {}).update(parts)
    return merged


def _dead_letters(catalog: Any, pipeline: PipelineConfig) -> dict[str, int]:
    if pipeline.errors.dlq_table is None:
        return {}
    try:
        table = catalog.load_table(pipeline.errors.dlq_table)
    except Exception:
        return {}
    rows = table.scan(row_filter=f"pipeline = '{pipeline.name}'", selected_fields=("stage",))
    return dict(Counter(str(s) for s in rows.to_arrow().column("stage").to_pylist()))


def _running(config: FrazilConfig, pipeline: str) -> bool:
    return fence.running_pid(config.state_dir, pipeline) is not None


def read_status(
    config: FrazilConfig, names: list[str] | None = None, catalog: Any = None
) -> list[PipelineStatus]:
    """Every chosen pipeline's status (all of them by default)."""
    from frazil.observe.metrics import kafka_latest

    catalog = catalog if catalog is not None else pyiceberg_catalog(config)
    conf, _ = admin_config(config)
    latest_of = kafka_latest(conf, isolation_level(config))
    now = time.time() * 1000
    found: list[PipelineStatus] = []
    unreachable: list[KafkaError] = []
    for pipeline in config.pipelines:
        if names and pipeline.name not in names:
            continue
        problems: list[str] = []
        walks = [
            w for n in pipeline_tables(catalog, pipeline) if (w := _walk(catalog, n, pipeline.name))
        ]
        tables = [w.status for w in walks]
        committed = freshness.lowest_offsets(t.offsets for t in tables)
        problems += _missing_topics(config, pipeline, committed, unreachable)
        lag: dict[str, int | None] = {}
        lag_s: dict[str, float | None] = {}
        if committed:
            try:
                if unreachable:  # met by a pipeline before: not waited for again
                    raise unreachable[0]
                committed = _with_unread_partitions(config, pipeline, committed, latest_of)
                latest = latest_of(committed)
            except Exception as exc:
                if isinstance(exc, KafkaError) and exc not in unreachable:
                    unreachable.append(exc)
                # Unknown, not 0: a lag read as "caught up" while Kafka is away would hide
                # the very backlog an operator looks for.
                reason = str(exc) or type(exc).__name__
                if not isinstance(exc, KafkaError):
                    reason = f"Kafka's latest offsets unavailable: {reason}"
                problems.append(f"lag unknown: {reason[:300]}")
                lag = dict.fromkeys(sorted(committed))
                lag_s = dict.fromkeys(sorted(committed))
                committed = {}
            newest: dict[tuple[str, int], int] = {}
            for w in walks:
                for key, ts in w.newest.items():
                    newest[key] = max(ts, newest.get(key, ts))
            for topic, parts in sorted(committed.items()):
                ends = latest.get(topic, {})
                behind = {p: freshness.lag_records(o, ends.get(p)) for p, o in parts.items()}
                lag[topic] = sum(behind.values())
                # A topic lags by its most lagging partition (as the metrics, per partition).
                lag_s[topic] = max(
                    freshness.lag_seconds(n, newest.get((topic, p)), now) for p, n in behind.items()
                )
        rate = None
        if walks:
            # The newest run's commits, to whichever of the pipeline's tables (a route's
            # tables each hold a share of its records).
            last = max(walks, key=lambda w: w.window[0].at_ms if w.window else 0)
            rate = records_per_second(
                [w.window for w in walks if w.window and w.run_by == last.run_by]
            )
        valid = freshness.pipeline_valid_through(t.valid_through_ms for t in tables)
        commits = [t.last_commit_ms for t in tables if t.last_commit_ms is not None]
        found.append(
            PipelineStatus(
                pipeline=pipeline.name,
                running=_running(config, pipeline.name),
                lag_records=lag,
                lag_seconds=lag_s,
                records_per_second=rate,
                freshness_seconds=freshness.freshness_seconds(valid, now),
                last_commit_ms=max(commits) if commits else None,
                dead_letters=_dead_letters(catalog, pipeline),
                tables=tables,
                problems=problems,
            )
        )
    return found
