"""``frazil dlq replay``: dead letters re-ingested through their pipeline, exactly once.

After a fix (a schema change, a new transform, a corrected route), the dead-letter table's
records of a pipeline are read back as the Kafka records they were and run through the
pipeline's plan:

1. records that now succeed are appended to the table(s) the pipeline routes them to (a
   routed pipeline's new table is created, with a marker so that runs adopt it);
2. records that fail again are appended to the dead-letter table with their new reason;
3. the replayed records are deleted from the dead-letter table.

The dead-letter table's rows (read, sent back, deleted) are handled in
:mod:`frazil.engine.replay_rows`.

A replay is named by the dead-letter snapshot it read and its filters (``R``). What it did
so far is kept where snapshot expiry cannot remove it (:mod:`frazil.engine.replay_state`):
its progress in a property of the dead-letter table, the snapshot it reads under a tag. Each
append's commit also carries ``frazil.dlq-replay.<pipeline> = R`` (``frazil.dlq-replay-failed.``
for the send-back), so a replay interrupted between a commit and noting it tells from the
history since whether the commit happened. The next replay first finishes an open one: it
skips the steps done and deletes (again, harmlessly) the rows it read. One replay of a
pipeline runs at a time: each holds a claim on it, a property of the dead-letter table.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.engine import replay_rows
from frazil.engine.adapt import ColumnAdapter
from frazil.engine.cached_table import with_values, with_values_columns
from frazil.engine.ledger import TableLedger
from frazil.engine.pipeline import build_pipeline
from frazil.engine.plan import select
from frazil.engine.replay_state import ReplayClaim, ReplayProgress, ReplayState
from frazil.errors import ConfigError, PipelineError
from frazil.progress import markers, offset_rules, table_markers
from frazil.route.rules import route_error
from frazil.sink.dead_letters.format import TARGET_TABLE, dead_letter_columns, upgrade_dlq_table
from frazil.sink.iceberg import IcebergTable, append_rows
from frazil.sink.table import qualified
from frazil.sink.tables import TableSet, Target

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

#: Marks a replay's append to the pipeline's table (and opened a replay of an older frazil:
#: a marker without data in the dead-letter table).
REPLAY = "frazil.dlq-replay."
#: Marks the replay's append of records that failed again, in the dead-letter table.
FAILED = "frazil.dlq-replay-failed."
#: Closed a replay of an older frazil (a marker without data in the dead-letter table).
DONE = "frazil.dlq-replay-done."
#: The step of the send-back of records that failed again (the others: ``table <name>``).
SENT_BACK = "dead letters"


@dataclass(frozen=True)
class ReplayReport:
    """What one replay did."""

    pipeline: str
    replayed: int
    written: int
    failed_again: int
    resumed: bool


def replay(
    spark: SparkSession,
    config: FrazilConfig,
    pipeline: PipelineConfig,
    *,
    stage: str | None = None,
    since: datetime | None = None,
) -> ReplayReport:
    """Replay the pipeline's dead letters (of ``stage``, failed since ``since``).

    Raises:
        ConfigError: The pipeline has no dead-letter table, or upserts (replay appends).
        PipelineError: Another replay of the pipeline is running.
    """
    if pipeline.errors.dlq_table is None:
        raise ConfigError(
            f"pipeline {pipeline.name!r} has no dead-letter table (errors.dlq_table): "
            "nothing to replay"
        )
    write = pipeline.defaults.write
    if write.merges:
        raise ConfigError(
            f"pipeline {pipeline.name!r} writes with mode {write.mode}; replaying "
            "dead letters is supported for append pipelines so far"
        )
    catalog = config.catalog.name
    dead = IcebergTable(spark, qualified(catalog, pipeline.errors.dlq_table))
    upgrade_dlq_table(spark, dead.java)
    claim = ReplayClaim(dead, pipeline.name)
    claim.acquire()
    try:
        return _replay(spark, config, pipeline, dead, claim, stage, since)
    finally:
        claim.release()


def _replay(
    spark: SparkSession,
    config: FrazilConfig,
    pipeline: PipelineConfig,
    dead: IcebergTable,
    claim: ReplayClaim,
    stage: str | None,
    since: datetime | None,
) -> ReplayReport:
    """The replay, under its claim: finish the open one, or open one and run it."""
    state = claim.state()
    if state is None:
        legacy = _open_replay(dead, pipeline.name)
        if legacy is not None:
            # Opened by an older frazil: its progress is noted here from now on.
            state = ReplayState(legacy, legacy=True)
            claim.save(state, _parse(legacy)[0])
    resumed = state is not None
    fingerprint = _fingerprint(pipeline)
    if state is not None:
        replay_id = state.id
        snapshot, stage, since, started_with = _parse(replay_id)
        if started_with != fingerprint:
            # Another config may sort the records otherwise: finishing with it could lose
            # or duplicate what the interrupted replay already wrote.
            raise ConfigError(
                f"pipeline {pipeline.name!r}: an interrupted dead-letter replay was started "
                "with another version of this pipeline's config; run `frazil dlq replay` "
                "with that config to finish it, then replay again with the new one"
            )
    else:
        current = dead.current_snapshot_id()
        if current is None:
            return ReplayReport(pipeline.name, 0, 0, 0, False)
        snapshot = current
        replay_id = _name(snapshot, stage, since, fingerprint)
    source = replay_rows.read(spark, dead.name, snapshot, pipeline.name, stage, since).cache()
    try:
        replayed = source.count()
        if replayed == 0 and not resumed:
            return ReplayReport(pipeline.name, 0, 0, 0, False)
        if state is None:
            # Opened before anything is written: a crash from here on is finished next time.
            state = ReplayState(replay_id)
            claim.save(state, snapshot)
        progress = ReplayProgress(claim, state)
        written, failed = _run(spark, config, pipeline, source, dead, progress)
        claim.renew()
        # Rows that failed before the replay began; the ones it sent back are newer.
        replay_rows.delete(spark, dead.name, source, pipeline.name)
        claim.close(state)
        if state.legacy:
            # Older frazil looks for this marker; without it, it would take the replay as open.
            dead.commit_summary_only({DONE + pipeline.name: replay_id})
    finally:
        source.unpersist()
    log.info(
        "%s: replayed %d dead letter(s): %d written, %d failed again",
        pipeline.name,
        replayed,
        written,
        failed,
    )
    return ReplayReport(pipeline.name, replayed, written, failed, resumed)


def _fingerprint(pipeline: PipelineConfig) -> str:
    """A digest of the pipeline's config: a replay is finished with the config it began with."""
    return hashlib.sha256(pipeline.model_dump_json().encode()).hexdigest()[:16]


def _name(snapshot: int, stage: str | None, since: datetime | None, fingerprint: str) -> str:
    return f"{snapshot}|{stage or ''}|{since.isoformat() if since else ''}|{fingerprint}"


def _parse(replay_id: str) -> tuple[int, str | None, datetime | None, str]:
    snapshot, stage, since, fingerprint = replay_id.split("|", 3)
    return (
        int(snapshot),
        stage or None,
        datetime.fromisoformat(since) if since else None,
        fingerprint,
    )


def _open_replay(dead: IcebergTable, pipeline: str) -> str | None:
    """The newest replay of the pipeline that an older frazil opened (a marker in the
    dead-letter table's history) and did not finish, if any."""
    dead.refresh()
    for view in dead.ancestry():
        done = view.get(DONE + pipeline)
        if done is not None:
            return None
        started = view.get(REPLAY + pipeline)
        if started is not None:
            return started
    return None


def _run(
    spark: SparkSession,
    config: FrazilConfig,
    pipeline: PipelineConfig,
    source: DataFrame,
    dead: IcebergTable,
    progress: ReplayProgress,
) -> tuple[int, int]:
    """Write what succeeds now to its table(s) and send back what fails again (each table's
    append and the send-back once: each commit is named by the replay)."""
    from pyspark.sql import functions as F

    built = build_pipeline(spark, config, pipeline)
    tables = TableSet(spark, config.catalog.name, pipeline, built.route, config.catalog.type)
    plan = built.plan
    # The dead letters as the Kafka records they were; one row per record and table.
    # A record that failed for a table (target_table) goes back there only: the other
    # tables its route fans out to took it when it first came. Rows of a dead-letter table
    # written before the column existed read null: every table the route names. A record
    # that failed at the mode names its table but no table took it: routed anew.
    failed_for = (
        F.when(F.col("stage") != F.lit(c.STAGE_MODE), F.col(TARGET_TABLE))
        if TARGET_TABLE in source.columns
        else F.lit(None).cast("string")
    )
    raw = source.select(
        "key",
        "value",
        "headers",
        "topic",
        "partition",
        "offset",
        "timestamp",
        F.lit(0).alias("timestampType"),
        failed_for.alias(c.FAILED_FOR),
    )
    # The schema ids the dead letters name that the decoders do not know yet (registered
    # since, under another subject too), as a run's batch fetches them.
    for _ in range(3):
        if not plan.learn(raw):
            break
    staged, projection = plan.stage(raw)
    projection = only_where_failed(projection, F.col(c.FAILED_FOR))
    # Kept (an internal column, never written): what fails again keeps the table it failed for.
    projection[c.FAILED_FOR] = F.col(c.FAILED_FOR)
    planned = c.explode_routes(select(staged, projection)).cache()
    try:
        user = c.user_schema(planned.schema)
        # Records failing before routing (decode, transform, route) have one row each.
        failing = [
            planned.where(F.col(c.ERROR).isNotNull() & c.first_route()).select(
                *dead_letter_columns(
                    pipeline.name,
                    F.col(c.ERROR),
                    True,
                    F.coalesce(F.col(c.FAILED_FOR), c.mode_target()),
                )
            )
        ]
        routed = planned.where(
            F.col(c.ERROR).isNull()
            & (F.col(c.OP) == c.OP_APPEND)
            & F.col(c.ROUTE_TABLE).isNotNull()
        )
        values = _with_values(routed, user)
        known = tables.known()
        # Tables evolve as in a run; the replay's schema changes go to no run's account.
        adapter = ColumnAdapter(spark, TableLedger(pipeline.name, known), quiet=True)
        written = 0
        for name in sorted(values):
            target = known.get(name)
            if target is None:
                _refuse_next_to_a_run(config, pipeline, name)
                target = _create(tables, pipeline, name, user, values[name], known)
                known[name] = target
            rows = routed.where(F.col(c.ROUTE_TABLE) == name)
            good, bad = _write_table(pipeline, adapter, target, rows, values[name], progress)
            written += good
            failing.append(bad)
        back = failing[0]
        for part in failing[1:]:
            back = back.unionByName(part)
        back = replay_rows.first_failure(back, source).cache()
        try:
            failed = back.count()
            if failed and not progress.done(SENT_BACK, dead, FAILED + pipeline.name):
                progress.commit(
                    SENT_BACK,
                    dead,
                    FAILED + pipeline.name,
                    lambda summary: append_rows(back, dead.name, summary),
                )
        finally:
            back.unpersist()
    finally:
        planned.unpersist()
    return written, failed


def only_where_failed(batch: c.Projection, failed_for: Column) -> c.Projection:
    """A replayed batch's routes narrowed to the table each record failed for.

    A record whose ``failed_for`` is null failed before routing: it goes where the route
    sends it now. Otherwise it goes to that table only, if the route still sends it there;
    if not, it fails again at stage ``route``, saying so, and stays a dead letter.
    """
    from pyspark.sql import functions as F

    tables, error = batch[c.TABLE], batch[c.ERROR]
    there = F.coalesce(F.array_contains(tables, failed_for), F.lit(False))
    gone = failed_for.isNotNull() & error.isNull() & ~there
    reason = F.concat(
        F.lit("the route no longer sends the record to table "),
        failed_for,
        F.lit(", where it failed (it was written to the others)"),
    )
    result = dict(batch)
    result[c.ERROR] = F.when(gone, route_error(reason, F.lit("")).cast(c.ERROR_DDL)).otherwise(
        error
    )
    result[c.TABLE] = F.when(failed_for.isNotNull() & there, F.array(failed_for)).otherwise(tables)
    return result


def _with_values(rows: DataFrame, user: StructType) -> dict[str, set[str]]:
    """Per table, the user columns holding a value in at least one of its records (a new
    column is added to a table only where its records fill it, as in a run)."""
    names = [f.name for f in user.fields]
    found = rows.groupBy(c.ROUTE_TABLE).agg(*with_values_columns(names)).collect()
    return {str(r[c.ROUTE_TABLE]): with_values(r, names) for r in found}


def _refuse_next_to_a_run(config: FrazilConfig, pipeline: PipelineConfig, table: str) -> None:
    """A replay may not create a table while its pipeline runs.

    The new table's marker would be the lowest of the pipeline's other tables as they are
    now, while the live run goes on writing them: a restart with the new config would read
    again from there and write the run's later records twice into it (and a table that gets
    no live record would make every start read again since the replay).

    Raises:
        PipelineError: The pipeline runs (its run lock in ``state_dir`` is held).
    """
    from frazil.progress import fence

    if fence.running_pid(config.state_dir, pipeline.name) is None:
        return
    raise PipelineError(
        f"pipeline {pipeline.name!r} is running: this replay would create table {table} "
        "(the route sends records there now), which is safe only while the pipeline is "
        "stopped; stop the pipeline first, replay, then start it with the new config"
    )


def _create(
    tables: TableSet,
    pipeline: PipelineConfig,
    name: str,
    user: StructType,
    with_values: set[str],
    known: dict[str, Target],
) -> Target:
    """A table the replay routes records to for the first time: created (or adopted) as a
    run does, with a marker where the pipeline's other tables are all complete, so that the
    next run takes it as one of the pipeline's tables.

    Raises:
        PipelineError: The table exists with rows but no marker of the pipeline.
    """

    def start(state: table_markers.TableState) -> markers.Marker | None:
        others = [table_markers.find_marker(t.table, pipeline.name).marker for t in known.values()]
        merged = markers.merge_markers(others, lowest=True)
        if merged is None:
            return None
        basis = offset_rules.Basis(
            planned=merged.offsets, batch_id=merged.batch_id, query_id=merged.query_id
        )
        return offset_rules.next_marker(None, pipeline.name, basis)

    return tables.adopt(name, user, with_values, start, sender="the replay routes records")


def _write_table(
    pipeline: PipelineConfig,
    adapter: ColumnAdapter,
    target: Target,
    rows: DataFrame,
    with_values: set[str],
    progress: ReplayProgress,
) -> tuple[int, DataFrame]:
    """Append a table's replayed records that it takes now (evolving it as a run would);
    returns how many, and the dead-letter rows of those it cannot take."""
    table = target.table
    # As it is now: the pipeline's run may have evolved it since it was opened.
    table.refresh()
    # Not a batch of the stream: a schema change is made without one.
    columns = adapter.adapt(rows.schema, target, batch_id=-1, with_values=with_values)
    good = rows.where(columns.error.isNull())
    written = good.count()
    step = f"table {target.name}"
    if written and not progress.done(step, table, REPLAY + pipeline.name):
        required = bool(target.view and target.view.required)
        options = {"check-nullability": "false"} if required else {}
        progress.commit(
            step,
            table,
            REPLAY + pipeline.name,
            lambda summary: append_rows(
                good.select(*columns.table), target.qualified, summary, options
            ),
        )
    bad = rows.where(columns.error.isNotNull()).select(
        *dead_letter_columns(pipeline.name, columns.error, True, target.name)
    )
    return written, bad
