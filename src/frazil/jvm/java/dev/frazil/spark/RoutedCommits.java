package dev.frazil.spark;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.function.IntConsumer;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.HasTableOperations;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableOperations;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.relocated.com.google.common.util.concurrent.MoreExecutors;
import org.apache.iceberg.util.Tasks;
import org.apache.iceberg.util.ThreadPools;
import dev.frazil.iceberg.OwnManifests;
import dev.frazil.spark.RoutedWrites.Result;

/**
 * Commits what {@link RoutedWrites#write} wrote to known tables each in a commit of its own
 * ({@link #append}, several at once with {@link #appendEach}), and a marker without data
 * ({@link #mark}). All known tables' files in one catalog transaction are {@link
 * TablesTransaction}'s; a table the batch met first is created with its files by {@link
 * NewTables}. Each commit's snapshot carries the batch's marker (its summary).
 */
public final class RoutedCommits {
  static final ObjectMapper JSON = new ObjectMapper();

  /**
   * Runs a commit's manifest scans (the merge and filter of existing manifests, the manifest
   * list) in the committing thread: on Iceberg's shared worker pool, each step of the tables
   * committing at once would queue, and its caller polls for it in 10 ms sleeps. Writing the
   * new manifest still goes to that pool in Iceberg 1.11, hence its size (frazil sets
   * {@code iceberg.worker.num-threads}).
   */
  static final ExecutorService IN_THREAD = MoreExecutors.newDirectExecutorService();

  /**
   * Commits the known tables of a batch each on its own ({@link #appendEach}): as many at once
   * as the driver's threads did (catalog round trips and small file writes, mostly waiting).
   */
  private static final ExecutorService EACH_POOL =
      ThreadPools.newExitingWorkerPool("frazil-commit-each", 8);

  private RoutedCommits() {}

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

  /** Some of a list of tables, named, each with a summary: a JSON list of commits, parsed. */
  static final class Chosen {
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

  /** {@code work} for each index, several at once: the failures, by index. */
  static Map<Integer, Throwable> each(int n, IntConsumer work) {
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
  static Map<String, String> stringMap(Object parsed) {
    Map<String, String> out = new LinkedHashMap<>();
    for (Map.Entry<?, ?> e : ((Map<?, ?>) parsed).entrySet()) {
      out.put((String) e.getKey(), (String) e.getValue());
    }
    return out;
  }

  /** A JSON object of strings, as a map in its order. */
  static Map<String, String> summaryOf(String json) throws IOException {
    return JSON.readValue(json, new TypeReference<LinkedHashMap<String, String>>() {});
  }
}
