"""A local Schema Registry: Apicurio Registry (from Maven Central) with its Confluent API.

``frazil local up --with schema-registry`` and the tests run it as a detached JVM on
127.0.0.1. Confluent's clients and serializers talk to it at
``http://127.0.0.1:<port>/apis/ccompat/v7``. Everything lives under
``<state_dir>/schema-registry/``:

* ``data/``: the schemas (an H2 database file). Kept across restarts, like the broker's
  topics: records in the topics name their schema by id, and an in-memory registry would
  hand the same ids to other schemas after a restart.
* ``registry.log``: the JVM's stdout/stderr,
* ``registry.pid``: pid, port and URL of the running registry.

Apicurio differs from Confluent's registry in a few ways that matter to clients: it keeps
a schema in the form it was registered (confluent-kafka's ProtobufSerializer registers base64
``FileDescriptorProto`` bytes, not ``.proto`` text) and ignores ``?format=serialized``; its
default compatibility level is ``NONE`` (Confluent's is ``BACKWARD``). See
``tests/integration/test_local_registry.py``, which pins these down.

The first start of a given Java runtime and Apicurio version also writes a class-data-sharing
archive when the registry stops (as :mod:`frazil.jvm.cds` does for Spark); later starts map
it and answer in about half the time. ``FRAZIL_CDS=0`` starts without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from frazil.errors import ServiceError
from frazil.jvm.apps import ensure_app
from frazil.jvm.cds import CDS_ENV
from frazil.jvm.fetch import java_executable
from frazil.jvm.pins import APICURIO_VERSION, SCHEMA_REGISTRY_APP
from frazil.paths import cache_dir
from frazil.procs import pid_alive

#: The Confluent-compatible API's path under the registry's root.
CCOMPAT_PATH = "/apis/ccompat/v7"

_POLL_INTERVAL_S = 0.1
_LOG_TAIL_LINES = 30
# registry.log is appended to by the JVM and cannot roll itself; rotate it between runs.
_LOG_ROTATE_BYTES = 16 * 1024 * 1024
# On the command line so a pid from the pid file can be told apart from an unrelated process
# that got the same pid later (after a reboot): Quarkus ignores unknown system properties.
_MARKER_PROPERTY = "frazil.registry.dir"
# Bumped when what the CDS archive covers changes, so an archive made the old way is not used.
_CDS_LAYOUT = 1
_CDS_QUIET = ["-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
# Leftover archives of registries that never stopped cleanly are removed after this long.
_CDS_PARTIAL_MAX_AGE_S = 24 * 3600

# Children started by this Python process, kept so they can be reaped (no zombies, no
# "subprocess still running" warnings) when this process stops them.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


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


@dataclasses.dataclass(frozen=True)
class _Running:
    """The running registry, as recorded in its pid file."""

    pid: int
    port: int
    url: str
    #: Where the JVM writes its CDS archive when it exits, if it was started to make one.
    cds_partial: str | None


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
        self.pid_file = self.registry_dir / "registry.pid"
        self.log_file = self.registry_dir / "registry.log"

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
        self.registry_dir.mkdir(parents=True, exist_ok=True)
        with self._locked():
            running = self._running()
            if running is not None:
                if running.url != self.url:
                    raise ServiceError(
                        f"the local schema registry in {self.registry_dir} is already running "
                        f"at {running.url} (pid {running.pid}); stop it (`frazil local down "
                        "--only schema-registry`) to change its address"
                    )
                # Another command may have just started it: wait until it answers.
                self._wait_ready(running.pid, time.monotonic() + timeout, log_offset=None)
                return running.url
            self.pid_file.unlink(missing_ok=True)
            if _port_taken(self.host, self.port):
                raise ServiceError(
                    f"cannot start the local schema registry: {self.host}:{self.port} is "
                    "already in use (pick another port with --registry-port)"
                )
            jar = ensure_app(SCHEMA_REGISTRY_APP)
            java = java_executable()
            self.data_dir.mkdir(exist_ok=True)
            self._rotate_log()
            started = self._spawn(java, jar)
            try:
                self._wait_ready(started.pid, time.monotonic() + timeout, started.log_offset)
            except BaseException:
                self._stop(started.running, timeout=10, keep_archive=False)
                raise
            return self.url

    def down(self, timeout: float = 30) -> bool:
        """Stop the registry: SIGTERM, wait for a clean exit, SIGKILL after ``timeout``.

        Its schemas are kept for the next start.

        Returns:
            Whether a running registry was stopped (False if none was running).

        Raises:
            ServiceError: If the process does not go away even after SIGKILL.
        """
        if not self.registry_dir.is_dir():
            return False
        with self._locked():
            running = self._running()
            if running is None:
                self.pid_file.unlink(missing_ok=True)
                return False
            self._stop(running, timeout, keep_archive=True)
            return True

    def status(self) -> RegistryStatus:
        """Report whether the registry runs, where, and how much data it holds."""
        running = self._running()
        return RegistryStatus(
            running=running is not None,
            url=running.url if running else self.url,
            pid=running.pid if running else None,
            registry_dir=self.registry_dir,
            data_bytes=_tree_size(self.data_dir),
            log_file=self.log_file,
        )

    def command(self, java: str, jar: Path, cds_options: list[str]) -> list[str]:
        """The command line that runs the registry (no side effects; public for tests).

        Args:
            java: The ``java`` launcher.
            jar: Apicurio's runner jar.
            cds_options: JVM options for class-data sharing (see :func:`cds_options`).

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

    # -- process handling -------------------------------------------------------------

    def _running(self) -> _Running | None:
        """The live registry recorded in the pid file, else None."""
        try:
            info = json.loads(self.pid_file.read_text())
            pid, port, url = int(info["pid"]), int(info["port"]), str(info["url"])
            partial = info.get("cds_partial")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if not self._is_ours(pid):
            return None
        return _Running(pid, port, url, str(partial) if partial else None)

    def _is_ours(self, pid: int) -> bool:
        child = _CHILDREN.get(pid)
        if child is not None:
            return child.poll() is None
        if not pid_alive(pid):
            return False
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            return False
        except OSError:
            return True
        if not cmdline:
            return True  # briefly empty while the process execs
        return f"-D{_MARKER_PROPERTY}={self.registry_dir}".encode() in cmdline.split(b"\0")

    def _spawn(self, java: str, jar: Path) -> _Started:
        archive = cds_archive(java, jar)
        partial = None
        if archive is not None and not archive.is_file():
            partial = archive.with_name(f"{archive.name}.{uuid.uuid4().hex[:12]}.partial")
        cmd = self.command(java, jar, cds_options(archive, partial))
        with self.log_file.open("ab") as log:
            log.write(f"\n=== frazil: starting schema registry at {time.ctime()} ===\n".encode())
            log.flush()
            log_offset = log.tell()
            proc = subprocess.Popen(
                cmd,
                cwd=self.registry_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _CHILDREN[proc.pid] = proc
        running = _Running(proc.pid, self.port, self.url, str(partial) if partial else None)
        self.pid_file.write_text(
            json.dumps(
                {
                    "pid": running.pid,
                    "port": running.port,
                    "url": running.url,
                    "cds_partial": running.cds_partial,
                }
            )
        )
        return _Started(running, log_offset)

    def _wait_ready(self, pid: int, deadline: float, log_offset: int | None) -> None:
        while True:
            if not self._is_ours(pid):
                code = _reap(pid)
                exit_note = f" with exit code {code}" if code is not None else ""
                raise ServiceError(
                    f"the local schema registry (pid {pid}) exited{exit_note} while starting; "
                    f"last lines of {self.log_file}:\n{self._log_tail(log_offset)}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServiceError(
                    f"the local schema registry (pid {pid}) did not answer at {self.url} in "
                    f"time; last lines of {self.log_file}:\n{self._log_tail(log_offset)}"
                )
            if _answers(self.url, min(remaining, 2.0)):
                return
            time.sleep(_POLL_INTERVAL_S)

    def _stop(self, running: _Running, timeout: float, *, keep_archive: bool) -> None:
        pid = running.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        clean = self._wait_exit(pid, timeout)
        if not clean:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            if not self._wait_exit(pid, 10):
                raise ServiceError(f"the local schema registry (pid {pid}) did not stop")
        self.pid_file.unlink(missing_ok=True)
        if running.cds_partial is not None:
            # The JVM writes the archive while it exits; only a clean exit leaves it whole.
            _settle_archive(Path(running.cds_partial), keep=keep_archive and clean)

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
        while self._is_ours(pid):
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_INTERVAL_S)
        return True

    # -- files ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # Serializes up/down of one state dir across processes (two CLIs, a test run).
        with (self.registry_dir / ".lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

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


@dataclasses.dataclass(frozen=True)
class _Started:
    running: _Running
    log_offset: int

    @property
    def pid(self) -> int:
        return self.running.pid


def cds_archive(java: str, jar: Path) -> Path | None:
    """Where the registry's class-data-sharing archive for this JVM and jar lives.

    The archive only fits the JVM binary and the jars it was made with, so its name carries a
    digest of them. None when ``FRAZIL_CDS=0``.
    """
    if os.environ.get(CDS_ENV, "1") == "0":
        return None
    parts: list[object] = [_CDS_LAYOUT, APICURIO_VERSION]
    for path in (Path(java).resolve(), jar.resolve()):
        try:
            parts += [str(path), path.stat().st_mtime_ns]
        except OSError:
            parts += [str(path), None]
    digest = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]
    return cache_dir() / "cds" / f"apicurio-registry-{digest}.jsa"


def cds_options(archive: Path | None, partial: Path | None) -> list[str]:
    """JVM options that map ``archive``, or that write ``partial`` at exit when ``archive`` is
    not made yet; none when class-data sharing is off (``archive`` is None).

    An archive the JVM cannot use (another JVM build, damaged) is skipped silently.
    """
    if archive is None:
        return []
    if partial is not None:
        partial.parent.mkdir(parents=True, exist_ok=True)
        return [f"-XX:ArchiveClassesAtExit={partial}", *_CDS_QUIET]
    return [f"-XX:SharedArchiveFile={archive}", *_CDS_QUIET]


def _settle_archive(partial: Path, *, keep: bool) -> None:
    """Install the archive a registry wrote at exit (or drop it), and old leftovers."""
    final = partial.with_name(partial.name.split(".jsa.")[0] + ".jsa")
    if keep and partial.is_file() and partial.stat().st_size > 0:
        for old in final.parent.glob("apicurio-registry-*.jsa"):
            if old != final:
                old.unlink(missing_ok=True)  # archives of other JVMs or versions: useless now
        os.replace(partial, final)
    else:
        partial.unlink(missing_ok=True)
    now = time.time()
    for leftover in final.parent.glob("apicurio-registry-*.partial"):
        with contextlib.suppress(OSError):
            if now - leftover.stat().st_mtime > _CDS_PARTIAL_MAX_AGE_S:
                leftover.unlink()


# No proxy: HTTP(S)_PROXY from the environment must not route requests to 127.0.0.1.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _answers(url: str, timeout: float) -> bool:
    """Whether the Confluent API at ``url`` lists its subjects."""
    try:
        with _DIRECT.open(f"{url}/subjects", timeout=max(timeout, 0.1)) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError, ValueError):
        return False


def _port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As servers bind, so sockets lingering in TIME_WAIT do not count.
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
            with contextlib.suppress(OSError):
                total += (Path(root) / name).stat().st_blocks * 512
    return total
