"""The pipeline's throughput over its recent commits, across the tables it writes."""

from __future__ import annotations

import pytest

from frazil.observe.status import records_per_second


def test_one_table_counts_the_commits_after_the_oldest() -> None:
    # Newest first: 3 commits 1 s apart; the oldest opens the window.
    window = [(3_000, 100), (2_000, 100), (1_000, 100)]
    assert records_per_second([window]) == pytest.approx(100.0)


def test_routed_tables_add_up() -> None:
    # Twenty tables committed together each second, 50 records each: 1,000 records/s,
    # not one table's 50.
    windows = [[(3_000 + t, 50), (2_000 + t, 50), (1_000 + t, 50)] for t in range(20)]
    rate = records_per_second(windows)
    assert rate == pytest.approx(2_000 / 2.0, rel=0.02)


def test_window_opens_at_the_latest_oldest_commit() -> None:
    # A busy table's window (capped) starts later than a quiet one's: the quiet table's
    # commits before that start are not counted, so both cover the same seconds.
    busy = [(10_000, 10), (9_000, 10), (8_000, 10)]
    quiet = [(9_500, 40), (5_000, 40), (1_000, 40)]
    assert records_per_second([busy, quiet]) == pytest.approx((10 + 10 + 40) / 2.0)


def test_a_single_commit_does_not_open_a_window() -> None:
    assert records_per_second([[(5_000, 10)]]) is None
    assert records_per_second([]) is None
    # But its records count inside another table's window.
    assert records_per_second([[(3_000, 10), (1_000, 10)], [(2_000, 30)]]) == pytest.approx(20.0)


def test_equal_times_give_no_rate() -> None:
    assert records_per_second([[(1_000, 10), (1_000, 10)]]) is None
