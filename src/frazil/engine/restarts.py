"""Restarts from the tables, bounded: a cause that comes back at every start stops the run
with that cause instead of restarting forever."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from frazil.errors import PipelineError


@dataclass
class RestartBudget:
    """Restarts from the tables allowed in a window of time: a cause that comes back at
    every start (a topic deleted and created again over and over, one that stays away) stops
    the run with that cause instead of restarting forever.

    Attributes:
        limit: Restarts allowed within ``window_s``.
        window_s: The window, in seconds.
        clock: ``time.monotonic`` (tests give their own).
    """

    limit: int = 5
    window_s: float = 600.0
    clock: Callable[[], float] = time.monotonic
    _times: list[float] = field(default_factory=list)

    def spend(self, pipeline: str, why: str, hint: str) -> None:
        """Count one restart.

        Raises:
            PipelineError: ``limit`` restarts were made within ``window_s`` already.
        """
        now = self.clock()
        self._times = [t for t in self._times if now - t < self.window_s]
        if len(self._times) >= self.limit:
            raise PipelineError(
                f"pipeline {pipeline!r}: restarted from its tables {len(self._times)} times "
                f"within {self.window_s:g} s and the cause is back: {why}. Stopped instead of "
                f"restarting again; {hint}"
            )
        self._times.append(now)
