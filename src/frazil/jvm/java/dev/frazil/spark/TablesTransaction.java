package dev.frazil.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.function.Function;
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
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.exceptions.CommitFailedException;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.util.PropertyUtil;
import org.apache.iceberg.util.Tasks;
import org.apache.iceberg.util.ThreadPools;
import dev.frazil.iceberg.MarkedCatalog;
import dev.frazil.iceberg.MarkedOperations;
import dev.frazil.iceberg.OwnManifests;
import dev.frazil.spark.RoutedWrites.Result;

/**
 * Commits what {@link RoutedWrites#write} wrote to several known tables in one catalog
 * transaction where the catalog commits several tables at once ({@link
 * MarkedCatalog#commitsTablesAtOnce}): every table's append, or the run's final markers, all
 * tables or none. Each snapshot carries its table's marker (its summary).
 */
public final class TablesTransaction {
  /**
   * Applies the appends of a multi-table commit at once ({@link #appendAll}): a pool of its own,
   * since each append hands its manifest to Iceberg's worker pool and waits for it.
   */
  private static final ExecutorService APPLY_POOL =
      ThreadPools.newExitingWorkerPool("frazil-commit-apply", 16);

  private TablesTransaction() {}

  /**
   * {@link #appendAll(Result, MarkedCatalog, List, List, List)} for some of {@code tables}:
   * {@code commits} is a JSON list of {@code [index into tables, table name, summary object]}.
   * Passed as one string and a list built once per table set, where Java lists and maps built
   * per batch cost a py4j round trip per table and summary entry.
   */
  public static void appendAll(
      Result result, MarkedCatalog catalog, List<Table> tables, String commits)
      throws IOException, InterruptedException {
    RoutedCommits.Chosen c = RoutedCommits.Chosen.parse(tables, commits);
    appendAll(result, catalog, c.names, c.tables, c.summaries);
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
    RoutedCommits.Chosen c = RoutedCommits.Chosen.parse(tables, commits);
    commitAll(name -> List.of(), catalog, c.names, c.tables, c.summaries);
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
        files.isEmpty() ? txn.newFastAppend() : txn.newAppend().scanManifestsWith(RoutedCommits.IN_THREAD);
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
}
