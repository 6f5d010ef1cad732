"""A local Iceberg REST catalog: the Iceberg project's own ``RESTCatalogServer``.

``frazil local up --with rest-catalog`` runs the server from Iceberg's ``iceberg-open-api``
test-fixtures jar (the one Iceberg's REST compatibility kit runs against) as a detached
JVM, port 8181 by default. It serves the REST spec (``/v1/config``, namespaces, tables,
the multi-table ``/v1/{prefix}/transactions/commit``) in front of a JDBC catalog:

* the catalog's tables (names -> current metadata file) are in a SQLite file,
  ``<state_dir>/rest-catalog/catalog.db``, kept across restarts;
* table data and metadata go to the warehouse ``s3://frazil/warehouse`` on the local object
  store (:mod:`frazil.local.object_store`) through Iceberg's S3FileIO, path-style, with the
  store's local credentials.

The server reads its catalog properties from ``CATALOG_*`` environment variables (Iceberg's
``RCKUtils.environmentCatalogConfig``: the prefix dropped, ``__`` -> ``-``, ``_`` -> ``.``,
lower-cased), so the secret never shows on a command line. It is started through a small
launcher (:mod:`frazil.local.rest_launcher`) that listens on 127.0.0.1 only: Iceberg's own
``main`` binds every interface.

Clients (PyIceberg, Spark's ``RESTCatalog``) need the object store's endpoint and
credentials themselves: this server vends none.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from frazil.errors import ServiceError
from frazil.jvm.fetch import java_executable, rest_catalog_classpath
from frazil.local import object_store
from frazil.local.cds import cds_archive, cds_options
from frazil.local.daemon import Daemon
from frazil.local.host import http_get
from frazil.local.rest_launcher import MAIN_CLASS, launcher_jar

DEFAULT_PORT = 8181
#: Where the catalog keeps table data and metadata (a bucket of the local object store).
WAREHOUSE = f"s3://{object_store.BUCKET}/warehouse"
_HEAP = "256m"
_NAME = "the local REST catalog (Iceberg RESTCatalogServer)"


@dataclasses.dataclass(frozen=True)
class RestCatalogStatus:
    """What :meth:`LocalRestCatalog.status` reports.

    Attributes:
        running: Whether the server runs.
        uri: Its URI (of the running one, if any).
        pid: Its process id, if running.
        warehouse: The warehouse location.
        s3_endpoint: The object store it writes to (of the running one, if any).
        database: The SQLite file holding the catalog.
        log_file: Its log.
    """

    running: bool
    uri: str
    pid: int | None
    warehouse: str
    s3_endpoint: str | None
    database: Path
    log_file: Path

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view (paths as strings)."""
        data = dataclasses.asdict(self)
        data["database"] = str(self.database)
        data["log_file"] = str(self.log_file)
        return data


class LocalRestCatalog:
    """Iceberg's REST catalog server under ``state_dir/rest-catalog``.

    Args:
        state_dir: frazil's state folder; the catalog uses its ``rest-catalog`` subfolder.
        port: HTTP port.
    """

    def __init__(self, state_dir: Path, port: int = DEFAULT_PORT) -> None:
        self.state_dir = Path(state_dir).resolve()
        self.port = port
        self.catalog_dir = self.state_dir / "rest-catalog"
        self.database = self.catalog_dir / "catalog.db"
        self.daemon = Daemon(_NAME, self.catalog_dir, "rest-catalog", service="rest-catalog")

    @property
    def uri(self) -> str:
        """The catalog URI this server is configured to serve on."""
        return f"http://127.0.0.1:{self.port}"

    def up(self, s3_endpoint: str, timeout: float = 60) -> str:
        """Start the server (fetching its jars on first use) and wait until it answers.

        Idempotent: if it runs already on this port, only checks that it answers.

        Args:
            s3_endpoint: The local object store's endpoint (must be running).
            timeout: Seconds to wait for ``GET /v1/config``.

        Returns:
            The catalog URI.

        Raises:
            ServiceError: If it runs on another port or against another object store, the
                port is in use, or it exits or does not answer within ``timeout`` seconds
                (the message names its log).
            ArtifactError: If its jars cannot be fetched or Java is missing.
        """
        with self.daemon.locked():
            command: list[str] = []
            partial = None
            current = self.daemon.running()
            if current is not None and current.info.get("s3_endpoint") != s3_endpoint:
                raise ServiceError(
                    f"{_NAME} is already running at {current.address} (pid {current.pid}) "
                    f"against the object store at {current.info.get('s3_endpoint')}, not "
                    f"{s3_endpoint}; stop it (`{self.daemon.down_command}`) first"
                )
            if current is None:
                java, jars = java_executable(), rest_catalog_classpath()
                jars = [launcher_jar(jars), *jars]
                cds, partial = cds_options(cds_archive("rest-catalog", java, jars))
                command = [
                    java,
                    f"-Xmx{_HEAP}",
                    "-XX:+UseSerialGC",
                    "-XX:+ExitOnOutOfMemoryError",
                    # Short-lived requests on a small machine: C1 only starts faster.
                    "-XX:TieredStopAtLevel=1",
                    *cds,
                    "-cp",
                    ":".join(str(p) for p in jars),
                    MAIN_CLASS,
                ]
            self.daemon.start(
                command,
                address=self.uri,
                ports=[self.port],
                healthy=self._answers,
                timeout=timeout,
                env=catalog_environment(self.port, self.database, s3_endpoint),
                info={"s3_endpoint": s3_endpoint, "warehouse": WAREHOUSE},
                port_hint="pick another with --rest-port",
                cds_partial=partial,
            )
        return self.uri

    def down(self, timeout: float = 30) -> bool:
        """Stop the server (the catalog and its tables are kept). Whether one was running."""
        return self.daemon.down(timeout)

    def status(self) -> RestCatalogStatus:
        """Whether it runs, where, and what it is backed by."""
        running = self.daemon.running()
        endpoint = running.info.get("s3_endpoint") if running else None
        return RestCatalogStatus(
            running=running is not None,
            uri=running.address if running else self.uri,
            pid=running.pid if running else None,
            warehouse=WAREHOUSE,
            s3_endpoint=str(endpoint) if endpoint else None,
            database=self.database,
            log_file=self.daemon.log_file,
        )

    def _answers(self, timeout: float) -> bool:
        answer = http_get(f"{self.uri}/v1/config", timeout)
        if answer is None or answer[0] != 200:
            return False
        try:
            return isinstance(json.loads(answer[1]), dict)
        except ValueError:
            return False


def catalog_properties(port: int, database: Path, s3_endpoint: str) -> dict[str, str]:
    """The server's catalog properties: JDBC on SQLite, warehouse on the local store."""
    return {
        # Read by frazil's launcher (frazil.local.rest_launcher), not by Iceberg's main.
        "rest.host": "127.0.0.1",
        "rest.port": str(port),
        "catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        "uri": f"jdbc:sqlite:{database}",
        # V1 keeps views too; the server defaults to it, said here so it stays so.
        "jdbc.schema-version": "V1",
        "warehouse": WAREHOUSE,
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "s3.endpoint": s3_endpoint,
        "s3.path-style-access": "true",
        "s3.access-key-id": object_store.ACCESS_KEY,
        "s3.secret-access-key": object_store.SECRET_KEY,
        "client.region": object_store.REGION,
    }


def catalog_environment(port: int, database: Path, s3_endpoint: str) -> Mapping[str, str]:
    """:func:`catalog_properties` as the ``CATALOG_*`` variables the server reads."""
    return {
        property_to_env(key): value
        for key, value in catalog_properties(port, database, s3_endpoint).items()
    }


def property_to_env(key: str) -> str:
    """The ``CATALOG_*`` variable that ``RESTCatalogServer`` turns into property ``key``.

    The inverse of Iceberg's mapping (``CATALOG_`` dropped, ``__`` -> ``-``, ``_`` -> ``.``,
    lower-cased): ``s3.path-style-access`` -> ``CATALOG_S3_PATH__STYLE__ACCESS``.

    Raises:
        ValueError: If ``key`` has an ``_`` or upper-case letters (no variable maps to it).
    """
    if "_" in key or key != key.lower():
        raise ValueError(f"no CATALOG_* variable maps to property {key!r}")
    return "CATALOG_" + key.replace("-", "__").replace(".", "_").upper()
