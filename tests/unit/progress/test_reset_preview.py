"""What ``--reset-offsets`` says it will do to a table before it does it."""

from __future__ import annotations

from frazil.progress.markers import EARLIEST, Marker
from frazil.progress.start import TableReset, reset_lines, table_names


def _reset(
    spec: str, target: dict[str, dict[int, int]], marker: Marker | None, rows: int = 251_000
) -> TableReset:
    return TableReset("db.pay", "pay", spec, rows, marker, target)


MARKER = Marker(pipeline="pay", offsets={"payments": {0: 125_500, 1: 125_500}})


def test_earliest_on_a_table_with_a_marker_reads_everything_again() -> None:
    reset = _reset("earliest", {"payments": {0: 0, 1: 0}}, MARKER)
    assert reset.destructive
    assert reset.again() == 251_000 and reset.skipped() == 0
    assert reset.lines() == [
        "db.pay: 251,000 rows; pipeline pay continues at payments/0 125,500, payments/1 125,500",
        "  reset to earliest: payments/0 0, payments/1 0; 251,000 records read again (appended "
        "again: duplicate rows)",
    ]


def test_latest_skips_what_the_table_has_not_got_yet() -> None:
    reset = _reset("latest", {"payments": {0: 130_000, 1: 125_500}}, MARKER)
    assert reset.again() == 0 and reset.skipped() == 4_500
    assert reset.lines()[1] == (
        "  reset to latest: payments/0 130,000, payments/1 125,500; no record read again, "
        "4,500 records skipped (never written)"
    )


def test_a_keyed_table_merges_again() -> None:
    reset = TableReset("db.pay", "pay", "earliest", 10, MARKER, {"payments": {0: 0}}, merges=True)
    assert reset.lines()[1].endswith("125,500 records read again (merged again by key)")


def test_partitions_the_marker_does_not_know_count_nothing() -> None:
    marker = Marker(pipeline="pay", offsets={"payments": {0: EARLIEST}})
    reset = _reset("earliest", {"payments": {0: 0, 1: 0}}, marker)
    assert reset.again() == 0
    assert "continues at payments/0 earliest, payments/1 -" in reset.lines()[0]


def test_many_partitions_are_summed_up() -> None:
    marker = Marker(pipeline="pay", offsets={"t": {p: 10 for p in range(20)}})
    reset = _reset("earliest", {"t": {p: 0 for p in range(20)}}, marker)
    assert reset.again() == 200
    assert reset.lines()[0].endswith("t/5 10, … and 14 more")


def test_no_confirmation_without_rows_or_marker() -> None:
    assert not _reset("earliest", {"t": {0: 0}}, None).destructive
    assert not _reset("earliest", {"t": {0: 0}}, MARKER, rows=0).destructive


def test_a_routed_pipelines_tables_count_its_records_once() -> None:
    target = {"payments": {0: 0, 1: 0}}
    tables = [
        TableReset(f"db.pay_{n}", "pay", "earliest", rows, MARKER, target)
        for n, rows in enumerate([100_000, 150_000, 1_000])
    ]
    lonely = TableReset("db.other", "other", "earliest", 5, None, target)
    assert reset_lines([*tables, lonely]) == [
        "3 tables (db.pay_0, db.pay_1, db.pay_2): 251,000 rows; pipeline pay continues at "
        "payments/0 125,500, payments/1 125,500",
        "  reset to earliest: payments/0 0, payments/1 0; 251,000 of the pipeline's records "
        "read again (appended again: duplicate rows)",
        *lonely.lines(),
    ]


def test_a_routed_pipelines_many_tables_are_summed_up() -> None:
    target = {"payments": {0: 130_000, 1: 125_500}}
    tables = [TableReset(f"t{n}", "pay", "latest", 1, MARKER, target) for n in range(9)]
    lines = reset_lines(tables)
    assert lines[0].startswith("9 tables (t0, t1, t2, t3, t4, t5, … and 3 more): 9 rows;")
    assert lines[1].endswith("4,500 of the pipeline's records skipped (never written)")


def test_table_names_in_a_sentence_stop_after_a_few() -> None:
    assert table_names(["a", "b"]) == "a, b"
    assert (
        table_names([f"t{n}" for n in range(1_006)]) == "t0, t1, t2, t3, t4, t5, … and 1,000 more"
    )
