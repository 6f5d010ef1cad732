// In Iceberg's package: the adapter's Route is package-private.
package org.apache.iceberg.rest;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Consumer;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;

/**
 * Iceberg's REST catalog adapter (as its RESTCatalogServer serves it, configured the same way
 * from CATALOG_* variables) whose multi-table commit is atomic to readers.
 *
 * <p>Iceberg's reference adapter validates every table of a {@code transactions/commit} first,
 * then commits the tables one after the other: a reader may load one table after its commit
 * and another before its own. Catalogs built for it (Polaris, Nessie) commit the tables in one
 * metastore transaction. This server gets there with a lock: a multi-table commit runs alone,
 * every other request (loads, single-table commits) runs beside the others.
 */
public final class AtomicRESTCatalogServer {
  private AtomicRESTCatalogServer() {}

  public static void main(String[] args) throws Exception {
    Map<String, String> props = new HashMap<>();
    System.getenv()
        .forEach(
            (key, value) -> {
              if (key.startsWith("CATALOG_")) {
                props.put(
                    key.substring("CATALOG_".length())
                        .replace("__", "-")
                        .replace("_", ".")
                        .toLowerCase(Locale.ROOT),
                    value);
              }
            });
    props.putIfAbsent("catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog");
    props.putIfAbsent("jdbc.schema-version", "V1");
    int port = Integer.parseInt(props.getOrDefault("rest.port", "8181"));
    Catalog catalog = CatalogUtil.buildIcebergCatalog("rest_backend", props, new Configuration());
    ReadWriteLock lock = new ReentrantReadWriteLock(true);
    RESTCatalogAdapter adapter =
        new RESTCatalogAdapter(catalog) {
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
    Server server = new Server(port);
    server.setHandler(context);
    server.start();
    server.join();
  }
}
