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


class _Conf:
    def __init__(self, memory: str | None) -> None:
        self.memory = memory

    def get(self, key: str, default: str) -> str:
        assert key == "spark.driver.memory"
        return default if self.memory is None else self.memory


class _Spark:
    def __init__(self, memory: str | None) -> None:
        conf = _Conf(memory)

        class _Context:
            def getConf(self) -> _Conf:
                return conf

        self.sparkContext = _Context()


def test_driver_budget_is_an_eighth_of_the_driver_memory() -> None:
    assert dead_capture.driver_budget(_Spark("4g")) == 512 * 2**20  # type: ignore[arg-type]
    assert dead_capture.driver_budget(_Spark("512m")) == 64 * 2**20  # type: ignore[arg-type]
    assert dead_capture.driver_budget(_Spark(None)) == 128 * 2**20  # type: ignore[arg-type]
    assert dead_capture.driver_budget(_Spark("2G")) == 256 * 2**20  # type: ignore[arg-type]
