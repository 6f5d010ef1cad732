"""``frazil ui``: the status page with plots, served on its own."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import typer

from frazil.cli.app import app, err_console
from frazil.config.loader import load_config


@app.command()
def ui(
    config: Path = typer.Option(..., "--config", "-c", help="Path to the frazil YAML config file."),
    port: int = typer.Option(8470, "--port", help="Port to serve on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (0.0.0.0: all)."),
) -> None:
    """A web page with each pipeline's status and plots over time (records per second, lag,
    freshness per commit, files per table), rebuilt from the tables' commit history and
    refreshed live. Needs no Spark; `frazil run` serves the same page next to its metrics."""
    from frazil.observe.status import check_reads
    from frazil.observe.web import Dashboard

    loaded = load_config(config)
    dashboard = Dashboard(loaded)
    # A catalog PyIceberg cannot open, or credentials the store refuses, stop here with one
    # line (as `frazil status`), rather than as an error inside the page.
    check_reads(loaded, dashboard.catalog())
    bound = dashboard.start(host, port)
    err_console.print(f"frazil ui on http://{host}:{bound}/ (Ctrl-C to stop)", highlight=False)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    dashboard.stop()
