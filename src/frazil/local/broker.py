"""A real Apache Kafka 4.x broker for local development, run as a detached JVM.

The broker runs in KRaft mode as a single combined broker+controller node, listens on
127.0.0.1 only and keeps everything under ``<state_dir>/kafka/``:

* ``data/``: the log dir (topics and the metadata log),
* ``server.properties`` and ``log4j2.xml``: rewritten on every start (the properties are
  private to the user: they hold the SASL passwords when a SASL listener is configured),
* ``broker.log``: the JVM's stdout/stderr,
* ``broker.pid``: pid and addresses of the running broker.

The process is detached (own session), so it outlives the CLI command that started it.

Besides its PLAINTEXT client listener the broker can serve an extra ``SASL_PLAINTEXT``
listener (mechanism PLAIN, users and passwords given to :class:`LocalBroker`), for testing
clients that authenticate. With ``secure_ports`` it also serves a ``SASL_SSL`` listener
(SCRAM-SHA-512) and an mTLS one, with TLS from a CA frazil generates
(:mod:`frazil.local.secure`). Inter-broker and controller traffic always stays PLAINTEXT.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from frazil.errors import ServiceError
from frazil.jvm.fetch import java_executable, kafka_classpath
from frazil.local.properties import escape_property
from frazil.local.secure import SecureListeners
from frazil.paths import locked
from frazil.procs import pid_alive

_LOG_TAIL_LINES = 40
# broker.log is appended to by the JVM and cannot roll itself; rotate it between runs.
_LOG_ROTATE_BYTES = 16 * 1024 * 1024
_POLL_INTERVAL_S = 0.1

# Name of the optional SASL listener; Kafka lower-cases it in per-listener config keys.
_SASL_LISTENER = "SASL_PLAINTEXT"
# Kafka's per-listener, per-mechanism JAAS setting (``listener.name.{listener}.{mechanism}.
# sasl.jaas.config``): a broker-level property, so no JAAS file or JVM flag is needed.
_SASL_JAAS_KEY = f"listener.name.{_SASL_LISTENER.lower()}.plain.sasl.jaas.config"
# User names become JAAS option keys (``user_<name>``), which cannot be quoted; Kafka 4.1's
# JAAS parser ends such a key at anything but letters, digits and ``._-$`` (checked).
_SASL_USER_NAME = re.compile(r"[A-Za-z0-9._-]+")

# Children started by this Python process, kept so they can be reaped (no zombies, no
# "subprocess still running" warnings) when this process stops them.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}

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


@dataclasses.dataclass(frozen=True)
class _Running:
    """The running broker, as recorded in its pid file."""

    pid: int
    bootstrap: str
    sasl_bootstrap: str | None
    secure_bootstraps: tuple[str, str] | None = None


class LocalBroker:
    """A single-node Kafka broker (KRaft, broker+controller) under ``state_dir/kafka``.

    Args:
        state_dir: frazil's state folder; the broker uses its ``kafka`` subfolder.
        host: Interface to listen on (keep it local).
        port: Client (PLAINTEXT) port.
        controller_port: KRaft controller port.
        heap: JVM maximum heap (``-Xmx``).
        sasl_port: If given, the broker also serves clients on this port with protocol
            ``SASL_PLAINTEXT`` and SASL mechanism ``PLAIN``.
        sasl_users: The users the SASL listener accepts (user name -> password); required
            with ``sasl_port``. Names are limited to letters, digits and ``._-``.
        secure_ports: If given, ``(SASL_SSL port, mTLS port)``: the broker also serves a
            ``SASL_SSL`` listener (SCRAM-SHA-512, its user created with the admin API) and an
            ``SSL`` one that requires a client certificate, with TLS from a CA generated
            under ``kafka/secure`` (see :mod:`frazil.local.secure`).

    Raises:
        ValueError: If only one of ``sasl_port`` and ``sasl_users`` is given, no user is
            given, a user name is not allowed, or two ports are the same.
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
        self.state_dir = Path(state_dir).resolve()
        self.host = host
        self.port = port
        self.controller_port = controller_port
        self.heap = heap
        self.sasl_port = sasl_port
        # A private copy: later changes to the caller's mapping must not change the config.
        self.sasl_users: dict[str, str] | None = (
            dict(sasl_users) if sasl_users is not None else None
        )
        self.kafka_dir = self.state_dir / "kafka"
        self.data_dir = self.kafka_dir / "data"
        self.config_file = self.kafka_dir / "server.properties"
        self.log4j_file = self.kafka_dir / "log4j2.xml"
        self.log_file = self.kafka_dir / "broker.log"
        self.pid_file = self.kafka_dir / "broker.pid"
        self.secure: SecureListeners | None = (
            SecureListeners(self.kafka_dir, host, *secure_ports) if secure_ports else None
        )

    @property
    def secure_bootstraps(self) -> tuple[str, str] | None:
        """``(SASL_SSL, mTLS)`` addresses, or None without ``secure_ports``."""
        if self.secure is None:
            return None
        return (self.secure.sasl_ssl_bootstrap, self.secure.mtls_bootstrap)

    @property
    def bootstrap(self) -> str:
        """The ``host:port`` this broker is configured to serve clients on."""
        return f"{self.host}:{self.port}"

    @property
    def sasl_bootstrap(self) -> str | None:
        """The ``host:port`` of the SASL listener, or None if this broker has none."""
        return f"{self.host}:{self.sasl_port}" if self.sasl_port is not None else None

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
        self.kafka_dir.mkdir(parents=True, exist_ok=True)
        with self._locked():
            pid, log_offset, started = self._launch()
            try:
                self._wait_ready(pid, deadline, log_offset)
                if self.secure is not None:
                    credentials = self.secure.credentials()
                    assert credentials is not None  # written before the config
                    self.secure.create_user(
                        self.bootstrap, credentials, max(deadline - time.monotonic(), 10.0)
                    )
            except BaseException:
                if started:
                    self._stop(pid, timeout=10)
                raise
            return self.bootstrap

    def _launch(self) -> tuple[int, int | None, bool]:
        """Start the broker unless it runs already (call with :meth:`_locked` held).

        Returns:
            Its pid, the log offset its start's output begins at (None if it already ran),
            and whether this call started it.
        """
        running = self._running()
        if running is not None:
            if (running.bootstrap, running.sasl_bootstrap, running.secure_bootstraps) != (
                self.bootstrap,
                self.sasl_bootstrap,
                self.secure_bootstraps,
            ):
                sasl = f" and {running.sasl_bootstrap} (SASL)" if running.sasl_bootstrap else ""
                if running.secure_bootstraps:
                    sasl += " and {} (SASL_SSL), {} (mTLS)".format(*running.secure_bootstraps)
                raise ServiceError(
                    f"the local Kafka broker in {self.kafka_dir} is already running at "
                    f"{running.bootstrap}{sasl} (pid {running.pid}); stop it "
                    "(`frazil local down --only kafka`) to change its listeners"
                )
            if not self._runs_our_sasl_users():
                raise ServiceError(
                    f"the local Kafka broker in {self.kafka_dir} is already running "
                    f"(pid {running.pid}) with other SASL users or passwords; stop it "
                    "(`frazil local down --only kafka`) to change them"
                )
            return running.pid, None, False
        self.pid_file.unlink(missing_ok=True)
        ports = [self.port, self.controller_port]
        if self.sasl_port is not None:
            ports.append(self.sasl_port)
        if self.secure is not None:
            ports += self.secure.ports()
        for port in ports:
            if _port_taken(self.host, port):
                raise ServiceError(
                    f"cannot start the local Kafka broker: {self.host}:{port} is already in "
                    "use (another broker? pick other ports with --port/--controller-port)"
                )
        classpath = os.pathsep.join(str(p) for p in kafka_classpath())
        java = java_executable()
        self._write_config()
        self._rotate_log()
        if not (self.data_dir / "meta.properties").is_file():
            self._format(java, classpath)
        pid, log_offset = self._spawn(java, classpath)
        return pid, log_offset, True

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
        running = self._running()
        if running is None:
            raise ServiceError(f"the local Kafka broker in {self.kafka_dir} is not running")
        self._wait_ready(running.pid, time.monotonic() + timeout, None, running)
        return running.bootstrap

    def down(self, timeout: float = 30) -> bool:
        """Stop the broker: SIGTERM, wait for a clean exit, SIGKILL after ``timeout``.

        Returns:
            Whether a running broker was stopped (False if none was running).
        """
        if not self.kafka_dir.is_dir():
            return False
        with self._locked():
            running = self._running()
            if running is None:
                self.pid_file.unlink(missing_ok=True)
                return False
            self._stop(running.pid, timeout)
            return True

    def status(self) -> BrokerStatus:
        """Report whether the broker runs, where, and how much data it holds."""
        running = self._running()
        secure = running.secure_bootstraps if running else self.secure_bootstraps
        return BrokerStatus(
            running=running is not None,
            pid=running.pid if running else None,
            bootstrap=running.bootstrap if running else self._last_bootstrap(),
            state_dir=self.state_dir,
            formatted=(self.data_dir / "meta.properties").is_file(),
            data_bytes=_tree_size(self.data_dir),
            log_file=self.log_file,
            sasl_bootstrap=running.sasl_bootstrap if running else self.sasl_bootstrap,
            sasl_ssl_bootstrap=secure[0] if secure else None,
            mtls_bootstrap=secure[1] if secure else None,
        )

    def _last_bootstrap(self) -> str:
        """Where the stopped broker listened when it last ran (its config file, written at
        each start), else where this one would listen."""
        try:
            for line in self.config_file.read_text().splitlines():
                if line.startswith("listeners="):
                    for listener in line.split("=", 1)[1].split(","):
                        if listener.startswith("PLAINTEXT://"):
                            return listener[len("PLAINTEXT://") :]
        except OSError:
            pass
        return self.bootstrap

    # -- process handling -------------------------------------------------------------

    def _running(self) -> _Running | None:
        """The live broker recorded in the pid file, else None."""
        try:
            info = json.loads(self.pid_file.read_text())
            pid, bootstrap = int(info["pid"]), str(info["bootstrap"])
            # Absent from pid files written before SASL listeners existed: no SASL.
            sasl = info.get("sasl_bootstrap")
            sasl_bootstrap = str(sasl) if sasl is not None else None
            sasl_ssl, mtls = info.get("sasl_ssl_bootstrap"), info.get("mtls_bootstrap")
            secure = (str(sasl_ssl), str(mtls)) if sasl_ssl and mtls else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if not self._is_our_broker(pid):
            return None
        return _Running(pid, bootstrap, sasl_bootstrap, secure)

    def _runs_our_sasl_users(self) -> bool:
        """Whether the running broker's config has exactly our SASL users and passwords.

        The config file is only rewritten when the broker starts, so it shows what the
        running broker uses. Only called once the listeners matched, so both or neither
        have a SASL listener.
        """
        if self.sasl_users is None:
            return True
        try:
            lines = self.config_file.read_text().splitlines()
        except OSError:
            return False
        return self._sasl_jaas_line() in lines

    def _is_our_broker(self, pid: int) -> bool:
        child = _CHILDREN.get(pid)
        if child is not None:
            return child.poll() is None
        # A pid can be reused after a reboot or crash: only trust it if that process is
        # a Kafka JVM started on our config file.
        proc_dir = Path(f"/proc/{pid}")
        try:
            cmdline = (proc_dir / "cmdline").read_bytes()
            stat = (proc_dir / "stat").read_text()
        except FileNotFoundError:
            return False
        except OSError:
            return pid_alive(pid)
        if stat.rpartition(")")[2].split()[:1] == ["Z"]:
            return False  # exited, not yet reaped by its parent
        if not cmdline:
            # Briefly empty while the process execs; only a zombie stays that way.
            return True
        args = cmdline.split(b"\0")
        return b"kafka.Kafka" in args and str(self.config_file).encode() in args

    def _spawn(self, java: str, classpath: str) -> tuple[int, int]:
        cmd = [
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
            str(self.config_file),
        ]
        with self.log_file.open("ab") as log:
            log.write(f"\n=== frazil: starting Kafka broker at {time.ctime()} ===\n".encode())
            log.flush()
            log_offset = log.tell()
            proc = subprocess.Popen(
                cmd,
                cwd=self.kafka_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _CHILDREN[proc.pid] = proc
        secure: tuple[str | None, str | None] = self.secure_bootstraps or (None, None)
        self.pid_file.write_text(
            json.dumps(
                {
                    "pid": proc.pid,
                    "bootstrap": self.bootstrap,
                    "port": self.port,
                    "controller_port": self.controller_port,
                    "sasl_port": self.sasl_port,
                    "sasl_bootstrap": self.sasl_bootstrap,
                    "sasl_ssl_bootstrap": secure[0],
                    "mtls_bootstrap": secure[1],
                }
            )
        )
        return proc.pid, log_offset

    def _wait_ready(
        self,
        pid: int,
        deadline: float,
        log_offset: int | None,
        running: _Running | None = None,
    ) -> None:
        # Asked where this broker is configured to listen, or where the running one does.
        bootstrap = running.bootstrap if running is not None else self.bootstrap
        sasl = running.sasl_bootstrap if running is not None else self.sasl_bootstrap
        host, _, port = bootstrap.rpartition(":")
        admin = None
        while True:
            if not self._is_our_broker(pid):
                code = _reap(pid)
                exit_note = f" with exit code {code}" if code is not None else ""
                raise ServiceError(
                    f"the local Kafka broker (pid {pid}) exited{exit_note} while starting; "
                    f"last lines of {self.log_file}:\n{self._log_tail(log_offset)}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServiceError(
                    f"the local Kafka broker (pid {pid}) did not answer at {bootstrap} "
                    f"in time; last lines of {self.log_file}:\n{self._log_tail(log_offset)}"
                )
            # Only talk Kafka once the port accepts connections: librdkafka prints every
            # refused connection to stderr. Readiness is always asked on the PLAINTEXT
            # listener (no credentials needed); the SASL one only has to accept connections.
            if _port_open(host, int(port)):
                if admin is None:
                    admin = _admin_client(bootstrap)
                if _answers_metadata(admin, min(remaining, 2.0)) and (
                    sasl is None or _port_open(*_host_port(sasl))
                ):
                    return
            time.sleep(_POLL_INTERVAL_S)

    def _stop(self, pid: int, timeout: float) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not self._wait_exit(pid, timeout):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            if not self._wait_exit(pid, 10):
                raise ServiceError(f"the local Kafka broker (pid {pid}) did not stop")
        self.pid_file.unlink(missing_ok=True)

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        proc = _CHILDREN.get(pid)
        if proc is not None:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return False
            _CHILDREN.pop(pid, None)
            return True
        deadline = time.monotonic() + timeout
        while self._is_our_broker(pid):
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_INTERVAL_S)
        return True

    # -- files ------------------------------------------------------------------------

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        # Serializes up/down of one state dir across processes (two CLIs, a test run).
        return locked(self.kafka_dir / ".lock")

    def _write_config(self) -> None:
        self.log4j_file.write_text(_LOG4J2_XML)
        _write_private(self.config_file, self._server_properties())

    def _server_properties(self) -> str:
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
        settings = self._quorum_settings(settings)
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

    def _quorum_settings(self, settings: dict[str, str]) -> dict[str, str]:
        """The settings of this node's place in the quorum (one node here; see
        :class:`_ClusterNode`)."""
        return settings

    def _format_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments naming the cluster and its controllers."""
        return ["--cluster-id", _new_cluster_id(), "--standalone"]

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

    def _format(self, java: str, classpath: str) -> None:
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
            str(self.config_file),
            *self._format_arguments(),
        ]
        proc = subprocess.run(
            cmd,
            cwd=self.kafka_dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
            check=False,
        )
        with self.log_file.open("ab") as log:
            log.write(f"\n=== frazil: formatting storage at {time.ctime()} ===\n".encode())
            log.write(proc.stdout)
        if proc.returncode != 0:
            tail = "\n".join(proc.stdout.decode(errors="replace").splitlines()[-_LOG_TAIL_LINES:])
            raise ServiceError(
                f"formatting the local Kafka broker's storage in {self.data_dir} failed "
                f"(exit code {proc.returncode}):\n{tail}"
            )

    def _rotate_log(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            if self.log_file.stat().st_size > _LOG_ROTATE_BYTES:
                os.replace(self.log_file, self.log_file.with_name(self.log_file.name + ".1"))

    def _log_tail(self, offset: int | None) -> str:
        try:
            with self.log_file.open("rb") as log:
                if offset is not None:
                    log.seek(offset)
                text = log.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        lines = text.splitlines()[-_LOG_TAIL_LINES:]
        return "\n".join(lines) if lines else "(log is empty)"


def _new_cluster_id() -> str:
    # Same format and rules as Kafka's Uuid.randomUuid() (what `kafka-storage random-uuid`
    # prints): 16 random bytes, URL-safe base64 without padding, never the reserved zero
    # or metadata-topic ids, never starting with "-" (it would look like a CLI flag).
    reserved = {bytes(16), bytes(15) + b"\x01"}
    while True:
        raw = secrets.token_bytes(16)
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if raw not in reserved and not text.startswith("-"):
            return text


def _jaas_quote(value: str) -> str:
    """Escape a value for a double-quoted JAAS option (Java's StreamTokenizer rules)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable by its owner only (it may hold passwords)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        # The mode of open() only applies to new files; tighten an older one too.
        os.fchmod(handle.fileno(), 0o600)
        handle.write(text)


def _admin_client(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _answers_metadata(admin: Any, timeout: float) -> bool:
    from confluent_kafka import KafkaException

    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return bool(metadata.brokers)


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Same option Kafka binds with, so sockets lingering in TIME_WAIT do not count.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def _reap(pid: int) -> int | None:
    """Collect the exit code of a child this process started, if it is one."""
    proc = _CHILDREN.pop(pid, None)
    if proc is None:
        return None
    try:
        return proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return None


def _tree_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            # Allocated blocks, not st_size: Kafka preallocates sparse 10 MiB index files.
            with contextlib.suppress(OSError):
                total += (Path(root) / name).stat().st_blocks * 512
    return total
