"""The pipeline's throughput over its recent commits, across the tables it writes."""

from __future__ import annotations

import pytest

from frazil.observe.status import RECENT_COMMITS, Commit, records_per_second


def _window(*commits: tuple[int, int, int]) -> list[Commit]:
    """(time in ms, records, batch id) each, newest first."""
    return [Commit(at, added, ("q", str(batch))) for at, added, batch in commits]


def test_one_table_counts_the_commits_after_the_oldest() -> None:
    # Three batches 1 s apart; the oldest opens the window.
    window = _window((3_000, 100, 3), (2_000, 100, 2), (1_000, 100, 1))
    assert records_per_second([window]) == pytest.approx(100.0)


def test_routed_tables_add_up() -> None:
    # Twenty tables, each batch's commits a few ms apart, 50 records each: 1,000 records/s,
    # not one table's 50.
    windows = [
        _window((3_000 + t, 50, 3), (2_000 + t, 50, 2), (1_000 + t, 50, 1)) for t in range(20)
    ]
    assert records_per_second(windows) == pytest.approx(2_000 / 2.019)


def test_the_opening_batch_is_left_out_of_every_table_whatever_its_commit_order() -> None:
    # A commits each second; B, new to the route, committed twice in the opening batch
    # (its rows, then a marker), before A's commit of that batch.
    a = _window(*((1_005 + 1_000 * i, 100, i + 1) for i in reversed(range(5))))
    b = _window((1_001, 0, 1), (1_000, 100, 1))
    assert records_per_second([a, b]) == pytest.approx(400 / 4.005)
    b_after = _window((1_010, 0, 1), (1_009, 100, 1))
    assert records_per_second([a, b_after]) == pytest.approx(400 / 4.0)


def test_a_window_cut_short_opens_the_pipelines_window() -> None:
    # A busy table's window holds its last RECENT_COMMITS + 1 commits: where it starts, the
    # pipeline's window starts; a quiet table's commits before that are not counted.
    busy = _window(*((1_000 * i, 10, i) for i in reversed(range(1, RECENT_COMMITS + 2))))
    quiet = _window((RECENT_COMMITS * 1_000 + 500, 40, 99), (500, 40, 0))
    opened = busy[-1].at_ms
    expected = (10 * RECENT_COMMITS + 40) / ((busy[0].at_ms - opened) / 1000)
    assert records_per_second([busy, quiet]) == pytest.approx(expected)


def test_no_rate_without_a_commit_after_the_opening_batch() -> None:
    assert records_per_second([]) is None
    assert records_per_second([_window((5_000, 10, 1))]) is None
    # One batch, two tables: no time to measure over.
    assert records_per_second([_window((1_000, 10, 1)), _window((1_003, 10, 1))]) is None


def test_commits_without_batch_ids_count_by_time() -> None:
    old = [Commit(3_000, 10), Commit(2_000, 10), Commit(1_000, 10)]
    assert records_per_second([old]) == pytest.approx(10.0)


def test_the_markers_offsets_count_records_read_not_rows_a_merge_added() -> None:
    # An upsert pipeline: 700 records a batch collapse into ~80 rows each MERGE adds; two
    # routed tables carry the same batch's offsets once.
    def commit(at: int, added: int, batch: int, offset: int) -> Commit:
        return Commit(at, added, ("q", str(batch)), {("t", 0): offset, ("t", 1): offset})

    merged = [commit(3_000, 80, 3, 1_050), commit(2_000, 84, 2, 700), commit(1_000, 90, 1, 350)]
    assert records_per_second([merged]) == pytest.approx(1_400 / 2.0)
    other = [commit(3_001, 10, 3, 1_050), commit(2_001, 12, 2, 700)]
    assert records_per_second([merged, other]) == pytest.approx(1_400 / 2.001)
    # A commit without a marker: the added rows, as before.
    unmarked = [Commit(3_000, 80, ("q", "3")), *merged[1:]]
    assert records_per_second([unmarked]) == pytest.approx((80 + 84) / 2.0)
