"""A local Schema Registry: Apicurio Registry (from Maven Central) with its Confluent API.

``frazil local up --with schema-registry`` and the tests run it as a detached JVM on
127.0.0.1. Confluent's clients and serializers talk to it at
``http://127.0.0.1:<port>/apis/ccompat/v7``. Everything lives under
``<state_dir>/schema-registry/``:

* ``data/``: the schemas (an H2 database file). Kept across restarts, like the broker's
  topics: records in the topics name their schema by id, and an in-memory registry would
  hand the same ids to other schemas after a restart.
* ``registry.log`` and ``registry.pid``: its log and the record of the running process, as
  every local service has them (:mod:`frazil.local.daemon`).

Apicurio differs from Confluent's registry in a few ways that matter to clients: it keeps
a schema in the form it was registered (confluent-kafka's ProtobufSerializer registers base64
``FileDescriptorProto`` bytes, not ``.proto`` text) and ignores ``?format=serialized``; its
default compatibility level is ``NONE`` (Confluent's is ``BACKWARD``). See
``tests/integration/test_local_registry.py``, which pins these down.

The first start of a given Java runtime and Apicurio jar also writes a class-data-sharing
archive when the registry stops (:func:`frazil.local.cds.cds_archive`); later starts map
it and answer in about half the time. ``FRAZIL_CDS=0`` starts without it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from frazil.errors import ServiceError
from frazil.jvm.apps import ensure_app
from frazil.jvm.fetch import java_executable
from frazil.jvm.pins import SCHEMA_REGISTRY_APP
from frazil.local.cds import cds_archive, cds_options
from frazil.local.daemon import Daemon
from frazil.local.host import http_get, tree_size
from frazil.local.pid_record import LegacyPidFile

#: The Confluent-compatible API's path under the registry's root.
CCOMPAT_PATH = "/apis/ccompat/v7"

_NAME = "the local schema registry"
_PORT_HINT = "pick another port with --registry-port"
# On the command line so that a pid file without a start time (written before the registry
# ran as a Daemon) can still be told from an unrelated process that got the same pid later:
# Quarkus ignores unknown system properties.
_MARKER_PROPERTY = "frazil.registry.dir"


@dataclasses.dataclass(frozen=True)
class RegistryStatus:
    """What :meth:`LocalRegistry.status` reports.

    Attributes:
        running: Whether the registry process is alive.
        url: The Confluent-compatible API's URL (of the running registry, if any).
        pid: Its process id, if running.
        registry_dir: The folder the registry lives in.
        data_bytes: Disk space used by the stored schemas.
        log_file: The registry's log.
    """

    running: bool
    url: str
    pid: int | None
    registry_dir: Path
    data_bytes: int
    log_file: Path

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view (paths as strings)."""
        data = dataclasses.asdict(self)
        data["registry_dir"] = str(self.registry_dir)
        data["log_file"] = str(self.log_file)
        return data


def ccompat_url(host: str, port: int) -> str:
    """The Confluent-compatible API's URL of a registry on ``host:port``."""
    return f"http://{host}:{port}{CCOMPAT_PATH}"


class LocalRegistry:
    """One Apicurio Registry process whose files live in ``<state_dir>/schema-registry``.

    Args:
        state_dir: frazil's state folder; the registry uses its ``schema-registry`` subfolder.
        host: Interface to listen on (keep it local: the registry has no authentication).
        port: HTTP port.
        heap: JVM maximum heap (``-Xmx``).

    Raises:
        ValueError: If ``port`` is not a TCP port.
    """

    def __init__(
        self,
        state_dir: Path,
        host: str = "127.0.0.1",
        port: int = 8081,
        heap: str = "256m",
    ) -> None:
        if not 0 < port < 65536:
            raise ValueError(f"the registry's port must be within 1..65535, got {port}")
        self.state_dir = Path(state_dir).resolve()
        self.host = host
        self.port = port
        self.heap = heap
        self.registry_dir = self.state_dir / "schema-registry"
        self.data_dir = self.registry_dir / "data"
        marker = f"-D{_MARKER_PROPERTY}={self.registry_dir}"
        legacy = LegacyPidFile("url", (marker,), ("cds_partial",))
        self.daemon = Daemon(
            _NAME, self.registry_dir, "registry", service="schema-registry", legacy=legacy
        )
        self.log_file = self.daemon.log_file

    @property
    def url(self) -> str:
        """The Confluent-compatible API's URL (what the config's ``schema_registry.url`` takes)."""
        return ccompat_url(self.host, self.port)

    def up(self, timeout: float = 120) -> str:
        """Start the registry unless it is running; return its URL once its API answers.

        The first call fetches Apicurio with Maven (not counted in ``timeout``).

        Args:
            timeout: Seconds to wait for the API to answer.

        Returns:
            The Confluent-compatible API's URL.

        Raises:
            ServiceError: If it already runs on another port, the port is taken, or the
                registry exits or does not answer in time (the message has its log's tail).
            ArtifactError: If Apicurio cannot be fetched or Java is missing.
        """
        with self.daemon.locked():
            command: list[str] = []
            partial = None
            if self.daemon.running() is None:
                # Before fetching Apicurio: a taken port fails at once.
                self.daemon.check_ports(self.url, [self.port], _PORT_HINT)
                jar = ensure_app(SCHEMA_REGISTRY_APP)
                java = java_executable()
                self.data_dir.mkdir(exist_ok=True)
                options, partial = cds_options(cds_archive("apicurio-registry", java, [jar]))
                command = self.command(java, jar, options)
            self.daemon.start(
                command,
                address=self.url,
                ports=[self.port],
                healthy=self._answers,
                timeout=timeout,
                port_hint=_PORT_HINT,
                cds_partial=partial,
            )
        return self.url

    def down(self, timeout: float = 30) -> bool:
        """Stop the registry: SIGTERM, wait for a clean exit, SIGKILL after ``timeout``.

        Its schemas are kept for the next start.

        Returns:
            Whether a running registry was stopped (False if none was running).

        Raises:
            ServiceError: If the process does not go away even after SIGKILL.
        """
        return self.daemon.down(timeout)

    def status(self) -> RegistryStatus:
        """Report whether the registry runs, where, and how much data it holds."""
        running = self.daemon.running()
        return RegistryStatus(
            running=running is not None,
            url=running.address if running else self.url,
            pid=running.pid if running else None,
            registry_dir=self.registry_dir,
            data_bytes=tree_size(self.data_dir),
            log_file=self.log_file,
        )

    def command(self, java: str, jar: Path, cds_options: list[str]) -> list[str]:
        """The command line that runs the registry (no side effects; public for tests).

        Args:
            java: The ``java`` launcher.
            jar: Apicurio's runner jar.
            cds_options: JVM options for class-data sharing (see
                :func:`~frazil.local.cds.cds_options`).

        Raises:
            ServiceError: If the data folder's path cannot be put in an H2 database URL.
        """
        # H2 reads ';' in its URL as the start of a setting.
        if ";" in str(self.data_dir):
            raise ServiceError(
                f"the local schema registry cannot keep its data in {self.data_dir}: the "
                "path holds ';'; pick another state folder (--state-dir)"
            )
        settings = {
            _MARKER_PROPERTY: str(self.registry_dir),
            "quarkus.http.host": self.host,
            "quarkus.http.port": str(self.port),
            # Schemas on disk in the state folder (see the module docstring); Apicurio's
            # default is an H2 database in memory.
            "apicurio.datasource.url": f"jdbc:h2:file:{self.data_dir / 'registry'}",
            # Apicurio opens 20 database connections up front; one is plenty here.
            "apicurio.datasource.jdbc.initial-size": "1",
            "apicurio.datasource.jdbc.min-size": "1",
            # Compare schemas by their canonical form, as Confluent's registry does: the same
            # schema formatted differently gets the same id instead of a new version.
            "apicurio.ccompat.use-canonical-hash": "true",
            # No line per request (access and audit logs, storage metrics at INFO): keep
            # warnings, errors and Quarkus's own start/stop lines.
            "quarkus.http.access-log.enabled": "false",
            'quarkus.log.category."io.apicurio".level': "WARN",
            'quarkus.log.category."io.quarkus".level': "INFO",
        }
        return [
            java,
            f"-Xmx{self.heap}",
            # A small service on a shared machine: one GC thread, and C1 only (it starts
            # faster and is plenty for a development registry).
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            *cds_options,
            *(f"-D{key}={value}" for key, value in settings.items()),
            "-jar",
            str(jar),
        ]

    def _answers(self, timeout: float) -> bool:
        """Whether the Confluent API lists its subjects."""
        answer = http_get(f"{self.url}/subjects", timeout)
        return answer is not None and answer[0] == 200
