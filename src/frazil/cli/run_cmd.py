"""``frazil run``: run a config's pipelines as one Spark application."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import sys
from pathlib import Path

import typer

from frazil.cli.app import (
    GLOBALS,
    OUTPUT_OPTION,
    LogFormat,
    OutputFormat,
    app,
    console,
    err_console,
)
from frazil.cli.render import print_reports, top
from frazil.cli.run_view import (
    BacklogBar,
    BatchLines,
    freshness,
    maintenance_line,
    table_line,
)
from frazil.config.loader import load_config
from frazil.errors import PipelineError
from frazil.progress.events import (
    BatchDone,
    BatchStarted,
    CommitEvent,
    Event,
    MaintenanceDone,
)
from frazil.progress.start import TableReset, reset_lines, table_names
from frazil.transform.check import config_problems

log = logging.getLogger("frazil.run")


@app.command()
def run(
    config: Path = typer.Option(..., "--config", "-c", help="Path to the frazil YAML config file."),
    pipeline: list[str] = typer.Option(
        None, "--pipeline", "-p", help="Run only this pipeline (repeatable). Default: all."
    ),
    until_caught_up: bool = typer.Option(
        False,
        "--until-caught-up",
        help="Process everything available at start, then exit 0.",
    ),
    reset_offsets: str = typer.Option(
        None,
        "--reset-offsets",
        help="Continue from these offsets instead of the table's: earliest, latest, or JSON "
        'like \'{"topic": {"0": 42}}\' (-2 earliest, -1 latest; unlisted partitions start at '
        "earliest). Recorded in the table, so later runs go on from there. On tables that "
        "hold data of the pipeline it says what they hold and what will be read again, and "
        "asks (--yes to go on without asking).",
    ),
    yes: bool = typer.Option(
        False,
        "--yes",
        "-y",
        help="Go on with --reset-offsets on tables that hold data without asking (needed "
        "without a terminal, e.g. in CI).",
    ),
    output: OutputFormat = OUTPUT_OPTION,
    metrics_port: int = typer.Option(
        None,
        "--metrics-port",
        help="Serve Prometheus metrics on http://0.0.0.0:PORT/metrics (overrides metrics.port).",
    ),
) -> None:
    """Run pipelines: Kafka → decode → Iceberg, exactly once.

    Without --until-caught-up it runs until SIGINT/SIGTERM, then finishes and commits the
    micro-batch in flight and exits 0.
    """
    from frazil.engine.runner import StoppedNow
    from frazil.engine.runner import run as run_pipelines

    loaded = load_config(config, checks=config_problems)
    quiet = output is OutputFormat.json
    json_logs = GLOBALS.log_format is LogFormat.json
    commits = logging.getLogger("frazil.commit")
    if json_logs:
        commits.setLevel(logging.INFO)

    # One line per batch; with --verbose, a line per table and batch too. On a terminal, a
    # run until caught up shows its backlog in a progress bar (never with -o json).
    verbose = GLOBALS.verbose
    lines = BatchLines()
    bar = (
        BacklogBar(err_console)
        if until_caught_up and not quiet and not json_logs and err_console.is_terminal
        else None
    )

    # What this run committed, per table (batches, records, table total): all a second Ctrl-C
    # leaves time to say.
    committed: dict[str, tuple[int, int, int]] = {}

    def on_commit(event: CommitEvent) -> None:
        batches, records, _ = committed.get(event.table, (0, 0, 0))
        committed[event.table] = (batches + 1, records + event.records, event.total_records)
        if json_logs:
            fresh = freshness(event.valid_through_ms)
            commits.info(
                "commit",
                extra={
                    "fields": {
                        "pipeline": event.pipeline,
                        "table": event.table,
                        "batch": event.batch_id,
                        "records": event.records,
                        "seconds": round(event.seconds, 3),
                        "total_records": event.total_records,
                        "valid_through_ms": event.valid_through_ms,
                        "freshness_s": None if fresh is None else round(fresh, 3),
                        "lag_records": event.lag_records,
                        "offsets": event.offsets,
                    }
                },
            )
            return
        if quiet:
            return
        lines.commit(event)
        if verbose:
            err_console.print(table_line(event), highlight=False, soft_wrap=True)

    def on_event(event: Event) -> None:
        if isinstance(event, BatchStarted):
            # With --verbose: when each micro-batch starts (bench/startup.py times the first).
            log.info("%s: batch %d started", event.pipeline, event.batch_id)
            if bar is not None:
                bar.started()
        elif isinstance(event, MaintenanceDone):
            _maintenance_line(event, quiet=quiet, json_logs=json_logs)
        elif isinstance(event, BatchDone) and not quiet and not json_logs:
            line, written = lines.done(event)
            # A batch is one line, never wrapped by rich (a terminal folds it if it must):
            # table names stay whole for people and for whatever greps the log.
            err_console.print(line, highlight=False, soft_wrap=True)
            if bar is not None:
                bar.add(event, written)

    bar_stack = contextlib.ExitStack()

    def on_started(names: list[str]) -> None:
        if not quiet:
            mode = "until caught up" if until_caught_up else "until SIGINT/SIGTERM"
            err_console.print(f"running {', '.join(names)} ({mode})", highlight=False)
        if bar is not None:
            bar_stack.enter_context(bar)

    def confirm_reset(resets: list[TableReset]) -> bool:
        err_console.print(
            f"--reset-offsets {reset_offsets} changes where {len(resets)} table(s) holding "
            "data of their pipeline continue:",
            highlight=False,
        )
        for line in reset_lines(resets):
            err_console.print(f"  {line}", highlight=False, soft_wrap=True)
        if yes:
            return True
        if not sys.stdin.isatty():
            names = table_names([found.table for found in resets])
            raise PipelineError(
                f"--reset-offsets {reset_offsets} not applied to {names}: they hold data "
                "(above) and there is no terminal to ask on; nothing was changed. Run again "
                "with --yes to go on"
            )
        return typer.confirm("Reset these tables' offsets?", default=False, err=True)

    def on_stopping(what: str) -> None:
        err_console.print(what, highlight=False)

    try:
        # The bar starts once the pipelines run (after a --reset-offsets question, if any).
        with bar_stack:
            reports = run_pipelines(
                loaded,
                pipeline_names=pipeline or None,
                until_caught_up=until_caught_up,
                reset_offsets=reset_offsets,
                on_commit=on_commit,
                on_event=on_event,
                on_started=on_started,
                on_stopping=on_stopping,
                metrics_port=metrics_port,
                confirm_reset=confirm_reset,
                config_path=Path(config),
            )
    except StoppedNow:
        _print_stopped_now(committed)
        raise typer.Exit(130) from None
    if quiet:
        console.print_json(json.dumps([r.to_json() for r in reports]))
    else:
        print_reports(reports, str(config))


def _maintenance_line(event: MaintenanceDone, *, quiet: bool, json_logs: bool) -> None:
    """An inline maintenance action's line among the batches' (a log record under
    ``--log-format json``; nothing with ``-o json``)."""
    if json_logs:
        done = logging.getLogger("frazil.maintenance.done")
        done.setLevel(logging.INFO)
        done.info("maintenance", extra={"fields": dataclasses.asdict(event)})
        return
    if not quiet:
        err_console.print(maintenance_line(event), highlight=False, soft_wrap=True)


def _print_stopped_now(committed: dict[str, tuple[int, int, int]]) -> None:
    """After a second Ctrl-C: what this run committed, as far as its commits were seen."""
    err_console.print("stopped now: the next run reads the batch in flight again", highlight=False)
    if not committed:
        err_console.print("this run committed no batch", highlight=False)
        return
    err_console.print("committed by this run:", highlight=False)
    # The tables that got most, then how many more: a handful of lines for 100 tables.
    most = top({table: records for table, (_, records, _) in committed.items()})
    for table, _ in most.shown:
        batches, records, total = committed[table]
        plural = "batch" if batches == 1 else "batches"
        err_console.print(
            f"  {table}: {records:,} records in {batches:,} {plural} (total {total:,})",
            highlight=False,
            soft_wrap=True,
        )
    if most.more:
        err_console.print(
            f"  and {most.more:,} more tables ({most.more_total:,} records)", highlight=False
        )
