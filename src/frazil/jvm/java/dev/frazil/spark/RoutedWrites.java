package dev.frazil.spark;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.SerializableTable;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.data.RegistryBasedFileWriterFactory;
import org.apache.iceberg.io.FanoutDataWriter;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.io.RollingDataWriter;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.StructType;

/**
 * Writes a routed micro-batch to all of its tables in one Spark job: each task writes the
 * rows it holds to each table's data files with Iceberg's own writers for Spark rows (a
 * fan-out writer per table, one rolling file per partition), and the driver then commits
 * them: each table's files in one commit of its own ({@link RoutedCommits}), or all known
 * tables' files in one catalog transaction where the catalog commits several tables at once
 * ({@link TablesTransaction}); a table met first is created with its files ({@link NewTables}).
 *
 * <p>The batch is a Dataset laid out as: the row's kind (int, at {@link #KIND_COLUMN}), its
 * table's name (string, {@link #TABLE_COLUMN}; null for a known table's row, whose slot names
 * it), the record's topic (string, {@link #TOPIC_COLUMN}; null in a batch of one topic, which
 * the job is given), partition (int, {@link #PARTITION_COLUMN}) and Kafka timestamp in
 * milliseconds (long, {@link #TIMESTAMP_COLUMN}), its table's slot (int, {@link #SLOT_COLUMN}:
 * the table's position among the known tables the driver named, -1 for another), then one
 * struct column per table shape from {@link #FIRST_STRUCT} on. A row's kind is the index of the shape holding its values for its
 * table (the struct at {@code FIRST_STRUCT + kind}), or a negative code for a row that is not
 * written ({@link #BAD} to {@link #IGNORED}). A table the driver named is written with that
 * table's schema, spec and properties; any other name is a table the batch meets first,
 * written with the template (schema, spec, properties) under {@code <namespace
 * location>/<table>} and created by {@link NewTables#createAndAppend} with exactly that schema.
 *
 * <p>These positions and codes are the contract with {@code frazil.engine.routed_layout}, which
 * builds the layout with constants of the same names and values; {@code
 * tests/unit/engine/test_routed_layout.py} reads them from this file and compares.
 *
 * <p>A task writes with Iceberg's parts as Iceberg's own Spark writes use them ({@code
 * SparkWrite} in Iceberg 1.11): an {@link OutputFileFactory} names and places each table's
 * files, a {@link FanoutDataWriter} (a {@link RollingDataWriter} for an unpartitioned table)
 * keeps a rolling file per partition, and a {@link RegistryBasedFileWriterFactory} makes the
 * Parquet writers for Spark rows, with the table's properties and metrics settings. Two
 * classes of Iceberg's Spark writes are package-private and so are copied ({@link
 * RowWrapper}) or subclassed the same way ({@link SparkRowWriters}). Not used: {@code
 * ClusteredDataWriter}, which needs rows clustered by partition and fails on a partition met
 * again (a task's rows come in Kafka order); the Kafka Connect sink's {@code
 * RecordUtils.createTableWriter}, which writes Iceberg's generic records (each Spark row would
 * be converted); {@code BaseTaskWriter}'s {@code PartitionedFanoutWriter}, the same fan-out as
 * {@link FanoutDataWriter} behind the older task-writer interface.
 *
 * <p>Nothing is committed by the job: should the driver decide against committing (a record
 * it must see first), it deletes the files with {@link Result#deleteFiles}.
 */
public final class RoutedWrites {
  /** Position of the row's kind: a table shape's index, or one of the codes below. */
  public static final int KIND_COLUMN = 0;
  /** Position of the name of the row's table (null where the slot names a known table). */
  public static final int TABLE_COLUMN = 1;
  /** Position of the record's Kafka topic. */
  public static final int TOPIC_COLUMN = 2;
  /** Position of the record's Kafka partition. */
  public static final int PARTITION_COLUMN = 3;
  /** Position of the record's Kafka timestamp in milliseconds. */
  public static final int TIMESTAMP_COLUMN = 4;
  /** Position of the row's table slot: its position among the known tables, -1 for another. */
  public static final int SLOT_COLUMN = 5;
  /** Position of the first table shape: shape {@code i} is the column {@code FIRST_STRUCT + i}. */
  public static final int FIRST_STRUCT = 6;

  /** A record with an error (decode, transform, a value its table cannot take). */
  public static final int BAD = -1;
  /** A record the route matched to no table. */
  public static final int UNMATCHED = -2;
  /** A record dropped as configured (a filter, a skipped tombstone). */
  public static final int FILTERED = -3;
  /** A record its table must first change for (a new column with a value). */
  public static final int DEFERRED = -4;
  /** A row not written and not counted (the other tables' rows of a filtered record). */
  public static final int IGNORED = -5;

  private static final ObjectMapper JSON = new ObjectMapper();
  private RoutedWrites() {}

  /** Records not written, by code (the summary's counts; {@link #IGNORED} rows are not). */
  static final class Counts implements Serializable {
    long bad;
    long unmatched;
    long filtered;
    long deferred;

    void add(int kind) {
      switch (kind) {
        case BAD:
          bad++;
          break;
        case UNMATCHED:
          unmatched++;
          break;
        case FILTERED:
          filtered++;
          break;
        case DEFERRED:
          deferred++;
          break;
        case IGNORED:
          break;
        default:
          throw new IllegalArgumentException("unknown row kind " + kind);
      }
    }

    void add(Counts other) {
      bad += other.bad;
      unmatched += other.unmatched;
      filtered += other.filtered;
      deferred += other.deferred;
    }
  }

  /**
   * What the tasks wrote for one table of the batch: its data files (not committed), its
   * records, the template's columns they fill and their largest Kafka timestamps.
   */
  public static final class TableWritten implements Serializable {
    final String table;
    final boolean created;
    final String location;
    final List<DataFile> files = new ArrayList<>();
    final Map<String, Long> maxTimestamps = new HashMap<>();
    long records;
    boolean[] withValues;

    TableWritten(String table, boolean created, String location, int fields) {
      this.table = table;
      this.created = created;
      this.location = location;
      this.withValues = new boolean[fields];
    }

    void merge(TableWritten other) {
      files.addAll(other.files);
      records += other.records;
      for (Map.Entry<String, Long> e : other.maxTimestamps.entrySet()) {
        maxTimestamps.merge(e.getKey(), e.getValue(), Math::max);
      }
      for (int i = 0; i < withValues.length; i++) {
        withValues[i] |= other.withValues[i];
      }
    }
  }

  /**
   * The writer properties of a file smaller than one Parquet page: no dictionaries. Parquet
   * decides whether a column keeps its dictionary when the file's first page ({@code
   * write.parquet.page-row-limit}, 20,000 rows) is written, so a file of fewer rows hashes every
   * value of every column into a dictionary and, at close, encodes a column whose values do not
   * repeat again without it. A 16 KiB limit (2026-11-30, 11a24a0) let such columns give up
   * sooner; without dictionaries a routed batch of 100 tables (3,800 rows a file) wrote its
   * files in 0.83-0.88 CPU s against 1.05-1.09 (Spark's task metrics, bench/routing,
   * 2026-11-30), the files as large (133 KB: zstd takes the repeats a dictionary would). The
   * table's compaction rewrites the files with its own settings.
   */
  static final Map<String, String> SMALL_FILE_PROPERTIES =
      Collections.singletonMap("parquet.enable.dictionary", "false");

  /** The tables a batch's tasks write: the known ones by name, and the template of new ones. */
  static final class TaskTables implements Serializable {
    final Map<String, Table> known;
    final TemplateTable template;
    /** The known tables expected to write files smaller than a page in this batch. */
    final Set<String> small;
    /** Whether the tables met first are expected to. */
    final boolean newSmall;
    /** The known tables' names by slot ({@link #SLOT_COLUMN}). */
    final String[] slots;
    /** The batch's one topic, where its rows carry none ({@link #TOPIC_COLUMN} null). */
    final String topic;

    TaskTables(
        Map<String, Table> known,
        TemplateTable template,
        Set<String> small,
        boolean newSmall,
        String[] slots,
        String topic) {
      this.known = known;
      this.template = template;
      this.small = small;
      this.newSmall = newSmall;
      this.slots = slots;
      this.topic = topic;
    }

    /** The writer properties of a table's files in this batch (over the table's own). */
    Map<String, String> writerProperties(String name, Table table, boolean created) {
      boolean expectedSmall = created ? newSmall : small.contains(name);
      // A table's own dictionary settings win, as over any other file of it.
      boolean own =
          table.properties().containsKey(TableProperties.PARQUET_DICT_SIZE_BYTES)
              || table.properties().containsKey("parquet.enable.dictionary");
      return expectedSmall && !own ? SMALL_FILE_PROPERTIES : Collections.emptyMap();
    }
  }

  /** What one task wrote, and the rows it did not write. */
  static final class TaskOutput implements Serializable {
    final Map<String, TableWritten> tables = new LinkedHashMap<>();
    final Counts counts = new Counts();
    final List<String> refused = new ArrayList<>();
  }

  /** The job's outcome, read by the driver before it commits. */
  public static final class Result {
    private final Map<String, TableWritten> tables;
    private final Counts counts;
    private final List<String> refused;
    private final Map<String, FileIO> ios;

    Result(Map<String, TableWritten> tables, Counts counts, List<String> refused, Map<String, FileIO> ios) {
      this.tables = tables;
      this.counts = counts;
      this.refused = refused;
      this.ios = ios;
    }

    /**
     * The outcome as JSON: {@code bad}, {@code unmatched}, {@code filtered}, {@code deferred}
     * record counts, {@code refused} (new table names outside the template's namespace), and
     * per table: {@code created} (met first), {@code records}, {@code bytes} (of its files),
     * {@code with_values} (indexes of the template's columns holding a value; new tables only)
     * and {@code timestamps} ([topic, partition, largest timestamp ms]).
     */
    public String summary() throws IOException {
      Map<String, Object> out = new LinkedHashMap<>();
      out.put("bad", counts.bad);
      out.put("unmatched", counts.unmatched);
      out.put("filtered", counts.filtered);
      out.put("deferred", counts.deferred);
      out.put("refused", refused);
      Map<String, Object> byTable = new LinkedHashMap<>();
      for (TableWritten written : tables.values()) {
        Map<String, Object> t = new LinkedHashMap<>();
        t.put("created", written.created);
        t.put("records", written.records);
        long bytes = 0;
        for (DataFile f : written.files) {
          bytes += f.fileSizeInBytes();
        }
        t.put("bytes", bytes);
        List<Integer> values = new ArrayList<>();
        for (int i = 0; i < written.withValues.length; i++) {
          if (written.withValues[i]) {
            values.add(i);
          }
        }
        t.put("with_values", values);
        List<List<Object>> stamps = new ArrayList<>();
        for (Map.Entry<String, Long> e : written.maxTimestamps.entrySet()) {
          int cut = e.getKey().lastIndexOf('\u0000');
          stamps.add(
              List.of(
                  e.getKey().substring(0, cut),
                  Integer.parseInt(e.getKey().substring(cut + 1)),
                  e.getValue()));
        }
        t.put("timestamps", stamps);
        byTable.put(written.table, t);
      }
      out.put("tables", byTable);
      return JSON.writeValueAsString(out);
    }

    /** Deletes the files the job wrote for {@code names} (tables the driver did not commit). */
    public void deleteFiles(List<String> names) {
      for (TableWritten written : tables.values()) {
        if (!names.contains(written.table)) {
          continue;
        }
        FileIO io = ios.get(written.table);
        for (DataFile f : written.files) {
          try {
            io.deleteFile(f.location());
          } catch (RuntimeException e) {
            // Left for orphan-file cleanup, as Spark leaves a failed write's files.
          }
        }
      }
    }

    TableWritten written(String table) {
      TableWritten written = tables.get(table);
      if (written == null) {
        throw new IllegalArgumentException("no rows were written for table " + table);
      }
      return written;
    }
  }

  /**
   * Runs the job.
   *
   * @param batch the batch in the layout above, partitioned as its files should be
   * @param names the tables known before the batch, as a JSON array (one py4j argument)
   * @param tables their Iceberg tables, in the same order (null: none)
   * @param template how a table met first is written (null: such rows must not occur)
   * @param templateNamespace the namespace new tables are created in
   * @param namespaceLocation that namespace's location (new tables are created below it)
   * @param small the known tables expected to write files smaller than a Parquet page (see
   *     {@link #SMALL_FILE_PROPERTIES}), as a JSON array of names
   * @param newSmall whether the tables met first are expected to
   * @param slots the known tables' names by slot ({@link #SLOT_COLUMN}), as a JSON array: each
   *     one of {@code names}
   * @param topic the batch's one Kafka topic, where its rows carry none (null: they do)
   * @return what was written (nothing is committed)
   */
  public static Result write(
      Dataset<Row> batch,
      String names,
      List<Table> tables,
      Table template,
      String templateNamespace,
      String namespaceLocation,
      String small,
      boolean newSmall,
      String slots,
      String topic)
      throws IOException {
    Map<String, Table> known = new HashMap<>();
    Map<String, FileIO> ios = new HashMap<>();
    List<String> named = JSON.readValue(names, new TypeReference<List<String>>() {});
    if (named.size() != (tables == null ? 0 : tables.size())) {
      throw new IllegalArgumentException(
          named.size() + " table names for " + (tables == null ? 0 : tables.size()) + " tables");
    }
    for (int i = 0; i < named.size(); i++) {
      known.put(named.get(i), SerializableTable.copyOf(tables.get(i)));
    }
    TemplateTable newTables =
        template == null
            ? null
            : new TemplateTable(template, templateNamespace, namespaceLocation);
    StructType layout = batch.schema();
    StructType[] shapes = new StructType[layout.fields().length - FIRST_STRUCT];
    for (int i = 0; i < shapes.length; i++) {
      shapes[i] = (StructType) layout.fields()[FIRST_STRUCT + i].dataType();
    }
    String[] bySlot =
        JSON.readValue(slots, new TypeReference<List<String>>() {}).toArray(new String[0]);
    for (String name : bySlot) {
      if (!known.containsKey(name)) {
        throw new IllegalArgumentException("slot of table " + name + ", not a known table");
      }
    }
    String operation = UUID.randomUUID().toString();
    JavaRDD<InternalRow> rows = batch.queryExecution().toRdd().toJavaRDD();
    // The tables go to the tasks as a broadcast, as Iceberg's Spark writes send theirs: read
    // once per executor (in local mode, the driver's objects themselves). In the tasks'
    // closure, every task deserialized all of them, the FileIO's Hadoop configuration included:
    // with 100 tables that cost more than writing a task's files (bench/routing, 2026-11-26).
    Broadcast<TaskTables> shared =
        JavaSparkContext.fromSparkContext(rows.context())
            .broadcast(
                new TaskTables(
                    known,
                    newTables,
                    new HashSet<>(JSON.readValue(small, new TypeReference<List<String>>() {})),
                    newSmall,
                    bySlot,
                    topic));
    List<TaskOutput> outputs;
    try {
      outputs =
          rows.mapPartitionsWithIndex(
                  (index, it) -> {
                    TaskTables given = shared.value();
                    return Collections.singletonList(
                            new RoutedTaskWriter(given, shapes, operation, index).run(it))
                        .iterator();
                  },
                  false)
              .collect();
    } finally {
      shared.destroy();
    }
    Map<String, TableWritten> merged = new LinkedHashMap<>();
    Counts counts = new Counts();
    List<String> refused = new ArrayList<>();
    for (TaskOutput out : outputs) {
      counts.add(out.counts);
      for (String name : out.refused) {
        if (!refused.contains(name)) {
          refused.add(name);
        }
      }
      for (TableWritten written : out.tables.values()) {
        TableWritten into = merged.get(written.table);
        if (into == null) {
          merged.put(written.table, written);
        } else {
          into.merge(written);
        }
      }
    }
    for (String name : merged.keySet()) {
      Table table = known.get(name);
      ios.put(name, table != null ? table.io() : newTables.io());
    }
    return new Result(merged, counts, refused, ios);
  }
}
