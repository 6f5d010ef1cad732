"""``frazil validate``: check a config without starting Spark or Kafka."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from frazil.cli.app import OUTPUT_OPTION, OutputFormat, app, console, err_console
from frazil.config.loader import load_config, redacted
from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.config.secrets import mask_value
from frazil.errors import ConfigError
from frazil.transform.check import config_problems, declared_fields

CONFIG_OPTION = typer.Option(..., "--config", "-c", help="Path to the frazil YAML config file.")


@app.command()
def validate(
    config: Path = CONFIG_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Check a config file: every unknown key, wrong type, bad regex or partition transform,
    transforms that refer to fields the declared schema does not have, and columns that
    partition_by, sort_by, route.field or write.key name but the transforms do not leave; all
    in one run, with "did you mean" for a near miss.

    Exits 0 when the config is valid, 1 otherwise. Secrets are never printed.
    """
    try:
        loaded = load_config(config, checks=config_problems)
    except ConfigError as exc:
        if output is OutputFormat.json:
            listed = [{"key": key, "reason": reason} for key, reason in exc.problems]
            console.print_json(json.dumps({"valid": False, "error": str(exc), "problems": listed}))
            raise typer.Exit(1) from None
        raise
    warnings = loaded.catalog.warnings()
    if output is OutputFormat.json:
        console.print_json(
            json.dumps({"valid": True, "config": redacted(loaded), "warnings": warnings})
        )
        return
    console.print(f"[green]✓[/] {config} is valid: {len(loaded.pipelines)} pipeline(s)")
    for warning in warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    for pipeline in loaded.pipelines:
        source = ", ".join(pipeline.topics) if pipeline.topics else f"/{pipeline.topic_pattern}/"
        partitions = ", ".join(pipeline.defaults.partition_by) or "unpartitioned"
        schema = _schema_source(pipeline)
        count = len(pipeline.transforms)
        transforms = f"{count} transform{'s' if count != 1 else ''}"
        if count and declared_fields(pipeline) is None:
            transforms += " (checked against the schema at start)"
        write = pipeline.defaults.write
        mode = ""
        if write.merges:
            how = "Debezium" if write.debezium else write.op_field or ""
            own = [
                f"{name}: {', '.join(settings.write.key)}"
                for name, settings in pipeline.tables.items()
                if settings.write is not None
                and settings.write.key is not None
                and settings.write.key != write.key
            ]
            keys = (
                ", ".join(write.key) + (f" ({'; '.join(own)})" if own else "")
                if write.key
                else f"each table's own key ({'; '.join(own)})"
            )
            mode = f"{write.mode}{' by ' + how if how else ''} on {keys}; "
        console.print(
            f"  [bold]{pipeline.name}[/]: {source} → "
            f"{_target(pipeline)} "
            f"({partitions}); {pipeline.value.format}, schema {schema}; {mode}{transforms}; "
            f"{pipeline.errors.describe()}; trigger {pipeline.trigger}; "
            f"checkpoint {mask_value(loaded.checkpoint_for(pipeline))}",
            highlight=False,
        )
    storage_line = _storage_line(loaded)
    if storage_line:
        console.print(storage_line, highlight=False)


def _storage_line(loaded: FrazilConfig) -> str | None:
    """Where the S3 locations go and whence their credentials (never the credentials)."""
    from frazil.config.storage import ACCESS_KEY_ID, SECRET_ACCESS_KEY, credentials
    from frazil.config.storage_clients import region, uses_s3

    if not uses_s3(loaded):
        return None
    storage = loaded.storage
    where = storage.address() if storage else "AWS S3"
    if storage is not None and storage.path_style:
        where += " (path-style)"
    signing = region(storage)
    if signing:
        where += f", region {signing}"
    found = credentials() is not None
    whence = (
        f"credentials from {ACCESS_KEY_ID}/{SECRET_ACCESS_KEY}"
        if found
        else "no credentials in the environment: the AWS SDK's default chain (~/.aws, a role)"
    )
    return f"  storage: {where}; {whence}"


def _schema_source(pipeline: PipelineConfig) -> str:
    """Where the value schema comes from, as the summary line says it."""
    value = pipeline.value
    source = value.source()
    if source == "declared" and value.schema_ is not None:
        if value.variant is not None:
            return f"{len(value.schema_)} fields, the rest in the variant column {value.variant!r}"
        return f"{len(value.schema_)} fields"
    if source == "file" and value.schema_file is not None:
        return f"from {Path(value.schema_file).name}"
    if source == "registry":
        return f"from the registry ({value.subject_name(pipeline.topics)})"
    if source == "none":
        return "none (the payload as one column)"
    if source == "variant":
        return f"none (each value whole in the variant column {value.variant!r})"
    return "inferred at start"


def _target(pipeline: PipelineConfig) -> str:
    if pipeline.table is not None:
        return pipeline.table
    return pipeline.describe_target()
