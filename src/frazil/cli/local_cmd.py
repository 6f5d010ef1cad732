"""``frazil local up|down|status``: the local single-node Kafka broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from frazil import paths
from frazil.cli.app import OutputFormat, app, console, err_console
from frazil.local.broker import LocalBroker

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


def _broker(state_dir: Path | None, port: int, controller_port: int) -> LocalBroker:
    return LocalBroker(state_dir or paths.state_dir(), port=port, controller_port=controller_port)


@local_app.command("up")
def up(
    port: Port = 9092,
    controller_port: ControllerPort = 9093,
    state_dir: StateDir = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the broker to answer.")
    ] = 60.0,
) -> None:
    """Start the broker (fetching Kafka on first use) and print its bootstrap address."""
    broker = _broker(state_dir, port, controller_port)
    with err_console.status("Starting the local Kafka broker..."):
        bootstrap = broker.up(timeout=timeout)
    # Only the address on stdout, so scripts can do BOOTSTRAP=$(frazil local up).
    console.print(bootstrap, highlight=False)


@local_app.command("down")
def down(
    port: Port = 9092,
    controller_port: ControllerPort = 9093,
    state_dir: StateDir = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for a clean exit before killing.")
    ] = 30.0,
) -> None:
    """Stop the broker; its data is kept for the next start."""
    broker = _broker(state_dir, port, controller_port)
    with err_console.status("Stopping the local Kafka broker..."):
        stopped = broker.down(timeout=timeout)
    console.print("stopped" if stopped else "not running")


@local_app.command("status")
def status(
    port: Port = 9092,
    controller_port: ControllerPort = 9093,
    state_dir: StateDir = None,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="Print as text or as JSON.")
    ] = OutputFormat.text,
) -> None:
    """Show whether the broker runs, its address, pid and data size."""
    st = _broker(state_dir, port, controller_port).status()
    if output is OutputFormat.json:
        typer.echo(json.dumps(st.as_dict()))
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
