"""Iceberg's REST catalog server on local files, for tests of the REST catalog's commits.

Iceberg's ``RESTCatalogServer`` (the ``iceberg-open-api`` test fixtures, the reference
implementation of the REST specification's server side) over a JDBC catalog on SQLite, its
warehouse a local folder: what a test of commits through a REST catalog needs, without the
object store. Its jars are resolved with Maven (fetched once); Hadoop's client comes from
pyspark's jars.

``atomic=True`` serves the same adapter with its multi-table commit atomic to readers
(``java/AtomicRESTCatalogServer.java``, compiled here): the reference adapter commits a
transaction's tables one after the other, so a reader may see one table ahead for a moment,
which is what catalogs such as Polaris and Nessie do not let happen.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from frazil.jvm.fetch import java_executable, pyspark_jars_dir

#: The server and what it needs beside pyspark's jars (Jetty 12.1 ee10, as Iceberg 1.11).
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>frazil.test</groupId><artifactId>rest-server</artifactId><version>1</version>
<dependencies>
<dependency><groupId>org.apache.iceberg</groupId><artifactId>iceberg-open-api</artifactId>
<version>1.11.0</version><classifier>test-fixtures</classifier></dependency>
<dependency><groupId>org.apache.iceberg</groupId><artifactId>iceberg-core</artifactId>
<version>1.11.0</version><classifier>tests</classifier></dependency>
<dependency><groupId>org.apache.iceberg</groupId><artifactId>iceberg-core</artifactId>
<version>1.11.0</version></dependency>
<dependency><groupId>org.eclipse.jetty.ee10</groupId><artifactId>jetty-ee10-servlet</artifactId>
<version>12.1.8</version></dependency>
<dependency><groupId>org.eclipse.jetty.compression</groupId>
<artifactId>jetty-compression-server</artifactId><version>12.1.8</version></dependency>
<dependency><groupId>org.eclipse.jetty.compression</groupId>
<artifactId>jetty-compression-gzip</artifactId><version>12.1.8</version></dependency>
<dependency><groupId>org.xerial</groupId><artifactId>sqlite-jdbc</artifactId>
<version>3.54.1.0</version></dependency>
<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId>
<version>2.0.17</version></dependency>
</dependencies></project>
"""


@dataclass(frozen=True)
class RestServer:
    """A running server."""

    uri: str
    warehouse: str
    log: Path


_ATOMIC_SOURCE = Path(__file__).parent / "java" / "AtomicRESTCatalogServer.java"


def _classpath() -> str:
    with tempfile.TemporaryDirectory(prefix="frazil-rest-") as work:
        (Path(work) / "pom.xml").write_text(_POM)
        out = Path(work) / "cp.txt"
        subprocess.run(
            ["mvn", "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={out}"],
            cwd=work, check=True, timeout=600, capture_output=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        jars = pyspark_jars_dir()
        hadoop = sorted(str(p) for p in jars.glob("hadoop-client-*.jar"))
        logging = sorted(str(p) for p in jars.glob("commons-logging-*.jar"))
        return os.pathsep.join([out.read_text().strip(), *hadoop, *logging])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _compile_atomic(classpath: str, into: Path) -> None:
    javac = Path(java_executable()).resolve().parent / "javac"
    subprocess.run(
        [str(javac), "-nowarn", "-d", str(into), "-cp", classpath, str(_ATOMIC_SOURCE)],
        check=True, timeout=300, capture_output=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@contextmanager
def rest_server(folder: Path, *, atomic: bool = False) -> Iterator[RestServer]:
    """Run a REST catalog server with its catalog and warehouse under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    classpath = _classpath()
    main = "org.apache.iceberg.rest.RESTCatalogServer"
    if atomic:
        _compile_atomic(classpath, folder / "classes")
        classpath = os.pathsep.join([str(folder / "classes"), classpath])
        main = "org.apache.iceberg.rest.AtomicRESTCatalogServer"
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
