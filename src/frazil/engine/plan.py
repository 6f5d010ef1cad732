"""The batch plan: the ordered steps every micro-batch of a pipeline runs, in the JVM.

Each step is a DataFrame → DataFrame function over the column contract
(:mod:`frazil.columns`); none raises for a per-record problem, each marks the record's error
column instead. The plan is built once per pipeline; anything that depends on data (schemas,
later registry ids and routing) is looked up inside the steps, so it can change between batches
without restarting the streaming query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.models import PipelineConfig
from frazil.decode.registry import Decoder
from frazil.route.single import SingleTableRoute
from frazil.sink.modes import append_mode
from frazil.source.raw import to_contract
from frazil.transform.chain import apply_transforms
from frazil.transform.metadata import add_metadata

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Step:
    """One step of the plan."""

    name: str
    description: str
    apply: Callable[[DataFrame], DataFrame]


@dataclass(frozen=True)
class BatchPlan:
    """A pipeline's steps, and the tables its route can produce."""

    pipeline: str
    steps: tuple[Step, ...]
    tables: tuple[str, ...]

    def run(self, raw: DataFrame) -> DataFrame:
        """Apply every step to a batch of raw Kafka rows (lazily: nothing runs yet)."""
        frame = raw
        for step in self.steps:
            frame = step.apply(frame)
        return frame

    def describe(self) -> list[tuple[str, str]]:
        """``(step, what it does)`` in order, for ``--dry-run``-style output and docs."""
        return [(s.name, s.description) for s in self.steps]


def _prune(frame: DataFrame) -> DataFrame:
    # The raw key/value/headers are dead weight once decoded: keep them out of the batch cache.
    drop = [col for col in (c.KEY, c.VALUE, c.HEADERS, c.TIMESTAMP) if col in frame.columns]
    return frame.drop(*drop)


def build_plan(pipeline: PipelineConfig, decoder: Decoder) -> BatchPlan:
    """The plan of one pipeline with the given value decoder."""
    route = SingleTableRoute(pipeline.table)
    metadata = ", ".join(pipeline.kafka_metadata) or "none"
    steps = (
        Step(
            "source",
            "Kafka rows into the column contract (provenance, error, table, op)",
            to_contract,
        ),
        Step(
            "decode",
            f"{pipeline.format} values into {len(decoder.schema.fields)} columns; "
            "undecodable records marked",
            decoder.decode,
        ),
        Step(
            "metadata",
            f"Kafka metadata columns: {metadata}",
            lambda frame: add_metadata(frame, pipeline),
        ),
        Step(
            "transform",
            "declared transforms (none)",
            lambda frame: apply_transforms(frame, pipeline),
        ),
        Step("route", f"every record to {pipeline.table}", route.route),
        Step("mode", "append; tombstones skipped", append_mode),
        Step("prune", "drop raw key, value and headers", _prune),
    )
    return BatchPlan(pipeline.name, steps, route.tables)
