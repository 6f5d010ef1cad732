"""What the local services ask of this machine: a free port, a direct HTTP GET, a private
file and the disk space a folder takes."""

from __future__ import annotations

import contextlib
import os
import socket
import urllib.error
import urllib.request
from pathlib import Path

# No proxy: HTTP(S)_PROXY from the environment must not route requests to 127.0.0.1.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


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
