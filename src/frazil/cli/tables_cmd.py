"""``frazil tables``, ``frazil table health``, ``frazil optimize``, ``frazil maintain``."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from frazil.cli.app import OUTPUT_OPTION, OutputFormat, app, console
from frazil.cli.metadata_reads import metadata_catalog
from frazil.cli.render import Column, fit_table
from frazil.config.loader import load_config

if TYPE_CHECKING:
    from frazil.config.models import FrazilConfig
    from frazil.maintenance.health import TableHealth
    from frazil.maintenance.passes import TableRef, TableReport

table_app = typer.Typer(help="One table's health.", no_args_is_help=True)
app.add_typer(table_app, name="table")

CONFIG_OPTION = typer.Option(..., "--config", "-c", help="Path to the frazil YAML config file.")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _when(ms: int | None) -> str:
    from frazil.progress.markers import format_ms

    return "—" if ms is None else format_ms(ms)


@app.command()
def tables(
    config: Path = CONFIG_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Health of every table the config's pipelines write: files, sizes, deletes, snapshots,
    manifests, metadata, last commit and maintenance, and a score with its reasons — read
    from the tables' metadata, without starting Spark where PyIceberg opens the catalog."""
    loaded = load_config(config)
    found = _measured(loaded)
    if output is OutputFormat.json:
        console.print_json(json.dumps([h.to_json() for h in found]))
        return
    if found:
        _health_table(found)
    _say_not_created(loaded, {h.table for h in found})


def _say_not_created(loaded: FrazilConfig, found: set[str]) -> None:
    """Name the config's tables that do not exist yet (none found at all is said too: a
    command that printed nothing would look as if it had not looked)."""
    from frazil.maintenance.passes import not_created

    missing = not_created(loaded, found)
    if not found and not missing:
        console.print(
            "no tables yet: the pipelines name theirs from their records (values or topics)"
        )
    if missing:
        console.print("not created yet (a pipeline creates a table with its first records for it):")
    for table, pipeline in missing:
        console.print(f"  {escape(table)} (pipeline {escape(repr(pipeline))})", highlight=False)


def _health_table(found: list[TableHealth]) -> None:
    """The tables' health as a table fitted to the console, then each one's reasons."""
    # At 80 columns the less telling columns are left out rather than every header and
    # name cut short; -o json has them all.
    columns = [
        Column("table", whole=True), Column("score"), Column("data files", 1, justify="right"),
        Column("avg size", 5, justify="right"), Column("small", 7, justify="right"),
        Column("delete files", 3, justify="right"), Column("snapshots", 4, justify="right"),
        Column("manifests", 8, justify="right"), Column("metadata", 9),
        Column("last commit", 2), Column("last maintenance", 6),
    ]  # fmt: skip
    rows = [
        [
            escape(h.table), _score(h.score), f"{h.data_files:,}", _size(h.avg_file_bytes),
            f"{h.small_files:,}", f"{h.delete_files:,}", f"{h.snapshots:,}", f"{h.manifests:,}",
            f"{h.metadata_files} ({_size(h.metadata_bytes)})", _when(h.last_commit_ms),
            _when(h.last_maintenance_ms),
        ]
        for h in found
    ]  # fmt: skip
    view, left_out = fit_table(columns, rows, console.width)
    console.print(view)
    if left_out:
        console.print(
            f"[dim]not shown at this width: {', '.join(left_out)} (see -o json, or `frazil "
            "table health TABLE`)[/]"
        )
    for h in found:
        for reason in h.reasons:
            console.print(f"  {escape(h.table)}: {escape(reason)}")


def _score(value: int) -> str:
    color = "green" if value >= 80 else "yellow" if value >= 50 else "red"
    return f"[{color}]{value}[/]"


@table_app.command("health")
def health(
    table: str = typer.Argument(..., help="The table, as the config names it (db.payments)."),
    config: Path = CONFIG_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """One table's health, partition by partition."""
    loaded = load_config(config)
    (h,) = _measured(loaded, table)
    if output is OutputFormat.json:
        console.print_json(json.dumps(h.to_json()))
        return
    console.print(
        f"[bold]{escape(h.table)}[/] score {_score(h.score)}: {h.data_files:,} data files "
        f"({_size(h.data_bytes)}, {h.records:,} rows, median {_size(h.median_file_bytes)}, "
        f"target {_size(h.target_file_bytes)}), {h.delete_files:,} delete files, "
        f"{h.snapshots:,} snapshots ({h.expirable_snapshots} expirable), {h.manifests} "
        f"manifests, {h.metadata_files} metadata files ({_size(h.metadata_bytes)}); last commit "
        f"{_when(h.last_commit_ms)}, last maintenance {_when(h.last_maintenance_ms)}"
    )
    for reason in h.reasons:
        console.print(f"  - {escape(reason)}")
    for marker, kept, retired in h.pins:
        what = (
            f"would keep {kept:,} snapshot(s), retired by a later --reset-offsets (its "
            "pipeline is no longer in the config)"
            if retired
            else f"keeps {kept:,} snapshot(s) from expiry"
        )
        console.print(f"  marker {escape(marker)}: {what}", highlight=False)
    columns = [
        Column("partition", whole=True), Column("data files", justify="right"),
        Column("bytes", 3, justify="right"), Column("small", 4, justify="right"),
        Column("median", 5, justify="right"), Column("delete files", 2, justify="right"),
        Column("rows", 1, justify="right"),
    ]  # fmt: skip
    rows = [
        [
            escape(p.partition or "(unpartitioned)"), f"{p.data_files:,}", _size(p.data_bytes),
            f"{p.small_files:,}", _size(p.median_file_bytes), f"{p.delete_files:,}",
            f"{p.records:,}",
        ]
        for p in h.partitions
    ]  # fmt: skip
    view, left_out = fit_table(columns, rows, console.width)
    console.print(view)
    if left_out:
        console.print(f"[dim]not shown at this width: {', '.join(left_out)} (see -o json)[/]")


@app.command()
def optimize(
    config: Path = CONFIG_OPTION,
    table: str | None = typer.Option(None, "--table", "-t", help="Only this table."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; change nothing."),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """One maintenance pass: what each table's health and policy call for (compaction,
    delete-file and manifest rewrites, snapshot expiry, orphan removal, retention).
    --dry-run reads the tables' metadata without starting Spark where PyIceberg opens the
    catalog."""
    from frazil.engine.session import build_spark
    from frazil.maintenance.passes import config_tables

    loaded = load_config(config)
    catalog = metadata_catalog(loaded) if dry_run else None
    if catalog is not None:
        from frazil.observe import catalog as metadata

        refs = metadata.config_tables(catalog, loaded, only=table)
        reports = metadata.plan_pass(catalog, loaded, refs)
    else:
        spark = build_spark(loaded)
        refs = config_tables(spark, loaded, only=table)
        reports = _pass(spark, loaded, refs, dry_run, output is OutputFormat.text)
    _render(reports, dry_run, output)
    if output is OutputFormat.text and table is None:
        _say_not_created(loaded, {r.table for r in reports})


def _measured(loaded: FrazilConfig, only: str | None = None) -> list[TableHealth]:
    """The health of the config's tables (``only`` that one), from their metadata: with
    PyIceberg where it opens the catalog, else through Spark."""
    from frazil.maintenance.passes import config_tables, measure
    from frazil.observe import catalog as metadata

    catalog = metadata_catalog(loaded)
    if catalog is not None:
        refs = metadata.config_tables(catalog, loaded, only)
        return [metadata.measure(catalog, loaded, ref) for ref in refs]
    from frazil.engine.session import build_spark

    spark = build_spark(loaded)
    return [measure(spark, loaded, ref) for ref in config_tables(spark, loaded, only)]


def _pass(
    spark: Any, loaded: FrazilConfig, refs: list[TableRef], dry_run: bool, show: bool
) -> list[TableReport]:
    from frazil.maintenance.passes import run_pass

    if not show:
        return run_pass(spark, loaded, refs, dry_run=dry_run)
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
        console=console, transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task("measuring tables", total=None)

        def started(name: str, action: str) -> None:
            bar.update(task, description=f"{name}: {action}")

        return run_pass(spark, loaded, refs, dry_run=dry_run, on_action=started)


def _render(reports: list[Any], dry_run: bool, output: OutputFormat) -> None:
    import dataclasses

    if output is OutputFormat.json:
        data = [
            {
                "table": r.table,
                "before": r.before.to_json(),
                "planned": [dataclasses.asdict(p) for p in r.planned],
                "results": [dataclasses.asdict(a) for a in r.results],
                "after": None if r.after is None else r.after.to_json(),
            }
            for r in reports
        ]
        console.print_json(json.dumps(data))
        return
    for r in reports:
        head = f"[bold]{escape(r.table)}[/] score {_score(r.before.score)}"
        if r.after is not None:
            head += f" → {_score(r.after.score)}"
        console.print(head)
        if not r.planned:
            console.print("  nothing to do")
        for p in r.planned:
            done = next((a for a in r.results if a.action == p.action), None)
            if dry_run or done is None:
                console.print(
                    f"  {'would run' if dry_run else 'skipped'} {p.action}: {escape(p.why)}"
                )
            elif done.skipped:
                console.print(f"  skipped {p.action}: {escape(done.skipped)}")
            elif done.error:
                console.print(f"  [red]{p.action} failed[/]: {escape(done.error)}")
            else:
                console.print(f"  {p.action} ({done.seconds:.1f}s): {escape(done.detail)}")
        if r.after is not None:
            b, a = r.before, r.after
            console.print(
                f"  files {b.data_files:,} → {a.data_files:,} data, {b.delete_files:,} → "
                f"{a.delete_files:,} delete; {_size(b.data_bytes)} → {_size(a.data_bytes)}; "
                f"snapshots {b.snapshots:,} → {a.snapshots:,}; manifests {b.manifests} → "
                f"{a.manifests}"
            )


@app.command()
def maintain(
    config: Path = CONFIG_OPTION,
    passes: int = typer.Option(0, "--passes", help="Stop after this many passes (0: run on)."),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Keep the tables healthy: a maintenance pass every maintenance.interval, as a Spark
    application of its own next to `frazil run`, until SIGINT/SIGTERM."""
    from frazil.config.durations import parse_duration
    from frazil.engine.session import build_spark
    from frazil.maintenance.passes import config_tables, run_pass

    loaded = load_config(config)
    spark = build_spark(loaded)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    interval = parse_duration(loaded.maintenance.interval)
    done = 0
    while not stop.is_set():
        started = time.monotonic()
        reports = run_pass(spark, loaded, config_tables(spark, loaded))
        done += 1
        if output is OutputFormat.json:
            _render(reports, False, output)
        else:
            acted = [
                f"{r.table}: " + ", ".join(a.action + _outcome(a) for a in r.results)
                for r in reports
                if r.results
            ]
            console.print(
                f"pass {done}: {len(reports)} table(s) in {time.monotonic() - started:.1f}s"
                + (("; " + "; ".join(acted)) if acted else "; nothing to do"),
                # One line per pass, whatever the width: a table's name and what was done to it
                # stay together for people and for scripts that grep the log.
                soft_wrap=True,
            )
        if passes and done >= passes:
            break
        stop.wait(max(0.0, interval - (time.monotonic() - started)))


def _outcome(result: Any) -> str:
    """`` (failed)`` or `` (skipped)`` after an action's name in ``maintain``'s line."""
    return " (failed)" if result.error else " (skipped)" if result.skipped else ""
