"""The declared transform chain (flatten, rename, cast, derive, filter, …).

Empty today: the config has no ``transforms:`` key yet. Each transform will be one
DataFrame → DataFrame function in the JVM that marks records it cannot handle with stage
``transform`` instead of raising.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil.config.models import PipelineConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def apply_transforms(frame: DataFrame, pipeline: PipelineConfig) -> DataFrame:
    """Apply the pipeline's transforms in order (none are declarable yet)."""
    del pipeline
    return frame
