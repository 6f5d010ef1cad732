"""``frazil local status``: the local broker or cluster, the registry and the stack, running or
not, and where."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from frazil import paths
from frazil.cli.app import OutputFormat, console, inherit_output
from frazil.cli.local_app import (
    ControllerPort,
    Port,
    RegistryPort,
    StateDir,
    broker_at,
    cluster_at,
    local_app,
    registry_at,
)
from frazil.local import stack
from frazil.local.broker import BrokerStatus
from frazil.local.broker_cluster import ClusterStatus


@local_app.command("status")
def status(
    port: Port = 9092,
    controller_port: ControllerPort = 9093,
    state_dir: StateDir = None,
    registry_port: RegistryPort = 8081,
    output: Annotated[
        OutputFormat,
        typer.Option("--output", "-o", help="Print as text or as JSON.", callback=inherit_output),
    ] = OutputFormat.text,
) -> None:
    """Show whether the broker and each other local service runs, its address, pid and data."""
    st = broker_at(state_dir, port, controller_port).status()
    cluster = cluster_at(state_dir)
    cluster_status = cluster.status() if cluster is not None else None
    registry = registry_at(state_dir, registry_port).status()
    services = stack.status(state_dir or paths.state_dir())
    if output is OutputFormat.json:
        typer.echo(
            json.dumps(
                {
                    **st.as_dict(),
                    "cluster": cluster_status.as_dict() if cluster_status else None,
                    "schema_registry": registry.as_dict(),
                    "s3": services.s3.as_dict(),
                    "rest_catalog": services.rest_catalog.as_dict(),
                    "spark_cluster": services.spark_cluster.as_dict(),
                }
            )
        )
        return
    # Where only a cluster was ever started, a single broker "stopped" would read as if
    # something were down.
    if st.running or st.formatted or cluster_status is None:
        _print_broker_status(st)
    if cluster_status is not None:
        _print_cluster_status(cluster_status)
    # The registry only shows once it was started here (`frazil local up --with ...`).
    if registry.running:
        console.print(f"registry:  [green]running[/] at {registry.url}", highlight=False)
        console.print(f"           pid {registry.pid}, log {registry.log_file}", highlight=False)
    elif registry.registry_dir.is_dir():
        console.print("registry:  [yellow]stopped[/]")
    _print_stack_status(services)


def _print_broker_status(st: BrokerStatus) -> None:
    console.print(f"broker:    {_state(st.running)}")
    console.print(f"bootstrap: {st.bootstrap}", highlight=False)
    if st.sasl_ssl_bootstrap and st.mtls_bootstrap:
        console.print(f"sasl_ssl:  {st.sasl_ssl_bootstrap} (SCRAM-SHA-512)", highlight=False)
        console.print(f"mtls:      {st.mtls_bootstrap} (client certificate)", highlight=False)
    if st.pid is not None:
        console.print(f"pid:       {st.pid}")
    console.print(f"state:     {st.state_dir / 'kafka'}", highlight=False)
    data = f"{st.data_bytes / 1024**2:.1f} MiB" if st.formatted else "(not formatted yet)"
    console.print(f"data:      {data}", highlight=False)
    console.print(f"log:       {st.log_file}", highlight=False)


def _print_cluster_status(cluster: ClusterStatus) -> None:
    line = console.print
    nodes = len(cluster.nodes)
    up_count = sum(n.running for n in cluster.nodes)
    state = _state(cluster.running) if up_count in (0, nodes) else "[yellow]degraded[/]"
    line(f"cluster:   {state}, {up_count} of {nodes} nodes running", highlight=False)
    line(f"           bootstrap {cluster.bootstrap}", highlight=False)
    line(f"           state {cluster.cluster_dir}", highlight=False)
    for n, node in enumerate(cluster.nodes, start=1):
        pid = f", pid {node.pid}" if node.pid is not None else ""
        data = f"{node.data_bytes / 1024**2:.1f} MiB" if node.formatted else "not formatted"
        line(
            f"node {n}:    {_state(node.running)} at {node.bootstrap}{pid}, data {data}",
            highlight=False,
        )
        line(f"           log {node.log_file}", highlight=False)


def _state(running: bool) -> str:
    return "[green]running[/]" if running else "[yellow]stopped[/]"


def _print_stack_status(services: stack.StackStatus) -> None:
    s3, rest, spark = services.s3, services.rest_catalog, services.spark_cluster
    line = console.print
    line(f"s3:        {_state(s3.running)} at {s3.endpoint}", highlight=False)
    if s3.running:
        line(f"           pid {s3.pid}, log {s3.log_file}", highlight=False)
    data = f"{s3.data_bytes / 1024**2:.1f} MiB"
    line(f"           data {s3.data_dir} ({data})", highlight=False)
    line(f"rest:      {_state(rest.running)} at {rest.uri}", highlight=False)
    if rest.running:
        line(f"           pid {rest.pid}, log {rest.log_file}", highlight=False)
        line(f"           warehouse {rest.warehouse} on {rest.s3_endpoint}", highlight=False)
    line(f"           catalog {rest.database}", highlight=False)
    line(f"spark:     {_state(spark.running)} at {spark.master_url}", highlight=False)
    if spark.running:
        line(f"           pid {spark.master_pid}, UI {spark.master_ui}", highlight=False)
    line(f"           log {spark.log_file}", highlight=False)
    for n, worker in enumerate(spark.workers, start=1):
        state = worker["state"] or ("running" if worker["pid"] else "stopped")
        pid = f", pid {worker['pid']}" if worker["pid"] else ""
        line(f"worker {n}:  {state} at {worker['ui']}{pid}", highlight=False)
        line(f"           log {worker['log_file']}", highlight=False)
