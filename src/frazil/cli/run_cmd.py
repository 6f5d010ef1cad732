"""``frazil run``: run a config's pipelines as one Spark application."""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

import typer

from frazil.cli.app import GLOBALS, LogFormat, OutputFormat, app, console, err_console
from frazil.cli.render import print_reports
from frazil.cli.run_view import BacklogBar, BatchLines, freshness, table_line
from frazil.config.loader import load_config
from frazil.progress.events import BatchDone, BatchStarted, CommitEvent, Event

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
        "earliest). Recorded in the table, so later runs go on from there.",
    ),
    output: OutputFormat = typer.Option(OutputFormat.text, "--output", "-o", help="text or json"),
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
    from frazil.engine.runner import run as run_pipelines

    loaded = load_config(config)
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

    def on_commit(event: CommitEvent) -> None:
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
            err_console.print(table_line(event), highlight=False)

    def on_event(event: Event) -> None:
        if isinstance(event, BatchStarted):
            # With --verbose: when each micro-batch starts (bench/startup.py times the first).
            log.info("%s: batch %d started", event.pipeline, event.batch_id)
            if bar is not None:
                bar.started()
        elif isinstance(event, BatchDone) and not quiet and not json_logs:
            line, written = lines.done(event)
            err_console.print(line, highlight=False)
            if bar is not None:
                bar.add(event, written)

    def on_started(names: list[str]) -> None:
        if not quiet:
            mode = "until caught up" if until_caught_up else "until SIGINT/SIGTERM"
            err_console.print(f"running {', '.join(names)} ({mode})", highlight=False)

    with bar if bar is not None else contextlib.nullcontext():
        reports = run_pipelines(
            loaded,
            pipeline_names=pipeline or None,
            until_caught_up=until_caught_up,
            reset_offsets=reset_offsets,
            on_commit=on_commit,
            on_event=on_event,
            on_started=on_started,
            metrics_port=metrics_port,
        )
    if quiet:
        console.print_json(json.dumps([r.to_json() for r in reports]))
    else:
        print_reports(reports, loaded, str(config))
