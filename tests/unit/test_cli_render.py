"""Output for people at 80 columns and at scale: summaries aggregate, tables fit, batch lines."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest
from rich.console import Console

from frazil.cli.render import (
    Column,
    fit_table,
    print_hint,
    print_records,
    query_hint,
    summary_rows,
    top,
)
from frazil.cli.run_view import Backlog, BatchLines, maintenance_line
from frazil.engine.report import PipelineReport
from frazil.progress.events import BatchDone, CommitEvent, MaintenanceDone


def _console(width: int = 80) -> Console:
    return Console(width=width, record=True, file=open(os.devnull, "w"), color_system=None)


def _report(tables: dict[str, int], **extra: object) -> PipelineReport:
    fields: dict[str, object] = {
        "pipeline": "orders",
        "table": "db.orders_{customer}",
        "records_ingested": sum(tables.values()),
        "batches": 3,
        "skipped_batches": 0,
        "resumed_from_table": False,
        "start": "",
        "table_rows": sum(tables.values()),
        "snapshots": 9,
        "data_files": 9,
        "offsets": {"orders": {p: 1000 * p for p in range(12)}},
        "valid_through": None,
        "last_commit": None,
        "freshness_lag_ms": None,
        "checked_at": "now",
        "tables": tables,
    }
    fields.update(extra)
    return PipelineReport(**fields)  # type: ignore[arg-type]


def test_top_names_the_biggest_then_counts_the_rest() -> None:
    counts = {f"db.t{i:02d}": i for i in range(30)}
    found = top(counts)
    assert [name for name, _ in found.shown] == ["db.t29", "db.t28", "db.t27", "db.t26", "db.t25"]
    assert (found.more, found.more_total) == (25, sum(range(25)))
    # "and 1 more" would take the line of the one more: it is named instead.
    six = top({f"t{i}": i for i in range(6)})
    assert (len(six.shown), six.more) == (6, 0)
    assert top({}).shown == [] and top({}).more == 0


def test_a_routed_summary_stays_a_handful_of_lines() -> None:
    tables = {f"db.orders_c{i:03d}": 100 + i for i in range(100)}
    rows = summary_rows(
        _report(tables, dead_letters={f"decode: reason {i}": i + 1 for i in range(40)})
    )
    text = "\n".join(f"{k} {v}" for k, v in rows)
    assert len(rows) < 30, text
    assert "14,950 in 100 table(s)" in text
    assert "db.orders_c099: 0 written, 199 rows" in text
    assert "and 95 more (" in text and "all in -o json" in text
    assert "db.orders_c000" not in text
    # Twelve partitions of a topic are counted, not listed.
    assert "orders: 12 partitions, 66,000 in all" in text
    assert "and 35 more reasons" in text


def test_the_query_hint_works_on_any_table_and_picks_the_biggest() -> None:
    report = _report({"db.small": 3, "db.big": 300, "db.mid": 30})
    assert query_hint(report) == "frazil sql -c CONFIG 'SELECT * FROM db.big LIMIT 10'"
    assert "GROUP BY" not in query_hint(report)
    assert query_hint(report, "my dir/f.yaml").startswith("frazil sql -c 'my dir/f.yaml'")


def test_a_hint_is_printed_on_one_line_at_any_width() -> None:
    out = _console(40)
    command = (
        'frazil sql -c /a/long/path/to/frazil.yaml "SELECT type, count(*) FROM t GROUP BY type"'
    )
    print_hint("query:  ", command, out)
    assert out.export_text().rstrip("\n") == "query:  " + command


def test_a_wide_table_drops_columns_instead_of_cutting_names() -> None:
    columns = [
        Column("table", whole=True), Column("score"), Column("data files", 1),
        Column("avg size", 3), Column("last maintenance", 2), Column("metadata", 4),
    ]  # fmt: skip
    rows = [
        ["lake.db.payments_by_type_credit", "95", "12", "1.2 MiB", "2026-11-22T01:02:03.456Z",
         "17 (40.2 KiB)"],
        ["lake.db.t", "45", "1,200", "12.2 KiB", "—", "170 (400.2 KiB)"],
    ]  # fmt: skip
    table, left_out = fit_table(columns, rows, 80)
    out = _console(80)
    out.print(table)
    text = out.export_text()
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "…" not in text
    assert "lake.db.payments_by_type_credit" in text
    assert "2026-11-22T01:02:03.456Z" in text
    assert left_out == ["avg size", "metadata"]
    table, left_out = fit_table(columns, rows, 200)
    assert left_out == []


def test_query_results_too_wide_for_the_terminal_go_one_row_per_block() -> None:
    names = ["id", "type", "created_at", "payer", "note"]
    long_note = "a long free text note " * 8
    rows = [
        ["9b2b0f0e-7a4c-4e33-bb2f-2f7d5a1e0c11", "bank_slip", "2026-11-26 01:15:19", "Ms X", None],
        ["0c2b0f0e-7a4c-4e33-bb2f-2f7d5a1e0c22", "debit", "2026-11-26 01:15:20", "Mr Y", long_note],
    ]
    out = _console(80)
    print_records(out, names, rows)
    text = out.export_text()
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "-[ row 2 ]-" in text and "(2 rows)" in text
    assert "9b2b0f0e-7a4c-4e33-bb2f-2f7d5a1e0c11" in text
    assert "NULL" in text
    # The long value is there whole, wrapped over lines.
    assert " ".join(long_note.split()) in " ".join(
        line.strip() for line in text.splitlines() if not line.startswith(("-[", "id", "type"))
    ).replace("note ", "", 1)

    narrow = _console(80)
    print_records(narrow, ["type", "count(1)"], [["debit", 3], ["credit", 4]])
    assert "┃ type" in narrow.export_text() and "-[ row" not in narrow.export_text()


def _commit(table: str, batch: int, records: int, total: int) -> CommitEvent:
    return CommitEvent("orders", table, batch, records, total, None, 1.0)


def test_a_batch_is_one_line_however_many_tables() -> None:
    lines = BatchLines()
    for i in range(30):
        lines.commit(_commit(f"db.t{i}", 4, 10, 300 + 10 * i))
    lines.commit(_commit("db.t0", 5, 7, 597))  # the next batch's commit stays for it
    line, written = lines.done(BatchDone("orders", 4, 2.5, read=300, lag_records=1_200))
    assert written == 300
    plain = Console().render_str(line).plain
    assert plain == "orders batch 4: 300 rows → 30 tables in 2.5s (lag 1,200)"
    line, written = lines.done(BatchDone("orders", 5, 0.5))
    assert Console().render_str(line).plain == ("orders batch 5: 7 records → db.t0 in 0.5s")


def test_the_backlog_counts_kafka_ranges_and_lag() -> None:
    backlog = Backlog(started=0.0)
    assert backlog.left is None and backlog.eta(10.0) is None
    backlog.add(BatchDone("a", 0, 1.0, read=None, lag_records=None), written=500)
    backlog.add(BatchDone("a", 1, 1.0, read=1_500, lag_records=8_000), written=1_400)
    backlog.add(BatchDone("b", 0, 1.0, read=None, lag_records=2_000), written=0)
    assert backlog.read == 2_000
    assert backlog.left == 10_000
    assert backlog.rate(now=10.0) == 200.0
    assert backlog.eta(now=10.0) == 50.0


HELP_COMMANDS = [
    [], ["run"], ["status"], ["tables"], ["optimize"], ["maintain"], ["ui"], ["plan"],
    ["quickstart"], ["dlq", "replay"], ["local", "up"],
]  # fmt: skip


@pytest.mark.parametrize("command", HELP_COMMANDS, ids=lambda c: " ".join(c) or "frazil")
def test_help_wraps_sentences_at_word_boundaries(command: list[str]) -> None:
    """At 80 columns no help line breaks before a word that would have fit on it."""
    result = subprocess.run(
        [sys.executable, "-m", "frazil.cli.main", *command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80", "TERM": "dumb"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    # A break is premature when the next line's first word would have fit on the line: the
    # same cell goes on (its text starts in the same column) and there was room.
    for prev, nxt in itertools.pairwise(lines):
        boxed = prev.startswith("│")
        text, following = prev.rstrip(" │"), nxt.rstrip(" │")
        start = len(text) - len(text.lstrip(" │"))
        nstart = len(following) - len(following.lstrip(" │"))
        if not text.strip(" │") or not following.strip(" │") or start != nstart:
            continue
        if following.strip(" │").startswith("[") or "  " in following.strip(" │"):
            continue  # a default, or another row of a panel
        first = following.strip(" │").split()[0]
        end = 76 if boxed else 77  # the text's last usable column, with a margin
        assert len(text) + 1 + len(first) > end, f"{text!r} broke before {first!r}"


def test_the_backlog_bar_keeps_log_lines_and_batch_lines_above_it() -> None:
    import io
    import logging

    from frazil.cli.run_view import BacklogBar

    stream = io.StringIO()
    out = Console(file=stream, force_terminal=True, width=80, color_system=None)
    handler = logging.StreamHandler(sys.stderr)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with BacklogBar(out) as bar:
            bar.started()
            bar.add(BatchDone("a", 1, 1.0, read=1_000, lag_records=3_000), written=1_000)
            out.print("a batch 1: 1,000 records → db.t in 1.0s")
            logging.getLogger("frazil.test").warning("a warning while the bar runs")
            assert bar.backlog.left == 3_000
        assert handler.stream is sys.stderr  # given back
    finally:
        root.removeHandler(handler)
    text = stream.getvalue()
    assert "a batch 1: 1,000 records → db.t in 1.0s" in text
    assert "a warning while the bar runs" in text
    assert "3,000 left" in text


def test_a_batch_counts_the_kafka_records_between_its_start_and_end() -> None:
    from frazil.engine.window import covered as _covered

    start = {"t": {0: 5, 1: 10}}
    assert _covered(start, {"t": {0: 15, 1: 12}}) == 12
    # A partition the start does not name counts nothing (its start is not known).
    assert _covered(start, {"t": {0: 5, 1: 10, 2: 7}}) == 0
    assert _covered(None, {"t": {0: 1}}) is None


def test_status_says_whose_throughput_a_stopped_pipeline_shows() -> None:
    from frazil.cli.status_cmd import _view
    from frazil.observe.status import PipelineStatus

    def shown(running: bool, last_commit_ms: int | None = None) -> str:
        status = PipelineStatus(
            pipeline="orders",
            running=running,
            lag_records={"orders": 0},
            lag_seconds={"orders": 0.0},
            records_per_second=3881.0,
            freshness_seconds=12.5,
            last_commit_ms=last_commit_ms,
            dead_letters={},
            tables=[],
        )
        out = _console()
        out.print(_view([status]))
        return out.export_text()

    assert "orders  running" in shown(True)
    assert "3,881 records/s (recent commits)" in shown(True)
    assert "orders  stopped" in shown(False)
    assert "3,881 records/s (its last run's recent commits)" in shown(False)
    # Running, but nothing committed for a while (Kafka away, say): the rate is that old.
    import time

    quiet = int(time.time() * 1000) - 58_000
    assert "3,881 records/s (recent commits, the last 58s ago)" in shown(True, quiet)
    assert "(recent commits)" in shown(True, int(time.time() * 1000) - 5_000)


def test_an_inline_maintenance_action_is_a_line_saying_what_it_did_or_why_not() -> None:
    console = _console()
    done = MaintenanceDone("db.orders", "compaction", 1.24, "12 data files rewritten into 1")
    skipped = MaintenanceDone(
        "db.orders", "compaction", 0.0, "", skipped="a pipeline's MERGE into it lost [40s ago]"
    )
    failed = MaintenanceDone("db.orders", "expire", 0.3, "", error="expire of db.orders failed")
    for event in (done, skipped, failed):
        console.print(maintenance_line(event), highlight=False, soft_wrap=True)
    assert console.export_text().splitlines() == [
        "maintenance db.orders: compaction in 1.2s: 12 data files rewritten into 1",
        "maintenance db.orders: compaction skipped: a pipeline's MERGE into it lost [40s ago]",
        "maintenance db.orders: expire failed: expire of db.orders failed",
    ]
