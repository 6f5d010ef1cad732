"""A local Schema Registry: Apicurio Registry (from Maven Central) with its Confluent API.

``frazil local up --with schema-registry`` and the tests run it as a local process on
127.0.0.1, in-memory (schemas live as long as the process). Confluent's clients and
serializers talk to it at ``http://127.0.0.1:<port>/apis/ccompat/v7``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frazil.errors import ServiceError
from frazil.jvm.apps import ensure_app
from frazil.jvm.fetch import java_executable
from frazil.jvm.pins import SCHEMA_REGISTRY_APP

#: The Confluent-compatible API's path under the registry's root.
CCOMPAT_PATH = "/apis/ccompat/v7"
_POLL_INTERVAL_S = 0.25
_LOG_TAIL_LINES = 20
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class RegistryStatus:
    """What ``frazil local status`` shows of the registry."""

    running: bool
    url: str
    pid: int | None
    log_file: Path

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "running": self.running,
            "url": self.url,
            "pid": self.pid,
            "log_file": str(self.log_file),
        }


class LocalRegistry:
    """One Apicurio Registry process whose files live in ``<state_dir>/schema-registry``.

    Args:
        state_dir: frazil's state folder.
        port: HTTP port on 127.0.0.1.
        heap: The JVM's maximum heap.
    """

    host = "127.0.0.1"

    def __init__(self, state_dir: Path, port: int = 8081, heap: str = "256m") -> None:
        self.dir = Path(state_dir) / "schema-registry"
        self.port = port
        self.heap = heap
        self.pid_file = self.dir / "registry.pid"
        self.log_file = self.dir / "registry.log"

    @property
    def url(self) -> str:
        """The Confluent-compatible API's URL (what ``schema_registry.url`` takes)."""
        return f"http://{self.host}:{self.port}{CCOMPAT_PATH}"

    def up(self, timeout: float = 120) -> str:
        """Start the registry unless it runs; return its URL once it answers.

        Raises:
            ServiceError: It exited or did not answer within ``timeout`` seconds.
            ArtifactError: Apicurio could not be fetched.
        """
        self.dir.mkdir(parents=True, exist_ok=True)
        with self._locked():
            pid = self._pid()
            if pid is not None and self._answers():
                return self.url
            if pid is not None:
                self._stop(pid, 10)
            if _port_taken(self.host, self.port):
                raise ServiceError(
                    f"port {self.port} on {self.host} is taken by another process; pick "
                    "another with --registry-port"
                )
            jar = ensure_app(SCHEMA_REGISTRY_APP)
            pid, offset = self._spawn(java_executable(), jar)
            deadline = time.monotonic() + timeout
            while not self._answers():
                if not _alive(pid):
                    _CHILDREN.pop(pid, None)
                    raise ServiceError(
                        f"the local schema registry (pid {pid}) exited while starting; last "
                        f"lines of {self.log_file}:\n{self._log_tail(offset)}"
                    )
                if time.monotonic() > deadline:
                    raise ServiceError(
                        f"the local schema registry (pid {pid}) did not answer at {self.url} "
                        f"in {timeout:.0f}s; last lines of {self.log_file}:\n"
                        f"{self._log_tail(offset)}"
                    )
                time.sleep(_POLL_INTERVAL_S)
            return self.url

    def down(self, timeout: float = 30) -> bool:
        """Stop the registry; returns whether one was running."""
        if not self.dir.exists():
            return False
        with self._locked():
            pid = self._pid()
            if pid is None:
                return False
            self._stop(pid, timeout)
            return True

    def status(self) -> RegistryStatus:
        """Whether it runs, its URL, pid and log."""
        pid = self._pid() if self.dir.exists() else None
        running = pid is not None and self._answers()
        return RegistryStatus(running, self.url, pid, self.log_file)

    def _spawn(self, java: str, jar: Path) -> tuple[int, int]:
        cmd = [
            java,
            f"-Xmx{self.heap}",
            # A small service on a shared machine: one GC thread, and C1 only — it starts
            # about twice as fast and is plenty for a test registry.
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:+ExitOnOutOfMemoryError",
            f"-Dquarkus.http.host={self.host}",
            f"-Dquarkus.http.port={self.port}",
            "-Dquarkus.log.level=WARN",
            "-Dquarkus.http.access-log.enabled=false",
            "-jar",
            str(jar),
        ]
        with self.log_file.open("ab") as log:
            log.write(f"\n=== frazil: starting schema registry at {time.ctime()} ===\n".encode())
            log.flush()
            offset = log.tell()
            proc = subprocess.Popen(
                cmd,
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _CHILDREN[proc.pid] = proc
        self.pid_file.write_text(json.dumps({"pid": proc.pid, "port": self.port}))
        return proc.pid, offset

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _pid(self) -> int | None:
        try:
            pid = int(json.loads(self.pid_file.read_text())["pid"])
        except (OSError, ValueError, KeyError):
            return None
        return pid if _alive(pid) else None

    def _stop(self, pid: int, timeout: float) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(_POLL_INTERVAL_S)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            time.sleep(_POLL_INTERVAL_S)
        proc = _CHILDREN.pop(pid, None)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        self.pid_file.unlink(missing_ok=True)

    def _log_tail(self, offset: int) -> str:
        try:
            with self.log_file.open("rb") as log:
                log.seek(offset)
                lines = log.read().decode(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-_LOG_TAIL_LINES:]) or "(empty)"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with (self.dir / ".lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    proc = _CHILDREN.get(pid)
    if proc is not None:
        return proc.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of another frazil process counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return True


def _port_taken(host: str, port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0
