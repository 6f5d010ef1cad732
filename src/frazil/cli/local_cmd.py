"""``frazil local up|down|status``: the local single-node Kafka broker and schema registry."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Annotated

import typer

from frazil import paths
from frazil.cli.app import OutputFormat, app, console, err_console
from frazil.local.broker import LocalBroker
from frazil.local.registry import LocalRegistry

local_app = typer.Typer(
    help="Run a real single-node Kafka broker on 127.0.0.1 for development and tests.",
    no_args_is_help=True,
)
app.add_typer(local_app, name="local")

Port = Annotated[int, typer.Option("--port", help="Client (PLAINTEXT) port.")]
ControllerPort = Annotated[int, typer.Option("--controller-port", help="KRaft controller port.")]
StateDir = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="frazil state folder; the broker lives in its kafka/ subfolder "
        "[default: $FRAZIL_STATE_DIR or ./.frazil]",
    ),
]


RegistryPort = Annotated[
    int, typer.Option("--registry-port", help="HTTP port of the local schema registry.")
]


class Service(str, enum.Enum):
    """Services ``frazil local up`` can start next to the broker."""

    schema_registry = "schema-registry"


def _broker(state_dir: Path | None, port: int, controller_port: int) -> LocalBroker:
    return LocalBroker(state_dir or paths.state_dir(), port=port, controller_port=controller_port)


def _registry(state_dir: Path | None, port: int) -> LocalRegistry:
    return LocalRegistry(state_dir or paths.state_dir(), port=port)


@local_app.command("up")
def up(
    port: Port = 9092,
    controller_port: ControllerPort = 9093,
    state_dir: StateDir = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the broker to answer.")
    ] = 60.0,
    with_: Annotated[
        list[Service] | None,
        typer.Option(
            "--with",
            help="Also start this service: schema-registry (Apicurio Registry, "
            "Confluent-compatible API).",
        ),
    ] = None,
    registry_port: RegistryPort = 8081,
) -> None:
    """Start the broker (fetching Kafka on first use) and print its bootstrap address.

    With --with schema-registry, also start a local Schema Registry and print its URL on
    a second line: the value of the config's schema_registry.url.
    """
    broker = _broker(state_dir, port, controller_port)
    with err_console.status("Starting the local Kafka broker..."):
        bootstrap = broker.up(timeout=timeout)
    # Only addresses on stdout, so scripts can do BOOTSTRAP=$(frazil local up).
    console.print(bootstrap, highlight=False)
    if Service.schema_registry in (with_ or []):
        with err_console.status("Starting the local schema registry..."):
            url = _registry(state_dir, registry_port).up(timeout=max(timeout, 120.0))
        console.print(url, highlight=False)


@local_app.command("down")
def down(
    port: Port = 9092,
    controller_port: ControllerPort = 9093,
    state_dir: StateDir = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for a clean exit before killing.")
    ] = 30.0,
    registry_port: RegistryPort = 8081,
) -> None:
    """Stop the broker (its data is kept for the next start) and the schema registry."""
    broker = _broker(state_dir, port, controller_port)
    with err_console.status("Stopping the local Kafka broker..."):
        stopped = broker.down(timeout=timeout)
    if _registry(state_dir, registry_port).down(timeout=timeout):
        err_console.print("schema registry stopped")
    console.print("stopped" if stopped else "not running")


@local_app.command("status")
def status(
    port: Port = 9092,
    controller_port: ControllerPort = 9093,
    state_dir: StateDir = None,
    registry_port: RegistryPort = 8081,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="Print as text or as JSON.")
    ] = OutputFormat.text,
) -> None:
    """Show whether the broker (and the schema registry) runs, its address, pid and data size."""
    st = _broker(state_dir, port, controller_port).status()
    registry = _registry(state_dir, registry_port).status()
    if output is OutputFormat.json:
        typer.echo(json.dumps({**st.as_dict(), "schema_registry": registry.as_dict()}))
        return
    state = "[green]running[/]" if st.running else "[yellow]stopped[/]"
    console.print(f"broker:    {state}")
    console.print(f"bootstrap: {st.bootstrap}", highlight=False)
    if st.pid is not None:
        console.print(f"pid:       {st.pid}")
    console.print(f"state:     {st.state_dir / 'kafka'}", highlight=False)
    data = f"{st.data_bytes / 1024**2:.1f} MiB" if st.formatted else "(not formatted yet)"
    console.print(f"data:      {data}", highlight=False)
    console.print(f"log:       {st.log_file}", highlight=False)
    # The registry only shows once it was started here (`frazil local up --with ...`).
    if registry.running:
        console.print(f"registry:  [green]running[/] at {registry.url}", highlight=False)
        console.print(f"           pid {registry.pid}, log {registry.log_file}", highlight=False)
    elif registry.registry_dir.is_dir():
        console.print("registry:  [yellow]stopped[/]")
