"""A maintenance pass: measure each table of the config, run what its health calls for.

``frazil optimize`` runs one pass, ``frazil maintain`` one every ``maintenance.interval``, and
``maintenance: {mode: inline}`` makes ``frazil run`` run them itself on a thread of its own.
An action that fails is reported and the pass goes on with the next one: maintenance never
stops ingestion.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil.config.durations import parse_duration
from frazil.config.maintenance import ResolvedPolicy
from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.errors import FrazilError, MaintenanceError, first_line
from frazil.maintenance.actions import ActionResult, Actions, with_retries
from frazil.maintenance.expiry import Protected, protected
from frazil.maintenance.health import TableHealth, read_health
from frazil.maintenance.planner import Planned, plan
from frazil.sink import yielding
from frazil.sink.iceberg import activate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from frazil.sink.iceberg import IcebergTable

log = logging.getLogger(__name__)

#: How long a rewriting action outside a budgeted pass waits for a table's MERGEs to end.
_TURN_WAIT_S = 300.0


@dataclass(frozen=True)
class TableRef:
    """A table of the config: its name in the catalog, and the pipeline writing it."""

    name: str
    pipeline: PipelineConfig | None
    #: Whether it is a dead-letter table (its policy: the pipeline's, never its row route).
    dead_letters: bool = False


@dataclass
class TableReport:
    """One table in one pass: health before, the plan, what each action did, health after."""

    table: str
    before: TableHealth
    planned: list[Planned]
    results: list[ActionResult] = field(default_factory=list)
    after: TableHealth | None = None


def config_tables(
    spark: SparkSession, config: FrazilConfig, only: str | None = None
) -> list[TableRef]:
    """Every table the config's pipelines write (routed tables found as at start, dead-letter
    tables included) that exists now, or ``only`` that one.

    Raises:
        MaintenanceError: ``only`` is not a table of the config.
    """
    from frazil.route.rules import build_route
    from frazil.sink.tables import TableSet

    found: dict[str, TableRef] = {}
    for pipeline in config.pipelines:
        tables = TableSet(
            spark, config.catalog.name, pipeline, build_route(pipeline), config.catalog.type
        )
        for name in tables.known():
            found.setdefault(name, TableRef(name, pipeline))
        dead = pipeline.errors.dlq_table
        if dead is not None and tables.exists(dead):
            found.setdefault(dead, TableRef(dead, pipeline, dead_letters=True))
    return pick(found, only, config)


def pick(
    found: dict[str, TableRef], only: str | None, config: FrazilConfig | None = None
) -> list[TableRef]:
    """The tables ``found``, by name, or ``only`` that one.

    Raises:
        MaintenanceError: ``only`` is not one of them: a table the ``config`` names that does
            not exist yet, or one it does not name.
    """
    if only is not None:
        if only not in found:
            writer = None if config is None else _named_by(config, only)
            if writer is not None:
                raise MaintenanceError(
                    f"table {only!r} does not exist yet: pipeline {writer!r} creates it with "
                    "its first records for it"
                )
            known = ", ".join(sorted(found)) or "none yet"
            raise MaintenanceError(
                f"table {only!r} is not a table the config's pipelines write (tables: {known})"
            )
        return [found[only]]
    return [found[n] for n in sorted(found)]


def policy_of(config: FrazilConfig, ref: TableRef) -> ResolvedPolicy:
    """A table's policy; a dead-letter table keeps rows for replay: no retention by the
    pipeline's rows' column."""
    policy = config.policy_for(ref.pipeline, ref.name)
    if ref.dead_letters and policy.retention is not None:
        return policy.model_copy(update={"retention": None})
    return policy


def measure(spark: SparkSession, config: FrazilConfig, ref: TableRef) -> TableHealth:
    """One table's health against its policy."""
    from frazil.sink.iceberg import IcebergTable
    from frazil.sink.table import qualified

    name = qualified(config.catalog.name, ref.name)
    return read_health(spark, name, IcebergTable(spark, name).java, policy_of(config, ref))


def _no_merge_lost(table: IcebergTable, backoff_s: float) -> bool:
    """Whether no pipeline's MERGE into the table lost to a concurrent commit within
    ``backoff_s`` (:data:`frazil.sink.yielding.MERGE_CONFLICT_AT`, read afresh)."""
    table.refresh()
    noted = table.java.properties().get(yielding.MERGE_CONFLICT_AT)
    return yielding.backing_off(noted, backoff_s=backoff_s) is None


def _protected(spark: SparkSession, config: FrazilConfig, name: str) -> Protected:
    """What expiry must keep of a table: the newest markers no reset retired."""
    del config
    return protected(spark, name)


def run_pass(
    spark: SparkSession,
    config: FrazilConfig,
    tables: list[TableRef],
    *,
    dry_run: bool = False,
    budget_s: float | None = None,
    on_action: Callable[[str, str], None] | None = None,
    on_result: Callable[[ActionResult], None] | None = None,
) -> list[TableReport]:
    """Measure each table and run its planned actions (none with ``dry_run``).

    Args:
        budget_s: Start no new action after this many seconds (inline passes).
        on_action: Called with ``(table, action)`` as each action starts (progress).
        on_result: Called with each action's result as it ends, or is skipped.
    """
    from frazil.sink.iceberg import IcebergTable
    from frazil.sink.table import qualified

    started = time.monotonic()
    spent = False
    backoff_s = parse_duration(config.maintenance.merge_backoff)
    reports: list[TableReport] = []
    for ref in tables:
        name = qualified(config.catalog.name, ref.name)
        policy = policy_of(config, ref)
        table = IcebergTable(spark, name)
        before = read_health(spark, name, table.java, policy)
        report = TableReport(ref.name, before, plan(before, policy))
        reports.append(report)
        if dry_run or not report.planned:
            continue
        actions = Actions(spark, name, table.java)
        for step in report.planned:
            if budget_s is not None and time.monotonic() - started > budget_s:
                # Recorded, not told one by one: a pass over many tables would print a line
                # for each action it leaves; the pass's one line says the budget is spent.
                if not spent:
                    log.info("maintenance: budget of %.0fs spent; the rest waits", budget_s)
                    spent = True
                why = f"the pass's budget of {budget_s:.0f}s (maintenance.budget) was spent"
                _skip(report, ref.name, step.action, f"{why}; the next pass runs it", None)
                continue
            if step.action in yielding.REWRITES:
                table.refresh()
                ago = yielding.backing_off(
                    table.java.properties().get(yielding.MERGE_CONFLICT_AT),
                    backoff_s=backoff_s,
                )
                if ago is not None:
                    why = (
                        f"a pipeline's MERGE into it lost to a concurrent commit {ago:.0f}s ago "
                        f"(table property {yielding.MERGE_CONFLICT_AT}); rewrites wait "
                        f"{backoff_s:g}s (maintenance.merge_backoff)"
                    )
                    _skip(report, ref.name, step.action, why, on_result)
                    continue
            if on_action is not None:
                on_action(ref.name, step.action)
            wait = budget_s if budget_s is not None else _TURN_WAIT_S
            with yielding.maintenance_turn(name, wait) as free:
                if not free:
                    why = (
                        f"the pipeline's MERGEs into it kept running for {wait:.0f}s; the next "
                        "pass tries again"
                    )
                    _skip(report, ref.name, step.action, why, on_result)
                    continue
                guard_now = functools.partial(_protected, spark, config, name)
                # In slices only where a MERGE may lose to it: a table written by key, or
                # one whose MERGE ever lost (another config's upsert pipeline).
                merged = (
                    ref.pipeline is not None and ref.pipeline.settings_for(ref.name).write.merges
                ) or table.java.properties().get(yielding.MERGE_CONFLICT_AT) is not None
                free_now = functools.partial(_no_merge_lost, table, backoff_s) if merged else None
                result = _run(
                    actions, step, policy, before, ref.name, guard_now, free_now, on_result
                )
                report.results.append(result)
                if on_result is not None:
                    on_result(result)
            table.refresh()
        table.refresh()
        report.after = read_health(spark, name, table.java, policy)
    return reports


def _skip(
    report: TableReport,
    table: str,
    action: str,
    why: str,
    on_result: Callable[[ActionResult], None] | None,
) -> None:
    """Record an action not run this pass, and why (a pipeline's MERGE holds the table)."""
    log.info("maintenance: %s: %s skipped: %s", table, action, why)
    result = ActionResult(table, action, 0.0, "", skipped=why)
    report.results.append(result)
    if on_result is not None:
        on_result(result)


def _run(
    actions: Actions,
    step: Planned,
    policy: ResolvedPolicy,
    health: TableHealth,
    table: str,
    guard: Callable[[], Protected],
    free: Callable[[], bool] | None,
    on_result: Callable[[ActionResult], None] | None = None,
) -> ActionResult:
    started = time.monotonic()

    def call() -> str:
        if step.action == "compaction":
            return actions.compact(policy, health, keep_going=free)
        if step.action == "deletes":
            return actions.rewrite_deletes(policy)
        if step.action == "manifests":
            return actions.rewrite_manifests()
        if step.action == "expire":
            # Read again right before: a batch committed since the pass began moves it on.
            return actions.expire(policy, guard().since_ms)
        if step.action == "orphans":
            return actions.remove_orphans(policy)
        if step.action == "retention":
            return actions.retain(policy)
        raise AssertionError(step.action)

    try:
        detail = with_retries(f"{step.action} of {table}", call)
    except FrazilError as exc:
        # Said once: by the caller's line when it takes results (frazil run), else here.
        log.log(logging.INFO if on_result else logging.WARNING, "maintenance: %s", exc)
        return ActionResult(table, step.action, time.monotonic() - started, "", error=str(exc))
    log.info("maintenance: %s: %s: %s", table, step.action, detail)
    return ActionResult(table, step.action, time.monotonic() - started, detail)


class MaintenanceThread(threading.Thread):
    """Passes every ``interval`` over some tables until stopped (``frazil run``'s inline
    mode). Errors are logged, never raised: upkeep must not stop ingestion."""

    def __init__(
        self,
        spark: SparkSession,
        config: FrazilConfig,
        pipelines: list[PipelineConfig],
        stop: threading.Event,
        on_result: Callable[[ActionResult], None] | None = None,
    ) -> None:
        super().__init__(name="frazil-maintenance", daemon=True)
        self.spark = spark
        self.config = config
        self.pipelines = {p.name for p in pipelines}
        self.stop = stop
        #: Told of each action as it ends or is skipped (``frazil run`` prints a line).
        self.on_result = on_result
        self.passes = 0
        self.reports: list[TableReport] = []

    def run(self) -> None:
        interval = parse_duration(self.config.maintenance.interval)
        budget = parse_duration(self.config.maintenance.budget)
        while not self.stop.wait(interval):
            try:
                # Iceberg's rewrite registers its catalog on the thread's active session;
                # without one every file group of a compaction fails (left as it was).
                activate(self.spark)
                tables = [
                    t
                    for t in config_tables(self.spark, self.config)
                    if t.pipeline is not None and t.pipeline.name in self.pipelines
                ]
                self.reports = run_pass(
                    self.spark, self.config, tables, budget_s=budget, on_result=self.on_result
                )
                self.passes += 1
            except Exception as exc:  # never let upkeep take the run down
                log.warning("maintenance pass failed: %s", first_line(exc))


def not_created(config: FrazilConfig, existing: Collection[str]) -> list[tuple[str, str]]:
    """The tables the config names (a pipeline's table, a static route's tables, dead-letter
    tables) that are not among ``existing``, each with the pipeline that creates it, by name.

    A route that names tables by the records' values names none ahead of them.
    """
    missing: dict[str, str] = {}
    for pipeline in config.pipelines:
        named = [*pipeline.static_tables(), pipeline.errors.dlq_table]
        for table in named:
            if table is not None and table not in existing:
                missing.setdefault(table, pipeline.name)
    return sorted(missing.items())


def _named_by(config: FrazilConfig, table: str) -> str | None:
    """The pipeline whose config names ``table`` (``table``, a route's tables, the
    dead-letter table), if any."""
    return dict(not_created(config, ())).get(table)
