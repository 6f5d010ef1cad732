package dev.frazil.iceberg;

import java.io.Closeable;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.iceberg.BaseTable;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.HasTableOperations;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableMetadata;
import org.apache.iceberg.TableOperations;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.SupportsNamespaces;
import org.apache.iceberg.catalog.TableCommit;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.exceptions.NamespaceNotEmptyException;
import org.apache.iceberg.exceptions.NoSuchNamespaceException;
import org.apache.iceberg.hadoop.Configurable;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.rest.RESTCatalog;

/**
 * Any Iceberg catalog, whose tables refuse a pipeline's commit planned on a stale marker ({@link
 * MarkedOperations}): the table is the lock between runs of one pipeline, whatever writes it
 * (Spark appends and MERGE, frazil's own appends, marker-only commits).
 *
 * <p>Registered as Spark's {@code catalog-impl}; the catalog it wraps is named by {@link
 * #DELEGATE_TYPE} (Iceberg's {@code type}: jdbc, rest, hadoop, hive) or {@link #DELEGATE_IMPL}
 * (a {@code catalog-impl}), all other properties passed on unchanged.
 *
 * <p>With a REST or a JDBC catalog, {@link #commitTables} commits several tables' changes in one
 * catalog transaction (the REST specification's multi-table commit; for JDBC, one database
 * transaction: {@link JdbcTablesCommit}), each table checked as {@link MarkedOperations} checks its
 * own commits; {@link #ATOMIC_COMMITS} {@code false} turns that off.
 */
public class MarkedCatalog implements Catalog, SupportsNamespaces, Configurable<Object>, Closeable {
  public static final String DELEGATE_TYPE = "frazil.delegate-type";
  public static final String DELEGATE_IMPL = "frazil.delegate-impl";
  /** Whether multi-table commits are used ({@code true}, the default): REST and JDBC catalogs. */
  public static final String ATOMIC_COMMITS = "frazil.atomic-commits";

  protected Catalog delegate;
  private Object conf;
  private String name;
  private boolean atomicCommits;
  /** A JDBC catalog's multi-table commits (null for other catalogs). */
  private JdbcTablesCommit jdbcCommits;

  @Override
  public void setConf(Object conf) {
    this.conf = conf;
  }

  @Override
  public void initialize(String catalogName, Map<String, String> properties) {
    this.name = catalogName;
    Map<String, String> own = new HashMap<>(properties);
    own.remove(CatalogProperties.CATALOG_IMPL);
    String type = own.remove(DELEGATE_TYPE);
    String impl = own.remove(DELEGATE_IMPL);
    this.atomicCommits = !"false".equalsIgnoreCase(own.remove(ATOMIC_COMMITS));
    if (impl != null) {
      own.put(CatalogProperties.CATALOG_IMPL, impl);
    } else if (type != null) {
      own.put(CatalogUtil.ICEBERG_CATALOG_TYPE, type);
    }
    this.delegate = CatalogUtil.buildIcebergCatalog(catalogName, own, conf);
    if (atomicCommits && delegate instanceof JdbcCatalog) {
      this.jdbcCommits = new JdbcTablesCommit(catalogName, own);
    }
  }

  /** The catalog this one wraps. */
  public Catalog delegate() {
    return delegate;
  }

  /**
   * Whether {@code catalog} commits several tables at once with {@link #commitTables}: a {@link
   * MarkedCatalog} over a REST or a JDBC catalog, the multi-table commit not switched off.
   */
  public static boolean commitsTablesAtOnce(Catalog catalog) {
    if (!(catalog instanceof MarkedCatalog) || !((MarkedCatalog) catalog).atomicCommits) {
      return false;
    }
    MarkedCatalog marked = (MarkedCatalog) catalog;
    return marked.delegate instanceof RESTCatalog || marked.jdbcCommits != null;
  }

  /** {@link #commitTables(List, List, List, List)} with the tables loaded anew (JDBC). */
  public void commitTables(
      List<TableIdentifier> identifiers, List<TableMetadata> bases, List<TableMetadata> updated) {
    commitTables(identifiers, null, bases, updated);
  }

  /**
   * Commits the changes of several tables in one catalog transaction: all of them, or none.
   *
   * <p>Each table's change is checked first as {@link MarkedOperations#commit} checks it (a
   * snapshot planned on a stale marker is refused with {@link StaleMarkerException}, nothing
   * sent). With a REST catalog all then go in one request to its {@code transactions/commit},
   * each with the requirements Iceberg derives from its base ({@link TableCommit#create}: the
   * table's UUID, and its main branch still at {@code base}'s snapshot). With a JDBC catalog each
   * table's metadata file is written and all tables' rows swap to theirs in one database
   * transaction, each only from {@code base}'s metadata location ({@link JdbcTablesCommit}). A
   * commit of anyone else to any of the tables since its base therefore fails the whole
   * transaction ({@link org.apache.iceberg.exceptions.CommitFailedException}), and the marker
   * checked against {@code base} is the table's newest when the transaction commits.
   *
   * @param identifiers the tables
   * @param tables the tables as loaded from this catalog, whose current metadata is {@code bases}
   *     (same order; JDBC: set to the committed metadata after the commit); null to load them
   * @param bases each table's metadata the change was applied on
   * @param updated each table's metadata with the change (its {@code changes()} are sent)
   * @throws IllegalStateException if {@link #commitsTablesAtOnce} is false for this catalog
   */
  public void commitTables(
      List<TableIdentifier> identifiers,
      List<Table> tables,
      List<TableMetadata> bases,
      List<TableMetadata> updated) {
    if (!commitsTablesAtOnce(this)) {
      throw new IllegalStateException("catalog " + name + " does not commit tables at once");
    }
    for (int i = 0; i < identifiers.size(); i++) {
      MarkedOperations.check(bases.get(i), updated.get(i), identifiers.get(i).toString());
    }
    if (delegate instanceof RESTCatalog) {
      List<TableCommit> commits = new ArrayList<>(identifiers.size());
      for (int i = 0; i < identifiers.size(); i++) {
        commits.add(TableCommit.create(identifiers.get(i), bases.get(i), updated.get(i)));
      }
      ((RESTCatalog) delegate).commitTransaction(commits);
      return;
    }
    List<TableOperations> ops = new ArrayList<>(identifiers.size());
    for (int i = 0; i < identifiers.size(); i++) {
      Table table = tables == null ? delegate.loadTable(identifiers.get(i)) : tables.get(i);
      TableOperations o = ((HasTableOperations) table).operations();
      ops.add(o instanceof MarkedOperations ? ((MarkedOperations) o).delegate() : o);
    }
    jdbcCommits.commit(identifiers, ops, bases, updated);
  }

  /** {@code table} with its commits checked ({@link MarkedOperations}); others unchanged. */
  static Table marked(Table table) {
    if (table instanceof BaseTable && !(((BaseTable) table).operations() instanceof MarkedOperations)) {
      BaseTable base = (BaseTable) table;
      return new BaseTable(
          new MarkedOperations(base.operations(), base.name()), base.name(), base.reporter());
    }
    return table;
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public Table loadTable(TableIdentifier identifier) {
    return marked(delegate.loadTable(identifier));
  }

  @Override
  public List<TableIdentifier> listTables(Namespace namespace) {
    return delegate.listTables(namespace);
  }

  @Override
  public boolean tableExists(TableIdentifier identifier) {
    return delegate.tableExists(identifier);
  }

  @Override
  public boolean dropTable(TableIdentifier identifier, boolean purge) {
    return delegate.dropTable(identifier, purge);
  }

  @Override
  public void renameTable(TableIdentifier from, TableIdentifier to) {
    delegate.renameTable(from, to);
  }

  @Override
  public void invalidateTable(TableIdentifier identifier) {
    delegate.invalidateTable(identifier);
  }

  @Override
  public Table registerTable(TableIdentifier identifier, String metadataFileLocation) {
    return marked(delegate.registerTable(identifier, metadataFileLocation));
  }

  @Override
  public Catalog.TableBuilder buildTable(TableIdentifier identifier, Schema schema) {
    // A table's creation has no marker before it to check against.
    return delegate.buildTable(identifier, schema);
  }

  private SupportsNamespaces namespaces() {
    if (!(delegate instanceof SupportsNamespaces)) {
      throw new UnsupportedOperationException(
          "catalog " + name + " (" + delegate.getClass().getName() + ") has no namespaces");
    }
    return (SupportsNamespaces) delegate;
  }

  @Override
  public void createNamespace(Namespace namespace, Map<String, String> metadata) {
    namespaces().createNamespace(namespace, metadata);
  }

  @Override
  public List<Namespace> listNamespaces(Namespace namespace) throws NoSuchNamespaceException {
    return namespaces().listNamespaces(namespace);
  }

  @Override
  public Map<String, String> loadNamespaceMetadata(Namespace namespace)
      throws NoSuchNamespaceException {
    return namespaces().loadNamespaceMetadata(namespace);
  }

  @Override
  public boolean dropNamespace(Namespace namespace) throws NamespaceNotEmptyException {
    return namespaces().dropNamespace(namespace);
  }

  @Override
  public boolean setProperties(Namespace namespace, Map<String, String> properties)
      throws NoSuchNamespaceException {
    return namespaces().setProperties(namespace, properties);
  }

  @Override
  public boolean removeProperties(Namespace namespace, Set<String> properties)
      throws NoSuchNamespaceException {
    return namespaces().removeProperties(namespace, properties);
  }

  @Override
  public boolean namespaceExists(Namespace namespace) {
    return namespaces().namespaceExists(namespace);
  }

  @Override
  public void close() throws IOException {
    if (jdbcCommits != null) {
      jdbcCommits.close();
    }
    if (delegate instanceof Closeable) {
      ((Closeable) delegate).close();
    }
  }

  @Override
  public String toString() {
    return "MarkedCatalog(" + delegate + ")";
  }
}
