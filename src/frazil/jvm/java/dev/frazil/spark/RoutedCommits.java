package dev.frazil.spark;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.function.Function;
import java.util.function.IntConsumer;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.BaseTable;
import org.apache.iceberg.BaseTransaction;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.HasTableOperations;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableMetadata;
import org.apache.iceberg.TableOperations;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.Transaction;
import org.apache.iceberg.Transactions;
import org.apache.iceberg.UpdateSchema;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.exceptions.CommitFailedException;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.mapping.MappingUtil;
import org.apache.iceberg.mapping.NameMappingParser;
import org.apache.iceberg.relocated.com.google.common.util.concurrent.MoreExecutors;
import org.apache.iceberg.util.PropertyUtil;
import org.apache.iceberg.util.Tasks;
import org.apache.iceberg.util.ThreadPools;
import dev.frazil.iceberg.MarkedCatalog;
import dev.frazil.iceberg.MarkedOperations;
import dev.frazil.iceberg.OwnManifests;
import dev.frazil.spark.RoutedWrites.Result;
import dev.frazil.spark.RoutedWrites.TableWritten;
/**
 * Commits what {@link RoutedWrites#write} wrote: each known table's files in one commit of its
 * own ({@link #append}, several at once with {@link #appendEach}), all known tables' files in
 * one catalog transaction where the catalog commits several tables at once ({@link
 * #appendAll}), and a table the batch met first created with its files ({@link
 * #createAndAppend}). Each commit's snapshot carries the batch's marker (its summary).
 */
public final class RoutedCommits {
  private static final ObjectMapper JSON = new ObjectMapper();
  /**
   * Runs a commit's manifest scans (the merge and filter of existing manifests, the manifest
   * list) in the committing thread: on Iceberg's shared worker pool, each step of the tables
   * committing at once would queue, and its caller polls for it in 10 ms sleeps. Writing the
   * new manifest still goes to that pool in Iceberg 1.11, hence its size (frazil sets
   * {@code iceberg.worker.num-threads}).
   */
  private static final ExecutorService IN_THREAD = MoreExecutors.newDirectExecutorService();
  /**
   * Applies the appends of a multi-table commit at once ({@link #appendAll}): a pool of its own,
   * since each append hands its manifest to Iceberg's worker pool and waits for it.
   */
  private static final ExecutorService APPLY_POOL =
      ThreadPools.newExitingWorkerPool("frazil-commit-apply", 16);

  /**
   * Commits the known tables of a batch each on its own ({@link #appendEach}): as many at once
   * as the driver's threads did (catalog round trips and small file writes, mostly waiting).
   */
  private static final ExecutorService EACH_POOL =
      ThreadPools.newExitingWorkerPool("frazil-commit-each", 8);

  private RoutedCommits() {}

  /** Whether every table holds the snapshot its change adds (the transaction went in). */
  private static boolean landed(
      List<Table> tables,
      List<TableMetadata> bases,
      List<TableMetadata> updated,
      RuntimeException failure) {
    for (int i = 0; i < tables.size(); i++) {
      Table table = tables.get(i);
      if (!(table instanceof HasTableOperations)
          || !MarkedOperations.landed(
              ((HasTableOperations) table).operations(), bases.get(i), updated.get(i), failure)) {
        return false;
      }
    }
    return true;
  }

  /**
   * Appends a known table's files in one commit carrying {@code summary}. A commit refused by
   * validation (a stale marker: another run, a rollback) deletes the files: nothing refers to
   * them, and the batch is planned again.
   */
  public static void append(Result result, Table table, String name, Map<String, String> summary) {
    AppendFiles append = table.newAppend().scanManifestsWith(IN_THREAD);
    List<DataFile> files = result.written(name).files;
    TableOperations ops = ((HasTableOperations) table).operations();
    List<ManifestFile> manifests = OwnManifests.add(ops, ops.current(), append, files);
    summary.forEach(append::set);
    try {
      append.commit();
    } catch (ValidationException e) {
      OwnManifests.deleteUncommitted(table.io(), manifests, e);
      UncommittedFiles.delete(table.io(), files, e);
      throw e;
    }
  }

  /**
   * {@link #append(Result, Table, String, Map)} with the summary as a JSON object of strings:
   * one py4j argument, where a Java map is a round trip per entry.
   */
  public static void append(Result result, Table table, String name, String summary)
      throws IOException {
    append(result, table, name, summaryOf(summary));
  }

  /**
   * {@link #appendAll(Result, MarkedCatalog, List, List, List)} for some of {@code tables}:
   * {@code commits} is a JSON list of {@code [index into tables, table name, summary object]}.
   * Passed as one string and a list built once per table set, where Java lists and maps built
   * per batch cost a py4j round trip per table and summary entry.
   */
  public static void appendAll(
      Result result, MarkedCatalog catalog, List<Table> tables, String commits)
      throws IOException, InterruptedException {
    Chosen c = Chosen.parse(tables, commits);
    appendAll(result, catalog, c.names, c.tables, c.summaries);
  }

  /** Some of a list of tables, named, each with a summary: a JSON list of commits, parsed. */
  private static final class Chosen {
    final List<String> names;
    final List<Table> tables;
    final List<Map<String, String>> summaries;

    private Chosen(int n) {
      names = new ArrayList<>(n);
      tables = new ArrayList<>(n);
      summaries = new ArrayList<>(n);
    }

    /** {@code commits}: a JSON list of {@code [index into tables, table name, summary object]}. */
    static Chosen parse(List<Table> tables, String commits) throws IOException {
      List<List<Object>> parsed =
          JSON.readValue(commits, new TypeReference<List<List<Object>>>() {});
      Chosen out = new Chosen(parsed.size());
      for (List<Object> commit : parsed) {
        out.tables.add(tables.get(((Number) commit.get(0)).intValue()));
        out.names.add((String) commit.get(1));
        out.summaries.add(stringMap(commit.get(2)));
      }
      return out;
    }
  }

  /**
   * {@link #append(Result, Table, String, Map)} for some of {@code tables}, each in a commit
   * of its own, several at once: {@code commits} is a JSON list of {@code [index into tables,
   * table name, summary object]}. The driver's per-table commits cost a few py4j round trips
   * each; here a batch's known tables cost one. Waits for all of them.
   *
   * @return the commits that failed (their positions in {@code commits}) and their failures:
   *     usually empty, one round trip to read
   */
  public static Map<Integer, Throwable> appendEach(
      Result result, List<Table> tables, String commits)
      throws IOException {
    Chosen c = Chosen.parse(tables, commits);
    return each(
        c.names.size(),
        i -> append(result, c.tables.get(i), c.names.get(i), c.summaries.get(i)));
  }

  /** {@code work} for each index, several at once: the failures, by index. */
  private static Map<Integer, Throwable> each(int n, IntConsumer work) {
    Throwable[] failures = new Throwable[n];
    Tasks.range(n)
        .executeWith(n > 1 ? EACH_POOL : null)
        .run(
            i -> {
              try {
                work.accept(i);
              } catch (RuntimeException | Error e) {
                failures[i] = e;
              }
            });
    Map<Integer, Throwable> out = new LinkedHashMap<>();
    for (int i = 0; i < n; i++) {
      if (failures[i] != null) {
        out.put(i, failures[i]);
      }
    }
    return out;
  }

  /** A parsed JSON object of strings, as a map in its order. */
  private static Map<String, String> stringMap(Object parsed) {
    Map<String, String> out = new LinkedHashMap<>();
    for (Map.Entry<?, ?> e : ((Map<?, ?>) parsed).entrySet()) {
      out.put((String) e.getKey(), (String) e.getValue());
    }
    return out;
  }

  private static Map<String, String> summaryOf(String json) throws IOException {
    return JSON.readValue(json, new TypeReference<LinkedHashMap<String, String>>() {});
  }

  /**
   * Appends the files of several known tables, each in a snapshot carrying its own summary, in
   * one catalog transaction ({@link MarkedCatalog#commitTables}): all tables commit, or none.
   *
   * <p>Each attempt applies every table's append over its metadata (refreshed after a failed
   * attempt) in an Iceberg transaction that is never committed on its own, and sends all the
   * tables' changes in one request. A concurrent commit to any of the tables fails the whole
   * transaction; it is tried again over the refreshed tables, as Iceberg retries one table's
   * commit (the tables' largest {@code commit.retry.num-retries}, waits between {@code
   * commit.retry.min-wait-ms} and {@code max-wait-ms}), the marker checked anew each time. A
   * stale marker ({@link dev.frazil.iceberg.StaleMarkerException}) is not retried: the data
   * files are deleted (nothing refers to them) and the batch is planned again.
   *
   * @param result the job's files
   * @param catalog the tables' catalog (one for which {@link
   *     MarkedCatalog#commitsTablesAtOnce} holds)
   * @param names the tables' names ({@code namespace.table}), as the job wrote them
   * @param tables the tables (same order)
   * @param summaries each table's snapshot summary: its marker (same order)
   */
  public static void appendAll(
      Result result,
      MarkedCatalog catalog,
      List<String> names,
      List<Table> tables,
      List<Map<String, String>> summaries)
      throws InterruptedException {
    commitAll(name -> result.written(name).files, catalog, names, tables, summaries);
  }

  /**
   * Markers without data for several tables (a run's final markers at its stop), in one catalog
   * transaction as {@link #appendAll} commits a batch: each table gets a snapshot adding no
   * files and carrying its summary, all tables or none. {@code commits} is a JSON list of {@code
   * [index into tables, table name, summary object]}.
   */
  public static void markAll(MarkedCatalog catalog, List<Table> tables, String commits)
      throws IOException, InterruptedException {
    Chosen c = Chosen.parse(tables, commits);
    commitAll(name -> List.of(), catalog, c.names, c.tables, c.summaries);
  }

  /**
   * A marker without data: a snapshot of {@code table} adding no files, carrying {@code
   * summary} (a JSON object of strings: one py4j argument, where a Java map or the append's
   * setters cost a round trip per entry).
   */
  public static void mark(Table table, String summary) throws IOException {
    AppendFiles append = table.newFastAppend();
    summaryOf(summary).forEach(append::set);
    append.commit();
  }

  private static void commitAll(
      Function<String, List<DataFile>> filesOf,
      MarkedCatalog catalog,
      List<String> names,
      List<Table> tables,
      List<Map<String, String>> summaries)
      throws InterruptedException {
    int retries = 0;
    long minWait = Long.MAX_VALUE;
    long maxWait = 0;
    for (Table table : tables) {
      Map<String, String> props = table.properties();
      retries =
          Math.max(
              retries,
              PropertyUtil.propertyAsInt(
                  props,
                  TableProperties.COMMIT_NUM_RETRIES,
                  TableProperties.COMMIT_NUM_RETRIES_DEFAULT));
      minWait =
          Math.min(
              minWait,
              PropertyUtil.propertyAsLong(
                  props,
                  TableProperties.COMMIT_MIN_RETRY_WAIT_MS,
                  TableProperties.COMMIT_MIN_RETRY_WAIT_MS_DEFAULT));
      maxWait =
          Math.max(
              maxWait,
              PropertyUtil.propertyAsLong(
                  props,
                  TableProperties.COMMIT_MAX_RETRY_WAIT_MS,
                  TableProperties.COMMIT_MAX_RETRY_WAIT_MS_DEFAULT));
    }
    List<TableIdentifier> identifiers = new ArrayList<>(names.size());
    for (String name : names) {
      identifiers.add(TableIdentifier.parse(name));
    }
    for (int attempt = 0; ; attempt++) {
      int n = names.size();
      TableMetadata[][] applied = new TableMetadata[n][];
      boolean refresh = attempt > 0;
      // The tables' appends are applied at once, as their own commits would run (each writes
      // a manifest and a manifest list).
      Tasks.range(n)
          .executeWith(n > 1 ? APPLY_POOL : null)
          .stopOnFailure()
          .throwFailureWhenFinished()
          .run(
              i ->
                  applied[i] =
                      apply(filesOf.apply(names.get(i)), names.get(i), tables.get(i),
                          summaries.get(i), refresh));
      List<TableMetadata> bases = new ArrayList<>(n);
      List<TableMetadata> updated = new ArrayList<>(n);
      for (TableMetadata[] pair : applied) {
        bases.add(pair[0]);
        updated.add(pair[1]);
      }
      try {
        catalog.commitTables(identifiers, tables, bases, updated);
        return;
      } catch (ValidationException e) {
        // Refused before the request was sent (a stale marker): nothing went in.
        for (int i = 0; i < names.size(); i++) {
          deleteUncommitted(bases.get(i), updated.get(i), tables.get(i).io(), e);
          UncommittedFiles.delete(tables.get(i).io(), filesOf.apply(names.get(i)), e);
        }
        throw e;
      } catch (RuntimeException e) {
        // A 409, a 5xx, a timeout or a dropped connection: the catalog may have applied the
        // transaction (a 409 answers a retry of a request it applied). It went in if the
        // tables hold its snapshots; only then, or certainly not, is anything cleaned up.
        if (landed(tables, bases, updated, e)) {
          return;
        }
        if (!(e instanceof CommitFailedException)) {
          throw e; // unknown: the files may be in the tables, leave them
        }
        // Certainly not committed (the catalog refused a requirement): this attempt's manifests
        // are nobody's.
        for (int i = 0; i < names.size(); i++) {
          deleteUncommitted(bases.get(i), updated.get(i), tables.get(i).io(), e);
        }
        if (attempt >= retries) {
          throw e;
        }
        Thread.sleep(Math.min(maxWait, minWait * (1L << Math.min(attempt, 20))));
      }
    }
  }

  /**
   * One table's append applied in memory only (a transaction's table operations): its
   * manifests are written, the table is not touched until the catalog commits the whole
   * transaction. Returns the metadata it was applied on and the metadata with it.
   */
  private static TableMetadata[] apply(
      List<DataFile> files,
      String name,
      Table table,
      Map<String, String> summary,
      boolean refresh) {
    TableOperations ops = ((BaseTable) table).operations();
    if (refresh) {
      ops.refresh();
    }
    Transaction txn = Transactions.newTransaction(name, ops);
    // Without files, a fast append: nothing to merge, as a marker's own commit makes it.
    AppendFiles append =
        files.isEmpty() ? txn.newFastAppend() : txn.newAppend().scanManifestsWith(IN_THREAD);
    // Deleted with the attempt's manifest list should it not commit (deleteUncommitted: the
    // list names them as this snapshot's).
    OwnManifests.add(ops, ((BaseTransaction) txn).startMetadata(), append, files);
    summary.forEach(append::set);
    append.commit();
    return new TableMetadata[] {
      ((BaseTransaction) txn).startMetadata(), ((BaseTransaction) txn).currentMetadata()
    };
  }

  /** Deletes the manifests and manifest list an uncommitted append wrote (best effort). */
  private static void deleteUncommitted(
      TableMetadata base, TableMetadata updated, FileIO io, RuntimeException failure) {
    Snapshot snapshot = updated.currentSnapshot();
    if (snapshot == null || base.snapshot(snapshot.snapshotId()) != null) {
      return;
    }
    try {
      for (ManifestFile m : snapshot.allManifests(io)) {
        if (m.snapshotId() != null && m.snapshotId() == snapshot.snapshotId()) {
          io.deleteFile(m.path());
        }
      }
      io.deleteFile(snapshot.manifestListLocation());
    } catch (RuntimeException suppressed) {
      failure.addSuppressed(suppressed); // left for orphan-file cleanup
    }
  }

  /**
   * Creates a table met first with the template's schema (the catalog assigns the same field
   * ids, checked), drops the columns none of its records filled, sets the name mapping and
   * appends its files, in one transaction: the table appears with its rows and marker. The
   * columns to drop (a JSON list) and the summary (a JSON object of strings) are one py4j
   * argument each, where a Java list or map costs a round trip per element.
   *
   * @return false if the catalog would give the columns other ids (nothing is created)
   */
  public static boolean createAndAppend(
      Result result,
      Catalog catalog,
      TableIdentifier identifier,
      Table template,
      Map<String, String> properties,
      String dropColumnsJson,
      String nameMappingProperty,
      String summaryJson)
      throws IOException {
    List<String> dropColumns =
        JSON.readValue(dropColumnsJson, new TypeReference<List<String>>() {});
    return create(
        result,
        catalog,
        identifier,
        template,
        properties,
        dropColumns,
        nameMappingProperty,
        summaryOf(summaryJson));
  }

  /** What {@link #createAll} made: each table, or why not. */
  public static final class Created {
    private final Table[] tables;
    private final Map<Integer, Throwable> failures;

    Created(Table[] tables, Map<Integer, Throwable> failures) {
      this.tables = tables;
      this.failures = failures;
    }

    /** The {@code i}th table, created and loaded; null if it failed or needs a refit. */
    public Table table(int i) {
      return tables[i];
    }

    /** The tables whose creation failed (by index), with the failure. */
    public Map<Integer, Throwable> failures() {
      return failures;
    }

    /**
     * Every table, in order (null where {@link #table} is): one py4j round trip for the batch's
     * new tables, a driver reading each only when it needs it.
     */
    public List<Table> tables() {
      return Collections.unmodifiableList(Arrays.asList(tables));
    }

    /** The indexes of the tables neither created nor failed (a refit), as a JSON list. */
    public String refits() throws IOException {
      List<Integer> out = new ArrayList<>();
      for (int i = 0; i < tables.length; i++) {
        if (tables[i] == null && !failures.containsKey(i)) {
          out.add(i);
        }
      }
      return JSON.writeValueAsString(out);
    }
  }

  /**
   * {@link #createAndAppend} for several tables in one call, several at once (each is a few
   * catalog round trips and file writes, mostly waiting), each table loaded once created. One
   * py4j round trip for the batch's new tables: per table the calls and their arguments cost
   * more than the creation itself (bench/routing, 100 tables met in a first batch).
   *
   * @param tablesJson a JSON list of {@code [table name, [columns to drop], summary object]}
   * @return each table created (null where the catalog would give the columns other ids:
   *     nothing is created), or its failure
   */
  public static Created createAll(
      Result result,
      Catalog catalog,
      Table template,
      Map<String, String> properties,
      String nameMappingProperty,
      String tablesJson)
      throws IOException {
    List<List<Object>> parsed =
        JSON.readValue(tablesJson, new TypeReference<List<List<Object>>>() {});
    Table[] tables = new Table[parsed.size()];
    Map<Integer, Throwable> failures =
        each(
            parsed.size(),
            i -> {
              List<Object> spec = parsed.get(i);
              TableIdentifier identifier = TableIdentifier.parse((String) spec.get(0));
              List<String> drops = new ArrayList<>();
              for (Object column : (List<?>) spec.get(1)) {
                drops.add((String) column);
              }
              if (create(
                  result,
                  catalog,
                  identifier,
                  template,
                  properties,
                  drops,
                  nameMappingProperty,
                  stringMap(spec.get(2)))) {
                tables[i] = catalog.loadTable(identifier);
              }
            });
    return new Created(tables, failures);
  }

  private static boolean create(
      Result result,
      Catalog catalog,
      TableIdentifier identifier,
      Table template,
      Map<String, String> properties,
      List<String> dropColumns,
      String nameMappingProperty,
      Map<String, String> summary) {
    TableWritten written = result.written(identifier.toString());
    Transaction txn =
        catalog
            .buildTable(identifier, template.schema())
            .withPartitionSpec(template.spec())
            .withProperties(properties)
            .withLocation(written.location)
            .createTransaction();
    if (!txn.table().schema().asStruct().equals(template.schema().asStruct())
        || !txn.table().spec().equals(template.spec())) {
      return false;
    }
    if (!dropColumns.isEmpty()) {
      UpdateSchema update = txn.updateSchema();
      for (String column : dropColumns) {
        update.deleteColumn(column);
      }
      update.commit();
    }
    txn.updateProperties()
        .set(nameMappingProperty, NameMappingParser.toJson(MappingUtil.create(txn.table().schema())))
        .commit();
    AppendFiles append = txn.newAppend().scanManifestsWith(IN_THREAD);
    for (DataFile f : written.files) {
      append.appendFile(f);
    }
    summary.forEach(append::set);
    append.commit();
    txn.commitTransaction();
    return true;
  }
}
