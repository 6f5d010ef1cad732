"""A launcher for Iceberg's REST catalog server that listens on 127.0.0.1 only.

Iceberg's ``RESTCatalogServer.main`` binds Jetty to every interface (``new Server(port)``,
with SO_REUSEPORT) and has no host setting: an unauthenticated catalog that can create,
drop and purge tables would be open to the network. :data:`SOURCE` is the same start-up
(read with ``javap`` from ``iceberg-open-api`` 1.11.0's test-fixtures jar: the ``CATALOG_*``
variables as catalog properties, a JDBC catalog by default, Iceberg's own servlet and
adapter behind a gzip handler), with one connector on ``rest.host`` (127.0.0.1 unless set)
and no SO_REUSEPORT, so a port another server holds makes it fail instead of sharing.

One change of behaviour: a multi-table commit (``transactions/commit``) runs alone. Iceberg's
adapter validates a transaction's tables first and then commits them one after the other,
so a reader could load one table after its commit and another before its own; catalogs built
for multi-table commits (Polaris, Nessie) commit them in one metastore transaction. A
read-write lock around the adapter does the same here: every other request runs beside the
others, a transaction waits for them and they for it (docs/exactly-once.md).

It lives in Iceberg's package to reach the adapter and its context, which are package-private
there. Compiled once per JDK and classpath with ``javac`` (like frazil's own JVM classes,
:mod:`frazil.jvm.build`) into a jar in the artifact cache; kept here as a string so the
package carries it without a data file.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from pathlib import Path

from frazil.jvm.build import compile_jar
from frazil.paths import cache_dir, locked

#: The launcher's main class.
MAIN_CLASS = "org.apache.iceberg.rest.FrazilRESTCatalogServer"

SOURCE = """\
package org.apache.iceberg.rest;

import java.util.Map;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Consumer;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.relocated.com.google.common.collect.Maps;
import org.apache.iceberg.util.PropertyUtil;
import org.eclipse.jetty.compression.gzip.GzipCompression;
import org.eclipse.jetty.compression.server.CompressionHandler;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

/** RESTCatalogServer's start-up, listening on rest.host (default 127.0.0.1) only, with
 * multi-table commits atomic to readers. Written by frazil (frazil.local.rest_launcher). */
public final class FrazilRESTCatalogServer {
  private FrazilRESTCatalogServer() {}

  public static void main(String[] args) throws Exception {
    Map<String, String> config = Maps.newHashMap(RCKUtils.environmentCatalogConfig());
    config.putIfAbsent(CatalogProperties.CATALOG_IMPL, JdbcCatalog.class.getName());
    config.putIfAbsent("jdbc.schema-version", "V1");
    String name = PropertyUtil.propertyAsString(config, "catalog.name", "rest_backend");
    Catalog catalog = CatalogUtil.buildIcebergCatalog(name, config, new Configuration());
    ReadWriteLock lock = new ReentrantReadWriteLock(true);
    RESTCatalogAdapter adapter =
        new RESTServerCatalogAdapter(new RESTCatalogServer.CatalogContext(catalog, config)) {
          @Override
          public <T extends RESTResponse> T handleRequest(
              Route route,
              Map<String, String> vars,
              HTTPRequest request,
              Class<T> responseType,
              Consumer<Map<String, String>> responseHeaders) {
            Lock held = route == Route.COMMIT_TRANSACTION ? lock.writeLock() : lock.readLock();
            held.lock();
            try {
              return super.handleRequest(route, vars, request, responseType, responseHeaders);
            } finally {
              held.unlock();
            }
          }
        };

    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(adapter)), "/*");
    CompressionHandler compression = new CompressionHandler();
    compression.putCompression(new GzipCompression());
    context.insertHandler(compression);

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost(PropertyUtil.propertyAsString(config, "rest.host", "127.0.0.1"));
    connector.setPort(PropertyUtil.propertyAsInt(config, "rest.port", 8181));
    server.addConnector(connector);
    server.setHandler(context);
    server.start();
    server.join();
  }
}
"""

_FILE = "FrazilRESTCatalogServer.java"
_JAR = "frazil-rest-catalog-launcher.jar"


def launcher_jar(classpath: Sequence[Path]) -> Path:
    """The launcher's jar, compiled against ``classpath`` on first use.

    Raises:
        ArtifactError: If no ``javac`` (a JDK) is found or compiling fails.
    """
    digest = hashlib.sha256(SOURCE.encode())
    for jar in classpath:
        digest.update(jar.name.encode())
    target = cache_dir() / "jars" / f"rest-catalog-launcher-{digest.hexdigest()[:12]}" / _JAR
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(target.parent / ".lock"), tempfile.TemporaryDirectory() as work:
        if not target.is_file():
            source = Path(work) / _FILE
            source.write_text(SOURCE)
            compile_jar([source], classpath, target, "the local REST catalog's launcher")
    return target
