"""The one definition of freshness and lag every figure uses."""

from frazil.progress.freshness import (
    freshness_ms,
    freshness_seconds,
    lag_records,
    lag_seconds,
    lowest_offsets,
    pipeline_valid_through,
)


def test_pipeline_valid_through_is_the_lowest_and_unknown_while_a_table_has_none() -> None:
    assert pipeline_valid_through([3_000, 1_000, 2_000]) == 1_000
    assert pipeline_valid_through([3_000, None]) is None
    assert pipeline_valid_through([]) is None


def test_freshness_is_the_moment_minus_valid_through_never_negative() -> None:
    assert freshness_ms(10_000, 12_500) == 2_500
    assert freshness_seconds(10_000, 12_500) == 2.5
    # A producer clock ahead cannot make the tables fresher than now.
    assert freshness_ms(13_000, 12_500) == 0
    assert freshness_ms(None, 12_500) is None and freshness_seconds(None, 1) is None


def test_lag_counts_records_beyond_the_lowest_table_offset() -> None:
    assert lowest_offsets([{"t": {0: 10, 1: 5}}, {"t": {0: 7}, "u": {0: 1}}]) == {
        "t": {0: 7, 1: 5},
        "u": {0: 1},
    }
    assert lag_records(7, 10) == 3
    assert lag_records(7, None) == 0 and lag_records(12, 10) == 0
    assert lag_seconds(3, 10_000, 14_000) == 4.0
    # Caught up, or no timestamp known: no lag in seconds.
    assert lag_seconds(0, 10_000, 14_000) == 0.0 and lag_seconds(3, None, 14_000) == 0.0
