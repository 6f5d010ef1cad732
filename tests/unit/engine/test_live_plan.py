"""The live plan's learning bound, and the thread helpers, without Spark."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from frazil.engine import threads
from frazil.engine.live_plan import MAX_LEARN, LivePlan


class _Plan:
    def __init__(self, learns: bool) -> None:
        self.learns = learns
        self.asked = 0

    def learn(self, batch: Any) -> bool:
        self.asked += 1
        return self.learns


def test_a_plan_that_learned_is_rebuilt() -> None:
    rebuilt = _Plan(learns=False)
    live = LivePlan("p", _Plan(learns=True), replan=lambda: rebuilt)  # type: ignore[arg-type,return-value]
    assert live.learn(None, 3, attempt=0)  # type: ignore[arg-type]
    assert live.plan is rebuilt


def test_a_plan_that_learned_nothing_stays() -> None:
    plan = _Plan(learns=False)
    live = LivePlan("p", plan)  # type: ignore[arg-type]
    assert not live.learn(None, 3, attempt=0)  # type: ignore[arg-type]
    assert live.plan is plan


def test_learning_stops_at_the_bound_without_asking_the_decoders() -> None:
    plan = _Plan(learns=True)
    live = LivePlan("p", plan)  # type: ignore[arg-type]
    assert not live.learn(None, 3, attempt=MAX_LEARN)  # type: ignore[arg-type]
    assert plan.asked == 0


def test_each_keeps_the_order_and_raises_the_first_failure() -> None:
    assert threads.each([3, 1, 2], lambda n: n * 10) == [30, 10, 20]

    def fail(n: int) -> int:
        if n > 1:
            raise ValueError(f"item {n}")
        return n

    with pytest.raises(ValueError, match="item 2"):
        threads.each([1, 2, 3], fail)


def test_each_takes_items_that_cannot_be_hashed() -> None:
    tables = [{"name": "a"}, {"name": "b"}]
    assert threads.each(tables, lambda t: t["name"]) == ["a", "b"]


def test_each_outcome_waits_for_every_item_and_keeps_each_failure() -> None:
    done: list[int] = []
    lock = threading.Lock()

    def call(n: int) -> int:
        if n == 1:
            raise RuntimeError("one")
        time.sleep(0.01)
        with lock:
            done.append(n)
        return n * 2

    outcomes = threads.each_outcome([1, 2, 3], call)
    assert len(outcomes) == 3
    assert outcomes[1] == (4, None) and outcomes[2] == (6, None)
    result, error = outcomes[0]
    assert result is None and isinstance(error, RuntimeError)
    assert sorted(done) == [2, 3]
    assert threads.each_outcome([], call) == []


def test_the_pause_hook_sleeps_only_for_its_table(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(threads.time, "sleep", slept.append)
    monkeypatch.setenv("FRAZIL_TEST_PAUSE_BEFORE_WRITE", "db.b:0.2")
    pause = threads.Pause()
    pause.before_write("db.a")
    assert slept == []
    pause.before_write("db.b")
    assert slept == [0.2]
    monkeypatch.delenv("FRAZIL_TEST_PAUSE_BEFORE_WRITE")
    threads.Pause().before_write("db.b")
    assert slept == [0.2]
