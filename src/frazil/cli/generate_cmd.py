"""``frazil generate``: fill a Kafka topic with synthetic payment events."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from frazil.cli.app import OutputFormat, app, console, err_console, inherit_output
from frazil.generate.producer import ensure_topic, produce_events

DEFAULT_BOOTSTRAP_SERVERS = "127.0.0.1:9092"

_EPILOG = (
    "Each event is a JSON object like "
    '{"id": "<uuid4, also the record key>", "type": "debit|credit|bank_slip", '
    '"created_at": "2024-02-29T12:23:03.417Z" (UTC, millisecond precision), '
    '"document": "75", "payer": "Miss Aniya Rath", "amount": 9424}.'
)


@app.command(epilog=_EPILOG)
def generate(
    topic: Annotated[str, typer.Option("--topic", "-t", help="Topic to write to.")],
    count: Annotated[int, typer.Option("--count", "-n", min=0, help="How many events to produce.")],
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate",
            "-r",
            min=0.001,
            help="Target events per second, held on average. Default: as fast as possible.",
        ),
    ] = None,
    partitions: Annotated[
        int,
        typer.Option(
            "--partitions",
            "-p",
            min=1,
            help="Partition count if the topic has to be created; an existing topic is kept.",
        ),
    ] = 4,
    bootstrap_servers: Annotated[
        str,
        typer.Option(
            "--bootstrap-servers",
            "-b",
            envvar="FRAZIL_BOOTSTRAP_SERVERS",
            help="Kafka bootstrap servers.",
        ),
    ] = DEFAULT_BOOTSTRAP_SERVERS,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            help="Reproduce the same ids, types, documents, payers and amounts "
            "(created_at is always the current time).",
        ),
    ] = None,
    output: Annotated[
        OutputFormat,
        typer.Option(
            "--output", "-o", help="Print the result as text or as JSON.", callback=inherit_output
        ),
    ] = OutputFormat.text,
) -> None:
    """Produce synthetic payment events to a Kafka topic, creating the topic if needed."""
    status = ensure_topic(bootstrap_servers, topic, partitions)
    if status.created:
        err_console.print(
            f"created topic [bold]{topic}[/] with {status.partitions} partitions", highlight=False
        )
    elif status.partitions != partitions:
        err_console.print(
            f"topic [bold]{topic}[/] already exists with {status.partitions} partitions "
            f"(not {partitions}); leaving it as it is",
            highlight=False,
        )
    report = produce_events(
        bootstrap_servers, topic, count, rate=rate, seed=seed, console=err_console
    )
    if output is OutputFormat.json:
        # Plain output rather than rich: scripts parse this, so no wrapping or markup.
        typer.echo(json.dumps(report.to_dict()))
        return
    console.print(
        f"produced {report.count:,} events to [bold]{topic}[/] in {report.seconds:.2f} s "
        f"({report.events_per_second:,.0f} events/s)",
        highlight=False,
    )
    if report.partition_counts:
        spread = ", ".join(f"{p}: {n:,}" for p, n in report.partition_counts.items())
        console.print(f"per partition: {spread}", highlight=False)
