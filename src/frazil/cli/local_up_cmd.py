"""``frazil local up``: the local Kafka broker (or a cluster), and on demand the schema
registry and the production-shaped stack (object store, REST catalog, Spark cluster)."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Annotated, Any

import typer

from frazil import paths
from frazil.cli.app import console, err_console
from frazil.cli.local_app import (
    DEFAULT_WORKER_UI_PORTS,
    LABELS,
    ControllerPort,
    Port,
    RegistryPort,
    RestPort,
    S3Port,
    SecurePorts,
    Service,
    SparkPort,
    SparkUiPort,
    SparkWorkerUiPorts,
    StateDir,
    checked_names,
    local_app,
)
from frazil.local import stack
from frazil.local.broker import LocalBroker
from frazil.local.broker_cluster import LocalKafkaCluster, cluster_ports
from frazil.local.registry import LocalRegistry
from frazil.local.secure import SecureListeners, settings_hint

_KAFKA_OPTIONS = ("port", "controller_port", "brokers", "secure", "secure_ports")
_STACK_OPTIONS = {
    stack.S3: ("s3_port",),
    stack.REST_CATALOG: ("rest_port",),
    stack.SPARK_CLUSTER: ("spark_port", "spark_ui_port", "spark_worker_ui_ports"),
}


def _services(values: list[str] | None) -> list[Service]:
    """The --with values, each possibly comma-separated, checked and de-duplicated."""
    known = {s.value: s for s in Service}
    return [known[n] for n in checked_names(values, list(known), "--with")]


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
    spark_worker_ui_ports: SparkWorkerUiPorts = DEFAULT_WORKER_UI_PORTS,
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
        with err_console.status(f"{what} the local {LABELS[name]}..."):
            found = _merge(found, stack.up(state_dir, [name], ports, timeout))
        if name in running:
            err_console.print(f"{name} already running at {running[name]}", highlight=False)
    for address in found.addresses():
        console.print(address, highlight=False)
    _print_hint(found)


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
