"""One detached local server process: its pid file, log, health wait and stop.

Every service ``frazil local`` runs is one or more such processes, each run from its own
folder under the state dir: the Kafka broker (:mod:`frazil.local.broker`) or each node of a
cluster (:mod:`frazil.local.broker_cluster`), the schema registry
(:mod:`frazil.local.registry`), and the production-shaped stack (:mod:`frazil.local.stack`:
the object store, the REST catalog, the Spark master and workers). A folder holds:

* ``<stem>.log``: the process's stdout and stderr (rotated between runs when large),
* ``<stem>.pid``: JSON with its pid, start time, address and ports (see :class:`Running`),
* ``.lock``: serializes starts and stops of that folder across processes.

A process is recognized by its pid *and* its start time (:mod:`frazil.procs`), so a pid
that the kernel handed to another process later is never taken for the service. Pid files
written before a service ran this way hold no start time; :class:`LegacyPidFile` says how to
recognize their process by its command line instead. Processes run in their own session
(they outlive the command that started them) and are stopped with SIGTERM, then SIGKILL to
their whole process group after a bounded wait.

Every failure is a :class:`~frazil.errors.ServiceError` naming the service, its address and
its log file, with the log's last lines when the process stopped or never answered.

JVM services can start from a class-data-sharing archive (:func:`cds_archive`): the first
run of a given JVM and classpath writes one when it stops cleanly (``-XX:ArchiveClassesAtExit``),
later runs map it and start in about half the time on this 2-core machine. A run that fails
to start leaves none: it may have stopped before loading what a service needs. ``FRAZIL_CDS=0``
starts without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from frazil.errors import ServiceError
from frazil.jvm.cds import CDS_ENV
from frazil.paths import cache_dir, locked
from frazil.procs import cmdline_args, is_running, start_time

_POLL_INTERVAL_S = 0.2
_LOG_TAIL_LINES = 30
# The logs are appended to by the servers, which cannot roll them; rotate between runs.
_LOG_ROTATE_BYTES = 16 * 1024 * 1024

# Children started by this Python process, kept so they can be reaped (no zombies, no
# "subprocess still running" warnings) when this process stops them.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}

# A stale or unusable archive is skipped silently: the JVM then starts as without one.
_CDS_QUIET = ["-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
# Bumped when what an archive covers changes, so one made the old way is not used.
_CDS_LAYOUT = 1
# Archives of processes that never stopped cleanly are removed after this long.
_CDS_PARTIAL_MAX_AGE_S = 24 * 3600
_CDS_INFO_KEY = "cds_partial"

# No proxy: HTTP(S)_PROXY from the environment must not route requests to 127.0.0.1.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclasses.dataclass(frozen=True)
class Running:
    """A running service process, as its pid file records it.

    Attributes:
        pid: Its process id.
        started: Its start time (clock ticks since boot; with the pid, its identity).
        address: What clients use (a URL, a ``spark://`` address or Kafka's ``host:port``).
        ports: Every port it listens on that was chosen by frazil.
        info: Service-specific details (e.g. the object store a REST catalog uses).
    """

    pid: int
    started: int
    address: str
    ports: tuple[int, ...]
    info: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Launched:
    """What :meth:`Daemon.launch` found running or started.

    Attributes:
        running: The process.
        log_offset: Where the output of this start begins in the log; None when the process
            ran already (this call started nothing).
    """

    running: Running
    log_offset: int | None = None

    @property
    def fresh(self) -> bool:
        """Whether this call started the process."""
        return self.log_offset is not None


@dataclasses.dataclass(frozen=True)
class LegacyPidFile:
    """How to read a service's pid file written before it ran as a :class:`Daemon`.

    Such a file has a pid but no start time, and a pid alone may since have gone to another
    process: the process counts as the service only if its command line holds ``args``.

    Attributes:
        address: The key of the address clients use.
        args: Arguments only the service's command line holds (its main class, its folder).
        info: Keys copied into :attr:`Running.info` where the file has them.
    """

    address: str
    args: tuple[str, ...]
    info: tuple[str, ...] = ()

    def read(self, data: Mapping[str, Any]) -> Running | None:
        """The process such a file records, if it still runs and is the service."""
        pid = int(data["pid"])
        argv = cmdline_args(pid)
        started = start_time(pid)
        if started is None or not argv or any(arg not in argv for arg in self.args):
            return None
        info = {key: data[key] for key in self.info if data.get(key) is not None}
        return Running(pid, started, str(data[self.address]), (), info)


class Daemon:
    """One local server process living in ``directory``.

    Args:
        name: How messages name the service (``"the local object store (s3proxy)"``).
        directory: Its folder (created on start); holds the pid file and the log.
        stem: Base name of the pid and log files.
        service: The ``frazil local`` name of the service it belongs to (``s3``), for the
            command that stops it alone; empty for the plain ``frazil local down``.
        legacy: How to read a pid file of this service from before it ran as a Daemon, for
            a state dir whose service was started then; None if there never was one.
    """

    def __init__(
        self,
        name: str,
        directory: Path,
        stem: str,
        service: str = "",
        legacy: LegacyPidFile | None = None,
    ) -> None:
        self.name = name
        self.service = service
        self.directory = Path(directory)
        self.stem = stem
        self.legacy = legacy
        self.pid_file = self.directory / f"{stem}.pid"
        self.log_file = self.directory / f"{stem}.log"

    @property
    def down_command(self) -> str:
        """The command that stops this service (and, without a service name, the others)."""
        return f"frazil local down --only {self.service}" if self.service else "frazil local down"

    def running(self) -> Running | None:
        """The live process recorded in the pid file, else None."""
        try:
            data = json.loads(self.pid_file.read_text())
            recorded = self._record(data)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if recorded is None:
            return None
        child = _CHILDREN.get(recorded.pid)
        if child is not None and child.poll() is not None:
            _CHILDREN.pop(recorded.pid, None)
            return None
        if not is_running(recorded.pid, recorded.started):
            return None
        return recorded

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """Hold the folder's lock (starts and stops of one service never interleave)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        return locked(self.directory / ".lock")

    def start(
        self,
        command: Sequence[str],
        *,
        address: str,
        ports: Sequence[int],
        healthy: Callable[[float], bool],
        timeout: float,
        env: Mapping[str, str] | None = None,
        info: Mapping[str, Any] | None = None,
        port_hint: str = "",
        cds_partial: Path | None = None,
    ) -> Running:
        """Start the process unless it runs already, and wait until ``healthy`` says so.

        Call with :meth:`locked` held. :meth:`launch`, :meth:`wait` and :meth:`rollback` in
        one: a process this call started and that does not answer is stopped again.

        Args:
            command: The program and its arguments (only run when nothing runs yet).
            address: What clients use; recorded and named in messages.
            ports: Ports it will listen on on 127.0.0.1; each must be free.
            healthy: Called with the seconds left; True once the service answers.
            timeout: Seconds to wait for ``healthy`` before stopping it and failing.
            env: Extra environment variables for the process (on top of this one's).
            info: Service-specific details to record in the pid file.
            port_hint: Appended to the "port in use" message (which option picks another).
            cds_partial: Where ``command`` makes the JVM write a class-data archive at exit
                (:func:`cds_options`); installed when the process stops cleanly.

        Returns:
            The running process.

        Raises:
            ServiceError: If it already runs elsewhere, a port is in use, or it exits or does
                not answer within ``timeout`` (with its log's last lines).
        """
        deadline = time.monotonic() + timeout
        launched = self.launch(
            command,
            address=address,
            ports=ports,
            env=env,
            info=info,
            port_hint=port_hint,
            cds_partial=cds_partial,
        )
        with self.rollback(launched):
            self.wait(launched, healthy, timeout, deadline)
        return launched.running

    def launch(
        self,
        command: Sequence[str],
        *,
        address: str,
        ports: Sequence[int],
        env: Mapping[str, str] | None = None,
        info: Mapping[str, Any] | None = None,
        port_hint: str = "",
        cds_partial: Path | None = None,
    ) -> Launched:
        """Start the process unless it runs already; do not wait for it to answer.

        Call with :meth:`locked` held. The arguments are those of :meth:`start`.

        Returns:
            The process, and where the output of this start begins in its log.

        Raises:
            ServiceError: If it already runs at another address, a port is in use, or the
                program cannot be run.
        """
        current = self.running()
        if current is not None:
            if current.address != address:
                raise ServiceError(
                    f"{self.name} is already running at {current.address} (pid {current.pid}); "
                    f"stop it (`{self.down_command}`) to move it to {address}"
                )
            return Launched(current)
        self.pid_file.unlink(missing_ok=True)
        self.check_ports(address, ports, port_hint)
        self._rotate_log()
        with self.log_file.open("ab") as log:
            log.write(f"\n=== frazil: starting {self.name} at {time.ctime()} ===\n".encode())
            log.flush()
            log_offset = log.tell()
            try:
                proc = subprocess.Popen(
                    list(command),
                    cwd=self.directory,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env={**os.environ, **(env or {})},
                )
            except OSError as exc:
                raise ServiceError(
                    f"cannot start {self.name} at {address}: {command[0]}: {exc.strerror}"
                ) from None
        _CHILDREN[proc.pid] = proc
        started = start_time(proc.pid) or 0
        details = dict(info or {})
        if cds_partial is not None:
            details[_CDS_INFO_KEY] = str(cds_partial)
        running = Running(proc.pid, started, address, tuple(ports), details)
        self.pid_file.write_text(
            json.dumps(
                {
                    "pid": running.pid,
                    "started": running.started,
                    "address": running.address,
                    "ports": list(running.ports),
                    "info": dict(running.info),
                }
            )
        )
        return Launched(running, log_offset)

    def check_ports(self, address: str, ports: Sequence[int], port_hint: str = "") -> None:
        """Fail unless every port is free (:meth:`launch` checks; a service that prepares
        slowly before it launches checks first).

        Raises:
            ServiceError: Naming the first port in use, with ``port_hint`` and the log.
        """
        for port in ports:
            if port_taken("127.0.0.1", port):
                hint = f" ({port_hint})" if port_hint else ""
                raise ServiceError(
                    f"cannot start {self.name} at {address}: 127.0.0.1:{port} is already in "
                    f"use{hint}; its log: {self.log_file}"
                )

    def wait(
        self,
        launched: Launched,
        healthy: Callable[[float], bool],
        timeout: float,
        deadline: float | None = None,
    ) -> None:
        """Wait until ``healthy`` says the process answers.

        Args:
            launched: The process (from :meth:`launch`, or ``Launched(running)``).
            healthy: Called with the seconds left; True once the service answers.
            timeout: Seconds to wait (named in the message).
            deadline: When to give up (:func:`time.monotonic`), if earlier work counts
                against ``timeout``; else ``timeout`` from now.

        Raises:
            ServiceError: If the process exits or does not answer in time (with its log's
                last lines since this start); it is left as it is.
        """
        if deadline is None:
            deadline = time.monotonic() + timeout
        pid, address = launched.running.pid, launched.running.address
        while True:
            if not self._alive(pid):
                code = _reap(pid)
                exit_note = f" with exit code {code}" if code is not None else ""
                raise ServiceError(
                    f"{self.name} (pid {pid}) exited{exit_note} while starting at {address}; "
                    f"last lines of its log {self.log_file}:\n"
                    f"{self.log_tail(launched.log_offset)}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServiceError(
                    f"{self.name} (pid {pid}) did not answer at {address} within "
                    f"{timeout:g} s; last lines of its log {self.log_file}:\n"
                    f"{self.log_tail(launched.log_offset)}"
                )
            if healthy(min(remaining, 2.0)):
                return
            time.sleep(_POLL_INTERVAL_S)

    @contextlib.contextmanager
    def rollback(self, launched: Launched) -> Iterator[None]:
        """Stop the process again if the block fails and :meth:`launch` started it.

        A process that ran before is left running. Its class-data archive, if it was to
        write one, is dropped.
        """
        try:
            yield
        except BaseException:
            if launched.fresh:
                self._stop(launched.running, timeout=10, keep_archive=False)
            raise

    def stop(self, timeout: float = 30) -> bool:
        """Stop the process (SIGTERM; SIGKILL to its group after ``timeout`` seconds).

        Call with :meth:`locked` held.

        Returns:
            Whether a running process was stopped.
        """
        running = self.running()
        if running is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        self._stop(running, timeout)
        return True

    def down(self, timeout: float = 30) -> bool:
        """:meth:`stop` with the lock held; nothing (not even the folder) is made for a
        service that never ran.

        Returns:
            Whether a running process was stopped.
        """
        if not self.directory.is_dir():
            return False
        with self.locked():
            return self.stop(timeout)

    def terminate(self) -> bool:
        """Send the process SIGTERM and return at once: to stop several side by side, then
        each with :meth:`stop` (which waits).

        Returns:
            Whether a process was running.
        """
        running = self.running()
        if running is not None:
            _terminate(running)
        return running is not None

    def log_tail(self, offset: int | None = None) -> str:
        """The log's last lines (from ``offset`` on, if given)."""
        try:
            with self.log_file.open("rb") as log:
                if offset is not None:
                    log.seek(offset)
                text = log.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        lines = text.splitlines()[-_LOG_TAIL_LINES:]
        return "\n".join(lines) if lines else "(log is empty)"

    # -- internals --------------------------------------------------------------------

    def _record(self, data: Any) -> Running | None:
        """The pid file's contents as a :class:`Running` (its process not checked yet)."""
        if "started" not in data and self.legacy is not None:
            return self.legacy.read(data)
        return Running(
            int(data["pid"]),
            int(data["started"]),
            str(data["address"]),
            tuple(int(p) for p in data["ports"]),
            dict(data.get("info") or {}),
        )

    def _alive(self, pid: int) -> bool:
        child = _CHILDREN.get(pid)
        if child is not None:
            return child.poll() is None
        started = start_time(pid)
        return started is not None and is_running(pid, started)

    def _stop(self, running: Running, timeout: float, *, keep_archive: bool = True) -> None:
        pid = running.pid
        _terminate(running)
        clean = self._wait_exit(running, timeout)
        partial = running.info.get(_CDS_INFO_KEY)
        if not clean:
            # The whole group: a Spark worker's executors are its children.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            if not self._wait_exit(running, 10):
                raise ServiceError(
                    f"{self.name} (pid {pid}) did not stop; its log: {self.log_file}"
                )
        self.pid_file.unlink(missing_ok=True)
        if partial:
            # The JVM writes the archive while it exits; only a clean exit leaves it whole.
            _settle_archive(Path(str(partial)), keep=clean and keep_archive)

    def _wait_exit(self, running: Running, timeout: float) -> bool:
        proc = _CHILDREN.get(running.pid)
        if proc is not None:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return False
            _CHILDREN.pop(running.pid, None)
            return True
        deadline = time.monotonic() + timeout
        while is_running(running.pid, running.started):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def _rotate_log(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            if self.log_file.stat().st_size > _LOG_ROTATE_BYTES:
                os.replace(self.log_file, self.log_file.with_name(self.log_file.name + ".1"))


def _terminate(running: Running) -> None:
    """SIGTERM to the process, if it still is the one recorded."""
    if is_running(running.pid, running.started):
        with contextlib.suppress(ProcessLookupError):
            os.kill(running.pid, signal.SIGTERM)


def cds_archive(name: str, java: str, classpath: Sequence[Path]) -> Path | None:
    """Where the class-data archive of service ``name`` on this JVM and classpath lives.

    An archive only fits the JVM binary and the jars it was made with, so its name carries a
    digest of them. None when ``FRAZIL_CDS=0``.
    """
    if os.environ.get(CDS_ENV, "1") == "0":
        return None
    parts: list[object] = [_CDS_LAYOUT, name]
    for path in (Path(java).resolve(), *classpath):
        try:
            parts += [str(path), path.stat().st_mtime_ns]
        except OSError:
            parts += [str(path), None]
    digest = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]
    return cache_dir() / "cds" / f"{name}-{digest}.jsa"


def cds_options(archive: Path | None) -> tuple[list[str], Path | None]:
    """JVM options that map ``archive``, or that write it at exit when it is not made yet.

    Returns:
        The options, and the temporary file the JVM will write (pass it to
        :meth:`Daemon.start` as ``cds_partial``), None when mapping or when off.
    """
    if archive is None:
        return [], None
    if archive.is_file():
        return [f"-XX:SharedArchiveFile={archive}", *_CDS_QUIET], None
    partial = archive.with_name(f"{archive.name}.{uuid.uuid4().hex[:12]}.partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    return [f"-XX:ArchiveClassesAtExit={partial}", *_CDS_QUIET], partial


def _settle_archive(partial: Path, *, keep: bool) -> None:
    """Install the archive a process wrote at exit (or drop it), and drop old leftovers."""
    final = partial.with_name(partial.name.split(".jsa.")[0] + ".jsa")
    prefix = final.name.rsplit("-", 1)[0]
    if keep and partial.is_file() and partial.stat().st_size > 0:
        for old in final.parent.glob(f"{prefix}-*.jsa"):
            if old != final:
                old.unlink(missing_ok=True)  # archives of other JVMs or jars: useless now
        os.replace(partial, final)
    else:
        partial.unlink(missing_ok=True)
    now = time.time()
    for leftover in final.parent.glob(f"{prefix}-*.partial"):
        with contextlib.suppress(OSError):
            if now - leftover.stat().st_mtime > _CDS_PARTIAL_MAX_AGE_S:
                leftover.unlink()


def port_taken(host: str, port: int) -> bool:
    """Whether ``host:port`` cannot be bound (something listens there already).

    Binds without SO_REUSEPORT, so a server that binds with it (Iceberg's REST catalog
    server does, through Jetty) and would silently share the port is reported too.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As servers bind, so sockets lingering in TIME_WAIT do not count.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def http_get(url: str, timeout: float) -> tuple[int, bytes] | None:
    """GET ``url`` directly (no proxy): its status and body, or None if nothing answered."""
    try:
        with _DIRECT.open(url, timeout=max(timeout, 0.1)) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read() if exc.fp is not None else b""
    except (OSError, ValueError):
        return None


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable by its owner only (it may hold a secret)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        # The mode of open() only applies to new files; tighten an older one too.
        os.fchmod(handle.fileno(), 0o600)
        handle.write(text)


def tree_size(path: Path) -> int:
    """Disk space used by the files under ``path`` (0 if it does not exist)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            # Allocated blocks, not st_size: Kafka preallocates sparse 10 MiB index files.
            with contextlib.suppress(OSError):
                total += (Path(root) / name).stat().st_blocks * 512
    return total


def _reap(pid: int) -> int | None:
    """Collect the exit code of a child this process started, if it is one."""
    proc = _CHILDREN.pop(pid, None)
    if proc is None:
        return None
    try:
        return proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return None
