"""Printing results for people: run summaries, tables and query results that stay readable
in an 80-column terminal (``--output json`` is printed elsewhere, whole)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from frazil.cli.app import console
from frazil.engine.report import PipelineReport
from frazil.progress.markers import format_ms

#: How many of a long list (tables, topics, dead-letter reasons, schema changes) a summary
#: names before it says "and N more" (``--output json`` lists them all).
SHOWN = 5


@dataclass(frozen=True)
class Column:
    """A column of a :func:`fit_table`.

    Attributes:
        header: Its header; wraps at spaces, never cut.
        drop: 0: always shown; otherwise, when the terminal is too narrow, the column with
            the highest ``drop`` is left out first.
        whole: Cells are never broken (names); other cells wrap at spaces.
        justify: ``left`` or ``right`` (numbers).
    """

    header: str
    drop: int = 0
    whole: bool = False
    justify: str = "left"


def _plain(cell: str) -> str:
    return Text.from_markup(cell).plain


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def _border(columns: int) -> int:
    """Width a rich table adds around its cells: one space each side, one rule between."""
    return 3 * columns + 1


def fit_table(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int
) -> tuple[Table, list[str]]:
    """A table that fits ``width``: columns are left out (highest ``drop`` first) until every
    header word and every whole cell fits, so that no name or header is cut with ``…``.

    Args:
        rows: Cells in rich markup, one per column.

    Returns:
        The table, and the headers of the columns left out.
    """
    minimum, natural = [], []
    for i, col in enumerate(columns):
        cells = [_plain(r[i]) for r in rows]
        words = [len(c) if col.whole else _longest_word(c) for c in cells]
        minimum.append(max([_longest_word(col.header), *words]))
        natural.append(max([len(col.header), *(len(c) for c in cells)]))
    kept = list(range(len(columns)))
    while sum(minimum[i] for i in kept) + _border(len(kept)) > width:
        droppable = [i for i in kept if columns[i].drop > 0]
        if not droppable:
            break
        kept.remove(max(droppable, key=lambda i: (columns[i].drop, i)))
    # Each column as wide as its longest cell, then the widest ones narrowed (not below
    # their longest word) until the table fits: rich would otherwise cut header words.
    widths = {i: natural[i] for i in kept}
    excess = sum(widths.values()) + _border(len(kept)) - width
    while excess > 0:
        room = [i for i in kept if widths[i] > minimum[i]]
        if not room:
            break
        widest = max(room, key=lambda i: widths[i] - minimum[i])
        widths[widest] -= 1
        excess -= 1
    table = Table()
    for i in kept:
        col = columns[i]
        table.add_column(
            col.header,
            width=widths[i],
            justify="right" if col.justify == "right" else "left",
            overflow="fold",
        )
    for r in rows:
        table.add_row(*[r[i] for i in kept])
    return table, [columns[i].header for i in range(len(columns)) if i not in kept]


def print_records(out: Console, names: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Query results as a table when it fits the terminal, otherwise one block per row with
    one ``column: value`` line each (like psql's ``\\x``), values wrapped, never cut."""
    cells = [["NULL" if v is None else str(v) for v in row] for row in rows]
    natural = [max([len(n), *(len(line) for r in cells for line in r[i].splitlines())])
               for i, n in enumerate(names)]  # fmt: skip
    if not names or sum(natural) + _border(len(names)) <= out.width:
        table = Table(*[escape(n) for n in names])
        for r in cells:
            table.add_row(*[escape(c) for c in r])
        out.print(table)
        return
    key_width = max(len(n) for n in names)
    for number, r in enumerate(cells, start=1):
        out.print(f"[bold]-[ row {number} ]-[/]", highlight=False)
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", min_width=key_width, no_wrap=True)
        grid.add_column(overflow="fold")
        for name, value in zip(names, r, strict=True):
            grid.add_row(escape(name), escape(value))
        out.print(grid)
    out.print(f"({len(cells)} row{'s' if len(cells) != 1 else ''})", highlight=False)


@dataclass(frozen=True)
class Aggregate:
    """The first few of a long list, and what is left of it."""

    shown: list[tuple[str, int]]
    more: int
    more_total: int


def top(counts: dict[str, int], n: int = SHOWN) -> Aggregate:
    """The ``n`` biggest of ``counts`` (ties by name), and how many more there are with how
    much in total: a summary stays a handful of lines whatever the number of tables."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    # "and 1 more" takes the line the one more would take: show it instead.
    if len(ordered) == n + 1:
        n += 1
    rest = ordered[n:]
    return Aggregate(ordered[:n], len(rest), sum(v for _, v in rest))


def _offsets(offsets: dict[str, dict[int, int]]) -> list[str]:
    """One line per topic: its partitions' offsets, or their count and sum when many."""
    lines = []
    for topic, parts in sorted(offsets.items()):
        if len(parts) <= 4:
            lines.append(f"{topic}: " + ", ".join(f"{p}→{o}" for p, o in sorted(parts.items())))
        else:
            lines.append(f"{topic}: {len(parts)} partitions, {sum(parts.values()):,} in all")
    if len(lines) > SHOWN + 1:
        lines = [*lines[:SHOWN], f"and {len(lines) - SHOWN} more topics"]
    return lines


def _freshness(r: PipelineReport, lag: str) -> str:
    """The summary's freshness, naming its commit when that is not the last one shown (a
    stop's or an idle batch's marker commits after the newest rows)."""
    if r.last_data_commit_ms is None or r.freshness_lag_ms is None:
        return f"{lag} at the last commit (its time − valid through)"
    at = format_ms(r.last_data_commit_ms)
    if at == r.last_commit:
        return f"{lag} at the last commit (its time − valid through)"
    return f"{lag} at the commit of the newest rows, {at} (its time − valid through)"


def summary_rows(r: PipelineReport) -> list[tuple[str, str]]:
    """The rows of one pipeline's summary: a bounded number, however many tables it wrote."""
    lag = f"{r.freshness_lag_ms / 1000:.1f} s" if r.freshness_lag_ms is not None else "-"
    offsets = _offsets(r.offsets) or ["-"]
    routed = len(r.tables) > 1 or r.table not in r.tables
    if routed:
        # A record routed to several tables is a row in each: say rows, and how many tables.
        # The tables that got rows: a routed run's others got only a marker.
        filled = sum(1 for n in r.rows_written.values() if n) if r.rows_written else len(r.tables)
        written = f"{r.records_ingested:,} row(s) to {filled} table(s) in {r.batches} batch(es)"
        in_tables = f"{r.table_rows:,} in {len(r.tables)} table(s)"
    else:
        written = f"{r.records_ingested:,} in {r.batches} batch(es)"
        in_tables = f"{r.table_rows:,}"
    rows = [
        ("table", r.table),
        ("rows written" if routed else "records written", written),
        ("rows in tables" if routed else "rows in table", in_tables),
        ("snapshots", str(r.snapshots)),
        ("data files", str(r.data_files)),
        ("kafka offsets", offsets[0]),
        *(("", line) for line in offsets[1:]),
        ("valid through", r.valid_through or "-"),
        ("last commit", r.last_commit or "-"),
        ("freshness", _freshness(r, lag)),
    ]
    if routed:
        # The biggest tables by rows, then how many more: a handful of lines for 100 tables.
        tables = top(r.tables)
        rows += [
            ("tables" if i == 0 else "", f"{t}: {r.rows_written.get(t, 0):,} written, "
             f"{n:,} rows")
            for i, (t, n) in enumerate(tables.shown)
        ]  # fmt: skip
        if tables.more:
            rows.append(
                ("", f"and {tables.more:,} more ({tables.more_total:,} rows; all in -o json)")
            )
    if r.unmatched_skipped:
        rows.append(("unmatched", f"{r.unmatched_skipped:,} record(s) matched no table, skipped"))
    if r.filtered_skipped:
        rows.append(
            (
                "filtered",
                f"{r.filtered_skipped:,} record(s) dropped as configured "
                "(filter, tombstones: skip)",
            )
        )
    changes = r.schema_changes
    for change in changes[: SHOWN + 1 if len(changes) == SHOWN + 1 else SHOWN]:
        rows.append(("schema change", change))
    if len(changes) > SHOWN + 1:
        rows.append(("", f"and {len(changes) - SHOWN:,} more schema changes (all in -o json)"))
    if r.dead_letters:
        total = sum(r.dead_letters.values())
        rows.append(("dead letters", f"{total:,} record(s) to the dead-letter queue"))
        reasons = top(r.dead_letters)
        rows += [("", f"{n:,} × {what}") for what, n in reasons.shown]
        if reasons.more:
            rows.append(("", f"and {reasons.more:,} more reasons ({reasons.more_total:,})"))
    if r.skipped_batches:
        rows.append(("replayed batches", f"{r.skipped_batches} already committed, skipped"))
    if r.start:
        rows.append(("start", r.start))
    return rows


def query_hint(r: PipelineReport, config: str = "CONFIG") -> str:
    """A query that works on any table: the rows of the pipeline's biggest table."""
    biggest = top(r.tables, 1).shown
    table = biggest[0][0] if biggest else r.table
    statement = f"SELECT * FROM {table} LIMIT 10"  # `frazil sql`: the catalog is the default
    where = config if config == "CONFIG" else shlex.quote(config)
    return f"frazil sql -c {where} {shlex.quote(statement)}"


def print_hint(label: str, command: str, out: Console | None = None) -> None:
    """A command to copy, on one line whatever the terminal's width (the terminal may fold
    it, rich never breaks it: a copy-paste gets it whole)."""
    (out or console).print(
        f"{label}{command}", highlight=False, markup=False, soft_wrap=True, overflow="ignore"
    )


def print_reports(reports: list[PipelineReport], config_path: str = "CONFIG") -> None:
    """One block per pipeline (narrow terminals stay readable), then how to query."""
    for r in reports:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column()
        for key, value in summary_rows(r):
            grid.add_row(key, escape(value))
        console.print(f"[bold green]✓ {escape(r.pipeline)}[/]")
        console.print(grid)
    if reports:
        console.print("\nQuery it:", highlight=False)
        for r in reports[:3]:
            routed = len(r.tables) > 1
            print_hint("  ", query_hint(r, config_path))
            if routed:
                console.print(
                    f"  (the biggest of {r.pipeline}'s {len(r.tables):,} tables)",
                    highlight=False,
                )
        if len(reports) > 3:
            console.print(f"  and the tables of {len(reports) - 3} more pipelines")
        console.print(
            "  without Spark: PyIceberg or DuckDB, see 'Query without Spark' in the README",
            highlight=False,
        )
