"""``frazil validate``: check a config without starting Spark or Kafka."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from frazil.cli.app import OutputFormat, app, console, err_console
from frazil.config.loader import load_config, redacted
from frazil.config.secrets import mask_value
from frazil.errors import ConfigError

CONFIG_OPTION = typer.Option(..., "--config", "-c", help="Path to the frazil YAML config file.")


@app.command()
def validate(
    config: Path = CONFIG_OPTION,
    output: OutputFormat = typer.Option(OutputFormat.text, "--output", "-o", help="text or json"),
) -> None:
    """Check a config file: every unknown key, wrong type, bad regex or partition transform.

    Exits 0 when the config is valid, 1 otherwise. Secrets are never printed.
    """
    try:
        loaded = load_config(config)
    except ConfigError as exc:
        if output is OutputFormat.json:
            problems = [{"key": key, "reason": reason} for key, reason in exc.problems]
            console.print_json(
                json.dumps({"valid": False, "error": str(exc), "problems": problems})
            )
            raise typer.Exit(1) from None
        raise
    if output is OutputFormat.json:
        console.print_json(json.dumps({"valid": True, "config": redacted(loaded)}))
        return
    console.print(f"[green]✓[/] {config} is valid: {len(loaded.pipelines)} pipeline(s)")
    for pipeline in loaded.pipelines:
        source = ", ".join(pipeline.topics) if pipeline.topics else f"/{pipeline.topic_pattern}/"
        partitions = ", ".join(pipeline.partition_by) or "unpartitioned"
        schema = f"{len(pipeline.schema_)} fields" if pipeline.schema_ else "inferred at start"
        console.print(
            f"  [bold]{pipeline.name}[/]: {source} → {loaded.catalog.name}.{pipeline.table} "
            f"({partitions}); {pipeline.format}, schema {schema}; trigger {pipeline.trigger}; "
            f"checkpoint {mask_value(loaded.checkpoint_for(pipeline))}",
            highlight=False,
        )
    _ = err_console
