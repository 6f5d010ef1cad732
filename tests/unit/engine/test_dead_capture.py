"""Failing records carried in the write's pass: the memory bound and the split of what the
write observed into carried records and positions to read again."""

from __future__ import annotations

from frazil.engine import dead_capture
from frazil.engine.dead_capture import MAX_CARRIED_BYTES, Failing


def test_records_upper_bound_counts_from_known_starts_and_zero_elsewhere() -> None:
    planned = {"a": {0: 100, 1: 50}, "b": {0: 7}}
    assert dead_capture.records_upper_bound(planned, {"a": {0: 90, 1: 50}}) == 10 + 0 + 7
    assert dead_capture.records_upper_bound(planned, None) == 157
    # A start past the end (a re-planned range) counts nothing, never a negative.
    assert dead_capture.records_upper_bound({"a": {0: 5}}, {"a": {0: 9}}) == 0


def test_carry_limit_keeps_a_whole_failing_batch_within_the_budget() -> None:
    budget = 128 * 2**20
    for records in (1, 1_000, 250_000, 1_000_000, 50_000_000):
        limit = dead_capture.carry_limit(budget, records)
        assert 0 <= limit <= MAX_CARRIED_BYTES
        # Every record failing and carried at the limit still fits.
        assert records * limit <= budget
    assert dead_capture.carry_limit(budget, 10) == MAX_CARRIED_BYTES
    assert dead_capture.carry_limit(budget, 0) == MAX_CARRIED_BYTES
    # A batch so large that nothing fits carries nothing (all read again by position).
    assert dead_capture.carry_limit(budget, 10**9) == 0


def test_failing_records_known_by_position_are_all_read_again() -> None:
    rows = [("t", 0, 5, "decode", "malformed"), ("u", 1, 9, "schema", "incompatible")]
    failing = Failing.at(rows)
    assert failing.positions == rows
    assert failing.missing == rows
    assert failing.carried_rows() == []


class _Spark:
    """What :func:`dead_capture.driver_budget` reads of a session: heap and one setting."""

    def __init__(self, heap: int, max_result: str | None) -> None:
        runtime = type("Runtime", (), {"maxMemory": lambda self: heap})()
        lang = type(
            "Lang", (), {"Runtime": type("R", (), {"getRuntime": staticmethod(lambda: runtime)})}
        )
        conf = {} if max_result is None else {"spark.driver.maxResultSize": max_result}
        context = type(
            "Context",
            (),
            {
                "_jvm": type("Jvm", (), {"java": type("Java", (), {"lang": lang})})(),
                "getConf": lambda self: type(
                    "Conf", (), {"get": lambda self, key, default: conf.get(key, default)}
                )(),
            },
        )
        self.sparkContext = context()


def test_driver_budget_is_a_sixteenth_of_the_heap_within_the_result_size() -> None:
    gib = 2**30
    # maxResultSize 1g by default: a quarter of it caps large heaps.
    assert dead_capture.driver_budget(_Spark(gib, None)) == gib // 16  # type: ignore[arg-type]
    assert dead_capture.driver_budget(_Spark(16 * gib, None)) == gib // 4  # type: ignore[arg-type]
    assert dead_capture.driver_budget(_Spark(16 * gib, "0")) == gib  # type: ignore[arg-type]
    assert dead_capture.driver_budget(_Spark(16 * gib, "2048")) == 2 * gib // 4  # type: ignore[arg-type]
    assert dead_capture.driver_budget(_Spark(4 * gib, "100m")) == 25 * 2**20  # type: ignore[arg-type]
