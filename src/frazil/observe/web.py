"""The web page: each pipeline's status and plots over time, on one port with ``/metrics``.

``frazil ui`` serves it on its own; ``frazil run`` serves it next to its Prometheus metrics.
Plots of records per second, per-commit freshness and data files per table are rebuilt from
the tables' snapshot history (PyIceberg), so they cover the time before the page was opened
and before this process started; lag is sampled live. Every asset ships in the package: the
page works without internet.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from frazil.config.models import FrazilConfig
from frazil.errors import ServiceError, first_line
from frazil.maintenance.facts import summary_of
from frazil.observe.catalog import pipeline_tables, pyiceberg_catalog
from frazil.observe.status import read_status
from frazil.progress.freshness import freshness_seconds
from frazil.progress.markers import PIPELINE, VALID_THROUGH_MS

log = logging.getLogger(__name__)

#: Commits per table a history answer holds, at most (the newest).
HISTORY_POINTS = 500


def history(config: FrazilConfig, catalog: Any) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per pipeline and table, one point per commit of the pipeline, oldest first: time,
    records, records per second since the previous commit, freshness (commit time minus
    valid-through) and the table's data files."""
    from pyiceberg.table.snapshots import ancestors_of

    found: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for pipeline in config.pipelines:
        tables: dict[str, list[dict[str, Any]]] = {}
        for name in pipeline_tables(catalog, pipeline):
            try:
                table = catalog.load_table(name)
            except Exception:
                continue
            commits = []
            for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
                summary = summary_of(snapshot)
                if summary.get(PIPELINE) != pipeline.name:
                    continue
                commits.append((int(snapshot.timestamp_ms), summary))
                if len(commits) > HISTORY_POINTS:
                    break
            points: list[dict[str, Any]] = []
            previous: int | None = None
            for stamp, summary in reversed(commits):
                records = int(summary.get("added-records", 0))
                valid = summary.get(VALID_THROUGH_MS)
                points.append(
                    {
                        "t": stamp,
                        "records": records,
                        "rps": None
                        if previous is None or stamp <= previous
                        else records * 1000 / (stamp - previous),
                        "freshness_s": freshness_seconds(int(valid) if valid else None, stamp),
                        "data_files": int(summary.get("total-data-files", 0)),
                    }
                )
                previous = stamp
            tables[name] = points
        found[pipeline.name] = tables
    return found


class Dashboard:
    """The page, its JSON API and (in ``frazil run``) ``/metrics`` on one HTTP server."""

    def __init__(self, config: FrazilConfig, registry: Any = None) -> None:
        self.config = config
        self.registry = registry
        self._catalog: Any = None
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    def catalog(self) -> Any:
        with self._lock:
            if self._catalog is None:
                self._catalog = pyiceberg_catalog(self.config)
            return self._catalog

    def answer(self, path: str) -> tuple[int, str, bytes]:
        """``(status, content type, body)`` for a GET of ``path``."""
        route = path.split("?", 1)[0]
        if route in ("/", "/index.html"):
            page = resources.files("frazil.observe").joinpath("static/index.html").read_bytes()
            return 200, "text/html; charset=utf-8", page
        if route == "/metrics" and self.registry is not None:
            from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if route == "/api/status":
            statuses = read_status(self.config, catalog=self.catalog())
            body = {"at": int(time.time() * 1000), "pipelines": [s.to_json() for s in statuses]}
            return 200, "application/json", json.dumps(body, default=str).encode()
        if route == "/api/history":
            return (
                200,
                "application/json",
                json.dumps(history(self.config, self.catalog())).encode(),
            )
        return 404, "text/plain", b"not found"

    def start(self, host: str, port: int) -> int:
        """Serve from a daemon thread; returns the port (a free one for port 0).

        Raises:
            ServiceError: The port is taken (or the host is not an address of this machine).
        """
        dashboard = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                try:
                    code, kind, body = dashboard.answer(self.path)
                except Exception as exc:  # the page shows it; the run goes on
                    code, kind = 500, "application/json"
                    body = json.dumps({"error": first_line(exc, 500)}).encode()
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("ui: " + format, *args)

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:  # the port is taken, or the address is not this machine's
            raise ServiceError(
                f"cannot serve the status page on {host}:{port}: {exc.strerror or exc} "
                "(choose another port)"
            ) from None
        self._server.daemon_threads = True
        thread = threading.Thread(target=self._server.serve_forever, name="frazil-ui", daemon=True)
        thread.start()
        return int(self._server.server_address[1])

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
