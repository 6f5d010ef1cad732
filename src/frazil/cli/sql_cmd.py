"""``frazil sql``: run Spark SQL against the config's catalog."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer

from frazil.cli.app import OUTPUT_OPTION, OutputFormat, app, console, err_console
from frazil.cli.render import print_records
from frazil.config.loader import load_config


@app.command()
def sql(
    statement: str = typer.Argument(
        ...,
        help='A Spark SQL statement, e.g. "SELECT * FROM db.t" (the config\'s catalog is the '
        "default).",
    ),
    config: Path = typer.Option(..., "--config", "-c", help="Path to the frazil YAML config file."),
    limit: int = typer.Option(
        50, "--limit", min=0, help="Most rows to print (a note says when there were more)."
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Query the Iceberg tables with Spark SQL (the config's catalog is the default one).

    A statement without a result set (`UPDATE`, `DELETE`, `MERGE INTO`, `INSERT`, DDL) prints
    `OK`, or `{"statement": "ok"}` with `-o json`.
    """
    from frazil.engine.session import build_spark

    loaded = load_config(config)
    spark = build_spark(loaded)
    result = spark.sql(statement)  # runs a command (UPDATE, DDL…) here, at once
    names = result.columns
    if not names:
        # Spark's DML and DDL on Iceberg return no columns at all (a query without rows still
        # has them): without a word the command looked as if nothing had run. How many rows
        # changed is not said: Iceberg's snapshot summary counts the rows of the rewritten
        # files (copy-on-write), not the rows the statement touched.
        if output is OutputFormat.json:
            console.print_json(json.dumps({"statement": "ok"}))
        else:
            console.print("OK (no result set)", highlight=False)
        return
    # One row more than printed tells whether there were more: a table of 50 rows printed
    # whole looked like a table of 50 rows.
    rows = result.limit(limit + 1).collect()
    cut = len(rows) > limit
    rows = rows[:limit]
    note = f"only the first {limit:,} rows: --limit N prints more"
    if output is OutputFormat.json:
        records = [{n: _jsonable(row[n]) for n in names} for row in rows]
        console.print_json(json.dumps(records, default=str, allow_nan=False))
        if cut:
            err_console.print(note, highlight=False)  # stdout stays the JSON alone
        return
    # A table when it fits the terminal, otherwise a block per row: values never cut.
    print_records(console, names, [list(row) for row in rows])
    if cut:
        console.print(note, highlight=False)


def _jsonable(value: Any) -> Any:
    """A result's value as JSON takes it: a struct as an object (a Row is a tuple, which
    ``json`` writes as a list without its names), NaN and infinities as the strings Spark's
    ``to_json`` writes (bare ``NaN`` is not JSON: ``jq`` reads it as null)."""
    from pyspark.sql import Row

    if isinstance(value, Row):
        return {k: _jsonable(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value
