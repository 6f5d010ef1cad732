"""What a local Kafka node is configured with, and the files that say so.

A :class:`BrokerConfig` is one KRaft node that is broker and controller at once: its
listeners (PLAINTEXT, the controller's, an optional ``SASL_PLAINTEXT`` one with mechanism
PLAIN and the ``--secure`` ones of :mod:`frazil.local.secure`), its users, its JVM command
line and its folder's files:

* ``server.properties`` and ``log4j2.xml``: rewritten on every start (the properties are
  private to the user: they hold the SASL passwords when a SASL listener is configured),
* ``data/``: the log dir (topics and the metadata log), formatted with Kafka's storage tool
  on first use.

Inter-broker and controller traffic always stays PLAINTEXT. A node alone is its own quorum
(``--standalone``); the nodes of :mod:`frazil.local.broker_cluster` are voters of a static
quorum of several (:class:`Quorum`).
"""

from __future__ import annotations

import base64
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from frazil.errors import ServiceError
from frazil.local.host import write_private
from frazil.local.properties import escape_property
from frazil.local.secure import SecureListeners

_FORMAT_TAIL_LINES = 40

# Name of the optional SASL listener; Kafka lower-cases it in per-listener config keys.
_SASL_LISTENER = "SASL_PLAINTEXT"
# Kafka's per-listener, per-mechanism JAAS setting (``listener.name.{listener}.{mechanism}.
# sasl.jaas.config``): a broker-level property, so no JAAS file or JVM flag is needed.
_SASL_JAAS_KEY = f"listener.name.{_SASL_LISTENER.lower()}.plain.sasl.jaas.config"
# User names become JAAS option keys (``user_<name>``), which cannot be quoted; Kafka 4.1's
# JAAS parser ends such a key at anything but letters, digits and ``._-$`` (checked).
_SASL_USER_NAME = re.compile(r"[A-Za-z0-9._-]+")

_LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by frazil on every broker start; edits are overwritten. -->
<!-- No log4j shutdown hook: Kafka logs its own shutdown, which the hook would cut off. -->
<Configuration status="WARN" shutdownHook="disable">
  <Appenders>
    <Console name="STDOUT" target="SYSTEM_OUT">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="STDOUT"/></Root>
    <!-- The full config dump on every start and per-request logs drown what matters. -->
    <Logger name="org.apache.kafka.common.config.AbstractConfig" level="WARN"/>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="state.change.logger" level="WARN"/>
  </Loggers>
</Configuration>
"""


class Quorum(Protocol):
    """A node's place in a KRaft quorum of several nodes."""

    def settings(self, settings: dict[str, str]) -> dict[str, str]:
        """The node's ``server.properties`` settings, changed for its place in the quorum."""
        ...

    def format_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments naming the cluster and its controllers."""
        ...


class BrokerConfig:
    """One KRaft node (broker and controller) configured to live in ``folder``.

    Args:
        folder: The node's folder.
        host: Interface to listen on (keep it local).
        port: Client (PLAINTEXT) port.
        controller_port: KRaft controller port.
        heap: JVM maximum heap (``-Xmx``).
        sasl_port: If given, the node also serves clients on this port with protocol
            ``SASL_PLAINTEXT`` and SASL mechanism ``PLAIN``.
        sasl_users: The users the SASL listener accepts (user name -> password); required
            with ``sasl_port``. Names are limited to letters, digits and ``._-``.
        secure_ports: If given, ``(SASL_SSL port, mTLS port)`` of the listeners of
            :class:`~frazil.local.secure.SecureListeners`, with their files in ``folder``.
        quorum: Its place in a quorum of several nodes; None: it is the quorum alone.

    Raises:
        ValueError: If only one of ``sasl_port`` and ``sasl_users`` is given, no user is
            given, a user name is not allowed, or two ports are the same.
    """

    def __init__(
        self,
        folder: Path,
        host: str,
        port: int,
        controller_port: int,
        heap: str,
        sasl_port: int | None = None,
        sasl_users: Mapping[str, str] | None = None,
        secure_ports: tuple[int, int] | None = None,
        quorum: Quorum | None = None,
    ) -> None:
        if (sasl_port is None) != (sasl_users is None):
            raise ValueError("sasl_port and sasl_users must be given together")
        if sasl_users is not None:
            if not sasl_users:
                raise ValueError("sasl_users must name at least one user")
            for name in sasl_users:
                if not _SASL_USER_NAME.fullmatch(name):
                    raise ValueError(
                        f"SASL user name {name!r} is not allowed: use letters, digits and ._-"
                    )
        ports = [port, controller_port] + ([sasl_port] if sasl_port is not None else [])
        ports += list(secure_ports or ())
        if len(set(ports)) != len(ports):
            raise ValueError(f"the broker's ports must differ, got {ports}")
        self.folder = folder
        self.host = host
        self.port = port
        self.controller_port = controller_port
        self.heap = heap
        self.sasl_port = sasl_port
        # A private copy: later changes to the caller's mapping must not change the config.
        self.sasl_users: dict[str, str] | None = (
            dict(sasl_users) if sasl_users is not None else None
        )
        self.quorum = quorum
        self.data_dir = folder / "data"
        self.file = folder / "server.properties"
        self.log4j_file = folder / "log4j2.xml"
        self.secure: SecureListeners | None = (
            SecureListeners(folder, host, *secure_ports) if secure_ports else None
        )

    @property
    def bootstrap(self) -> str:
        """The ``host:port`` of the PLAINTEXT listener."""
        return f"{self.host}:{self.port}"

    @property
    def sasl_bootstrap(self) -> str | None:
        """The ``host:port`` of the SASL listener, or None without one."""
        return f"{self.host}:{self.sasl_port}" if self.sasl_port is not None else None

    @property
    def secure_bootstraps(self) -> tuple[str, str] | None:
        """``(SASL_SSL, mTLS)`` addresses, or None without ``secure_ports``."""
        if self.secure is None:
            return None
        return (self.secure.sasl_ssl_bootstrap, self.secure.mtls_bootstrap)

    @property
    def formatted(self) -> bool:
        """Whether the storage was formatted (the node ran at least once)."""
        return (self.data_dir / "meta.properties").is_file()

    def ports(self) -> list[int]:
        """Every port the node listens on."""
        ports = [self.port, self.controller_port]
        if self.sasl_port is not None:
            ports.append(self.sasl_port)
        return ports + (self.secure.ports() if self.secure is not None else [])

    def command(self, java: str, classpath: str) -> list[str]:
        """The command line of the node's JVM."""
        return [
            java,
            f"-Xmx{self.heap}",
            # Kafka's own launcher defaults (kafka-run-class.sh).
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log4j_file}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(self.file),
        ]

    def write(self) -> None:
        """Write ``log4j2.xml`` and ``server.properties`` (owner only)."""
        self.log4j_file.write_text(_LOG4J2_XML)
        write_private(self.file, self.server_properties())

    def server_properties(self) -> str:
        """The text of ``server.properties`` (for ``--secure``, also makes its CA and keys)."""
        client = f"{self.host}:{self.port}"
        controller = f"{self.host}:{self.controller_port}"
        listeners = f"PLAINTEXT://{client},CONTROLLER://{controller}"
        protocols = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
        if self.sasl_port is not None:
            listeners += f",{_SASL_LISTENER}://{self.host}:{self.sasl_port}"
            protocols += f",{_SASL_LISTENER}:SASL_PLAINTEXT"
        if self.secure is not None:
            for name, address, protocol in self.secure.listeners():
                listeners += f",{name}://{address}"
                protocols += f",{name}:{protocol}"
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": controller,
            "listeners": listeners,
            # Each listener advertises itself, so a client bootstrapped on the SASL port
            # gets the SASL port back in metadata.
            "advertised.listeners": listeners,
            "listener.security.protocol.map": protocols,
            # Replication and controller traffic stay PLAINTEXT, so the broker itself never
            # needs SASL credentials.
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": escape_property(str(self.data_dir)),
            # One node: every internal topic must make do with one replica.
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "default.replication.factor": "1",
            # Fewer internal partitions: the first consumer group or transaction creates
            # them all, which takes seconds at Kafka's default of 50.
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            # After a crash or SIGKILL the restarted broker waits for the controller to
            # expire its previous session; the default (9 s) makes that restart slow.
            "broker.heartbeat.interval.ms": "1000",
            "broker.session.timeout.ms": "6000",
            # Consumers in tests and demos should not wait 3 s for a first rebalance.
            "group.initial.rebalance.delay.ms": "0",
            "num.partitions": "1",
            # auto.create.topics.enable stays at Kafka's default (true).
            # Bounded disk use: a week or 1 GiB per partition, whichever comes first.
            "log.retention.hours": "168",
            "log.retention.bytes": str(1024**3),
            "log.segment.bytes": str(128 * 1024**2),
            # Sized for a laptop, not a server.
            "num.network.threads": "2",
            "num.io.threads": "4",
        }
        if self.quorum is not None:
            settings = self.quorum.settings(settings)
        lines = ["# Written by frazil on every broker start; edits are overwritten."]
        lines += [f"{key}={value}" for key, value in settings.items()]
        if self.sasl_users is not None:
            lines += [
                # Only PLAIN; Kafka's default (GSSAPI) would need Kerberos.
                "sasl.enabled.mechanisms=PLAIN",
                self._sasl_jaas_line(),
            ]
        if self.secure is not None:
            # Credentials and certificates first: the config names their files.
            lines += self.secure.server_properties(self.secure.prepare())
        return "\n".join(lines) + "\n"

    def format_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments naming the cluster and its controllers."""
        if self.quorum is not None:
            return self.quorum.format_arguments()
        return ["--cluster-id", new_cluster_id(), "--standalone"]

    def format_storage(self, java: str, classpath: str, log_file: Path) -> None:
        """Format the data folder with Kafka's storage tool (after :meth:`write`).

        Args:
            java: The ``java`` launcher.
            classpath: Kafka's classpath.
            log_file: The node's log, which gets the tool's output.

        Raises:
            ServiceError: If the tool fails (with the last lines of its output).
        """
        # No meta.properties means no usable data: clear leftovers of a failed format.
        shutil.rmtree(self.data_dir, ignore_errors=True)
        cmd = [
            java,
            f"-Dlog4j2.configurationFile={self.log4j_file}",
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            "--config",
            str(self.file),
            *self.format_arguments(),
        ]
        proc = subprocess.run(
            cmd,
            cwd=self.folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
            check=False,
        )
        with log_file.open("ab") as log:
            log.write(f"\n=== frazil: formatting storage at {time.ctime()} ===\n".encode())
            log.write(proc.stdout)
        if proc.returncode != 0:
            lines = proc.stdout.decode(errors="replace").splitlines()[-_FORMAT_TAIL_LINES:]
            raise ServiceError(
                f"formatting the local Kafka broker's storage in {self.data_dir} failed "
                f"(exit code {proc.returncode}):\n" + "\n".join(lines)
            )

    def written_users_match(self) -> bool:
        """Whether the ``server.properties`` on disk has exactly these SASL users and
        passwords (always, without a SASL listener).

        The file is only rewritten when the node starts, so it shows what a running node
        uses.
        """
        if self.sasl_users is None:
            return True
        try:
            lines = self.file.read_text().splitlines()
        except OSError:
            return False
        return self._sasl_jaas_line() in lines

    def written_bootstrap(self) -> str:
        """Where the PLAINTEXT listener of the ``server.properties`` on disk is (where the
        node listened when it last ran), else :attr:`bootstrap`."""
        try:
            for line in self.file.read_text().splitlines():
                if line.startswith("listeners="):
                    for listener in line.split("=", 1)[1].split(","):
                        if listener.startswith("PLAINTEXT://"):
                            return listener[len("PLAINTEXT://") :]
        except OSError:
            pass
        return self.bootstrap

    def _sasl_jaas_line(self) -> str:
        """The ``server.properties`` line that holds the SASL users and passwords."""
        assert self.sasl_users is not None
        # PlainLoginModule's server side accepts each ``user_<name>="<password>"`` option;
        # no username/password options, as the broker never logs in over SASL itself.
        users = " ".join(
            f'user_{name}="{_jaas_quote(password)}"' for name, password in self.sasl_users.items()
        )
        jaas = f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
        return f"{_SASL_JAAS_KEY}={escape_property(jaas)}"


def new_cluster_id() -> str:
    """A new KRaft cluster id, as ``kafka-storage random-uuid`` prints one."""
    # Same format and rules as Kafka's Uuid.randomUuid(): 16 random bytes, URL-safe base64
    # without padding, never the reserved zero or metadata-topic ids, never starting with
    # "-" (it would look like a CLI flag).
    reserved = {bytes(16), bytes(15) + b"\x01"}
    while True:
        raw = secrets.token_bytes(16)
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if raw not in reserved and not text.startswith("-"):
            return text


def _jaas_quote(value: str) -> str:
    """Escape a value for a double-quoted JAAS option (Java's StreamTokenizer rules)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
