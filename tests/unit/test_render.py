"""The run summary's figures and their labels (the layout is render.py's own)."""

from __future__ import annotations

from frazil.cli.app import console
from frazil.cli.render import print_reports
from frazil.engine.report import PipelineReport


def _report(**extra: object) -> PipelineReport:
    fields: dict[str, object] = {
        "pipeline": "p",
        "table": "db.a",
        "records_ingested": 5_000,
        "batches": 2,
        "skipped_batches": 0,
        "resumed_from_table": False,
        "start": "",
        "table_rows": 5_000,
        "snapshots": 2,
        "data_files": 2,
        "offsets": {},
        "valid_through": None,
        "last_commit": None,
        "freshness_lag_ms": 1_300,
        "checked_at": "",
    }
    fields.update(extra)
    return PipelineReport(**fields)  # type: ignore[arg-type]


def _printed(report: PipelineReport) -> str:
    with console.capture() as captured:
        # Only the catalog's name is read.
        print_reports([report])
    # Words as printed, whatever the terminal's width wraps.
    return " ".join(captured.get().split())


def test_a_routed_summary_says_rows_per_table_and_counts_records_not_written() -> None:
    text = _printed(
        _report(
            table="route on type",
            tables={"db.a": 3_000, "db.b": 1_000, "db.c": 1_000},
            rows_written={"db.a": 3_000, "db.b": 1_000, "db.c": 1_000},
            unmatched_skipped=1_000,
        )
    )
    assert "records ingested" not in text
    assert "rows written" in text and "5,000 row(s) to 3 table(s)" in text
    assert "db.b: 1,000 written, 1,000 rows" in text
    assert "1,000 record(s) matched no table" in text
    assert "1.3 s at the last commit" in text


def test_a_single_tables_summary_says_records() -> None:
    text = _printed(_report(tables={"db.a": 5_000}, rows_written={"db.a": 5_000}))
    assert "records written" in text and "rows in table" in text
    assert "rows written" not in text


def test_freshness_names_its_commit_when_a_later_one_is_the_last_shown() -> None:
    """A stop's marker commits after the newest rows: the summary's last commit is the
    marker's, its freshness the rows' commit's, and it says which."""
    from frazil.progress.markers import format_ms

    rows_at = 1_796_150_411_268
    later = _report(last_commit=format_ms(rows_at + 4_000), last_data_commit_ms=rows_at)
    assert f"1.3 s at the commit of the newest rows, {format_ms(rows_at)}" in _printed(later)
    same = _report(last_commit=format_ms(rows_at), last_data_commit_ms=rows_at)
    assert "1.3 s at the last commit (its time − valid through)" in _printed(same)


def test_a_routed_summary_counts_the_tables_that_got_rows() -> None:
    """The route's other tables got a marker only (a batch with no record for them)."""
    text = _printed(
        _report(
            table="route on kind",
            records_ingested=2,
            tables={"db.a": 2, "db.b": 0, "db.c": 5},
            rows_written={"db.a": 2, "db.b": 0, "db.c": 0},
        )
    )
    assert "2 row(s) to 1 table(s)" in text
