"""A fault-injecting HTTP proxy, for tests of unknown outcomes: it forwards every request, and
for some of them (a REST catalog's table commits, an object store's uploads) it lets the
server act, then answers 503, drops the connection, or answers only after the client's
timeout. What the client sees then says nothing of what the server did."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

#: A table commit (``POST …/namespaces/<ns>/tables/<table>``) or a multi-table commit.
_COMMIT = re.compile(r"/v1/(.+/)?(namespaces/[^/]+/tables/[^/]+|transactions/commit)$")


#: A table's file in the warehouse: its folder and kind (``data`` or ``metadata``).
_TABLE_FILE = re.compile(r"/warehouse/([^/]+/[^/]+)/(data|metadata)/")


def catalog_commits(method: str, path: str) -> str | None:
    """A REST catalog's table commits (and multi-table commits), counted together."""
    return "commit" if method == "POST" and _COMMIT.search(path) is not None else None


def table_uploads(method: str, path: str) -> str | None:
    """An object store's uploads of tables' files (data files, manifests, manifest lists),
    counted by table and kind: each table's data files, and its metadata, get faults."""
    found = _TABLE_FILE.search(path) if method == "PUT" else None
    return None if found is None else "/".join(found.groups())


@dataclass
class Faults:
    """Which commits fail, and how: ``mode`` is ``503``, ``drop`` or ``delay`` (answer after
    ``delay_s``), or ``mixed`` (each in turn); every ``every``-th commit after the first
    ``skip`` is hit. ``which`` picks the requests counted (by method and path) and names
    their count (each its own); ``keep_host`` forwards the client's ``Host`` header (an
    object store checks it in the signature)."""

    mode: str
    every: int = 2
    skip: int = 0
    delay_s: float = 8.0
    commits: int = 0
    hit: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    which: Callable[[str, str], str | None] = catalog_commits
    keep_host: bool = False
    counts: dict[str, int] = field(default_factory=dict)

    def strike(self, kind: str, path: str) -> bool:
        """Whether this request gets the fault (counted once per request, by kind)."""
        with self.lock:
            self.commits += 1
            self.counts[kind] = self.counts.get(kind, 0) + 1
            n = self.counts[kind] - self.skip
            if n > 0 and n % self.every == 0:
                self.hit.append(path)
                return True
            return False


def _handler(target: str, faults: Faults) -> type[BaseHTTPRequestHandler]:
    # The client's 100-continue was answered here; the forwarded request has its body.
    dropped_headers = {"expect"} if faults.keep_host else {"host", "expect"}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet
            del format, args

        def _forward(self) -> tuple[int, dict[str, str], bytes]:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            request = urllib.request.Request(
                target + self.path, data=body, method=self.command,
                headers={
                    k: v for k, v in self.headers.items()
                    if k.lower() not in dropped_headers
                },
            )  # fmt: skip
            try:
                with urllib.request.urlopen(request, timeout=60) as answer:
                    return answer.status, dict(answer.headers.items()), answer.read()
            except urllib.error.HTTPError as error:
                return error.code, dict(error.headers.items()), error.read()

        def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for key, value in headers.items():
                if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(key, value)
            length = headers.get("Content-Length") if self.command == "HEAD" else None
            # A HEAD answer has no body, its length is the object's.
            self.send_header("Content-Length", length or str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _serve(self) -> None:
            path = self.path.split("?", 1)[0]
            kind = faults.which(self.command, path)
            struck = kind is not None and faults.strike(kind, path)
            status, headers, body = self._forward()
            if not struck:
                self._answer(status, headers, body)
                return
            # The catalog applied (or refused) the commit; the client learns nothing of it.
            mode = faults.mode
            if mode == "mixed":
                mode = ("503", "drop", "delay")[(len(faults.hit) - 1) % 3]
            if mode == "503":
                message = (
                    b'{"error": {"message": "injected", "type": "ServiceUnavailable", "code": 503}}'
                )
                self._answer(503, {"Content-Type": "application/json"}, message)
            elif mode == "drop":
                self.close_connection = True
                self.connection.shutdown(2)
            else:
                time.sleep(faults.delay_s)
                self._answer(status, headers, body)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

    return Handler


@contextmanager
def fault_proxy(target: str, faults: Faults) -> Iterator[str]:
    """Serve the proxy on a free local port; yields its base URI."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(target.rstrip("/"), faults))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def run_until_done(config: Path, attempts: int = 3, env: dict[str, str] | None = None) -> None:
    """``frazil run --until-caught-up`` of ``config``, started again (up to ``attempts``
    times) while it stops on a fault: an outcome that stays unknown stops the run."""
    outputs = []
    for _ in range(attempts):
        done = subprocess.run(
            [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(config),
             "--until-caught-up"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900,
            check=False, env={**os.environ, **(env or {})},
        )  # fmt: skip
        outputs.append(done.stdout + done.stderr)
        if done.returncode == 0:
            return
    raise AssertionError("\n".join(o[-3000:] for o in outputs))
