"""The live batch plan: the pipeline's plan as its decoders learn new schemas mid-stream."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil.engine.plan import BatchPlan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# The handler's logger: users and tests follow a batch's way under this one name.
log = logging.getLogger("frazil.engine.batch")

#: How often a batch may learn new schemas and be planned again before it is rejected.
MAX_LEARN = 3


@dataclass
class LivePlan:
    """The plan batches are written with, rebuilt when a batch teaches the decoders a new
    shape (a schema id not known yet, new fields of inferred JSON).

    Learning is a failure path: records the plan cannot decode yet are marked, their write
    fails before any commit, and the batch is planned and written again (a loop in each way
    of writing, at most :data:`MAX_LEARN` times).

    Attributes:
        pipeline: The pipeline's name (for logs).
        plan: The current plan.
        replan: Rebuilds the plan once decoders learned a new shape (new columns through the
            chain); None keeps the plan as it is.
        follow: The plan and its ``replan`` built again from the config file when it promoted
            columns since the last call (:mod:`~frazil.engine.promotion`); None when it did
            not. None: the config file is not followed.
    """

    pipeline: str
    plan: BatchPlan
    replan: Callable[[], BatchPlan] | None = None
    follow: Callable[[], tuple[BatchPlan, Callable[[], BatchPlan]] | None] | None = None

    def take_promotions(self) -> None:
        """Take in the columns the config file promoted since the last batch, if any."""
        if self.follow is None:
            return
        rebuilt = self.follow()
        if rebuilt is not None:
            self.plan, self.replan = rebuilt

    def learn(self, batch: DataFrame, batch_id: int, attempt: int) -> bool:
        """Let the decoders learn from a batch with marked records; replan if they did.

        Returns:
            Whether the batch should be planned and written again (False once ``attempt``
            reached the bound, or nothing was learned).
        """
        if attempt >= MAX_LEARN or not self.plan.learn(batch):
            return False
        log.info("%s: learned new schemas in batch %d", self.pipeline, batch_id)
        if self.replan is not None:
            self.plan = self.replan()
        return True
