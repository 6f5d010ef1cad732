"""``frazil dlq show|replay``: what went to the dead-letter queue, and re-ingesting it."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from frazil.cli.app import OUTPUT_OPTION, OutputFormat, app, console
from frazil.config.loader import load_config
from frazil.errors import ConfigError

dlq_app = typer.Typer(
    help="Inspect and replay the dead-letter tables (errors.dlq_table) of the pipelines.",
    no_args_is_help=True,
)
app.add_typer(dlq_app, name="dlq")


@dlq_app.command()
def show(
    config: Path = typer.Option(..., "--config", "-c", help="Path to the frazil YAML config file."),
    pipeline: list[str] | None = typer.Option(
        None, "--pipeline", "-p", help="Only this pipeline (repeatable). Default: all."
    ),
    examples: int = typer.Option(1, "--examples", help="Example records per stage and reason."),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Count dead letters by pipeline, stage and reason, with example records (read with
    PyIceberg, without starting Spark, where it opens the catalog)."""
    loaded = load_config(config)
    unknown = sorted(set(pipeline or []) - {p.name for p in loaded.pipelines})
    if unknown:
        raise ConfigError(f"no pipeline named {', '.join(map(repr, unknown))} in {config}")
    chosen = [p for p in loaded.pipelines if not pipeline or p.name in pipeline]
    tables: dict[str, list[str]] = {}
    for p in chosen:
        if p.errors.dlq_table is not None:
            tables.setdefault(p.errors.dlq_table, []).append(p.name)
    if not tables:
        raise ConfigError(
            "no pipeline chosen has a dead-letter table (errors.dlq_table); a dead-letter "
            "topic is read with any Kafka consumer"
        )
    groups = _groups(loaded, tables, examples)
    if output is OutputFormat.json:
        console.print_json(json.dumps(groups, default=str))
        return
    if not groups:
        console.print("no dead letters")
        return
    # A block per pipeline, stage and reason: the reason and the examples on lines of their
    # own, wrapped as sentences (a table column wrapped them a word per line at 80 columns).
    for g in groups:
        console.print(
            f"[bold]{escape(g['pipeline'])}[/]  {escape(g['stage'])}  "
            f"{g['records']:,} record(s)  first failed {g['first_failed']}",
            highlight=False,
        )
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, style="dim")
        grid.add_column(overflow="fold")
        grid.add_row("  reason", escape(g["reason"]))
        for e in g["examples"]:
            where = f"{e['topic']}/{e['partition']}@{e['offset']}"
            detail = f" {e['detail']!r}" if e["detail"] else ""
            if e["reason"] != g["reason"]:  # the value the reason quotes
                detail = f" ({e['reason'][len(g['reason']) + 2 :]}){detail}"
            grid.add_row("  example", escape(where + detail))
        console.print(grid)


def _instant(value: Any) -> str:
    """A failure time as every other frazil output shows instants (``…T02:35:14.848Z``).

    PySpark hands timestamps back as naive datetimes in the process's local time, which
    ``timestamp()`` reads back the same way; PyArrow as datetimes in UTC.
    """
    from frazil.progress.markers import format_ms

    if not isinstance(value, datetime):
        return str(value)
    return format_ms(int(value.timestamp() * 1000))


def _groups(loaded: Any, tables: dict[str, list[str]], examples: int) -> list[dict[str, Any]]:
    """The groups of every dead-letter table (to its pipelines), read with PyIceberg where it
    opens the catalog, else through Spark."""
    from frazil.cli.metadata_reads import metadata_catalog
    from frazil.observe.catalog import load

    groups: list[dict[str, Any]] = []
    catalog = metadata_catalog(loaded)
    if catalog is not None:
        for table, names in sorted(tables.items()):
            found = load(catalog, table)
            if found is not None:
                groups.extend(_summarise_arrow(found, table, names, examples))
        return groups
    from frazil.engine.session import build_spark
    from frazil.sink.table import qualified, table_exists

    spark = build_spark(loaded)
    for table, names in sorted(tables.items()):
        full = qualified(loaded.catalog.name, table)
        if table_exists(spark, full):
            groups.extend(_summarise(spark, full, table, names, examples))
    return groups


#: The columns a group is counted from; an example's ``detail`` is read for the examples only.
_GROUPED = ("pipeline", "stage", "reason", "failed_at", "topic", "partition", "offset")


def _summarise_arrow(
    table: Any, name: str, pipelines: list[str], examples: int
) -> list[dict[str, Any]]:
    """:func:`_summarise` of a dead-letter table loaded with PyIceberg."""
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    from frazil.reasons import VALUE_QUOTED

    chosen = f"pipeline IN ({', '.join(_quoted(p) for p in pipelines)})"
    rows = table.scan(row_filter=chosen, selected_fields=_GROUPED).to_arrow()
    if rows.num_rows == 0:
        return []
    rows = rows.append_column(
        "kind", pc.replace_substring_regex(rows.column("reason"), VALUE_QUOTED, "")
    )
    keys = ["pipeline", "stage", "kind"]
    counted = rows.group_by(keys).aggregate([([], "count_all"), ("failed_at", "min")])
    counted = counted.sort_by(
        [("count_all", "descending"), ("pipeline", "ascending"), ("stage", "ascending"),
         ("kind", "ascending")]
    )  # fmt: skip
    ordered = rows.sort_by([(k, "ascending") for k in (*keys, "topic", "partition", "offset")])
    picked: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in ordered.select([*keys, "reason", "topic", "partition", "offset"]).to_pylist():
        group = picked.setdefault((r["pipeline"], r["stage"], r["kind"]), [])
        if len(group) < examples:
            group.append({k: r[k] for k in ("pipeline", "topic", "partition", "offset", "reason")})
    # One scan for every example's detail (the column can be large: only theirs is read).
    wanted = [e for group in picked.values() for e in group]
    details: dict[tuple[str, str, int, int], Any] = {}
    for start in range(0, len(wanted), _DETAILS_PER_SCAN):
        where = " OR ".join(
            f"(pipeline = {_quoted(e['pipeline'])} AND topic = {_quoted(e['topic'])} AND "
            f"partition = {int(e['partition'])} AND offset = {int(e['offset'])})"
            for e in wanted[start : start + _DETAILS_PER_SCAN]
        )
        found = table.scan(
            row_filter=where, selected_fields=("pipeline", "topic", "partition", "offset", "detail")
        ).to_arrow()
        for d in found.to_pylist():
            details[(d["pipeline"], d["topic"], d["partition"], d["offset"])] = d["detail"]
    for e in wanted:
        e["detail"] = details.get((e.pop("pipeline"), e["topic"], e["partition"], e["offset"]))
    return [
        _group(name, r, int(r["count_all"]), r["failed_at_min"], picked)
        for r in counted.to_pylist()
    ]


#: Examples whose detail one scan reads (its filter grows with each).
_DETAILS_PER_SCAN = 50


def _group(
    table: str,
    row: Any,
    records: int,
    first_failed: Any,
    examples: dict[tuple[str, str, str], list[dict[str, Any]]],
) -> dict[str, Any]:
    """One group as ``dlq show`` prints it (``row``: its pipeline, stage and reason's kind)."""
    key = (row["pipeline"], row["stage"], row["kind"])
    return {
        "table": table,
        "pipeline": key[0],
        "stage": key[1],
        "reason": key[2],
        "records": records,
        "first_failed": _instant(first_failed),
        "examples": examples.get(key, []),
    }


def _quoted(value: str) -> str:
    """A string literal of PyIceberg's row filter syntax."""
    return "'" + value.replace("'", "''") + "'"


def _summarise(
    spark: Any, full: str, table: str, pipelines: list[str], examples: int
) -> list[dict[str, Any]]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from frazil.reasons import VALUE_QUOTED

    # Grouped by the reason's kind (without the value it may quote); examples keep theirs.
    rows = (
        spark.table(full)
        .where(F.col("pipeline").isin(*pipelines))
        .withColumn("kind", F.regexp_replace("reason", VALUE_QUOTED, ""))
    )
    counted = (
        rows.groupBy("pipeline", "stage", "kind")
        .agg(F.count(F.lit(1)).alias("records"), F.min("failed_at").alias("first_failed"))
        .orderBy(F.desc("records"), "pipeline", "stage", "kind")
        .collect()
    )
    order = Window.partitionBy("pipeline", "stage", "kind").orderBy("topic", "partition", "offset")
    picked = (
        rows.withColumn("n", F.row_number().over(order))
        .where(F.col("n") <= examples)
        .select("pipeline", "stage", "kind", "topic", "partition", "offset", "reason", "detail")
        .orderBy("topic", "partition", "offset")
        .collect()
    )
    found: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in picked:
        found.setdefault((r["pipeline"], r["stage"], r["kind"]), []).append(
            {k: r[k] for k in ("topic", "partition", "offset", "reason", "detail")}
        )
    return [_group(table, r, int(r["records"]), r["first_failed"], found) for r in counted]


@dlq_app.command()
def replay(
    config: Path = typer.Option(..., "--config", "-c", help="Path to the frazil YAML config file."),
    pipeline: str = typer.Option(
        ..., "--pipeline", "-p", help="The pipeline whose dead letters to replay."
    ),
    stage: str | None = typer.Option(
        None, "--stage", help="Only dead letters of this stage (decode, transform, route, schema)."
    ),
    since: datetime | None = typer.Option(
        None, "--since", help="Only dead letters that failed at or after this time (UTC, ISO-8601)."
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Re-ingest a pipeline's dead letters (after a fix), exactly once.

    Records that succeed now go to the pipeline's table(s), those that fail again go back to
    the dead-letter table with their new reason, and the replayed ones leave it.
    """
    from frazil.engine.replay import replay as replay_dead_letters
    from frazil.engine.session import build_spark

    loaded = load_config(config)
    chosen = next((p for p in loaded.pipelines if p.name == pipeline), None)
    if chosen is None:
        raise ConfigError(f"no pipeline named {pipeline!r} in {config}")
    spark = build_spark(loaded)
    report = replay_dead_letters(spark, loaded, chosen, stage=stage, since=since)
    if output is OutputFormat.json:
        console.print_json(json.dumps(dataclasses.asdict(report)))
        return
    resumed = " (finished an interrupted replay)" if report.resumed else ""
    where = chosen.table or "its tables"
    console.print(
        f"[bold green]✓ {report.pipeline}[/]: {report.replayed:,} dead letter(s) replayed"
        f"{resumed}: {report.written:,} written to {where}, {report.failed_again:,} failed "
        "again (back in the dead-letter table with their new reason)"
    )
