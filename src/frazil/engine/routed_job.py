"""The one-job routed write: a routed batch written to all of its tables in one Spark job
(:mod:`frazil.engine.one_job`), then each table committed with its marker: all known tables
in one catalog transaction where the catalog can (REST's multi-table commit), else each on
its own."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.pipeline import PipelineConfig
from frazil.engine import one_job
from frazil.engine.adapt import ColumnAdapter
from frazil.engine.ledger import TableLedger
from frazil.engine.live_plan import LivePlan
from frazil.engine.threads import Pause, each, each_outcome
from frazil.engine.window import BatchWindow
from frazil.progress import markers
from frazil.sink.evolution import NAME_MAPPING, WriteColumns
from frazil.sink.iceberg import IcebergTables, iceberg_catalog, identifier, stale_marker
from frazil.sink.tables import TableSet, Target

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

# The handler's logger: users and tests follow a batch's way under this one name.
log = logging.getLogger("frazil.engine.batch")


#: Iceberg's message when the REST server's configuration leaves the multi-table commit out.
_NO_TRANSACTIONS = "Server does not support endpoint: POST /v1/{prefix}/transactions/commit"


class _Refit(Exception):
    """A new table would not get the columns' ids its files were written with."""


#: A table the job committed: its marker, and for a new table, the table opened and its state.
_Committed = tuple[markers.Marker, tuple[Target, markers.TableState] | None]


@dataclass
class OneJobWrite:
    """Writes a routed batch to all of its tables in one Spark job, if it is the common case.

    Each table is committed once, with its marker; a table the batch meets first is created
    in the same transaction as its rows. Where the catalog commits several tables at once
    (REST), the known tables commit in one catalog transaction: all or none, and no reader
    sees one of them a batch ahead. Otherwise each commits on its own; should a commit fail
    after others went through, their markers make the general way skip what they hold.

    Attributes:
        spark: The session.
        pipeline: The pipeline.
        live: The live plan.
        tables: Opens and creates the pipeline's tables.
        ledger: The pipeline's tables and the run's counts.
        columns: The tables' columns (views).
    """

    spark: SparkSession
    pipeline: PipelineConfig
    live: LivePlan
    tables: TableSet
    ledger: TableLedger
    columns: ColumnAdapter
    #: The job's layouts by batch shape and table set.
    _layouts: dict[tuple[object, ...], one_job.Layout | None] = field(default_factory=dict)
    #: The template of new tables, per namespace and batch shape (the latest).
    _templates: dict[tuple[str, str], one_job.Template | None] = field(default_factory=dict)
    #: Whether the catalog commits several tables in one transaction (asked once).
    _at_once: bool | None = None

    def write(self, window: BatchWindow, states: dict[str, markers.TableState]) -> set[str] | None:
        """Write the batch in one job and commit each of its tables.

        Returns:
            The tables committed; None if nothing was committed and the general way is to
            write the batch (a replay, a table to adopt, a failing record, a column to add,
            a table with settings of its own).
        """
        if self.pipeline.defaults.write.merges:
            return None
        for name in self.ledger.targets:
            state = states[name]
            if (
                state.marker is None
                or not window.starts_at(state.marker)
                or markers.covered(state.marker, window.planned)
            ):
                return None  # a replay, or a table to adopt: the general way filters
        began = time.monotonic()
        planned = self.live.plan.run(window.batch)
        layout = self._layout(planned.schema)
        if layout is None:
            return None
        spark = self.spark
        tables = [self.ledger.targets[n].table.java for n in layout.names]
        frame = layout.frame(planned, max(1, spark.sparkContext.defaultParallelism))
        if not layout.fits(frame):
            return None
        try:
            outcome = one_job.run(spark, frame, layout, tables)
        except Exception as exc:  # nothing is committed: the general way names the failure
            log.debug("%s: the one job failed (%s)", self.pipeline.name, str(exc)[:300])
            return None
        written = time.monotonic()
        new = [n for n, share in outcome.tables.items() if share.created]
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
            return None
        pause = Pause()
        # New tables first: each is created with its rows and marker. Only then do the known
        # tables commit, so that a crash in between leaves every known table before the
        # batch, and a restart from the tables' markers (without the checkpoint) reads the
        # batch again rather than starting past the rows of a table never created.
        committed: dict[str, markers.Marker] = {}
        opened: dict[str, tuple[Target, markers.TableState]] = {}

        def commit(name: str) -> _Committed:
            return self._commit_share(window, name, outcome, layout, states, pause)

        known = [n for n in outcome.tables if n not in new]
        for phase in (new, known):
            errors: dict[str, BaseException] = {}
            together = phase is known and len(phase) > 1 and self._commits_at_once()
            outcomes = self._commit_all(window, phase, outcome, states, pause) if together else None
            if outcomes is None:  # per table (or the catalog turned out not to commit at once)
                if phase is known and len(phase) > 1 and not pause.active:
                    outcomes = self._commit_each(window, phase, outcome, states)
                else:
                    outcomes = each_outcome(phase, commit)
                if phase is known:
                    outcomes = self._check_interleavings(phase, outcomes, states)
            for name, (result, error) in zip(phase, outcomes, strict=True):
                if error is not None:
                    errors[name] = error
                    continue
                assert result is not None
                committed[name], found = result
                if found is not None:
                    opened[name] = found
            if errors:
                self._record_commits(window, outcome, committed, states, opened)
                # Files are deleted only where nothing was committed for certain: a failed
                # commit may have gone through (Iceberg keeps its files in that case too).
                untouched = [
                    n
                    for n in outcome.tables
                    if n not in committed and (n not in errors or isinstance(errors[n], _Refit))
                ]
                outcome.delete(spark, untouched)
                first = next(iter(errors.values()))
                if not isinstance(first, _Refit):
                    raise first
                for name, target in self.ledger.targets.items():
                    states[name] = markers.find_marker(target.table, self.pipeline.name)
                return None
        self._record_commits(window, outcome, committed, states, opened)
        self.ledger.count(unmatched=outcome.unmatched, filtered=outcome.filtered)
        log.debug(
            "%s: batch %d written to %d table(s) in one job (%.2f s; commits %.2f s)",
            self.pipeline.name,
            window.batch_id,
            len(committed),
            written - began,
            time.monotonic() - written,
        )
        return set(committed)

    def _commits_at_once(self) -> bool:
        """Whether the catalog commits the known tables in one transaction (REST, unless
        ``catalog.atomic_commits`` is off): asked of the JVM's catalog once per run."""
        if self._at_once is None:
            jvm = self.spark.sparkContext._jvm
            assert jvm is not None
            self._at_once = bool(
                jvm.dev.frazil.iceberg.MarkedCatalog.commitsTablesAtOnce(
                    iceberg_catalog(self.spark, self.tables.catalog)
                )
            )
        return self._at_once

    def _commit_all(
        self,
        window: BatchWindow,
        names: list[str],
        outcome: one_job.Outcome,
        states: dict[str, markers.TableState],
        pause: Pause,
    ) -> list[tuple[_Committed | None, BaseException | None]] | None:
        """Commit known tables' files in one catalog transaction, each snapshot carrying its
        marker: every table gets the batch, or none does (the same failure for each).

        Returns None, nothing sent, if the catalog's server does not offer the multi-table
        commit (its configuration lists its endpoints without it): the run then commits per
        table.
        """
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        for name in names:
            pause.before_write(name)
        handles = self.ledger.handles()
        made, commits = self._markers(window, names, states, handles)
        try:
            # One string for all tables' summaries, and the tables' Java list built once: a
            # list and map built here would cost a round trip per table and entry.
            jvm.dev.frazil.spark.RoutedCommits.appendAll(
                outcome.java,
                iceberg_catalog(self.spark, self.tables.catalog),
                handles.java_tables(),
                json.dumps(commits),
            )
        except Exception as exc:
            if _NO_TRANSACTIONS in str(exc):
                log.warning(
                    "%s: the REST catalog does not offer multi-table commits "
                    "(transactions/commit); each table commits on its own",
                    self.pipeline.name,
                )
                self._at_once = False
                return None
            stale = stale_marker(exc)
            error: BaseException = exc if stale is None else stale
            return [(None, error) for _ in names]
        committed: list[tuple[_Committed | None, BaseException | None]] = [
            ((marker, None), None) for marker in made
        ]
        return self._check_interleavings(names, committed, states)

    def _markers(
        self,
        window: BatchWindow,
        names: list[str],
        states: dict[str, markers.TableState],
        handles: IcebergTables,
    ) -> tuple[list[markers.Marker], list[list[object]]]:
        """Each table's marker for this batch, and what the JVM's commit of all of them
        takes: per table, its index among ``handles``, its name and the marker's summary."""
        made: list[markers.Marker] = []
        commits: list[list[object]] = []
        for name in names:
            target, state = self.ledger.targets[name], states[name]
            marker = window.marker(
                state.marker, self.pipeline.name, self.ledger.observed(target, state)
            )
            made.append(marker)
            commits.append([handles.index(target.table), name, marker.to_summary()])
        return made, commits

    def _commit_each(
        self,
        window: BatchWindow,
        names: list[str],
        outcome: one_job.Outcome,
        states: dict[str, markers.TableState],
    ) -> list[tuple[_Committed | None, BaseException | None]]:
        """Commit known tables' files each in a commit of its own carrying its marker, as
        :meth:`_commit_share` does, all in one call to the JVM (which runs several at once):
        each table's marker, or its failure (a stale marker as :class:`StaleMarker`).

        One round trip for the batch: per table, the commit and its summary cost a few, and
        with 100 tables they were most of the commits' time (bench/routing, 2026-11-26).
        """
        from py4j.protocol import Py4JJavaError

        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        handles = self.ledger.handles()
        made, commits = self._markers(window, names, states, handles)
        failures = jvm.dev.frazil.spark.RoutedCommits.appendEach(
            outcome.java, handles.java_tables(), json.dumps(commits)
        )
        out: list[tuple[_Committed | None, BaseException | None]] = [
            ((marker, None), None) for marker in made
        ]
        if len(failures):
            for index, failure in failures.items():
                # As py4j raises a Java exception: its text (with the Java stack) names it.
                error = Py4JJavaError("An error occurred while calling appendEach", failure)
                stale = stale_marker(error)
                out[int(index)] = (None, error if stale is None else stale)
        return out

    def _check_interleavings(
        self,
        names: list[str],
        outcomes: list[tuple[_Committed | None, BaseException | None]],
        states: dict[str, markers.TableState],
    ) -> list[tuple[_Committed | None, BaseException | None]]:
        """After known tables' commits: each committed table's outcome, or the error if
        another run of the pipeline committed to it in between
        (:func:`~frazil.progress.markers.check_no_interleaving`, all tables read at once)."""
        done = [i for i, (result, error) in enumerate(outcomes) if error is None]
        if not done:
            return outcomes
        tables = [self.ledger.targets[names[i]].table for i in done]
        made = [outcomes[i][0][0] for i in done]  # type: ignore[index]
        try:
            found: list[BaseException | None] = list(
                markers.check_no_interleavings(
                    self.ledger.handles(), tables, [states[names[i]] for i in done], made
                )
            )
        except Exception as exc:  # the tables could not be read: none is known to be fine
            found = [exc for _ in done]
        out = list(outcomes)
        for i, error in zip(done, found, strict=True):
            if error is not None:
                out[i] = (None, error)
        return out

    def _record_commits(
        self,
        window: BatchWindow,
        outcome: one_job.Outcome,
        committed: dict[str, markers.Marker],
        states: dict[str, markers.TableState],
        opened: dict[str, tuple[Target, markers.TableState]],
    ) -> None:
        """Keep and report the job's commits (new tables join the pipeline's, as the commit
        opened them)."""
        targets = self.ledger.targets
        for name, marker in committed.items():
            if name not in targets:
                target, state = opened.get(name) or self.ledger.open(name)
                targets[name] = target
                states[name] = state
            share = outcome.tables[name]
            self.ledger.committed(
                window, targets[name], marker, share.records, share.timestamps, share.bytes
            )

    def _commit_share(
        self,
        window: BatchWindow,
        name: str,
        outcome: one_job.Outcome,
        layout: one_job.Layout,
        states: dict[str, markers.TableState],
        pause: Pause,
    ) -> _Committed:
        """Commit one table's files of the job (creating the table if new): its marker, and
        for a new table, the table opened and its state (read here, alongside the other
        tables' commits)."""
        pause.before_write(name)
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        share = outcome.tables[name]
        target = self.ledger.targets.get(name)
        state = states.get(name)
        marker = window.marker(
            state.marker if state is not None else None,
            self.pipeline.name,
            self.ledger.observed(target, state) if target is not None else {},
        )
        routed_commits = jvm.dev.frazil.spark.RoutedCommits
        if target is not None:
            assert state is not None
            try:
                # The summary as one JSON string: a Java map costs a round trip per entry.
                summary_json = json.dumps(marker.to_summary())
                routed_commits.append(outcome.java, target.table.java, name, summary_json)
            except Exception as exc:
                stale = stale_marker(exc)
                if stale is None:
                    raise
                raise stale from None
            # No other run's commit in between: checked for all the batch's tables at once
            # once they are committed (_check_interleavings).
            return marker, None
        summary = jvm.java.util.HashMap()
        for key, value in marker.to_summary().items():
            summary.put(key, value)
        template = layout.template
        assert template is not None
        drops = jvm.java.util.ArrayList()
        for column in template.drops(share.with_values):
            drops.add(column)
        created = routed_commits.createAndAppend(
            outcome.java,
            iceberg_catalog(self.spark, self.tables.catalog),
            identifier(self.spark, name.split(".")),
            template.java_table,
            template.properties,
            drops,
            NAME_MAPPING,
            summary,
        )
        if not created:
            raise _Refit(name)
        log.info("%s: created table %s", self.pipeline.name, name)
        # Should opening it fail, the table is committed all the same: the error is raised
        # (its files stay), the known tables commit nothing, and the restart reads it anew.
        return marker, self.ledger.open(name)

    def _layout(self, schema: StructType) -> one_job.Layout | None:
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
        layout: one_job.Layout | None = None
        for name, target in targets.items():
            java = target.table.java
            if (
                not one_job.template_eligible(target.settings.model_copy(update={"aliases": {}}))
                or not java.sortOrder().isUnsorted()
                or str(java.properties().getOrDefault("write.format.default", "parquet")).lower()
                != "parquet"
            ):
                break
            columns = one_job.table_columns(
                schema, user, views[name], target.settings, name, shared
            )
            if columns is None:
                break
            known[name] = columns
        else:
            layout = one_job.build_layout(schema, known, self._template(user), views)
        if len(self._layouts) > 8:
            self._layouts.clear()
        self._layouts[key] = layout
        return layout

    def _template(self, user: StructType) -> one_job.Template | None:
        """The template of the tables the batch may create (the same for every layout of
        this batch shape: the known tables change)."""
        namespace = self.tables.new_table_namespace()
        if namespace is None or self.tables.catalog_type not in ("jdbc", "hadoop"):
            return None
        at = (namespace, user.json())
        if at not in self._templates:
            self._templates = {
                at: one_job.make_template(
                    self.spark, self.tables.catalog, self.pipeline, namespace, user
                )
            }
        return self._templates[at]
