"""One pipeline built from its config: its shape, route and batch plan, for every caller.

``frazil run`` (the runner), ``frazil plan`` (:mod:`~frazil.engine.explain`) and ``frazil dlq
replay`` (:mod:`~frazil.engine.replay`) all build a pipeline the same way, so that what the
dry run shows and what a replay writes is what a run does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.engine.plan import BatchPlan, build_plan
from frazil.engine.shape import PipelineShape, resolve_shape, source_schema
from frazil.engine.table_views import CatalogViews, TableViews
from frazil.route.rules import Route, build_route
from frazil.transform.chain import build_chain

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class BuiltPipeline:
    """A pipeline ready to plan batches.

    Attributes:
        pipeline: Its config.
        shape: Decoders, transforms and table schema, resolved against the registry and the
            existing table.
        route: Where its records go.
        plan: The batch plan of that shape and route.
    """

    pipeline: PipelineConfig
    shape: PipelineShape
    route: Route
    plan: BatchPlan

    def replan(self, spark: SparkSession) -> BatchPlan:
        """The plan again, once the decoders learned new fields: the transform chain is
        checked against the new columns."""
        shape = self.shape
        source = source_schema(self.pipeline, shape.value, shape.key)
        chain = build_chain(spark, self.pipeline, source)
        return build_plan(self.pipeline, shape.value, shape.key, chain, self.route)


def build_pipeline(
    spark: SparkSession,
    config: FrazilConfig,
    pipeline: PipelineConfig,
    views: TableViews | None = None,
) -> BuiltPipeline:
    """Resolve the pipeline's shape, build its route and its batch plan.

    Args:
        views: Where the existing tables are read (default: the session's catalog).

    Raises:
        ConfigError: A schema source or a transform does not fit.
        PipelineError: The registry or the topics could not give a schema.
    """
    if views is None:
        views = CatalogViews(spark, config.catalog.name)
    shape = resolve_shape(spark, config, pipeline, views)
    route = build_route(pipeline)
    plan = build_plan(pipeline, shape.value, shape.key, shape.chain, route)
    return BuiltPipeline(pipeline, shape, route, plan)
