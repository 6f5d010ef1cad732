"""How a routed batch's rows are expected to spread over its tables (no Spark session)."""

from __future__ import annotations

from frazil.engine.routed_sizing import (
    PAGE_ROWS,
    RowsSeen,
    hot_tables,
    meets_none_new,
    small_tables,
)


def test_tables_expected_to_write_less_than_a_page() -> None:
    # Without history: an even share of the batch among the known tables.
    assert small_tables(["a", "b"], 2 * PAGE_ROWS - 2, None) == (["a", "b"], True)
    assert small_tables(["a", "b"], 2 * PAGE_ROWS, None) == ([], False)
    # A first batch: no known table, the new ones share it.
    assert small_tables([], PAGE_ROWS - 1, None) == ([], True)
    # Each known table's share of the last batch: a hot table among small ones.
    seen = RowsSeen({"hot": 90_000, "a": 5_000, "b": 5_000}, 100_000)
    assert small_tables(["hot", "a", "b"], 200_000, seen) == (["a", "b"], False)
    # A table the last batch did not write gets the even share.
    assert small_tables(["hot", "a", "c"], 30_000, seen) == (["a", "c"], True)
    # A batch of unknown size: the tables' own settings.
    assert small_tables(["a"], None, seen) == ([], False)


def test_tables_expected_to_take_more_than_a_cores_share() -> None:
    seen = RowsSeen({"hot": 90_000, "a": 5_000, "b": 5_000}, 100_000)
    # One table of most of the batch: spread over a task per Kafka partition.
    assert hot_tables(["hot", "a", "b"], 200_000, seen, 2) == ("hot",)
    # Every table under a core's share: each keeps its task.
    assert hot_tables(["a", "b", "c", "d"], 400_000, None, 2) == ()
    # One known table takes the whole batch; a small batch is not split (a page at least).
    assert hot_tables(["only"], 100_000, None, 2) == ("only",)
    assert hot_tables(["only"], PAGE_ROWS - 1, None, 2) == ()
    assert hot_tables(["only"], None, None, 2) == ()


def test_a_layout_expects_no_new_table_once_the_last_batchs_tables_are_known() -> None:
    # The batch after the one that created the route's tables: all of them are known now.
    created = RowsSeen({"ns.a": 10, "ns.b": 5}, 15)
    assert meets_none_new(["ns.a", "ns.b", "ns.c"], created)
    # A table of the last batch is still unknown (it went the general way, or failed).
    assert not meets_none_new(["ns.a"], created)
    # No batch written yet, or one without a table's rows: nothing to go by.
    assert not meets_none_new(["ns.a"], None)
    assert not meets_none_new(["ns.a"], RowsSeen({}, 7))
