"""The routed job: one Spark job writes a routed batch to the data files of all of its
tables and hands back what it wrote (:class:`Outcome`); it commits nothing.

The common case of a routed batch: every table it meets either exists and takes the batch's
columns as they are, or is new and can be created with the pipeline's defaults. One Spark job
then decodes the batch, shuffles its rows by table (:mod:`frazil.engine.routed_layout`) and
writes each table's data files in the task that holds them (frazil's JVM helper
``RoutedWrites``, with Iceberg's own writers for Spark rows, as its Spark writes use them).
:class:`~frazil.engine.routed_commit.RoutedCommitter` then commits each table's files with
its marker, and creates each new table in the same transaction as its first rows.

Anything else is found by the job itself and sent back to the general, cached way
(:class:`frazil.engine.cached_write.CachedWrite`), which decodes the batch into a cache:
a record with an error (it may teach a decoder, or go to the dead-letter queue), a record
holding a value in a column its table lacks (the table evolves first), a new table with
settings of its own. The files the job wrote are then deleted, nothing is committed, and the
batch costs one pass more.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from frazil import columns as c
from frazil.config.pipeline import PipelineConfig
from frazil.engine import routed_layout, routed_sizing
from frazil.engine.adapt import ColumnAdapter
from frazil.engine.ledger import TableLedger
from frazil.engine.live_plan import LivePlan
from frazil.engine.outcomes import NotThisWay
from frazil.engine.routed_layout import Layout, Template
from frazil.engine.threads import each
from frazil.engine.window import BatchWindow
from frazil.jvm.classes import java_class
from frazil.progress import offset_rules, table_markers
from frazil.sink.conform import WriteColumns
from frazil.sink.tables import TableSet

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

# The handler's logger: users and tests follow a batch's way under this one name.
log = logging.getLogger("frazil.engine.batch")


@dataclass(frozen=True)
class TableWritten:
    """What the job wrote for one table, as the JVM's summary tells it (the files themselves
    stay in the JVM's ``RoutedWrites.TableWritten``, uncommitted)."""

    created: bool
    records: int
    bytes: int
    #: Indexes of the template's columns holding a value in the table's rows (new tables).
    with_values: frozenset[int]
    timestamps: dict[tuple[str, int], int]


@dataclass(frozen=True)
class Outcome:
    """What the job hands the committer: its files (not committed) per table, its counts,
    and how the tables it met first are created."""

    java: Any
    bad: int
    unmatched: int
    filtered: int
    deferred: int
    refused: tuple[str, ...]
    tables: dict[str, TableWritten]
    #: The template the tables met first are created like (None: the job could create none).
    template: Template | None = None
    #: How long the job took, in seconds.
    seconds: float = 0.0

    @classmethod
    def parse(cls, java: Any, template: Template | None = None) -> Outcome:
        """Read the JVM's result."""
        raw = json.loads(str(java.summary()))
        return cls(
            java=java,
            bad=int(raw["bad"]),
            unmatched=int(raw["unmatched"]),
            filtered=int(raw["filtered"]),
            deferred=int(raw["deferred"]),
            refused=tuple(raw["refused"]),
            tables={
                name: TableWritten(
                    created=bool(t["created"]),
                    records=int(t["records"]),
                    bytes=int(t["bytes"]),
                    with_values=frozenset(int(i) for i in t["with_values"]),
                    timestamps={(str(tp), int(p)): int(ts) for tp, p, ts in t["timestamps"]},
                )
                for name, t in raw["tables"].items()
            },
            template=template,
        )

    @property
    def clean(self) -> bool:
        """Whether every record was written or counted as the job may (nothing to send back)."""
        return not (self.bad or self.deferred or self.refused)

    def delete(self, spark: SparkSession, names: list[str] | None = None) -> None:
        """Delete the files written for ``names`` (None: all tables)."""
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        chosen = java_class(jvm, "java.util.ArrayList")()
        for name in self.tables if names is None else names:
            chosen.add(name)
        self.java.deleteFiles(chosen)


def run(
    spark: SparkSession,
    frame: DataFrame,
    layout: Layout,
    names: list[str],
    tables: Any,
    small: tuple[list[str], bool] = ([], False),
    topic: str | None = None,
) -> Outcome:
    """Write ``frame`` (in :meth:`Layout.frame`'s layout) to the known tables, ``names`` and
    their ``tables`` (a Java list in the same order, as the ledger keeps it: a list built here
    would cost a py4j round trip per table; None: no known table), and, with a template, to
    the tables it meets first; ``small``: the known tables, and whether the new ones, expected
    to write files smaller than a Parquet page (:func:`~frazil.engine.routed_sizing.small_tables`);
    ``topic``: the batch's one Kafka topic, which its rows then do not carry.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    template = layout.template
    result = java_class(jvm, "dev.frazil.spark.RoutedWrites").write(
        frame._jdf,
        json.dumps(names),
        tables,
        None if template is None else template.java_table,
        None if template is None else template.namespace,
        None if template is None else template.location,
        # One string: a Java array is a py4j round trip per element, and a route's tables
        # are all small in a batch of a few thousand rows each (100 round trips a batch).
        json.dumps(small[0]),
        small[1],
        json.dumps(layout.names),
        topic,
    )
    outcome = Outcome.parse(result, template)
    layout.met_new = any(t.created for t in outcome.tables.values()) or bool(outcome.refused)
    return outcome


@dataclass
class RoutedJob:
    """Writes a routed batch's data files for all of its tables in one Spark job, if it is
    the common case, and hands back the :class:`Outcome` (nothing committed).

    The job's layout (per batch shape and table set) and the template of new tables (per
    namespace and batch shape) are built once and kept across batches.

    Attributes:
        spark: The session.
        pipeline: The pipeline.
        live: The live plan.
        tables: Opens and creates the pipeline's tables.
        ledger: The pipeline's tables.
        columns: The tables' columns (views).
    """

    spark: SparkSession
    pipeline: PipelineConfig
    live: LivePlan
    tables: TableSet
    ledger: TableLedger
    columns: ColumnAdapter
    #: The job's layouts by batch shape and table set.
    _layouts: dict[tuple[object, ...], Layout | None] = field(default_factory=dict)
    #: The template of new tables, per namespace and batch shape (the latest).
    _templates: dict[tuple[str, str], Template | None] = field(default_factory=dict)
    #: Each table's rows in the last batch the job wrote.
    _seen: routed_sizing.RowsSeen | None = None

    def write(
        self, window: BatchWindow, states: dict[str, table_markers.TableState]
    ) -> Outcome | NotThisWay:
        """Write the batch's data files in one job, to be committed.

        Returns:
            What the job wrote, every record written or counted; or, nothing left written,
            why the general way is to write the batch (a replay, a table to adopt, a failing
            record, a column to add, a table with settings of its own).
        """
        if self.pipeline.defaults.write.merges:
            return NotThisWay("changes are merged")
        for name in self.ledger.targets:
            state = states[name]
            if (
                state.marker is None
                or not window.starts_at(state.marker)
                or offset_rules.covered(state.marker, window.planned)
            ):
                # A replay, or a table to adopt: the general way filters.
                return NotThisWay(f"table {name} does not start at the batch")
        began = time.monotonic()
        planned = self.live.plan.run(window.batch)
        layout = self._layout(planned.schema)
        if layout is None:
            return NotThisWay("a table the job cannot write as it is")
        spark = self.spark
        cores = max(1, spark.sparkContext.defaultParallelism)
        hot = routed_sizing.hot_tables(layout.names, window.records, self._seen, cores)
        topics = {t for t, _ in window.partitions}
        topic = next(iter(topics)) if len(topics) == 1 else None
        frame = layout.frame(planned, cores, hot, topic)
        if not layout.fits(frame):
            return NotThisWay("the batch does not fit the job's layout")
        small = routed_sizing.small_tables(layout.names, window.records, self._seen)
        try:
            targets = self.ledger.targets
            java_tables = self.ledger.handles().java_tables() if targets else None
            outcome = run(spark, frame, layout, list(targets), java_tables, small, topic)
        except Exception as exc:  # nothing is committed: the general way names the failure
            log.debug("%s: the one job failed (%s)", self.pipeline.name, str(exc)[:300])
            return NotThisWay("the job failed")
        outcome = dataclasses.replace(outcome, seconds=time.monotonic() - began)
        if window.records:
            self._seen = routed_sizing.RowsSeen(
                {n: t.records for n, t in outcome.tables.items()}, window.records
            )
        new = [n for n, t in outcome.tables.items() if t.created]
        try:
            unusable = any(n in self.pipeline.tables for n in new) or any(
                each(new, self.tables.exists)
            )
        except Exception:
            outcome.delete(spark)
            raise
        if not outcome.clean or unusable:
            outcome.delete(spark)
            log.debug(
                "%s: batch %d goes the general way (%d bad, %d deferred, %d refused)",
                self.pipeline.name,
                window.batch_id,
                outcome.bad,
                outcome.deferred,
                len(outcome.refused),
            )
            return NotThisWay("records the job cannot write alone")
        return outcome

    def _layout(self, schema: StructType) -> Layout | None:
        """The job's columns for this batch shape and the current tables (cached)."""
        targets = self.ledger.targets
        views = self.columns.views()
        key = (
            "one-job",
            schema.json(),
            tuple((n, v.schema_id, v.mapping_text) for n, v in sorted(views.items())),
        )
        if key in self._layouts:
            return self._layouts[key]
        user = c.user_schema(schema)
        known: dict[str, tuple[WriteColumns, list[str]]] = {}
        shared: dict[tuple[object, ...], WriteColumns] = {}
        layout: Layout | None = None
        plain = self.ledger.handles().plain_writes() if targets else []
        for (name, target), plain_writes in zip(targets.items(), plain, strict=True):
            if not plain_writes or not routed_layout.template_eligible(
                target.settings.model_copy(update={"aliases": {}})
            ):
                break
            columns = routed_layout.table_columns(
                schema, user, views[name], target.settings, name, shared
            )
            if columns is None:
                break
            known[name] = columns
        else:
            layout = routed_layout.build_layout(
                schema, known, self._template(user), views, one_each=self.live.plan.one_each
            )
            if routed_sizing.meets_none_new(known, self._seen):
                layout.met_new = False
        if len(self._layouts) > 8:
            self._layouts.clear()
        self._layouts[key] = layout
        return layout

    def _template(self, user: StructType) -> Template | None:
        """The template of the tables the batch may create (the same for every layout of
        this batch shape: the known tables change)."""
        namespace = self.tables.new_table_namespace()
        if namespace is None or self.tables.catalog_type not in ("jdbc", "hadoop"):
            return None
        at = (namespace, user.json())
        if at not in self._templates:
            self._templates = {
                at: routed_layout.make_template(
                    self.spark, self.tables.catalog, self.pipeline, namespace, user
                )
            }
        return self._templates[at]
