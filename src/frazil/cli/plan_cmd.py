"""``frazil plan``: a dry run that shows each pipeline's schemas and transforms."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer
from rich.tree import Tree

from frazil.cli.app import OUTPUT_OPTION, OutputFormat, app, console, err_console
from frazil.config.loader import load_config
from frazil.errors import ConfigError
from frazil.transform.check import config_problems


def _schema_tree(title: str, schema: object) -> Tree:
    from pyspark.sql.types import ArrayType, MapType, StructType

    tree = Tree(title)

    def add(node: Tree, data_type: object) -> None:
        assert isinstance(data_type, StructType)
        for f in data_type.fields:
            inner = f.dataType
            while isinstance(inner, ArrayType):
                inner = inner.elementType
            if isinstance(inner, MapType):
                inner = inner.valueType
            label = f"{f.name}: [cyan]{f.dataType.simpleString()}[/]"
            if isinstance(inner, StructType):
                add(node.add(f"{f.name}: [cyan]{_kind(f.dataType)}[/]"), inner)
            else:
                node.add(label)

    add(tree, schema)
    return tree


def _kind(data_type: object) -> str:
    from pyspark.sql.types import ArrayType, MapType

    if isinstance(data_type, ArrayType):
        return f"array<{_kind(data_type.elementType)}>"
    if isinstance(data_type, MapType):
        return f"map<{data_type.keyType.simpleString()}, {_kind(data_type.valueType)}>"
    return "struct"


@app.command()
def plan(
    config: Path = typer.Option(..., "--config", "-c", help="Path to the frazil YAML config file."),
    pipeline: list[str] = typer.Option(
        None, "--pipeline", "-p", help="Only this pipeline (repeatable). Default: all."
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Dry run: resolve each pipeline's source schema, transforms and table schema; no writes.

    Schemas come from where `frazil run` takes them (the config, a schema file, the schema
    registry, the existing table, or a sample of the topics), so the registry and Kafka must be
    reachable when the config relies on them.
    """
    from frazil.engine.explain import explain
    from frazil.engine.reachable import check_services
    from frazil.engine.runner import check_registry, check_topics
    from frazil.engine.session import build_spark
    from frazil.engine.spark_start import SparkStart, build_analysis_spark
    from frazil.engine.table_views import JavaCatalogViews, TableViews

    loaded = load_config(config, checks=config_problems)
    unknown = sorted(set(pipeline or []) - {p.name for p in loaded.pipelines})
    if unknown:
        raise ConfigError(f"no pipeline named {', '.join(map(repr, unknown))} in {config}")
    selected = [p for p in loaded.pipelines if not pipeline or p.name in pipeline]
    # Spark only resolves; the tables are read through Iceberg's catalog API: a lighter
    # session, started while the services are checked (FRAZIL_READS=spark: Spark's catalog).
    light = os.environ.get("FRAZIL_READS", "").lower() != "spark"
    starting = SparkStart(lambda: build_analysis_spark(loaded)) if light else None
    with err_console.status("Checking Kafka, the schema registry and the catalog..."):
        # As `frazil run` does: a missing topic or a service that does not answer fails in
        # seconds, with run's message.
        for p in selected:
            check_topics(loaded, p)
        check_registry(loaded, selected)
        if starting is not None:
            check_services(loaded, spark=False)
    with err_console.status("Starting Spark and resolving schemas..."):
        views: TableViews | None = None
        if starting is not None:
            spark = starting.result()
            views = JavaCatalogViews(spark, loaded)
        else:
            spark = build_spark(loaded)
        explanations = explain(spark, loaded, pipeline or [], views)
    if output is OutputFormat.json:
        console.print_json(json.dumps([e.to_json() for e in explanations]))
        return
    for e in explanations:
        state = e.table_state()
        console.print(
            f"[bold]{e.pipeline}[/] → {e.table} ({state}); {e.value_format} values, schema "
            f"{e.value_schema_source}" + (f"; {e.key_format} keys" if e.key_format else ""),
            highlight=False,
        )
        console.print(_schema_tree("source columns", e.source_schema))
        for i, t in enumerate(e.transforms, 1):
            console.print(f"  {i}. [bold]{t.name}[/]: {t.description}", highlight=False)
        if e.existing_schema is None:
            console.print(_schema_tree("table columns", e.table_schema))
        else:
            # The table as it is: it may have evolved past what the records first brought.
            console.print(_schema_tree("table columns (the table's now)", e.existing_schema))
            if e.existing_schema.simpleString() != e.table_schema.simpleString():
                console.print(_schema_tree("columns the records bring", e.table_schema))
        console.print("steps: " + " → ".join(name for name, _ in e.steps), highlight=False)
        console.print(f"bad records: {e.bad_records}", highlight=False)
        for warning in e.warnings:
            console.print(f"[yellow]warning[/]: {warning}", highlight=False)
        console.print()
