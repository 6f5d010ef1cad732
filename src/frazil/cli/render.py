"""Printing run summaries for people."""

from __future__ import annotations

from rich.table import Table

from frazil.cli.app import console
from frazil.config.models import FrazilConfig
from frazil.engine.report import PipelineReport


def print_reports(reports: list[PipelineReport], config: FrazilConfig) -> None:
    """One block per pipeline (narrow terminals stay readable), then how to query."""
    for r in reports:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        lag = f"{r.freshness_lag_ms / 1000:.1f} s" if r.freshness_lag_ms is not None else "-"
        offsets = "; ".join(
            f"{topic}: " + ", ".join(f"{p}→{o}" for p, o in sorted(parts.items()))
            for topic, parts in sorted(r.offsets.items())
        )
        routed = len(r.tables) > 1 or r.table not in r.tables
        if routed:
            # A record routed to several tables is a row in each: say rows, and how many tables.
            written = (
                f"{r.records_ingested:,} row(s) to {len(r.rows_written or r.tables)} table(s) "
                f"in {r.batches} batch(es)"
            )
            in_tables = f"{r.table_rows:,} in {len(r.tables)} table(s)"
        else:
            written = f"{r.records_ingested:,} in {r.batches} batch(es)"
            in_tables = f"{r.table_rows:,}"
        rows = [
            ("table", f"{config.catalog.name}.{r.table}"),
            ("rows written" if routed else "records written", written),
            ("rows in tables" if routed else "rows in table", in_tables),
            ("snapshots", str(r.snapshots)),
            ("data files", str(r.data_files)),
            ("kafka offsets", offsets or "-"),
            ("valid through", r.valid_through or "-"),
            ("last commit", r.last_commit or "-"),
            ("freshness", f"{lag} at the last commit (its time − valid through)"),
        ]
        if routed:
            rows.append(
                (
                    "tables",
                    "; ".join(
                        f"{config.catalog.name}.{t}: {r.rows_written.get(t, 0):,} written, "
                        f"{n:,} rows"
                        for t, n in sorted(r.tables.items())
                    )
                    or "-",
                )
            )
        if r.unmatched_skipped:
            rows.append(
                ("unmatched", f"{r.unmatched_skipped:,} record(s) matched no table, skipped")
            )
        if r.filtered_skipped:
            rows.append(
                (
                    "filtered",
                    f"{r.filtered_skipped:,} record(s) dropped as configured "
                    "(filter, tombstones: skip)",
                )
            )
        for change in r.schema_changes:
            rows.append(("schema change", change))
        if r.dead_letters:
            total = sum(r.dead_letters.values())
            rows.append(("dead letters", f"{total:,} record(s) to the dead-letter queue"))
            for what, n in sorted(r.dead_letters.items(), key=lambda item: -item[1]):
                rows.append(("", f"{n:,} × {what}"))
        if r.skipped_batches:
            rows.append(("replayed batches", f"{r.skipped_batches} already committed, skipped"))
        if r.start:
            rows.append(("start", r.start))
        for key, value in rows:
            grid.add_row(key, value)
        console.print(f"[bold green]✓ {r.pipeline}[/]")
        console.print(grid)
    if reports:
        first = reports[0]
        console.print("\nQuery it:", highlight=False)
        console.print(
            f'  frazil sql -c CONFIG "SELECT type, count(*) FROM '
            f'{config.catalog.name}.{next(iter(sorted(first.tables)), first.table)} GROUP BY type"',
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        console.print(
            "  without Spark: PyIceberg or DuckDB, see 'Query without Spark' in the README",
            highlight=False,
        )
