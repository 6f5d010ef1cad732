"""The local production-shaped stack: object store, REST catalog and Spark cluster together.

Real servers as local processes, no containers: ``frazil local up --with
s3,rest-catalog,spark-cluster`` and the integration tests' ``stack`` fixture both go through
:func:`up`, :func:`down` and :func:`status`. The services:

* ``s3``: s3proxy on its filesystem backend (:mod:`frazil.local.object_store`),
* ``rest-catalog``: Iceberg's REST catalog server, warehouse on that store
  (:mod:`frazil.local.rest_catalog`); it needs ``s3``, which :func:`resolve_services` adds,
* ``spark-cluster``: a standalone master and two workers (:mod:`frazil.local.spark_cluster`).

Each lives in its own folder of the state dir and records its address in a pid file, so
:func:`down` and :func:`status` find whatever runs there whatever ports it was started on.
Data (objects, the catalog's SQLite file) stays across ``down``/``up``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from frazil.errors import ServiceError
from frazil.local import object_store, rest_catalog, spark_cluster
from frazil.local.object_store import LocalObjectStore, ObjectStoreStatus
from frazil.local.rest_catalog import LocalRestCatalog, RestCatalogStatus
from frazil.local.spark_cluster import LocalSparkCluster, SparkClusterStatus

S3 = "s3"
REST_CATALOG = "rest-catalog"
SPARK_CLUSTER = "spark-cluster"
#: Every stack service, in start order.
SERVICES: tuple[str, ...] = (S3, REST_CATALOG, SPARK_CLUSTER)
#: What each service needs running first.
REQUIRES: dict[str, tuple[str, ...]] = {REST_CATALOG: (S3,)}


@dataclasses.dataclass(frozen=True)
class StackPorts:
    """Ports of the stack's services on 127.0.0.1 (the defaults are the documented ones)."""

    s3: int = object_store.DEFAULT_PORT
    rest_catalog: int = rest_catalog.DEFAULT_PORT
    spark_master: int = spark_cluster.DEFAULT_MASTER_PORT
    spark_master_ui: int = spark_cluster.DEFAULT_MASTER_UI_PORT
    spark_worker_uis: tuple[int, ...] = spark_cluster.DEFAULT_WORKER_UI_PORTS


@dataclasses.dataclass(frozen=True)
class StackAddresses:
    """Where the started services answer, and what clients need to use them.

    An address is None when its service was not asked for.

    Attributes:
        s3_endpoint: The object store's endpoint (``http://127.0.0.1:9000``).
        rest_uri: The REST catalog's URI (``http://127.0.0.1:8181``).
        spark_master: The Spark master URL (``spark://127.0.0.1:7077``).
        spark_master_ui: The master's web UI (its JSON at ``<ui>/json/``).
        access_key: The object store's access key (``AWS_ACCESS_KEY_ID``).
        secret_key: The object store's secret key (``AWS_SECRET_ACCESS_KEY``).
        region: The region to sign for (``AWS_REGION``).
        bucket: The bucket created at start.
        warehouse: The REST catalog's warehouse.
    """

    s3_endpoint: str | None = None
    rest_uri: str | None = None
    spark_master: str | None = None
    spark_master_ui: str | None = None
    access_key: str = object_store.ACCESS_KEY
    secret_key: str = object_store.SECRET_KEY
    region: str = object_store.REGION
    bucket: str = object_store.BUCKET
    warehouse: str = rest_catalog.WAREHOUSE

    def addresses(self) -> list[str]:
        """The started services' addresses, in start order (what ``local up`` prints)."""
        found = (self.s3_endpoint, self.rest_uri, self.spark_master)
        return [a for a in found if a is not None]

    def aws_environment(self) -> dict[str, str]:
        """The ``AWS_*`` variables that give frazil and Spark the store's credentials."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
        }

    def config(self) -> dict[str, Any]:
        """The frazil config keys that point a pipeline at the started services."""
        data: dict[str, Any] = {}
        if self.spark_master is not None:
            data["spark"] = {"master": self.spark_master}
        if self.rest_uri is not None:
            data["catalog"] = {"type": "rest", "uri": self.rest_uri, "warehouse": self.warehouse}
        if self.s3_endpoint is not None:
            data["storage"] = {
                "endpoint": self.s3_endpoint,
                "path_style": True,
                "region": self.region,
            }
        return data

    def pyiceberg_properties(self) -> dict[str, str]:
        """Properties for PyIceberg's REST catalog (``load_catalog(name, **props)``).

        Raises:
            ServiceError: If the REST catalog or object store was not started.
        """
        if self.rest_uri is None or self.s3_endpoint is None:
            raise ServiceError("the REST catalog and the object store are not both running")
        return {
            "type": "rest",
            "uri": self.rest_uri,
            "warehouse": self.warehouse,
            "s3.endpoint": self.s3_endpoint,
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.region": self.region,
            "s3.path-style-access": "true",
        }


@dataclasses.dataclass(frozen=True)
class StackStatus:
    """Each stack service's status (:func:`status`)."""

    s3: ObjectStoreStatus
    rest_catalog: RestCatalogStatus
    spark_cluster: SparkClusterStatus

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view, keyed by service name."""
        return {
            S3: self.s3.as_dict(),
            REST_CATALOG: self.rest_catalog.as_dict(),
            SPARK_CLUSTER: self.spark_cluster.as_dict(),
        }

    def running(self) -> dict[str, str]:
        """The running services' addresses by name, in start order (the Spark cluster's is
        its master's URL)."""
        found = {
            S3: self.s3.endpoint if self.s3.running else None,
            REST_CATALOG: self.rest_catalog.uri if self.rest_catalog.running else None,
            SPARK_CLUSTER: self.spark_cluster.master_url if self.spark_cluster.running else None,
        }
        return {name: address for name, address in found.items() if address is not None}


def resolve_services(requested: Iterable[str]) -> tuple[list[str], list[str]]:
    """Split comma-separated names, check them, add what they need, order them.

    Args:
        requested: Service names; each item may hold several, comma-separated
            (``["s3,rest-catalog", "spark-cluster"]``). Blanks are ignored.

    Returns:
        ``(services, added)``: every service to start, in start order, and those added only
        because another needs them.

    Raises:
        ValueError: If a name is not a stack service.
    """
    names = [n.strip() for item in requested for n in item.split(",") if n.strip()]
    unknown = [n for n in names if n not in SERVICES]
    if unknown:
        raise ValueError(f"unknown service {unknown[0]!r}: choose from {', '.join(SERVICES)}")
    wanted = set(names)
    added = {dep for n in names for dep in REQUIRES.get(n, ()) if dep not in wanted}
    wanted |= added
    return [s for s in SERVICES if s in wanted], [s for s in SERVICES if s in added]


def running_ports(status: StackStatus, ports: StackPorts, fixed: Iterable[str] = ()) -> StackPorts:
    """``ports`` with the running services' own ports in place of the asked ones.

    So that starting a service next to running ones reuses them where they run, and one that
    needs another (the REST catalog, the object store) finds it: a service is only moved by
    ``down`` and ``up`` again. A stopped object store that a running REST catalog still
    points at is given the port that catalog expects.

    Args:
        status: What runs now (:func:`status`).
        ports: The ports asked for (the defaults unless given).
        fixed: Services whose ports were asked for explicitly: those are kept as asked (and
            ``up`` then fails if the service runs elsewhere).

    Returns:
        The ports to start (or check) each service on.
    """
    keep = set(fixed)
    updates: dict[str, Any] = {}
    s3, rest, spark = status.s3, status.rest_catalog, status.spark_cluster
    if S3 not in keep:
        if s3.running:
            updates["s3"] = _port(s3.endpoint, ports.s3)
        elif rest.running and rest.s3_endpoint:
            updates["s3"] = _port(rest.s3_endpoint, ports.s3)
    if REST_CATALOG not in keep and rest.running:
        updates["rest_catalog"] = _port(rest.uri, ports.rest_catalog)
    if SPARK_CLUSTER not in keep:
        if spark.running:
            updates["spark_master"] = _port(spark.master_url, ports.spark_master)
            updates["spark_master_ui"] = _port(spark.master_ui, ports.spark_master_ui)
        workers = list(ports.spark_worker_uis)
        for n, worker in enumerate(spark.workers[: len(workers)]):
            if worker.get("pid"):
                workers[n] = _port(str(worker["ui"]), workers[n])
        updates["spark_worker_uis"] = tuple(workers)
    return dataclasses.replace(ports, **updates)


def _port(address: str, default: int) -> int:
    """The port of ``http://host:port`` or ``spark://host:port`` (``default`` if none)."""
    tail = address.rstrip("/").rpartition(":")[2]
    return int(tail) if tail.isdigit() else default


def up(
    state_dir: Path,
    services: Iterable[str],
    ports: StackPorts | None = None,
    timeout: float = 120,
) -> StackAddresses:
    """Start the given services (and what they need) and wait until each answers.

    Idempotent for services already running on the same ports. If a service fails, the ones
    this call started before it keep running (``down`` stops them).

    Args:
        state_dir: frazil's state folder (each service uses a subfolder).
        services: Names from :data:`SERVICES` (comma-separated items allowed).
        ports: Their ports; the documented defaults if None.
        timeout: Seconds each service may take to answer.

    Returns:
        The started services' addresses and the store's credentials.

    Raises:
        ValueError: If a service name is unknown.
        ServiceError: If a service cannot start or does not answer in time (the message
            names it, its address and its log file).
        ArtifactError: If a server's jars cannot be fetched or Java is missing.
    """
    ports = ports or StackPorts()
    names, _added = resolve_services(services)
    found: dict[str, str] = {}
    if S3 in names:
        found["s3_endpoint"] = LocalObjectStore(state_dir, ports.s3).up(timeout)
    if REST_CATALOG in names:
        found["rest_uri"] = LocalRestCatalog(state_dir, ports.rest_catalog).up(
            found["s3_endpoint"], timeout
        )
    if SPARK_CLUSTER in names:
        cluster = _cluster(state_dir, ports)
        found["spark_master"] = cluster.up(timeout)
        found["spark_master_ui"] = cluster.master_ui
    return StackAddresses(**found)


def down(state_dir: Path, timeout: float = 30, services: Iterable[str] | None = None) -> list[str]:
    """Stop the stack services running in ``state_dir`` (whatever their ports); data is kept.

    Stops the Spark cluster first, the object store last (the catalog writes to it). Stops
    only what it is told to: a REST catalog is not stopped with the object store it uses
    (``frazil local down --only`` checks that first).

    Args:
        state_dir: frazil's state folder.
        timeout: Seconds each process may take to exit before it is killed.
        services: Names from :data:`SERVICES`; every stack service if None.

    Returns:
        The names of the services that were running, in the order they were stopped.

    Raises:
        ValueError: If a service name is unknown.
    """
    names = set(SERVICES if services is None else services)
    unknown = sorted(names - set(SERVICES))
    if unknown:
        raise ValueError(f"unknown service {unknown[0]!r}: choose from {', '.join(SERVICES)}")
    stopped: list[str] = []
    if SPARK_CLUSTER in names and _cluster(state_dir, StackPorts()).down(timeout):
        stopped.append(SPARK_CLUSTER)
    if REST_CATALOG in names and LocalRestCatalog(state_dir).down(timeout):
        stopped.append(REST_CATALOG)
    if S3 in names and LocalObjectStore(state_dir).down(timeout):
        stopped.append(S3)
    return stopped


def status(state_dir: Path) -> StackStatus:
    """Each stack service's status in ``state_dir`` (running ones show their real address)."""
    return StackStatus(
        s3=LocalObjectStore(state_dir).status(),
        rest_catalog=LocalRestCatalog(state_dir).status(),
        spark_cluster=_cluster(state_dir, StackPorts()).status(),
    )


def _cluster(state_dir: Path, ports: StackPorts) -> LocalSparkCluster:
    return LocalSparkCluster(
        state_dir,
        master_port=ports.spark_master,
        master_ui_port=ports.spark_master_ui,
        worker_ui_ports=ports.spark_worker_uis,
    )
