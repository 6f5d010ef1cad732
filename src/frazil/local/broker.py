"""A real Apache Kafka 4.x broker for local development, run as a detached JVM.

The broker runs in KRaft mode as a single combined broker+controller node, listens on
127.0.0.1 only and keeps everything under ``<state_dir>/kafka/``: its configuration and
data (:mod:`frazil.local.broker_config`) and, as every local service
(:mod:`frazil.local.daemon`), ``broker.log`` (the JVM's stdout/stderr) and ``broker.pid``
(pid, start time and addresses of the running broker).

Besides its PLAINTEXT client listener the broker can serve an extra ``SASL_PLAINTEXT``
listener (mechanism PLAIN, users and passwords given to :class:`LocalBroker`), for testing
clients that authenticate. With ``secure_ports`` it also serves a ``SASL_SSL`` listener
(SCRAM-SHA-512) and an mTLS one, with TLS from a CA frazil generates
(:mod:`frazil.local.secure`).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from frazil.errors import ServiceError
from frazil.jvm.fetch import java_executable, kafka_classpath
from frazil.local.broker_config import BrokerConfig, Quorum
from frazil.local.daemon import Daemon, Launched
from frazil.local.host import tree_size
from frazil.local.pid_record import LegacyPidFile, Running

_NAME = "the local Kafka broker"
_PORT_HINT = "another broker? pick other ports with --port/--controller-port"
# The other listeners a running broker records (Running.info), under the keys that pid
# files from before the broker ran as a Daemon have too, so LegacyPidFile copies them as
# they are.
_EXTRA = ("sasl_bootstrap", "sasl_ssl_bootstrap", "mtls_bootstrap")


@dataclasses.dataclass(frozen=True)
class BrokerStatus:
    """What :meth:`LocalBroker.status` reports.

    Attributes:
        running: Whether the broker process is alive.
        pid: Its process id, if running.
        bootstrap: ``host:port`` clients connect to (of the running broker, if any).
        state_dir: The frazil state folder the broker lives in.
        formatted: Whether the storage was formatted (the broker ran at least once).
        data_bytes: Disk space used by the broker's data folder.
        log_file: The broker's log.
        sasl_bootstrap: ``host:port`` of the SASL listener (of the running broker, if any),
            or None if there is none.
        sasl_ssl_bootstrap: ``host:port`` of the SASL_SSL (SCRAM) listener, if any.
        mtls_bootstrap: ``host:port`` of the mTLS listener, if any.
    """

    running: bool
    pid: int | None
    bootstrap: str
    state_dir: Path
    formatted: bool
    data_bytes: int
    log_file: Path
    sasl_bootstrap: str | None = None
    sasl_ssl_bootstrap: str | None = None
    mtls_bootstrap: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view (paths as strings)."""
        data = dataclasses.asdict(self)
        data["state_dir"] = str(self.state_dir)
        data["log_file"] = str(self.log_file)
        return data


class LocalBroker:
    """A Kafka broker (KRaft, broker+controller) under ``state_dir/kafka``.

    Its configuration is a :class:`~frazil.local.broker_config.BrokerConfig`, its process a
    :class:`~frazil.local.daemon.Daemon`.

    Args:
        state_dir: frazil's state folder; the broker uses its ``kafka`` subfolder.
        host: Interface to listen on (keep it local).
        port: Client (PLAINTEXT) port.
        controller_port: KRaft controller port.
        heap: JVM maximum heap (``-Xmx``).
        sasl_port: If given, also serve ``SASL_PLAINTEXT`` (mechanism ``PLAIN``) there.
        sasl_users: The users the SASL listener accepts (user name -> password).
        secure_ports: If given, ``(SASL_SSL port, mTLS port)``: also serve a ``SASL_SSL``
            listener (SCRAM-SHA-512, its user created with the admin API) and an ``SSL`` one
            that requires a client certificate, with TLS from a CA generated under
            ``kafka/secure`` (see :mod:`frazil.local.secure`).
        folder: Its folder, if not ``state_dir/kafka`` (a node of a cluster).
        quorum: Its place in a quorum of several nodes (a node of a cluster).

    Raises:
        ValueError: If the listeners or users are not valid (see ``BrokerConfig``).
    """

    def __init__(
        self,
        state_dir: Path,
        host: str = "127.0.0.1",
        port: int = 9092,
        controller_port: int = 9093,
        heap: str = "512m",
        sasl_port: int | None = None,
        sasl_users: Mapping[str, str] | None = None,
        secure_ports: tuple[int, int] | None = None,
        *,
        folder: Path | None = None,
        quorum: Quorum | None = None,
    ) -> None:
        self.state_dir = Path(state_dir).resolve()
        self.kafka_dir = folder or self.state_dir / "kafka"
        self.config = BrokerConfig(
            self.kafka_dir,
            host,
            port,
            controller_port,
            heap,
            sasl_port,
            sasl_users,
            secure_ports,
            quorum=quorum,
        )
        self.secure = self.config.secure
        # A pid file of a broker started before it ran as a Daemon: its process is a Kafka
        # JVM on this folder's config file.
        legacy = LegacyPidFile("bootstrap", ("kafka.Kafka", str(self.config.file)), _EXTRA)
        self.daemon = Daemon(_NAME, self.kafka_dir, "broker", service="kafka", legacy=legacy)
        self.log_file = self.daemon.log_file

    @property
    def bootstrap(self) -> str:
        """The ``host:port`` this broker is configured to serve clients on."""
        return self.config.bootstrap

    @property
    def sasl_bootstrap(self) -> str | None:
        """The ``host:port`` of the SASL listener, or None if this broker has none."""
        return self.config.sasl_bootstrap

    def up(self, timeout: float = 60) -> str:
        """Start the broker (formatting its storage on first use) and wait until it answers.

        Idempotent: if this broker is already running, only checks that it answers.

        Args:
            timeout: Seconds to wait for the broker to answer a metadata request.

        Returns:
            The bootstrap address ``host:port``.

        Raises:
            ServiceError: If it is already running on other ports or with other SASL users,
                a port is taken, or the broker exits or does not answer in time (the message
                has its log's tail).
            ArtifactError: If the Kafka jars cannot be fetched or Java is missing.
        """
        deadline = time.monotonic() + timeout
        with self.daemon.locked():
            launched = self.launch()
            with self.daemon.rollback(launched):
                self.wait(launched, timeout, deadline)
                if self.secure is not None:
                    credentials = self.secure.credentials()
                    assert credentials is not None  # written before the config
                    self.secure.create_user(
                        self.bootstrap, credentials, max(deadline - time.monotonic(), 10.0)
                    )
            return self.bootstrap

    def launch(self) -> Launched:
        """Start the broker unless it runs already; do not wait (call with the daemon's lock
        held).

        Returns:
            The process, and whether this call started it.

        Raises:
            ServiceError: If it runs with other listeners or users, or a port is taken.
            ArtifactError: If the Kafka jars cannot be fetched or Java is missing.
        """
        running = self.daemon.running()
        command: list[str] = []
        if running is not None:
            self._refuse_another(running)
        else:
            # Before writing the config or formatting (seconds of a JVM): fail fast.
            self.daemon.check_ports(self.bootstrap, self.config.ports(), _PORT_HINT)
            command = self._command()
        secure = self.config.secure_bootstraps or (None, None)
        extra = dict(zip(_EXTRA, (self.sasl_bootstrap, *secure), strict=True))
        return self.daemon.launch(
            command,
            address=self.bootstrap,
            ports=self.config.ports(),
            info={key: value for key, value in extra.items() if value is not None},
            port_hint=_PORT_HINT,
        )

    def wait(self, launched: Launched, timeout: float, deadline: float | None = None) -> None:
        """Wait until the broker answers on its listeners.

        Args:
            launched: The broker's process (from :meth:`launch`).
            timeout: Seconds to wait (named in the message).
            deadline: When to give up, if earlier work counts against ``timeout``.

        Raises:
            ServiceError: If it exits or does not answer in time (see :meth:`Daemon.wait`).
        """
        bootstrap, sasl, _secure = _listeners(launched.running)
        self.daemon.wait(launched, _answers(bootstrap, sasl), timeout, deadline)

    def wait_running(self, timeout: float = 60) -> str:
        """Wait until the broker running in this state dir answers, wherever it listens.

        Starts and changes nothing (``frazil local up`` next to a broker started earlier,
        perhaps on other ports, or by another command that has not seen it answer yet).

        Returns:
            Its bootstrap address ``host:port``.

        Raises:
            ServiceError: If no broker runs here, or it exits or does not answer within
                ``timeout`` seconds.
        """
        running = self.daemon.running()
        if running is None:
            raise ServiceError(f"the local Kafka broker in {self.kafka_dir} is not running")
        self.wait(Launched(running), timeout)
        return running.address

    def down(self, timeout: float = 30) -> bool:
        """Stop the broker: SIGTERM, wait for a clean exit, SIGKILL after ``timeout``.

        Returns:
            Whether a running broker was stopped (False if none was running).
        """
        return self.daemon.down(timeout)

    def status(self) -> BrokerStatus:
        """Report whether the broker runs, where, and how much data it holds."""
        running = self.daemon.running()
        if running is not None:
            bootstrap, sasl, secure = _listeners(running)
        else:
            # Where it listened when it last ran, if it did.
            bootstrap, sasl = self.config.written_bootstrap(), self.sasl_bootstrap
            secure = self.config.secure_bootstraps
        return BrokerStatus(
            running=running is not None,
            pid=running.pid if running else None,
            bootstrap=bootstrap,
            state_dir=self.state_dir,
            formatted=self.config.formatted,
            data_bytes=tree_size(self.config.data_dir),
            log_file=self.log_file,
            sasl_bootstrap=sasl,
            sasl_ssl_bootstrap=secure[0] if secure else None,
            mtls_bootstrap=secure[1] if secure else None,
        )

    def _refuse_another(self, running: Running) -> None:
        """Fail unless the running broker has this one's listeners and SASL users."""
        bootstrap, sasl, secure = _listeners(running)
        if (bootstrap, sasl, secure) != (
            self.bootstrap,
            self.sasl_bootstrap,
            self.config.secure_bootstraps,
        ):
            others = f" and {sasl} (SASL)" if sasl else ""
            if secure:
                others += " and {} (SASL_SSL), {} (mTLS)".format(*secure)
            raise ServiceError(
                f"the local Kafka broker in {self.kafka_dir} is already running at "
                f"{bootstrap}{others} (pid {running.pid}); stop it "
                "(`frazil local down --only kafka`) to change its listeners"
            )
        if not self.config.written_users_match():
            raise ServiceError(
                f"the local Kafka broker in {self.kafka_dir} is already running "
                f"(pid {running.pid}) with other SASL users or passwords; stop it "
                "(`frazil local down --only kafka`) to change them"
            )

    def _command(self) -> list[str]:
        """Write the config, format the storage on first use; the JVM's command line."""
        classpath = os.pathsep.join(str(p) for p in kafka_classpath())
        java = java_executable()
        self.config.write()
        if not self.config.formatted:
            self.config.format_storage(java, classpath, self.log_file)
        return self.config.command(java, classpath)


def _listeners(running: Running) -> tuple[str, str | None, tuple[str, str] | None]:
    """A running broker's PLAINTEXT, SASL and ``(SASL_SSL, mTLS)`` addresses, as recorded."""
    sasl, sasl_ssl, mtls = (running.info.get(key) for key in _EXTRA)
    secure = (str(sasl_ssl), str(mtls)) if sasl_ssl and mtls else None
    return running.address, str(sasl) if sasl else None, secure


def _answers(bootstrap: str, sasl: str | None) -> Callable[[float], bool]:
    """Whether the broker answers a metadata request at ``bootstrap`` and its SASL listener
    (if any) accepts connections: a check for :meth:`Daemon.wait`."""
    admin = None

    def answers(timeout: float) -> bool:
        nonlocal admin
        # Only talk Kafka once the port accepts connections: librdkafka prints every
        # refused connection to stderr. Readiness is always asked on the PLAINTEXT listener
        # (no credentials needed); the SASL one only has to accept connections.
        if not _port_open(bootstrap):
            return False
        if admin is None:
            admin = admin_client(bootstrap)
        return broker_count(admin, timeout) > 0 and (sasl is None or _port_open(sasl))

    return answers


def admin_client(bootstrap: str) -> Any:
    """A librdkafka admin client of the brokers at ``bootstrap``."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def broker_count(admin: Any, timeout: float) -> int:
    """How many brokers a metadata request lists (0 if none answers in ``timeout`` s)."""
    from confluent_kafka import KafkaException

    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException:
        return 0
    return len(metadata.brokers)


def _port_open(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False
