"""``frazil local up|down|status``: the local Kafka broker and, on demand, the schema registry
and the production-shaped stack (object store, REST catalog, Spark cluster)."""

from __future__ import annotations

import enum
import json
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from frazil import paths
from frazil.cli.app import OutputFormat, app, console, err_console
from frazil.errors import ServiceError
from frazil.local import services as local_services
from frazil.local import stack
from frazil.local.broker import BrokerStatus, LocalBroker
from frazil.local.broker_cluster import ClusterStatus, LocalKafkaCluster, cluster_ports
from frazil.local.registry import LocalRegistry
from frazil.local.secure import SecureListeners, settings_hint

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


_DEFAULT_WORKER_UI_PORTS = ",".join(str(p) for p in stack.StackPorts.spark_worker_uis)


def _names(values: list[str] | None, choices: Sequence[str], option: str) -> list[str]:
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


def _services(values: list[str] | None) -> list[Service]:
    """The --with values, each possibly comma-separated, checked and de-duplicated."""
    known = {s.value: s for s in Service}
    return [known[n] for n in _names(values, list(known), "--with")]


def _only(values: list[str]) -> list[str]:
    """The --only values: names of ``frazil local`` services (``kafka`` too), at least one.

    Raises:
        typer.BadParameter: If a name is unknown or none is given (``--only ""`` must not
            read as "everything").
    """
    names = _names(values, local_services.SERVICES, "--only")
    if not names:
        raise typer.BadParameter(
            f"name at least one service: {', '.join(local_services.SERVICES)}",
            param_hint="--only",
        )
    return names


# The options that place each service: given explicitly, they must match a running one (which
# `up` then refuses to move); left at their defaults, a running service is kept where it runs.
_KAFKA_OPTIONS = ("port", "controller_port", "brokers", "secure", "secure_ports")
_STACK_OPTIONS = {
    stack.S3: ("s3_port",),
    stack.REST_CATALOG: ("rest_port",),
    stack.SPARK_CLUSTER: ("spark_port", "spark_ui_port", "spark_worker_ui_ports"),
}


def _given(ctx: typer.Context, *params: str) -> bool:
    """Whether any of these options was set (on the command line or through the environment)
    rather than left at its default."""
    # By name: typer ships its own copy of click, whose enum is not click's.
    sources = [ctx.get_parameter_source(p) for p in params]
    return any(s is not None and s.name not in ("DEFAULT", "DEFAULT_MAP") for s in sources)


def _secure_ports(text: str) -> tuple[int, int]:
    try:
        ports = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        ports = ()
    if len(ports) != 2 or any(not 0 < p < 65536 for p in ports):
        raise typer.BadParameter(
            f"{text!r} is not two comma-separated ports", param_hint="--secure-ports"
        )
    return ports[0], ports[1]


def _worker_ports(text: str) -> tuple[int, ...]:
    try:
        ports = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        ports = ()
    if not ports or any(not 0 < p < 65536 for p in ports):
        raise typer.BadParameter(
            f"{text!r} is not a comma-separated list of ports", param_hint="--spark-worker-ui-ports"
        )
    return ports


def _broker(state_dir: Path | None, port: int, controller_port: int) -> LocalBroker:
    return LocalBroker(state_dir or paths.state_dir(), port=port, controller_port=controller_port)


def _cluster(state_dir: Path | None) -> LocalKafkaCluster | None:
    """The multi-node cluster last started in the state dir, if any."""
    return LocalKafkaCluster.existing(state_dir or paths.state_dir())


def _registry(state_dir: Path | None, port: int) -> LocalRegistry:
    return LocalRegistry(state_dir or paths.state_dir(), port=port)


@local_app.command("up")
def up(
    ctx: typer.Context,
    port: Port = 9092,
    controller_port: ControllerPort = 9093,
    state_dir: StateDir = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the broker to answer.")
    ] = 60.0,
    brokers: Annotated[
        int,
        typer.Option(
            "--brokers",
            min=1,
            max=9,
            help="Start a cluster of this many nodes instead (each a broker and a KRaft "
            "controller; 3 or more): node i listens on --port + 2(i-1) and "
            "--controller-port + 2(i-1); new topics get 3 replicas, 2 of them in sync for "
            "acks=all. Prints the bootstrap list.",
        ),
    ] = 1,
    secure: Annotated[
        bool,
        typer.Option(
            "--secure",
            help="Also serve a SASL_SSL listener (SCRAM-SHA-512; the user is created with "
            "Kafka's admin API) and an mTLS listener (client certificate required), with TLS "
            "from a CA frazil generates in the state folder. Prints their addresses after "
            "the PLAINTEXT one, and on stderr the client settings and the file holding the "
            "credentials (never the passwords themselves, unless --show-credentials).",
        ),
    ] = False,
    secure_ports: SecurePorts = "",
    show_credentials: Annotated[
        bool,
        typer.Option(
            "--show-credentials",
            help="With --secure: also print the credentials' export lines on stderr.",
        ),
    ] = False,
    with_: Annotated[
        list[str] | None,
        typer.Option(
            "--with",
            help="Also start these services, those not running yet (repeat the option or "
            "separate with commas): "
            "schema-registry (Apicurio Registry, Confluent-compatible API), s3 (s3proxy "
            "object store), rest-catalog (Iceberg REST catalog; starts s3 too), "
            "spark-cluster (Spark standalone master and two workers).",
            metavar="SERVICE[,SERVICE...]",
        ),
    ] = None,
    registry_port: RegistryPort = 8081,
    s3_port: S3Port = stack.StackPorts.s3,
    rest_port: RestPort = stack.StackPorts.rest_catalog,
    spark_port: SparkPort = stack.StackPorts.spark_master,
    spark_ui_port: SparkUiPort = stack.StackPorts.spark_master_ui,
    spark_worker_ui_ports: SparkWorkerUiPorts = _DEFAULT_WORKER_UI_PORTS,
) -> None:
    """Start the broker (fetching Kafka on first use) and print its bootstrap address.

    Each service given with --with prints its address on a line of its own, in this order:
    the schema registry's URL (the config's schema_registry.url), the object store's
    endpoint, the REST catalog's URI, the Spark master's URL.

    Services already running in the state folder are kept as they are (stderr says "NAME
    already running at ADDRESS") and their addresses printed as if started: next to a
    running broker and object store, `up --with rest-catalog` starts only the REST catalog,
    on that store. A running service keeps its ports; give its port options only to check
    them (up then fails if it runs elsewhere: stop it first with `down --only NAME`).
    """
    services = _services(with_)
    ports = stack.StackPorts(
        s3=s3_port,
        rest_catalog=rest_port,
        spark_master=spark_port,
        spark_master_ui=spark_ui_port,
        spark_worker_uis=_worker_ports(spark_worker_ui_ports),
    )
    if brokers == 2:
        raise typer.BadParameter(
            "a 2-node cluster stops when either node does: use 1, or 3 or more",
            param_hint="--brokers",
        )
    # Next to the broker's own ports by default, so that --port moves every listener.
    secure_pair = (
        (_secure_ports(secure_ports) if secure_ports else (port + 2, port + 3)) if secure else None
    )
    if secure and brokers > 1:
        raise typer.BadParameter(
            "secured listeners are only available on a single broker for now",
            param_hint="--secure",
        )
    state = state_dir or paths.state_dir()
    _kafka_up(
        state,
        port=port,
        controller_port=controller_port,
        brokers=brokers,
        secure_pair=secure_pair,
        show_credentials=show_credentials,
        timeout=timeout,
        given=_given(ctx, *_KAFKA_OPTIONS),
    )
    if Service.schema_registry in services:
        _registry_up(state, registry_port, max(timeout, 120.0), given=_given(ctx, "registry_port"))
    wanted = [s.value for s in services if s is not Service.schema_registry]
    if wanted:
        fixed = [name for name, options in _STACK_OPTIONS.items() if _given(ctx, *options)]
        _stack_up(state, wanted, ports, max(timeout, 120.0), fixed)


def _kafka_up(
    state_dir: Path,
    *,
    port: int,
    controller_port: int,
    brokers: int,
    secure_pair: tuple[int, int] | None,
    show_credentials: bool,
    timeout: float,
    given: bool,
) -> None:
    """Start the broker or cluster asked for, or keep the one running; print its addresses.

    Args:
        state_dir: frazil's state folder.
        port: The (first node's) client port.
        controller_port: The (first node's) controller port.
        brokers: How many nodes (1: a single broker).
        secure_pair: The SASL_SSL and mTLS ports with --secure, else None.
        show_credentials: Also print the secured listeners' credentials.
        timeout: Seconds to wait for Kafka to answer.
        given: Whether any option placing Kafka was given; if not, whatever Kafka runs in
            the state folder (a broker, or a cluster) is kept on its own ports.
    """
    single = LocalBroker(state_dir).status()
    cluster = LocalKafkaCluster.existing(state_dir)
    nodes = cluster.status().nodes if cluster is not None else ()
    if not given and single.running:
        # Only waited for, not up() again: there is nothing to start, and its ports are
        # the ones it runs on, not the options' defaults.
        with err_console.status("Checking the local Kafka broker..."):
            bootstrap = LocalBroker(state_dir).wait_running(timeout=timeout)
        err_console.print(f"kafka already running at {bootstrap}", highlight=False)
        console.print(bootstrap, highlight=False)
        if single.sasl_ssl_bootstrap and single.mtls_bootstrap:
            listeners = _secure_listeners(
                state_dir, single.sasl_ssl_bootstrap, single.mtls_bootstrap
            )
            _print_secure(listeners, show_credentials)
        return
    adopt = not given and cluster is not None and any(n.running for n in nodes)
    if adopt or brokers > 1:
        if not adopt:
            try:
                cluster = LocalKafkaCluster(
                    state_dir, cluster_ports(brokers, port, controller_port)
                )
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint="--port/--controller-port") from None
        assert cluster is not None
        already = bool(nodes) and all(n.running for n in nodes)
        size = len(cluster.nodes)
        what = "Checking" if already else f"Starting a local Kafka cluster of {size} nodes"
        with err_console.status(f"{what}..."):
            # Every node starts at once; they answer when a majority of controllers run.
            # Nodes that run are only checked, so this also brings back one that stopped.
            bootstrap = cluster.up(timeout=max(timeout, 120.0))
        if already:
            err_console.print(f"kafka already running at {bootstrap}", highlight=False)
        console.print(bootstrap, highlight=False)
        return
    try:
        broker = LocalBroker(
            state_dir, port=port, controller_port=controller_port, secure_ports=secure_pair
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--port/--secure-ports") from None
    what = "Checking" if single.running else "Starting"
    with err_console.status(f"{what} the local Kafka broker..."):
        bootstrap = broker.up(timeout=timeout)
    if single.running:
        err_console.print(f"kafka already running at {bootstrap}", highlight=False)
    # Only addresses on stdout, so scripts can do BOOTSTRAP=$(frazil local up).
    console.print(bootstrap, highlight=False)
    if broker.secure is not None:
        _print_secure(broker.secure, show_credentials)


def _secure_listeners(state_dir: Path, sasl_ssl: str, mtls: str) -> SecureListeners:
    """The secured listeners of the broker running with these addresses (``host:port``)."""
    host, _, sasl_ssl_port = sasl_ssl.rpartition(":")
    broker = LocalBroker(state_dir)
    return SecureListeners(broker.kafka_dir, host, int(sasl_ssl_port), int(mtls.rpartition(":")[2]))


def _print_secure(listeners: SecureListeners, show_credentials: bool) -> None:
    """The secured listeners' addresses on stdout; their client settings on stderr."""
    console.print(listeners.sasl_ssl_bootstrap, highlight=False)
    console.print(listeners.mtls_bootstrap, highlight=False)
    err_console.print(settings_hint(listeners), highlight=False, soft_wrap=True, markup=False)
    credentials = listeners.credentials()
    if show_credentials and credentials is not None:
        env = " ".join(f"{k}={v}" for k, v in credentials.environment().items())
        err_console.print(f"  export {env}", highlight=False, soft_wrap=True, markup=False)


def _registry_up(state_dir: Path, port: int, timeout: float, *, given: bool) -> None:
    """Start the schema registry, or keep the running one (on its own port unless
    --registry-port was given); print its URL."""
    running = LocalRegistry(state_dir).status()
    if running.running and not given:
        port = urllib.parse.urlsplit(running.url).port or port
    what = "Checking" if running.running else "Starting"
    with err_console.status(f"{what} the local schema registry..."):
        url = LocalRegistry(state_dir, port=port).up(timeout=timeout)
    if running.running:
        err_console.print(f"schema-registry already running at {url}", highlight=False)
    console.print(url, highlight=False)


def _stack_up(
    state_dir: Path,
    wanted: list[str],
    ports: stack.StackPorts,
    timeout: float,
    fixed: list[str],
) -> None:
    """Start the stack services asked for (and what they need) that are not running.

    Running ones are only checked, on the ports they run on unless in ``fixed`` (their port
    options were given): so a REST catalog started next to a running object store uses it.
    """
    before = stack.status(state_dir)
    running = before.running()
    ports = stack.running_ports(before, ports, fixed)
    names, added = stack.resolve_services(wanted)
    for name in added:
        if name not in running:
            needers = [n for n in wanted if name in stack.REQUIRES.get(n, ())]
            err_console.print(f"{', '.join(needers)} needs {name}: starting it too")
    found = stack.StackAddresses()
    for name in names:
        what = "Checking" if name in running else "Starting"
        with err_console.status(f"{what} the local {_LABELS[name]}..."):
            found = _merge(found, stack.up(state_dir, [name], ports, timeout))
        if name in running:
            err_console.print(f"{name} already running at {running[name]}", highlight=False)
    for address in found.addresses():
        console.print(address, highlight=False)
    _print_hint(found)


_LABELS = {
    local_services.KAFKA: "Kafka broker",
    local_services.SCHEMA_REGISTRY: "schema registry",
    stack.S3: "object store (s3proxy)",
    stack.REST_CATALOG: "REST catalog",
    stack.SPARK_CLUSTER: "Spark cluster (master and two workers)",
}


def _merge(into: stack.StackAddresses, found: stack.StackAddresses) -> stack.StackAddresses:
    updates: dict[str, Any] = {
        "s3_endpoint": found.s3_endpoint or into.s3_endpoint,
        "rest_uri": found.rest_uri or into.rest_uri,
        "spark_master": found.spark_master or into.spark_master,
        "spark_master_ui": found.spark_master_ui or into.spark_master_ui,
    }
    return stack.StackAddresses(**updates)


def _print_hint(found: stack.StackAddresses) -> None:
    """On stderr: the config keys and credentials that point frazil at the started stack."""
    config = found.config()
    lines = ["config keys for these services:"]
    for key, value in config.items():
        inner = ", ".join(f"{k}: {_yaml_scalar(v)}" for k, v in value.items())
        lines.append(f"  {key}: {{{inner}}}")
    if "storage" in config:
        lines.append("  state_dir: s3a://frazil/state")
        env = " ".join(f"{k}={v}" for k, v in found.aws_environment().items())
        lines.append("the object store's local-only credentials, from the environment:")
        lines.append(f"  export {env}")
    if found.spark_master_ui is not None:
        lines.append(f"Spark master web UI: {found.spark_master_ui}")
    err_console.print("\n".join(lines), highlight=False, soft_wrap=True)


def _yaml_scalar(value: Any) -> str:
    return "true" if value is True else "false" if value is False else str(value)


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
    broker = _broker(state_dir, port, controller_port)
    with err_console.status("Stopping the local Kafka broker..."):
        stopped = broker.down(timeout=timeout)
    cluster = _cluster(state_dir)
    if cluster is not None:
        with err_console.status("Stopping the local Kafka cluster..."):
            if cluster.down(timeout=timeout):
                err_console.print(f"Kafka cluster ({len(cluster.nodes)} nodes) stopped")
                stopped = True
    if _registry(state_dir, registry_port).down(timeout=timeout):
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
        with err_console.status(f"Stopping the local {_LABELS[name]}..."):
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
    """Show whether the broker and each other local service runs, its address, pid and data."""
    st = _broker(state_dir, port, controller_port).status()
    cluster = _cluster(state_dir)
    cluster_status = cluster.status() if cluster is not None else None
    registry = _registry(state_dir, registry_port).status()
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
