"""The declared transform chain (flatten, rename, cast, derive, filter, …).

Empty today: the config has no ``transforms:`` key yet. Each transform will be one
function over the batch's column expressions (:data:`frazil.columns.Projection`), in the
JVM, that marks records it cannot handle with stage
``transform`` instead of raising.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil.config.models import PipelineConfig

if TYPE_CHECKING:
    from frazil.columns import Projection


def apply_transforms(batch: Projection, pipeline: PipelineConfig) -> Projection:
    """Apply the pipeline's transforms in order (none are declarable yet)."""
    del pipeline
    return batch
