package dev.frazil.iceberg;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.util.Tasks;
import org.apache.iceberg.util.ThreadPools;

/**
 * A pipeline's tables read at once, for the driver's per-batch looks at them: each table's
 * newest marker of the pipeline and, after a batch's commits, whether another run's commit of
 * the pipeline came in between. The rules are {@code frazil.progress.markers}' ({@code
 * find_marker}, {@code check_no_interleaving}); done here, a routed batch's 100 tables cost
 * one py4j round trip instead of some twenty each (a refresh, the ancestry walk and every
 * summary entry read one call at a time), and the tables' refreshes (a catalog round trip
 * each, and a metadata file read where the table changed) run at once.
 */
public final class TableStates {
  /** Summary keys of a marker (see {@code frazil.progress.markers}). */
  static final String PIPELINE = MarkedOperations.PIPELINE;

  static final String OFFSETS = MarkedOperations.OFFSETS;
  static final String COMMIT_ID = MarkedOperations.COMMIT_ID;
  /** A --reset-offsets commit's list of the marker names it retires (frazil.progress.markers). */
  static final String RETIRES = "frazil.retires";
  /** Where a marker's keys start: the summary entries handed back are those under it. */
  static final String PREFIX = "frazil.";

  private static final String TOTAL_RECORDS = "total-records";
  private static final String TOTAL_POSITION_DELETES = "total-position-deletes";
  private static final String TOTAL_DATA_FILES = "total-data-files";
  private static final String ADDED_RECORDS = "added-records";
  private static final ObjectMapper JSON = new ObjectMapper();
  /** Refreshes of several tables at once: catalog round trips and file reads, mostly waiting. */
  private static final ExecutorService POOL = ThreadPools.newExitingWorkerPool("frazil-states", 8);

  private TableStates() {}

  /**
   * Each table refreshed, and its state for {@code pipeline}: as JSON, a list (same order) of
   * objects with {@code snapshot_id} (the current snapshot's, or null), {@code total_records}
   * (the current snapshot's live rows: {@code total-records} less {@code
   * total-position-deletes}, as frazil.progress.rows counts them; 0 without one) and {@code marker}: the
   * {@code frazil.*} entries of the newest snapshot in the current ancestry (at most {@code
   * maxWalk} snapshots) whose summary names the pipeline and holds offsets, or null, and
   * {@code retired}: a newer snapshot's reset retired the pipeline and took over topics its
   * marker reads (a rename; its marker is then null).
   *
   * @throws RuntimeException the first table's failure (in the tables' order), once all are
   *     done
   */
  public static String read(List<Table> tables, String pipeline, int maxWalk)
      throws JsonProcessingException {
    Object[] out = new Object[tables.size()];
    each(tables.size(), i -> out[i] = state(tables.get(i), pipeline, maxWalk));
    return JSON.writeValueAsString(Arrays.asList(out));
  }

  /**
   * After a batch's commits, some of {@code tables}: {@code checks} is a JSON list of {@code
   * [index into tables, base snapshot id or null, commit id]}. Each table named is refreshed,
   * and the newest snapshot of its current ancestry after the base (the snapshot its state was
   * read at; null: none, the whole ancestry; at most {@code maxWalk} snapshots) that carries a
   * marker of {@code pipeline} with another commit id is found. As JSON, a list (the checks'
   * order) of that snapshot's id, or null where there is none.
   */
  public static String interleaved(
      List<Table> tables, String checks, String pipeline, int maxWalk)
      throws JsonProcessingException {
    List<List<Object>> parsed = JSON.readValue(checks, new TypeReference<List<List<Object>>>() {});
    Object[] out = new Object[parsed.size()];
    each(
        parsed.size(),
        i -> {
          List<Object> check = parsed.get(i);
          Table table = tables.get(((Number) check.get(0)).intValue());
          Long base = check.get(1) == null ? null : ((Number) check.get(1)).longValue();
          out[i] = other(table, base, pipeline, (String) check.get(2), maxWalk);
        });
    return JSON.writeValueAsString(Arrays.asList(out));
  }

  /**
   * Each table's current schema id and the value of its {@code property} (frazil's name
   * mapping), as JSON: a list (same order) of {@code [schema id, value or null]}. What a
   * routed batch compares with the columns it read last, for all its tables in one round trip
   * (a few each otherwise). Read from the tables as they are (refreshed by {@link #read}).
   */
  public static String columnVersions(List<Table> tables, String property)
      throws JsonProcessingException {
    List<List<Object>> out = new ArrayList<>(tables.size());
    for (Table table : tables) {
      out.add(Arrays.asList(table.schema().schemaId(), table.properties().get(property)));
    }
    return JSON.writeValueAsString(out);
  }

  /**
   * Whether each table's files are written as a routed batch's one job writes them: unsorted
   * and in Parquet ({@code write.format.default}), as JSON: a list of booleans (same order).
   */
  public static String plainWrites(List<Table> tables) throws JsonProcessingException {
    List<Boolean> out = new ArrayList<>(tables.size());
    for (Table table : tables) {
      String format = table.properties().getOrDefault("write.format.default", "parquet");
      out.add(table.sortOrder().isUnsorted() && "parquet".equalsIgnoreCase(format));
    }
    return JSON.writeValueAsString(out);
  }

  /**
   * The columns of some of the tables, as a routed batch's matching reads them, as JSON: a list
   * (in {@code indexes}' order) of objects with {@code schema_id}, {@code schema} (Iceberg's
   * JSON of the current schema), {@code spark} (that schema as Spark's type, its JSON), {@code
   * identifiers} (the identifier fields' names) and {@code mapping} (the value of {@code
   * property}, frazil's name mapping, or null). One round trip for the tables whose schema
   * changed (100 new tables: ten each otherwise).
   *
   * @param indexes positions in {@code tables}, as a JSON array
   */
  public static String columnViews(List<Table> tables, String indexes, String property)
      throws JsonProcessingException {
    List<Integer> chosen = JSON.readValue(indexes, new TypeReference<List<Integer>>() {});
    List<Map<String, Object>> out = new ArrayList<>(chosen.size());
    for (int index : chosen) {
      Table table = tables.get(index);
      org.apache.iceberg.Schema schema = table.schema();
      Map<String, Object> view = new LinkedHashMap<>();
      view.put("schema_id", schema.schemaId());
      view.put("schema", org.apache.iceberg.SchemaParser.toJson(schema));
      view.put("spark", org.apache.iceberg.spark.SparkSchemaUtil.convert(schema).json());
      view.put("identifiers", new ArrayList<>(schema.identifierFieldNames()));
      view.put("mapping", table.properties().get(property));
      out.add(view);
    }
    return JSON.writeValueAsString(out);
  }

  /**
   * Each table refreshed, and what a run's report reads of it, as JSON: a list (same order) of
   * objects with {@code snapshots} (kept in the metadata, all branches), {@code last_commit_ms}
   * (the current snapshot's time, or null), {@code pipeline_commit_ms} (the newest snapshot of the
   * current ancestry that names {@code pipeline} and added rows, or null), {@code data_files}
   * and {@code rows} (the current snapshot's totals; live rows as {@link #read} counts them). A
   * routed run's end reads its 1,000 tables in one round trip, not some ten per table.
   */
  public static String reports(List<Table> tables, String pipeline)
      throws JsonProcessingException {
    Object[] out = new Object[tables.size()];
    each(tables.size(), i -> out[i] = report(tables.get(i), pipeline));
    return JSON.writeValueAsString(Arrays.asList(out));
  }

  private static Map<String, Object> report(Table table, String pipeline) {
    table.refresh();
    int snapshots = 0;
    for (Snapshot ignored : table.snapshots()) {
      snapshots++;
    }
    Snapshot current = table.currentSnapshot();
    Long made = null;
    for (Snapshot s = current; s != null; s = parent(table, s)) {
      Map<String, String> summary = s.summary();
      if (summary != null
          && pipeline.equals(summary.get(PIPELINE))
          && number(summary, ADDED_RECORDS) > 0) {
        made = s.timestampMillis();
        break;
      }
    }
    Map<String, String> totals =
        current == null || current.summary() == null ? Map.of() : current.summary();
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("snapshots", snapshots);
    out.put("last_commit_ms", current == null ? null : current.timestampMillis());
    out.put("pipeline_commit_ms", made);
    out.put("data_files", number(totals, TOTAL_DATA_FILES));
    out.put(
        "rows",
        Math.max(0, number(totals, TOTAL_RECORDS) - number(totals, TOTAL_POSITION_DELETES)));
    return out;
  }

  private static long number(Map<String, String> summary, String key) {
    String value = summary.get(key);
    return value == null ? 0 : Long.parseLong(value);
  }

  private static Map<String, Object> state(Table table, String pipeline, int maxWalk) {
    table.refresh();
    Snapshot current = table.currentSnapshot();
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("snapshot_id", current == null ? null : current.snapshotId());
    long total = 0;
    if (current != null && current.summary() != null) {
      Map<String, String> totals = current.summary();
      total = Math.max(0, number(totals, TOTAL_RECORDS) - number(totals, TOTAL_POSITION_DELETES));
    }
    out.put("total_records", total);
    Map<String, String> marker = null;
    boolean retired = false;
    // Topics that newer resets retiring the pipeline took over (their markers' topics).
    java.util.Set<String> taken = new java.util.HashSet<>();
    int steps = 0;
    for (Snapshot s = current; s != null && steps < maxWalk; s = parent(table, s), steps++) {
      Map<String, String> summary = s.summary();
      if (summary != null && retires(summary.get(RETIRES), pipeline)) {
        taken.addAll(topics(summary.get(OFFSETS)));
      }
      if (summary != null
          && pipeline.equals(summary.get(PIPELINE))
          && summary.get(OFFSETS) != null) {
        if (!taken.isEmpty()
            && !java.util.Collections.disjoint(taken, topics(summary.get(OFFSETS)))) {
          // A later --reset-offsets of another pipeline over the same topics (a rename)
          // retired this one's markers: what they say is no longer what the table holds.
          retired = true;
          break;
        }
        marker = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : summary.entrySet()) {
          if (e.getKey().startsWith(PREFIX)) {
            marker.put(e.getKey(), e.getValue());
          }
        }
        break;
      }
    }
    out.put("marker", marker);
    out.put("retired", retired);
    return out;
  }

  /** The topics of a marker's offsets (JSON), none if there are none or they do not read. */
  static java.util.Set<String> topics(String offsetsJson) {
    java.util.Set<String> found = new java.util.HashSet<>();
    if (offsetsJson == null) {
      return found;
    }
    try {
      JSON.readTree(offsetsJson).fieldNames().forEachRemaining(found::add);
    } catch (JsonProcessingException e) {
      return found;
    }
    return found;
  }

  /** Whether a reset's list of retired markers (JSON, or null) names {@code pipeline}. */
  static boolean retires(String retiredJson, String pipeline) {
    if (retiredJson == null) {
      return false;
    }
    try {
      for (com.fasterxml.jackson.databind.JsonNode name : JSON.readTree(retiredJson)) {
        if (pipeline.equals(name.asText())) {
          return true;
        }
      }
    } catch (JsonProcessingException e) {
      return false; // not frazil's list: retires nothing
    }
    return false;
  }

  private static Long other(
      Table table, Long base, String pipeline, String commitId, int maxWalk) {
    table.refresh();
    int steps = 0;
    // Commits above our own came after it (another run that took over): not interleaving.
    // Only one between ours and the base is; without ours in the ancestry nothing is named.
    boolean pastOurs = false;
    for (Snapshot s = table.currentSnapshot(); s != null; s = parent(table, s), steps++) {
      if ((base != null && s.snapshotId() == base.longValue()) || steps >= maxWalk) {
        return null;
      }
      Map<String, String> summary = s.summary();
      if (summary == null || !pipeline.equals(summary.get(PIPELINE))) {
        continue;
      }
      if (commitId.equals(summary.get(COMMIT_ID))) {
        pastOurs = true;
      } else if (pastOurs) {
        return s.snapshotId();
      }
    }
    return null;
  }

  private static Snapshot parent(Table table, Snapshot snapshot) {
    Long parent = snapshot.parentId();
    return parent == null ? null : table.snapshot(parent);
  }

  /** {@code body} for 0..n-1, at once on the pool for more than one. */
  private static void each(int n, Tasks.Task<Integer, RuntimeException> body) {
    List<Integer> items = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      items.add(i);
    }
    Tasks.foreach(items)
        .executeWith(n > 1 ? POOL : null)
        .throwFailureWhenFinished()
        .run(body);
  }
}
