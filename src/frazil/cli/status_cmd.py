"""``frazil status``: each pipeline's state from Kafka and its tables (no Spark)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from frazil.cli.app import OUTPUT_OPTION, OutputFormat, app, console
from frazil.config.loader import load_config
from frazil.errors import ConfigError

#: How long a running pipeline may go without a commit before its rate is said to be old.
_QUIET_MS = 30_000


def _ago(ms: int | None) -> str:
    if ms is None:
        return "never"
    seconds = max(0.0, time.time() - ms / 1000)
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def _view(statuses: list[object]) -> Group:
    """One block per pipeline: readable at any terminal width, a handful of lines however
    many topics and tables (``-o json`` lists them all)."""
    from frazil.cli.render import SHOWN, top
    from frazil.observe.status import PipelineStatus

    parts: list[RenderableType] = []
    for s in statuses:
        assert isinstance(s, PipelineStatus)
        state = "[green]running[/]" if s.running else "[dim]stopped[/]"
        parts.append(
            f"[bold]{escape(s.pipeline)}[/]  {state}  last commit {_ago(s.last_commit_ms)}"
        )
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True)
        grid.add_column()
        lags = [
            f"{escape(t)}: unknown"
            if n is None
            else f"{escape(t)}: {n:,} records ({s.lag_seconds.get(t) or 0.0:,.1f} s)"
            for t, n in s.lag_records.items()
        ]
        if len(lags) > SHOWN + 1:
            lags = [*lags[:SHOWN], f"and {len(lags) - SHOWN:,} more topics"]
        rate = "—" if s.records_per_second is None else f"{s.records_per_second:,.0f} records/s"
        fresh = "—" if s.freshness_seconds is None else f"{s.freshness_seconds:,.1f} s"
        dead = ", ".join(f"{k}: {v:,}" for k, v in sorted(s.dead_letters.items())) or "0"
        for i, lag in enumerate(lags or ["—"]):
            grid.add_row("  lag" if i == 0 else "", lag)
        # A stopped pipeline's rate is its last run's, not what it does now.
        over = "recent commits" if s.running else "its last run's recent commits"
        quiet_ms = None if s.last_commit_ms is None else time.time() * 1000 - s.last_commit_ms
        if s.running and quiet_ms is not None and quiet_ms > _QUIET_MS:
            # A rate that stopped: the commits it was measured over are not now's.
            over += f", the last {_ago(s.last_commit_ms)}"
        grid.add_row("  throughput", f"{rate} ({over})")
        grid.add_row("  freshness", fresh)
        grid.add_row("  dead letters", escape(dead))
        by_table = {t.table: t for t in s.tables}
        shown = top({t.table: t.records for t in s.tables})
        for i, (name, _) in enumerate(shown.shown):
            t = by_table[name]
            grid.add_row(
                "  table" if i == 0 else "",
                f"{escape(t.table)}: {t.records:,} rows, {t.data_files:,} data files, "
                f"{t.delete_files:,} delete files, {t.snapshots:,} snapshots",
            )
        if shown.more:
            grid.add_row(
                "", f"and {shown.more:,} more tables ({shown.more_total:,} rows; all in -o json)"
            )
        parts.append(grid)
        parts += [f"  [yellow]{escape(p)}[/]" for p in s.problems]
    return Group(*parts)


@app.command()
def status(
    config: Path = typer.Option(..., "--config", "-c", help="Path to the frazil YAML config file."),
    pipeline: list[str] | None = typer.Option(
        None, "--pipeline", "-p", help="Only this pipeline (repeatable). Default: all."
    ),
    watch: bool = typer.Option(False, "--watch", "-w", help="Refresh every --interval seconds."),
    interval: float = typer.Option(2.0, "--interval", min=0.5, help="Seconds between refreshes."),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Each pipeline: running or not, lag per topic (records and seconds), throughput over
    recent commits, freshness, last commit, dead letters, table files and snapshots — read
    from Kafka and the tables (PyIceberg), without starting Spark."""
    from frazil.engine.reachable import check_services
    from frazil.observe.catalog import pyiceberg_catalog
    from frazil.observe.status import check_reads, read_status

    loaded = load_config(config)
    unknown = sorted(set(pipeline or []) - {p.name for p in loaded.pipelines})
    if unknown:
        raise ConfigError(f"no pipeline named {', '.join(map(repr, unknown))} in {config}")
    check_services(loaded, spark=False)
    catalog = pyiceberg_catalog(loaded)
    # Credentials the store refuses stop here, with one line (as `frazil run`).
    check_reads(loaded, catalog)
    if output is OutputFormat.json:
        while True:
            found = read_status(loaded, pipeline or None, catalog)
            print(json.dumps([s.to_json() for s in found]), flush=True)
            if not watch:
                return
            time.sleep(interval)
    if not watch:
        console.print(_view(list(read_status(loaded, pipeline or None, catalog))))
        return
    with Live(console=console, refresh_per_second=4) as live:
        while True:
            live.update(_view(list(read_status(loaded, pipeline or None, catalog))))
            time.sleep(interval)
