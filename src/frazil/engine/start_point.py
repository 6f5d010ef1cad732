"""Where a pipeline's query starts: the tables' markers against the checkpoint, an operator's
``--reset-offsets``, or a restart from the tables after a failure."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.engine.checkpoint import Checkpoint
from frazil.maintenance.expiry import to_retire
from frazil.progress import markers, table_markers
from frazil.progress.markers import RETIRES
from frazil.progress.start import (
    TableReset,
    decide_start,
    parse_reset,
    reset_marker,
    resolve_reset,
    resume_offsets,
)
from frazil.sink.tables import TableSet, Target
from frazil.source.admin import JvmKafkaAdmin
from frazil.source.offsets import TopicOffsets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The runner's logger: operators' log filters (and the tests) know these lines by that name.
log = logging.getLogger("frazil.engine.runner")


@dataclass
class StartPoint:
    """Decides where one pipeline's query starts, and records resets in its tables.

    Attributes:
        targets: The tables the pipeline writes, by config name (the handler's, live).
        tables: The pipeline's table set (every table the route can name, for resets).
        checkpoint: The query's checkpoint.
        reason: Why the run starts where it does (for the report).
        resumed_from_table: The run started from the tables' markers.
        topic_ids: Kafka's topic ids the next query's starting offsets are decided on.
    """

    spark: SparkSession
    config: FrazilConfig
    pipeline: PipelineConfig
    admin: JvmKafkaAdmin
    targets: dict[str, Target]
    tables: TableSet
    checkpoint: Checkpoint
    reason: str = ""
    resumed_from_table: bool = False
    topic_ids: dict[str, str] = field(default_factory=dict)
    #: The reset :meth:`reset_preview` showed and the offsets it resolved.
    _previewed: tuple[str, TopicOffsets] | None = field(default=None, init=False)

    def prepare(self, reset_offsets: str | None) -> TopicOffsets | None:
        """Reconcile checkpoint and table; the exact starting offsets, or None for the config's."""
        if reset_offsets is not None:
            self.reason = f"offsets reset to {reset_offsets}"
            return self.reset(reset_offsets)
        partitions, recreated, states = self._current_states()
        state = self._state(states)
        checkpoint = self.checkpoint
        committed = checkpoint.committed_offsets()
        start = decide_start(
            self.pipeline.name,
            self.pipeline.describe_target(),
            state,
            committed[1] if committed else None,
            checkpoint.has_progress(),
            recreated,
        )
        self.reason = start.reason
        if start.set_aside:
            moved = checkpoint.set_aside()
            log.warning(
                "%s: %s; old checkpoint moved to %s", self.pipeline.name, start.reason, moved
            )
        if start.from_table:
            self.resumed_from_table = True
            # INFO: a start from the table is how frazil recovers; what calls for a look (a
            # checkpoint set aside, a topic created again) was said at WARNING above.
            log.info("%s: %s", self.pipeline.name, start.reason)
            return resume_offsets(self._resume_marker(states), partitions)
        return None

    def from_tables(self) -> TopicOffsets:
        """Where a restart from the tables starts: where every table is complete, for the
        partitions Kafka has now."""
        partitions, _, states = self._current_states()
        return resume_offsets(self._resume_marker(states), partitions)

    def _states(self) -> list[table_markers.TableState]:
        return [
            table_markers.find_marker(t.table, self.pipeline.name) for t in self.targets.values()
        ]

    def _recreated(self, states: list[table_markers.TableState]) -> list[tuple[str, str, str]]:
        """Topics the tables' markers recorded under another id than Kafka's now (deleted and
        created again), each said at WARNING once."""
        found = sorted(
            {r for s in states for r in markers.recreated_topics(s.marker, self.topic_ids)}
        )
        for topic, old, new in found:
            log.warning(
                "%s: topic %s was deleted and created again (topic id %s, now %s): it is read "
                "from its start; the tables' offsets of the old topic no longer apply",
                self.pipeline.name,
                topic,
                old,
                new,
            )
        return found

    def _state(self, states: list[table_markers.TableState]) -> table_markers.TableState:
        """The tables' state for deciding where to start: one table's own; for several, where
        every table is complete (a checkpoint beyond it is ahead of some table — one rolled
        back, say — whose records would never come back: the run starts from the tables)."""
        if len(states) == 1:
            return states[0]
        for target, state in zip(self.targets.values(), states, strict=True):
            if state.marker is None and state.total_records > 0:
                # The same refusal as for one table (decide_start), naming this table.
                decide_start(self.pipeline.name, target.name, state, None, False)
        return table_markers.TableState(
            markers.merge_markers([s.marker for s in states], lowest=True),
            None,
            sum(s.total_records for s in states),
        )

    def _resume_marker(self, states: list[table_markers.TableState]) -> markers.Marker | None:
        """Where a restart from the tables starts: where every table is complete."""
        return markers.merge_markers([s.marker for s in states], lowest=True)

    def _current_states(
        self,
    ) -> tuple[dict[str, list[int]], list[str], list[table_markers.TableState]]:
        """Kafka's partitions and topic ids now (kept in :attr:`topic_ids`), the topics
        created again since the tables' markers (said at WARNING), and the tables' states as
        they stand for Kafka's topics now (the old offsets of those topics left out)."""
        partitions, self.topic_ids = self.admin.describe(self.pipeline)
        states = self._states()
        recreated = [t for t, _, _ in self._recreated(states)]
        return (
            partitions,
            recreated,
            [table_markers.current_state(s, self.topic_ids) for s in states],
        )

    def _reset_offsets(self, spec_text: str) -> TopicOffsets:
        """Where ``--reset-offsets`` makes the pipeline continue, per partition Kafka has now."""
        spec = parse_reset(spec_text)
        current, self.topic_ids = self.admin.describe(self.pipeline)
        return resolve_reset(
            spec,
            current,
            self.admin.offsets(current, "earliest"),
            self.admin.offsets(current, "latest"),
        )

    def _reset_targets(self) -> dict[str, Target]:
        # Every table the route can name, not only those the run knows by their markers: a
        # table whose marker expired is what the refusal sends users here for.
        targets = self.targets
        for name, found in self.tables.nameable().items():
            targets.setdefault(name, found)
        return targets

    def reset_preview(self, spec_text: str) -> list[TableReset]:
        """What ``--reset-offsets`` would do to each table, changing nothing: the rows and
        the pipeline's marker there, and where the reset makes it continue. The offsets are
        kept for :meth:`reset`, so what was confirmed is what is recorded."""
        offsets = self._reset_offsets(spec_text)
        self._previewed = (spec_text, offsets)
        found = []
        for target in self._reset_targets().values():
            state = table_markers.find_marker(target.table, self.pipeline.name)
            found.append(
                TableReset(
                    target.name,
                    self.pipeline.name,
                    spec_text,
                    state.total_records,
                    state.marker,
                    offsets,
                    merges=target.settings.write.merges,
                )
            )
        return found

    def reset(self, spec_text: str) -> TopicOffsets:
        """Record ``--reset-offsets`` durably in every table, and return where to start (the
        offsets :meth:`reset_preview` showed, if it was asked)."""
        previewed = self._previewed
        if previewed is not None and previewed[0] == spec_text:
            offsets = previewed[1]
        else:
            offsets = self._reset_offsets(spec_text)
        marker = reset_marker(self.pipeline.name, spec_text, offsets, self.topic_ids)
        targets = self._reset_targets()
        names = [p.name for p in self.config.pipelines]
        for target in targets.values():
            summary = marker.to_summary()
            # Markers of pipelines not in this config (the pipeline's former name, one
            # removed) stop pinning expiry from here on.
            retired = to_retire(self.spark, target.qualified, names)
            if retired:
                summary[RETIRES] = json.dumps(retired)
                log.info("%s: %s: retiring markers %s", self.pipeline.name, target.name, retired)
            target.table.commit_summary_only(summary)
        self.checkpoint.set_aside()
        log.warning("%s: offsets reset to %s (%s)", self.pipeline.name, spec_text, offsets)
        return offsets
