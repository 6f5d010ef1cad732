"""A fault-injecting HTTP proxy in front of a REST catalog, for tests of unknown commit
outcomes: it forwards every request, and for some table commits it lets the catalog apply
the commit, then answers 503, drops the connection, or answers only after the client's
timeout. What the client sees then says nothing of what the catalog did."""

from __future__ import annotations

import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: A table commit (``POST …/namespaces/<ns>/tables/<table>``) or a multi-table commit.
_COMMIT = re.compile(r"/v1/(.+/)?(namespaces/[^/]+/tables/[^/]+|transactions/commit)$")


@dataclass
class Faults:
    """Which commits fail, and how: ``mode`` is ``503``, ``drop`` or ``delay`` (answer after
    ``delay_s``), or ``mixed`` (each in turn); every ``every``-th commit after the first
    ``skip`` is hit."""

    mode: str
    every: int = 2
    skip: int = 0
    delay_s: float = 8.0
    commits: int = 0
    hit: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def strike(self, path: str) -> bool:
        """Whether this commit gets the fault (counted once per request)."""
        with self.lock:
            self.commits += 1
            n = self.commits - self.skip
            if n > 0 and n % self.every == 0:
                self.hit.append(path)
                return True
            return False


def _handler(target: str, faults: Faults) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet
            del format, args

        def _forward(self) -> tuple[int, dict[str, str], bytes]:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            request = urllib.request.Request(
                target + self.path, data=body, method=self.command,
                headers={k: v for k, v in self.headers.items() if k.lower() != "host"},
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
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _serve(self) -> None:
            path = self.path.split("?", 1)[0]
            struck = (
                self.command == "POST" and _COMMIT.search(path) is not None
                and faults.strike(path)
            )  # fmt: skip
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

        do_GET = do_POST = do_DELETE = do_HEAD = _serve

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
