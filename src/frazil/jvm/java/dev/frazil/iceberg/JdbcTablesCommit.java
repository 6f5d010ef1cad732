package dev.frazil.iceberg;

import java.io.Closeable;
import java.lang.reflect.Method;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.function.Function;
import java.util.function.Predicate;
import org.apache.iceberg.BaseMetastoreTableOperations;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.TableMetadata;
import org.apache.iceberg.TableMetadataParser;
import org.apache.iceberg.TableOperations;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.exceptions.CommitFailedException;
import org.apache.iceberg.exceptions.CommitStateUnknownException;
import org.apache.iceberg.jdbc.JdbcClientPool;
import org.apache.iceberg.util.LocationUtil;
import org.apache.iceberg.util.Tasks;
import org.apache.iceberg.util.ThreadPools;

/**
 * Several tables' changes committed to a JDBC catalog in one database transaction: all of them,
 * or none.
 *
 * <p>Iceberg's JDBC catalog commits a table by writing its new metadata file and swapping the
 * table's row from the metadata location the change was applied on to the new one ({@code UPDATE
 * … WHERE metadata_location = base}), in a database transaction of its own. Here every table's
 * metadata file is written first (at once), then all the rows are swapped in one transaction, each
 * with the same condition: a table that moved since its base (someone else's commit) swaps no row,
 * and the whole transaction is rolled back ({@link CommitFailedException}, retried by the caller
 * over the refreshed tables). A reader of the catalog sees all of the tables at the new metadata or
 * none; one database commit (one log sync for SQLite) serves the whole batch, where each table's
 * own commit took the database's write lock in turn.
 *
 * <p>After the transaction, each table's operations are brought to the metadata they committed
 * without reading the file back (Iceberg's commit reads every new metadata file it just wrote).
 * The SQL is Iceberg's own (its {@code JdbcUtil}), schema versions V0 and V1.
 */
final class JdbcTablesCommit implements Closeable {
  private static final String V0_UPDATE =
      "UPDATE iceberg_tables SET metadata_location = ? , previous_metadata_location = ? "
          + "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? "
          + "AND metadata_location = ?";
  private static final String V1_UPDATE =
      V0_UPDATE + " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)";
  private static final String SCHEMA_VERSION = "jdbc.schema-version";
  /** Writes the tables' metadata files at once: file writes, mostly waiting. */
  private static final ExecutorService POOL =
      ThreadPools.newExitingWorkerPool("frazil-commit-metadata", 8);
  /**
   * {@code BaseMetastoreTableOperations.refreshFromMetadataLocation(location, shouldRetry, retries,
   * loader)}: the one way to set a table's operations to metadata it committed without reading the
   * file (it is protected). Null if this Iceberg has no such method: the operations then read the
   * file at their next refresh, as after Iceberg's own commit.
   */
  private static final Method SET_CURRENT = setCurrent();

  private final String catalogName;
  private final String update;
  private final JdbcClientPool connections;

  /**
   * @param catalogName the catalog's name (its rows' {@code catalog_name})
   * @param properties the JDBC catalog's properties ({@code uri}, {@code jdbc.*})
   */
  JdbcTablesCommit(String catalogName, Map<String, String> properties) {
    this.catalogName = catalogName;
    this.update =
        "V1".equalsIgnoreCase(properties.getOrDefault(SCHEMA_VERSION, "V0")) ? V1_UPDATE : V0_UPDATE;
    // One connection: the transaction is the only thing it runs.
    this.connections = new JdbcClientPool(1, properties.get(CatalogProperties.URI), properties);
  }

  private static Method setCurrent() {
    try {
      Method m =
          BaseMetastoreTableOperations.class.getDeclaredMethod(
              "refreshFromMetadataLocation",
              String.class,
              Predicate.class,
              int.class,
              Function.class);
      m.setAccessible(true);
      return m;
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null;
    }
  }

  /**
   * Commits {@code updated} over {@code bases} for every table, in one database transaction.
   *
   * @param identifiers the tables
   * @param ops each table's operations (a JDBC catalog's, as loaded; their current metadata is
   *     {@code bases}' where the commit goes in)
   * @param bases each table's metadata the change was applied on
   * @param updated each table's metadata with the change
   * @throws CommitFailedException nothing was committed: a table moved since its base, or the
   *     database refused a statement before the transaction's commit
   * @throws CommitStateUnknownException the database's commit itself failed: the tables may or
   *     may not hold the change
   */
  void commit(
      List<TableIdentifier> identifiers,
      List<TableOperations> ops,
      List<TableMetadata> bases,
      List<TableMetadata> updated) {
    int n = identifiers.size();
    String[] written = new String[n];
    Tasks.range(n)
        .executeWith(n > 1 ? POOL : null)
        .stopOnFailure()
        .throwFailureWhenFinished()
        .run(i -> written[i] = writeMetadata(ops.get(i), bases.get(i), updated.get(i)));
    int moved;
    boolean[] committing = {false};
    try {
      moved = connections.run(conn -> swap(conn, identifiers, bases, written, committing), false);
    } catch (SQLException | RuntimeException e) {
      if (committing[0]) {
        throw new CommitStateUnknownException(e);
      }
      deleteQuietly(ops, written, e);
      throw new CommitFailedException(
          e, "Cannot commit %d tables: the catalog database refused the transaction: %s", n, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CommitStateUnknownException(e);
    }
    if (moved >= 0) {
      CommitFailedException e =
          new CommitFailedException(
              "Cannot commit %s: its metadata location is no longer %s (another commit since); "
                  + "none of the transaction's %d tables was committed",
              identifiers.get(moved), bases.get(moved).metadataFileLocation(), n);
      deleteQuietly(ops, written, e);
      throw e;
    }
    for (int i = 0; i < n; i++) {
      TableMetadata committed =
          TableMetadata.buildFrom(updated.get(i))
              .discardChanges()
              .withMetadataLocation(written[i])
              .build();
      setCurrent(ops.get(i), written[i], committed);
      CatalogUtil.deleteRemovedMetadataFiles(ops.get(i).io(), bases.get(i), committed);
    }
  }

  /**
   * The transaction: each table's row swapped from its base's metadata location to the new one.
   * Returns -1 once committed, or the first table whose row did not match (rolled back).
   */
  private int swap(
      Connection conn,
      List<TableIdentifier> identifiers,
      List<TableMetadata> bases,
      String[] written,
      boolean[] committing)
      throws SQLException {
    boolean autoCommit = conn.getAutoCommit();
    conn.setAutoCommit(false);
    try {
      try (PreparedStatement st = conn.prepareStatement(update)) {
        for (int i = 0; i < written.length; i++) {
          TableIdentifier id = identifiers.get(i);
          String base = bases.get(i).metadataFileLocation();
          st.setString(1, written[i]);
          st.setString(2, base);
          st.setString(3, catalogName);
          st.setString(4, String.join(".", id.namespace().levels()));
          st.setString(5, id.name());
          st.setString(6, base);
          if (st.executeUpdate() != 1) {
            conn.rollback();
            return i;
          }
        }
      } catch (SQLException | RuntimeException e) {
        try {
          conn.rollback();
        } catch (SQLException suppressed) {
          e.addSuppressed(suppressed); // a transaction never committed is not applied
        }
        throw e;
      }
      committing[0] = true;
      conn.commit();
      return -1;
    } finally {
      try {
        conn.setAutoCommit(autoCommit);
      } catch (SQLException ignored) {
        // the connection is broken; the pool replaces it on its next use
      }
    }
  }

  /**
   * Writes {@code metadata} as the table's next metadata file, named as Iceberg names it ({@code
   * <version>-<uuid>.metadata.json}, the version one above {@code base}'s), and returns its
   * location.
   */
  private static String writeMetadata(TableOperations ops, TableMetadata base, TableMetadata metadata) {
    String codec =
        metadata.property(
            TableProperties.METADATA_COMPRESSION, TableProperties.METADATA_COMPRESSION_DEFAULT);
    String file =
        String.format(
            Locale.ROOT,
            "%05d-%s%s",
            version(base.metadataFileLocation()) + 1,
            UUID.randomUUID(),
            TableMetadataParser.getFileExtension(codec));
    String folder = metadata.properties().get(TableProperties.WRITE_METADATA_LOCATION);
    String location =
        folder != null
            ? LocationUtil.stripTrailingSlash(folder) + "/" + file
            : LocationUtil.stripTrailingSlash(metadata.location()) + "/metadata/" + file;
    TableMetadataParser.overwrite(metadata, ops.io().newOutputFile(location));
    return location;
  }

  /** The version a metadata file's name starts with ({@code 00012-…}: 12), -1 if none. */
  static int version(String location) {
    if (location == null) {
      return -1;
    }
    int start = location.lastIndexOf('/') + 1;
    int end = location.indexOf('-', start);
    if (end < 0) {
      return -1;
    }
    try {
      return Integer.parseInt(location.substring(start, end));
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  /** Sets {@code ops}' current metadata to what it just committed, without reading the file. */
  private static void setCurrent(TableOperations ops, String location, TableMetadata committed) {
    if (SET_CURRENT == null || !(ops instanceof BaseMetastoreTableOperations)) {
      return;
    }
    Function<String, TableMetadata> loader = l -> committed;
    Predicate<Exception> never = e -> false;
    try {
      SET_CURRENT.invoke(ops, location, never, 0, loader);
    } catch (ReflectiveOperationException | RuntimeException e) {
      // Left to read the file at its next refresh, as after Iceberg's own commit.
    }
  }

  private static void deleteQuietly(List<TableOperations> ops, String[] written, Exception failure) {
    for (int i = 0; i < written.length; i++) {
      if (written[i] != null) {
        try {
          ops.get(i).io().deleteFile(written[i]);
        } catch (RuntimeException suppressed) {
          failure.addSuppressed(suppressed); // left for orphan-file cleanup
        }
      }
    }
  }

  @Override
  public void close() {
    connections.close();
  }
}
