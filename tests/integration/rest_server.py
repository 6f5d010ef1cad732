"""Iceberg's REST catalog server on local files, for tests of the REST catalog's commits.

The server ``frazil local up --with rest-catalog`` runs (Iceberg's ``RESTCatalogAdapter``
from its test fixtures, the reference implementation of the REST specification's server
side, over a JDBC catalog on SQLite; started by frazil's launcher, which serves a multi-table
commit atomically to readers, as catalogs such as Polaris and Nessie do:
:mod:`frazil.local.rest_launcher`), its warehouse a local folder: what a test of commits
through a REST catalog needs, without the object store.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from frazil.jvm.fetch import java_executable, rest_catalog_classpath
from frazil.local.rest_launcher import MAIN_CLASS, launcher_jar


@dataclass(frozen=True)
class RestServer:
    """A running server."""

    uri: str
    warehouse: str
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def rest_server(folder: Path) -> Iterator[RestServer]:
    """Run a REST catalog server with its catalog and warehouse under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    jars = rest_catalog_classpath()
    classpath = os.pathsep.join(str(p) for p in [launcher_jar(jars), *jars])
    main = MAIN_CLASS
    port = _free_port()
    warehouse = (folder / "warehouse").resolve().as_uri()
    env = {
        **os.environ,
        "CATALOG_WAREHOUSE": warehouse,
        "CATALOG_URI": f"jdbc:sqlite:{folder / 'catalog.db'}",
        "CATALOG_REST_PORT": str(port),
    }
    log = folder / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [java_executable(), "-Xmx256m", "-cp", classpath, main],
            env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/v1/config", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the REST catalog did not start:\n{log.read_text()}"
                    ) from None
                time.sleep(0.3)
        yield RestServer(uri, warehouse, log)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(20)
