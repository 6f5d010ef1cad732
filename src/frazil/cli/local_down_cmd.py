"""``frazil local down``: stop the local services, all of them or single ones (``--only``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from frazil import paths
from frazil.cli.app import console, err_console
from frazil.cli.local_app import (
    LABELS,
    ControllerPort,
    Port,
    RegistryPort,
    StateDir,
    broker_at,
    checked_names,
    cluster_at,
    local_app,
    registry_at,
)
from frazil.errors import ServiceError
from frazil.local import services as local_services
from frazil.local import stack
from frazil.local.broker import LocalBroker
from frazil.local.broker_cluster import LocalKafkaCluster
from frazil.local.registry import LocalRegistry


def _only(values: list[str]) -> list[str]:
    """The --only values: names of ``frazil local`` services (``kafka`` too), at least one.

    Raises:
        typer.BadParameter: If a name is unknown or none is given (``--only ""`` must not
            read as "everything").
    """
    names = checked_names(values, local_services.SERVICES, "--only")
    if not names:
        raise typer.BadParameter(
            f"name at least one service: {', '.join(local_services.SERVICES)}",
            param_hint="--only",
        )
    return names


# The options that place each service: given explicitly, they must match a running one (which
# `up` then refuses to move); left at their defaults, a running service is kept where it runs.
@local_app.command("down")
def down(
    port: Port = 9092,
    controller_port: ControllerPort = 9093,
    state_dir: StateDir = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for a clean exit before killing.")
    ] = 30.0,
    registry_port: RegistryPort = 8081,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help="Stop only these services and keep the others running (repeat the option or "
            "separate with commas): kafka (the broker, or every node of the cluster), "
            "schema-registry, s3, rest-catalog, spark-cluster. s3 is not stopped while "
            "rest-catalog runs on it, unless rest-catalog is named too.",
            metavar="SERVICE[,SERVICE...]",
        ),
    ] = None,
) -> None:
    """Stop the broker (or every node of the cluster) and every service started with --with;
    their data is kept.

    With --only, just the services named, each reported on stderr as "NAME stopped" or
    "NAME not running". A service another running one needs is not stopped alone: naming
    the object store while the REST catalog runs on it stops nothing and fails, saying to
    name both (then the catalog stops first) or to stop the catalog first.
    """
    if only is not None:
        _down_only(state_dir or paths.state_dir(), _only(only), timeout)
        return
    broker = broker_at(state_dir, port, controller_port)
    with err_console.status("Stopping the local Kafka broker..."):
        stopped = broker.down(timeout=timeout)
    cluster = cluster_at(state_dir)
    if cluster is not None:
        with err_console.status("Stopping the local Kafka cluster..."):
            if cluster.down(timeout=timeout):
                err_console.print(f"Kafka cluster ({len(cluster.nodes)} nodes) stopped")
                stopped = True
    if registry_at(state_dir, registry_port).down(timeout=timeout):
        err_console.print("schema registry stopped")
    with err_console.status("Stopping the local stack's services..."):
        stack_stopped = stack.down(state_dir or paths.state_dir(), timeout=timeout)
    for name in stack_stopped:
        err_console.print(f"{name} stopped")
    console.print("stopped" if stopped else "not running")


def _down_only(state_dir: Path, names: list[str], timeout: float) -> None:
    """Stop only the named services, each before what it needs.

    Raises:
        ServiceError: If a running service that is not named needs one that is (before
            anything is stopped).
    """
    blocked = local_services.left_without(names, _running(state_dir))
    if blocked:
        raise ServiceError(local_services.refusal(blocked, names))
    for name in local_services.stop_order(names):
        with err_console.status(f"Stopping the local {LABELS[name]}..."):
            stopped = _stop(state_dir, name, timeout)
        err_console.print(f"{name} {'stopped' if stopped else 'not running'}", highlight=False)


def _running(state_dir: Path) -> list[str]:
    """The names of the local services running in the state folder."""
    names = list(stack.status(state_dir).running())
    if LocalRegistry(state_dir).status().running:
        names.append(local_services.SCHEMA_REGISTRY)
    cluster = LocalKafkaCluster.existing(state_dir)
    cluster_nodes = cluster.status().nodes if cluster is not None else ()
    if LocalBroker(state_dir).status().running or any(n.running for n in cluster_nodes):
        names.append(local_services.KAFKA)
    return names


def _stop(state_dir: Path, name: str, timeout: float) -> bool:
    """Stop one service (whatever its ports: each records them in the state folder).

    Returns:
        Whether it was running.
    """
    if name == local_services.KAFKA:
        stopped = LocalBroker(state_dir).down(timeout=timeout)
        cluster = LocalKafkaCluster.existing(state_dir)
        return (cluster is not None and cluster.down(timeout=timeout)) or stopped
    if name == local_services.SCHEMA_REGISTRY:
        return LocalRegistry(state_dir).down(timeout=timeout)
    return bool(stack.down(state_dir, timeout=timeout, services=[name]))
