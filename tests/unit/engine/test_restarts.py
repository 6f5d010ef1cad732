"""The bound on restarts from the tables, without Spark: a cause that comes back at every
start stops the run with that cause instead of restarting forever."""

from __future__ import annotations

import pytest

from frazil.engine.restarts import RestartBudget
from frazil.errors import PipelineError


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_restarts_stop_after_five_within_the_window_naming_the_cause() -> None:
    clock = _Clock()
    budget = RestartBudget(limit=5, window_s=600, clock=clock)
    why = "topic(s) rot.1 no longer exist (Spark: partitions are gone)"
    for _ in range(5):
        budget.spend("p", why, "take it out of pipelines[0].topic_pattern")
        clock.now += 10
    with pytest.raises(PipelineError) as info:
        budget.spend("p", why, "take it out of pipelines[0].topic_pattern")
    message = str(info.value)
    assert "pipeline 'p': restarted from its tables 5 times within 600 s" in message
    assert "rot.1 no longer exist" in message and "pipelines[0].topic_pattern" in message


def test_restarts_spread_over_time_go_on() -> None:
    """Rotated topics aged out once a day restart the pipeline once a day, for ever."""
    clock = _Clock()
    budget = RestartBudget(limit=5, window_s=600, clock=clock)
    for _ in range(50):
        budget.spend("p", "topic(s) x no longer exist", "")
        clock.now += 200
