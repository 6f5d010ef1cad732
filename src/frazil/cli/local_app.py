"""The ``frazil local`` command group: its options, the services it names, and the local
broker, cluster and registry a command acts on."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from frazil import paths
from frazil.cli.app import app
from frazil.local import services as local_services
from frazil.local import stack
from frazil.local.broker import LocalBroker
from frazil.local.broker_cluster import LocalKafkaCluster
from frazil.local.registry import LocalRegistry

local_app = typer.Typer(
    help="Run a real single-node Kafka broker (or a cluster: --brokers 3) on 127.0.0.1 for "
    "development and tests, with a schema registry, an S3 object store, an Iceberg REST "
    "catalog and a Spark cluster on demand (--with); `down --only` stops single services.",
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


SecurePorts = Annotated[
    str,
    typer.Option(
        "--secure-ports",
        help="With --secure: the SASL_SSL (SCRAM-SHA-512) port and the mTLS port, "
        "comma-separated [--port + 2, --port + 3].",
    ),
]


RegistryPort = Annotated[
    int, typer.Option("--registry-port", help="HTTP port of the local schema registry.")
]


class Service(str, enum.Enum):
    """Services ``frazil local up`` can start next to the broker."""

    schema_registry = "schema-registry"
    s3 = stack.S3
    rest_catalog = stack.REST_CATALOG
    spark_cluster = stack.SPARK_CLUSTER


S3Port = Annotated[int, typer.Option("--s3-port", help="HTTP port of the local object store.")]
RestPort = Annotated[
    int, typer.Option("--rest-port", help="HTTP port of the local Iceberg REST catalog.")
]
SparkPort = Annotated[int, typer.Option("--spark-port", help="Port of the local Spark master.")]
SparkUiPort = Annotated[
    int, typer.Option("--spark-ui-port", help="Web UI port of the local Spark master.")
]
SparkWorkerUiPorts = Annotated[
    str,
    typer.Option(
        "--spark-worker-ui-ports",
        help="Web UI ports of the local Spark workers, comma-separated (one per worker).",
    ),
]


DEFAULT_WORKER_UI_PORTS = ",".join(str(p) for p in stack.StackPorts.spark_worker_uis)


def checked_names(values: list[str] | None, choices: Sequence[str], option: str) -> list[str]:
    """An option's service names, each value possibly comma-separated: checked against
    ``choices`` and de-duplicated, in the order given.

    Raises:
        typer.BadParameter: If a name is not one of ``choices`` (the message lists them).
    """
    names = [n.strip() for v in values or [] for n in v.split(",") if n.strip()]
    for name in names:
        if name not in choices:
            raise typer.BadParameter(
                f"unknown service {name!r}: choose from {', '.join(choices)}", param_hint=option
            )
    return list(dict.fromkeys(names))


def broker_at(state_dir: Path | None, port: int, controller_port: int) -> LocalBroker:
    return LocalBroker(state_dir or paths.state_dir(), port=port, controller_port=controller_port)


def cluster_at(state_dir: Path | None) -> LocalKafkaCluster | None:
    """The multi-node cluster last started in the state dir, if any."""
    return LocalKafkaCluster.existing(state_dir or paths.state_dir())


def registry_at(state_dir: Path | None, port: int) -> LocalRegistry:
    return LocalRegistry(state_dir or paths.state_dir(), port=port)


#: What each service is called in progress lines.
LABELS = {
    local_services.KAFKA: "Kafka broker",
    local_services.SCHEMA_REGISTRY: "schema registry",
    stack.S3: "object store (s3proxy)",
    stack.REST_CATALOG: "REST catalog",
    stack.SPARK_CLUSTER: "Spark cluster (master and two workers)",
}
