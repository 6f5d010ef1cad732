"""The routed job's committer: each table's files of the job committed with its marker,
the tables met first before the known ones, and the known tables all in one catalog
transaction where the catalog can (REST's multi-table commit), else each on its own."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil.config.pipeline import PipelineConfig
from frazil.engine.ledger import TableLedger
from frazil.engine.outcomes import NotThisWay, Written, Wrote
from frazil.engine.routed_job import Outcome
from frazil.engine.threads import Pause, each_outcome
from frazil.engine.window import BatchWindow
from frazil.jvm.classes import java_class
from frazil.progress import markers, table_markers
from frazil.sink.evolution import NAME_MAPPING
from frazil.sink.iceberg import (
    IcebergTables,
    commits_tables_at_once,
    iceberg_catalog,
    identifier,
    stale_marker,
)
from frazil.sink.tables import TableSet, Target

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The handler's logger: users and tests follow a batch's way under this one name.
log = logging.getLogger("frazil.engine.batch")


#: Iceberg's message when the REST server's configuration leaves the multi-table commit out.
_NO_TRANSACTIONS = "Server does not support endpoint: POST /v1/{prefix}/transactions/commit"


class _Refit(Exception):
    """A new table would not get the columns' ids its files were written with."""


#: Each table's commit, in the tables' order: what was committed, or the failure.
_Results = list[tuple[Written | None, BaseException | None]]


@dataclass
class RoutedCommitter:
    """Commits the routed job's files: each table once, with its marker.

    Only the committer commits (the job writes files and hands back its :class:`Outcome`).
    A table the batch meets first is created in the same transaction as its rows, before
    any known table commits. Where the catalog commits several tables at once (REST), the
    known tables commit in one catalog transaction: all or none, and no reader sees one of
    them a batch ahead. Otherwise each commits on its own; should a commit fail after others
    went through, their markers make the general way skip what they hold.

    Attributes:
        spark: The session.
        pipeline: The pipeline.
        tables: Opens the pipeline's tables, and names its catalog.
        ledger: The pipeline's tables and the run's counts.
    """

    spark: SparkSession
    pipeline: PipelineConfig
    tables: TableSet
    ledger: TableLedger
    #: Whether the catalog commits several tables in one transaction (asked once).
    _at_once: bool | None = None

    def commit(
        self, window: BatchWindow, outcome: Outcome, states: dict[str, table_markers.TableState]
    ) -> Wrote | NotThisWay:
        """Commit each table's files of the job with its marker.

        Returns:
            Each table committed (with the first failure, if a commit failed: the others'
            files that nothing committed are deleted); or, should a new table not get the
            columns' ids its files were written with, the batch for the general way, with
            the tables committed before that was found.
        """
        began = time.monotonic()
        spark = self.spark
        new = [n for n, t in outcome.tables.items() if t.created]
        pause = Pause()
        # New tables first: each is created with its rows and marker. Only then do the known
        # tables commit, so that a crash in between leaves every known table before the
        # batch, and a restart from the tables' markers (without the checkpoint) reads the
        # batch again rather than starting past the rows of a table never created.
        committed: dict[str, Written] = {}

        def commit(name: str) -> Written:
            return self._commit_one(window, name, outcome, states, pause)

        known = [n for n in outcome.tables if n not in new]
        for phase in (new, known):
            errors: dict[str, BaseException] = {}
            together = phase is known and len(phase) > 1 and self._commits_at_once()
            results = self._commit_all(window, phase, outcome, states, pause) if together else None
            if results is None:  # per table (or the catalog turned out not to commit at once)
                if phase is known and len(phase) > 1 and not pause.active:
                    results = self._commit_each(window, phase, outcome, states)
                elif phase is new and len(phase) > 1 and not pause.active:
                    results = self._create_all(window, phase, outcome, states)
                else:
                    results = each_outcome(phase, commit)
                if phase is known:
                    results = _check_interleavings(self.ledger, phase, results, states)
            for name, (result, error) in zip(phase, results, strict=True):
                if error is not None:
                    errors[name] = error
                    continue
                assert result is not None
                committed[name] = result
            if errors:
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
                    return Wrote(committed, failure=first)
                return NotThisWay(f"table {first} would not get its columns' ids", Wrote(committed))
        log.debug(
            "%s: batch %d written to %d table(s) in one job (%.2f s; commits %.2f s)",
            self.pipeline.name,
            window.batch_id,
            len(committed),
            outcome.seconds,
            time.monotonic() - began,
        )
        return Wrote(committed, unmatched=outcome.unmatched, filtered=outcome.filtered)

    def _commits_at_once(self) -> bool:
        """Whether the catalog commits the known tables in one transaction (REST, unless
        ``catalog.atomic_commits`` is off): asked of the JVM's catalog once per run."""
        if self._at_once is None:
            self._at_once = commits_tables_at_once(self.spark, self.tables.catalog)
        return self._at_once

    def _commit_all(
        self,
        window: BatchWindow,
        names: list[str],
        outcome: Outcome,
        states: dict[str, table_markers.TableState],
        pause: Pause,
    ) -> _Results | None:
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
            java_class(jvm, "dev.frazil.spark.TablesTransaction").appendAll(
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
        committed: _Results = [
            (self._written(outcome, name, marker), None)
            for name, marker in zip(names, made, strict=True)
        ]
        return _check_interleavings(self.ledger, names, committed, states)

    def _markers(
        self,
        window: BatchWindow,
        names: list[str],
        states: dict[str, table_markers.TableState],
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
        outcome: Outcome,
        states: dict[str, table_markers.TableState],
    ) -> _Results:
        """Commit known tables' files each in a commit of its own carrying its marker, as
        :meth:`_commit_one` does, all in one call to the JVM (which runs several at once):
        each table's marker, or its failure (a stale marker as :class:`StaleMarker`).

        One round trip for the batch: per table, the commit and its summary cost a few, and
        with 100 tables they were most of the commits' time (bench/routing, 2026-11-26).
        """
        from py4j.protocol import Py4JJavaError

        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        handles = self.ledger.handles()
        made, commits = self._markers(window, names, states, handles)
        failures = java_class(jvm, "dev.frazil.spark.RoutedCommits").appendEach(
            outcome.java, handles.java_tables(), json.dumps(commits)
        )
        out: _Results = [
            (self._written(outcome, name, marker), None)
            for name, marker in zip(names, made, strict=True)
        ]
        if len(failures):
            for index, failure in failures.items():
                # As py4j raises a Java exception: its text (with the Java stack) names it.
                error = Py4JJavaError("An error occurred while calling appendEach", failure)
                stale = stale_marker(error)
                out[int(index)] = (None, error if stale is None else stale)
        return out

    def _create_all(
        self,
        window: BatchWindow,
        names: list[str],
        outcome: Outcome,
        states: dict[str, table_markers.TableState],
    ) -> _Results:
        """Create the tables the batch met first, each with its files and marker as
        :meth:`_commit_one` creates one, all in one call to the JVM (which creates several
        at once); then read their states in one more.

        Two round trips for the batch, where each table's creation and opening took a
        dozen (bench/routing: a first batch meeting 1,000 tables committed in 3.2 s against
        13.1 s, one meeting 100 in 0.5 s against 0.8 s).
        """
        from py4j.protocol import Py4JJavaError

        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        template = outcome.template
        assert template is not None
        made: list[markers.Marker] = []
        specs: list[list[object]] = []
        for name in names:
            state = states.get(name)
            marker = window.marker(
                state.marker if state is not None else None, self.pipeline.name, {}
            )
            made.append(marker)
            drops = template.drops(outcome.tables[name].with_values)
            specs.append([name, drops, marker.to_summary()])
        try:
            created = java_class(jvm, "dev.frazil.spark.NewTables").createAll(
                outcome.java,
                iceberg_catalog(self.spark, self.tables.catalog),
                template.java_table,
                template.properties,
                NAME_MAPPING,
                json.dumps(specs),
            )
            failures = {int(i): failure for i, failure in created.failures().items()}
            # The tables in one list and the refits' indexes: two round trips, where a
            # table's own handle costs one each (its creation's list serves until it is used).
            made_tables = created.tables()
            refits = set(json.loads(str(created.refits())))
        except Exception as exc:
            # Each table's creation may or may not have gone in: each gets the error, and
            # its files stay, as a table's own failed creation leaves them.
            return [(None, exc) for _ in names]
        out: _Results = [(None, None)] * len(names)
        opened: list[tuple[int, Target]] = []
        for i, name in enumerate(names):
            if i in failures:
                # As py4j raises a Java exception: its text (with the Java stack) names it.
                out[i] = (
                    None,
                    Py4JJavaError("An error occurred while calling createAll", failures[i]),
                )
                continue
            if i in refits:
                out[i] = (None, _Refit(name))
                continue
            log.info("%s: created table %s", self.pipeline.name, name)
            opened.append((i, self.tables.in_list(name, made_tables, i)))
        if not opened:
            return out
        try:
            found = table_markers.find_markers(
                IcebergTables(self.spark, [t.table for _, t in opened]), self.pipeline.name
            )
        except Exception as exc:
            # The tables are committed all the same: the error is raised (their files stay),
            # the known tables commit nothing, and the restart reads them anew.
            for i, _ in opened:
                out[i] = (None, exc)
            return out
        for (i, target), state in zip(opened, found, strict=True):
            out[i] = (self._written(outcome, names[i], made[i], target, state), None)
        return out

    def _commit_one(
        self,
        window: BatchWindow,
        name: str,
        outcome: Outcome,
        states: dict[str, table_markers.TableState],
        pause: Pause,
    ) -> Written:
        """Commit one table's files of the job (creating the table if new): what it
        committed, and for a new table, the table opened and its state (read here, alongside
        the other tables' commits)."""
        pause.before_write(name)
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        written = outcome.tables[name]
        target = self.ledger.targets.get(name)
        state = states.get(name)
        marker = window.marker(
            state.marker if state is not None else None,
            self.pipeline.name,
            self.ledger.observed(target, state) if target is not None else {},
        )
        routed_commits = java_class(jvm, "dev.frazil.spark.RoutedCommits")
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
            # once they are committed (:func:`_check_interleavings`).
            return self._written(outcome, name, marker)
        template = outcome.template
        assert template is not None
        # The columns to drop and the summary as JSON strings: a Java list or map built here
        # costs a round trip per element.
        drops = json.dumps(template.drops(written.with_values))
        summary = json.dumps(marker.to_summary())
        created = java_class(jvm, "dev.frazil.spark.NewTables").createAndAppend(
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
        opened, state = self.ledger.open(name)
        return self._written(outcome, name, marker, opened, state)

    def _written(
        self,
        outcome: Outcome,
        name: str,
        marker: markers.Marker,
        target: Target | None = None,
        opened: table_markers.TableState | None = None,
    ) -> Written:
        """What a table's commit holds (``target``: a new table, as its commit opened it)."""
        written = outcome.tables[name]
        return Written(
            self.ledger.targets[name] if target is None else target,
            marker,
            written.records,
            written.timestamps,
            written.bytes,
            opened=opened,
        )


def _check_interleavings(
    ledger: TableLedger,
    names: list[str],
    results: _Results,
    states: dict[str, table_markers.TableState],
) -> _Results:
    """After known tables' commits: each committed table's result, or the error if
    another run of the pipeline committed to it in between
    (:func:`~frazil.progress.table_markers.check_no_interleaving`, all tables read at once)."""
    done = [i for i, (result, error) in enumerate(results) if error is None]
    if not done:
        return results
    tables = [ledger.targets[names[i]].table for i in done]
    made: list[markers.Marker] = []
    for i in done:
        result = results[i][0]
        assert result is not None and result.marker is not None
        made.append(result.marker)
    try:
        found: list[BaseException | None] = list(
            table_markers.check_no_interleavings(
                ledger.handles(), tables, [states[names[i]] for i in done], made
            )
        )
    except Exception as exc:  # the tables could not be read: none is known to be fine
        found = [exc for _ in done]
    out = list(results)
    for i, error in zip(done, found, strict=True):
        if error is not None:
            out[i] = (None, error)
    return out
