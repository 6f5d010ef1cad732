package dev.frazil.spark;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.LocationProviders;
import org.apache.iceberg.MetricsConfig;
import org.apache.iceberg.PartitionKey;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.SerializableTable;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.Transaction;
import org.apache.iceberg.UpdateSchema;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.io.DataWriter;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.LocationProvider;
import org.apache.iceberg.mapping.MappingUtil;
import org.apache.iceberg.mapping.NameMappingParser;
import org.apache.iceberg.parquet.Parquet;
import org.apache.iceberg.relocated.com.google.common.util.concurrent.MoreExecutors;
import org.apache.iceberg.spark.data.SparkParquetWriters;
import org.apache.iceberg.types.Types;
import org.apache.iceberg.util.PropertyUtil;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Writes a routed micro-batch to all of its tables in one Spark job: each task writes the
 * rows it holds to each table's data files (Iceberg's Parquet writers for Spark rows), and
 * the driver then commits each table's files in one commit of its own.
 *
 * <p>The batch is a Dataset laid out as: the row's kind (int, at {@link #KIND_COLUMN}), its
 * table's name (string, {@link #TABLE_COLUMN}), the record's topic (string, {@link
 * #TOPIC_COLUMN}), partition (int, {@link #PARTITION_COLUMN}) and Kafka timestamp in
 * milliseconds (long, {@link #TIMESTAMP_COLUMN}), then one struct column per table shape from
 * {@link #FIRST_STRUCT} on. A row's kind is the index of the shape holding its values for its
 * table (the struct at {@code FIRST_STRUCT + kind}), or a negative code for a row that is not
 * written ({@link #BAD} to {@link #IGNORED}). A table the driver named is written with that
 * table's schema, spec and properties; any other name is a table the batch meets first,
 * written with the template (schema, spec, properties) under {@code <namespace
 * location>/<table>} and created by {@link #createAndAppend} with exactly that schema.
 *
 * <p>These positions and codes are the contract with {@code frazil.engine.one_job}, which
 * builds the layout with constants of the same names and values; {@code
 * tests/unit/engine/test_one_job.py} reads them from this file and compares.
 *
 * <p>Nothing is committed by the job: should the driver decide against committing (a record
 * it must see first), it deletes the files with {@link Result#deleteFiles}.
 */
public final class RoutedWrites {
  /** Position of the row's kind: a table shape's index, or one of the codes below. */
  public static final int KIND_COLUMN = 0;
  /** Position of the name of the row's table. */
  public static final int TABLE_COLUMN = 1;
  /** Position of the record's Kafka topic. */
  public static final int TOPIC_COLUMN = 2;
  /** Position of the record's Kafka partition. */
  public static final int PARTITION_COLUMN = 3;
  /** Position of the record's Kafka timestamp in milliseconds. */
  public static final int TIMESTAMP_COLUMN = 4;
  /** Position of the first table shape: shape {@code i} is the column {@code FIRST_STRUCT + i}. */
  public static final int FIRST_STRUCT = 5;

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

  private static final int ROWS_PER_SIZE_CHECK = 1000;
  private static final ObjectMapper JSON = new ObjectMapper();
  /**
   * Runs a commit's manifest scans (the merge and filter of existing manifests, the manifest
   * list) in the committing thread: on Iceberg's shared worker pool, each step of the tables
   * committing at once would queue, and its caller polls for it in 10 ms sleeps. Writing the
   * new manifest still goes to that pool in Iceberg 1.11, hence its size (frazil sets
   * {@code iceberg.worker.num-threads}).
   */
  private static final ExecutorService IN_THREAD = MoreExecutors.newDirectExecutorService();

  private RoutedWrites() {}

  /** How one table is written: its schema, spec, properties and where its files go. */
  static final class Layout implements Serializable {
    final Schema schema;
    final PartitionSpec spec;
    final Map<String, String> properties;
    final FileIO io;
    final String location;
    final boolean created;
    final MetricsConfig metrics;

    Layout(
        Schema schema,
        PartitionSpec spec,
        Map<String, String> properties,
        FileIO io,
        String location,
        boolean created,
        MetricsConfig metrics) {
      this.schema = schema;
      this.spec = spec;
      this.properties = properties;
      this.io = io;
      this.location = location;
      this.created = created;
      this.metrics = metrics;
    }

    /** A table's layout, from the table (a copy that travels to the tasks). */
    static Layout of(Table table, boolean created, String location) {
      Table copy = SerializableTable.copyOf(table);
      return new Layout(
          copy.schema(),
          copy.spec(),
          copy.properties(),
          copy.io(),
          location == null ? copy.location() : location,
          created,
          MetricsConfig.forTable(table));
    }

    /** The same layout for a table at {@code at}. */
    Layout at(String at) {
      return new Layout(schema, spec, properties, io, at, created, metrics);
    }
  }

  /** New tables' layout: the template's, each table under the namespace's location. */
  static final class Template implements Serializable {
    final Layout layout;
    final String namespace;

    Template(Layout layout, String namespace) {
      this.layout = layout;
      this.namespace = namespace;
    }

    /** A new table's layout, or null for a name outside the template's namespace. */
    Layout layoutOf(String table) {
      String prefix = namespace + ".";
      if (!table.startsWith(prefix) || table.indexOf('.', prefix.length()) >= 0) {
        return null;
      }
      return layout.at(layout.location + "/" + table.substring(prefix.length()));
    }
  }

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

  /** One table's share of the batch, as written by the tasks. */
  public static final class TableShare implements Serializable {
    final String table;
    final boolean created;
    final String location;
    final List<DataFile> files = new ArrayList<>();
    final Map<String, Long> maxTimestamps = new HashMap<>();
    long records;
    boolean[] withValues;

    TableShare(String table, boolean created, String location, int fields) {
      this.table = table;
      this.created = created;
      this.location = location;
      this.withValues = new boolean[fields];
    }

    void merge(TableShare other) {
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

  /** What one task wrote, and the rows it did not write. */
  static final class TaskOutput implements Serializable {
    final Map<String, TableShare> tables = new LinkedHashMap<>();
    final Counts counts = new Counts();
    final List<String> refused = new ArrayList<>();
  }

  /** The job's outcome, read by the driver before it commits. */
  public static final class Result {
    private final Map<String, TableShare> tables;
    private final Counts counts;
    private final List<String> refused;
    private final Map<String, FileIO> ios;

    Result(Map<String, TableShare> tables, Counts counts, List<String> refused, Map<String, FileIO> ios) {
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
      for (TableShare share : tables.values()) {
        Map<String, Object> t = new LinkedHashMap<>();
        t.put("created", share.created);
        t.put("records", share.records);
        long bytes = 0;
        for (DataFile f : share.files) {
          bytes += f.fileSizeInBytes();
        }
        t.put("bytes", bytes);
        List<Integer> values = new ArrayList<>();
        for (int i = 0; i < share.withValues.length; i++) {
          if (share.withValues[i]) {
            values.add(i);
          }
        }
        t.put("with_values", values);
        List<List<Object>> stamps = new ArrayList<>();
        for (Map.Entry<String, Long> e : share.maxTimestamps.entrySet()) {
          int cut = e.getKey().lastIndexOf('\u0000');
          stamps.add(
              List.of(
                  e.getKey().substring(0, cut),
                  Integer.parseInt(e.getKey().substring(cut + 1)),
                  e.getValue()));
        }
        t.put("timestamps", stamps);
        byTable.put(share.table, t);
      }
      out.put("tables", byTable);
      return JSON.writeValueAsString(out);
    }

    /** Deletes the files the job wrote for {@code names} (tables the driver did not commit). */
    public void deleteFiles(List<String> names) {
      for (TableShare share : tables.values()) {
        if (!names.contains(share.table)) {
          continue;
        }
        FileIO io = ios.get(share.table);
        for (DataFile f : share.files) {
          try {
            io.deleteFile(f.location());
          } catch (RuntimeException e) {
            // Left for orphan-file cleanup, as Spark leaves a failed write's files.
          }
        }
      }
    }

    TableShare share(String table) {
      TableShare share = tables.get(table);
      if (share == null) {
        throw new IllegalArgumentException("no rows were written for table " + table);
      }
      return share;
    }
  }

  /**
   * Runs the job.
   *
   * @param batch the batch in the layout above, partitioned as its files should be
   * @param names the tables known before the batch
   * @param tables their Iceberg tables (same order)
   * @param template how a table met first is written (null: such rows must not occur)
   * @param templateNamespace the namespace new tables are created in
   * @param namespaceLocation that namespace's location (new tables are created below it)
   * @return what was written (nothing is committed)
   */
  public static Result write(
      Dataset<Row> batch,
      String[] names,
      Table[] tables,
      Table template,
      String templateNamespace,
      String namespaceLocation) {
    Map<String, Layout> known = new HashMap<>();
    Map<String, FileIO> ios = new HashMap<>();
    for (int i = 0; i < names.length; i++) {
      known.put(names[i], Layout.of(tables[i], false, null));
    }
    Template newTables =
        template == null
            ? null
            : new Template(Layout.of(template, true, namespaceLocation), templateNamespace);
    StructType layout = batch.schema();
    StructType[] shapes = new StructType[layout.fields().length - FIRST_STRUCT];
    for (int i = 0; i < shapes.length; i++) {
      shapes[i] = (StructType) layout.fields()[FIRST_STRUCT + i].dataType();
    }
    String operation = UUID.randomUUID().toString();
    JavaRDD<InternalRow> rows = batch.queryExecution().toRdd().toJavaRDD();
    List<TaskOutput> outputs =
        rows.mapPartitionsWithIndex(
                (index, it) ->
                    Collections.singletonList(
                            new TaskWriter(known, newTables, shapes, operation, index).run(it))
                        .iterator(),
                false)
            .collect();
    Map<String, TableShare> merged = new LinkedHashMap<>();
    Counts counts = new Counts();
    List<String> refused = new ArrayList<>();
    for (TaskOutput out : outputs) {
      counts.add(out.counts);
      for (String name : out.refused) {
        if (!refused.contains(name)) {
          refused.add(name);
        }
      }
      for (TableShare share : out.tables.values()) {
        TableShare into = merged.get(share.table);
        if (into == null) {
          merged.put(share.table, share);
        } else {
          into.merge(share);
        }
      }
    }
    for (String name : merged.keySet()) {
      Layout l = known.get(name);
      ios.put(name, l != null ? l.io : newTables.layout.io);
    }
    return new Result(merged, counts, refused, ios);
  }

  /** Appends a known table's files in one commit carrying {@code summary}. */
  public static void append(Result result, Table table, String name, Map<String, String> summary) {
    AppendFiles append = table.newAppend().scanManifestsWith(IN_THREAD);
    for (DataFile f : result.share(name).files) {
      append.appendFile(f);
    }
    summary.forEach(append::set);
    append.commit();
  }

  /**
   * Creates a table met first with the template's schema (the catalog assigns the same field
   * ids, checked), drops the columns none of its records filled, sets the name mapping and
   * appends its files, in one transaction: the table appears with its rows and marker.
   *
   * @return false if the catalog would give the columns other ids (nothing is created)
   */
  public static boolean createAndAppend(
      Result result,
      Catalog catalog,
      TableIdentifier identifier,
      Table template,
      Map<String, String> properties,
      List<String> dropColumns,
      String nameMappingProperty,
      Map<String, String> summary) {
    TableShare share = result.share(identifier.toString());
    Transaction txn =
        catalog
            .buildTable(identifier, template.schema())
            .withPartitionSpec(template.spec())
            .withProperties(properties)
            .withLocation(share.location)
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
    for (DataFile f : share.files) {
      append.appendFile(f);
    }
    summary.forEach(append::set);
    append.commit();
    txn.commitTransaction();
    return true;
  }

  /** One task: routes each row to its table's writer for its partition. */
  static final class TaskWriter {
    private final Map<String, Layout> known;
    private final Template template;
    private final StructType[] shapes;
    private final String operation;
    private final int partitionIndex;
    private final TaskOutput output = new TaskOutput();
    private final Map<UTF8String, Sink> sinks = new HashMap<>();
    private final Map<UTF8String, String> topics = new HashMap<>();
    private int fileCount;

    TaskWriter(
        Map<String, Layout> known,
        Template template,
        StructType[] shapes,
        String operation,
        int partitionIndex) {
      this.known = known;
      this.template = template;
      this.shapes = shapes;
      this.operation = operation;
      this.partitionIndex = partitionIndex;
    }

    TaskOutput run(Iterator<InternalRow> rows) throws IOException {
      try {
        while (rows.hasNext()) {
          InternalRow row = rows.next();
          int kind = row.getInt(KIND_COLUMN);
          if (kind < 0) {
            output.counts.add(kind);
            continue;
          }
          UTF8String name = row.getUTF8String(TABLE_COLUMN);
          Sink sink = sinks.get(name);
          if (sink == null) {
            sink = open(name.toString(), kind);
            sinks.put(name.clone(), sink);
          }
          if (sink.share == null) {
            output.counts.add(DEFERRED);
            continue;
          }
          InternalRow values = row.getStruct(FIRST_STRUCT + kind, shapes[kind].size());
          sink.write(values);
          sink.share.records++;
          sink.stamp(
              topic(row.getUTF8String(TOPIC_COLUMN)),
              row.getInt(PARTITION_COLUMN),
              row.getLong(TIMESTAMP_COLUMN));
        }
        for (Sink sink : sinks.values()) {
          sink.close();
        }
        for (Sink sink : sinks.values()) {
          if (sink.share != null) {
            output.tables.put(sink.share.table, sink.share);
          }
        }
        return output;
      } catch (Throwable t) {
        for (Sink sink : sinks.values()) {
          sink.abort();
        }
        throw t;
      }
    }

    private String topic(UTF8String topic) {
      String name = topics.get(topic);
      if (name == null) {
        name = topic.toString();
        topics.put(topic.clone(), name);
      }
      return name;
    }

    private Sink open(String name, int kind) {
      Layout layout = known.get(name);
      if (layout == null) {
        layout = template == null ? null : template.layoutOf(name);
        if (layout == null) {
          if (!output.refused.contains(name)) {
            output.refused.add(name);
          }
          return new Sink(null, null, null);
        }
      }
      TableShare share =
          new TableShare(name, layout.created, layout.location, layout.schema.columns().size());
      return new Sink(layout, shapes[kind], share);
    }

    /** One table's writers in this task, one per partition. */
    final class Sink {
      final Layout layout;
      final StructType shape;
      final TableShare share;
      final Map<PartitionKey, DataWriter<InternalRow>> writers = new HashMap<>();
      final List<DataWriter<InternalRow>> closed = new ArrayList<>();
      final PartitionKey key;
      final RowWrapper wrapper;
      final LocationProvider locations;
      final MetricsConfig metrics;
      final long targetFileSize;
      DataWriter<InternalRow> unpartitioned;
      int sinceSizeCheck;

      Sink(Layout layout, StructType shape, TableShare share) {
        this.layout = layout;
        this.shape = shape;
        this.share = share;
        if (layout == null) {
          key = null;
          wrapper = null;
          locations = null;
          metrics = null;
          targetFileSize = 0;
          return;
        }
        key = new PartitionKey(layout.spec, layout.schema);
        wrapper = new RowWrapper(shape, layout.schema.asStruct());
        locations = LocationProviders.locationsFor(layout.location, layout.properties);
        metrics = layout.metrics;
        targetFileSize =
            PropertyUtil.propertyAsLong(
                layout.properties,
                TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
                TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT);
      }

      void write(InternalRow values) throws IOException {
        DataWriter<InternalRow> writer;
        if (layout.spec.isUnpartitioned()) {
          if (unpartitioned == null) {
            unpartitioned = newWriter(null);
          }
          writer = unpartitioned;
        } else {
          key.partition(wrapper.wrap(values));
          writer = writers.get(key);
          if (writer == null) {
            PartitionKey copy = key.copy();
            writer = newWriter(copy);
            writers.put(copy, writer);
          }
        }
        writer.write(values);
        if (layout.created) {
          boolean[] seen = share.withValues;
          for (int i = 0; i < seen.length; i++) {
            if (!seen[i] && !values.isNullAt(i)) {
              seen[i] = true;
            }
          }
        }
        // As Iceberg's rolling writers: the size sums every column's buffers, so not per row.
        if (++sinceSizeCheck < ROWS_PER_SIZE_CHECK) {
          return;
        }
        sinceSizeCheck = 0;
        if (writer.length() >= targetFileSize) {
          writer.close();
          closed.add(writer);
          if (layout.spec.isUnpartitioned()) {
            unpartitioned = null;
          } else {
            writers.remove(key);
          }
        }
      }

      void stamp(String topic, int partition, long timestampMs) {
        share.maxTimestamps.merge(topic + "\u0000" + partition, timestampMs, Math::max);
      }

      private DataWriter<InternalRow> newWriter(StructLike partition) throws IOException {
        TaskContext context = TaskContext.get();
        long taskId = context == null ? 0 : context.taskAttemptId();
        String file =
            String.format(
                "%05d-%d-%s-%05d.parquet", partitionIndex, taskId, operation, ++fileCount);
        String path =
            partition == null
                ? locations.newDataLocation(file)
                : locations.newDataLocation(layout.spec, partition, file);
        return Parquet.writeData(layout.io.newOutputFile(path))
            .schema(layout.schema)
            .createWriterFunc(
                (icebergSchema, message) ->
                    SparkParquetWriters.buildWriter(icebergSchema, message, shape))
            .setAll(layout.properties)
            .metricsConfig(metrics)
            .withSpec(layout.spec)
            .withPartition(partition)
            .overwrite()
            .build();
      }

      void close() throws IOException {
        List<DataWriter<InternalRow>> all = new ArrayList<>(closed);
        if (unpartitioned != null) {
          unpartitioned.close();
          all.add(unpartitioned);
        }
        for (DataWriter<InternalRow> w : writers.values()) {
          w.close();
          all.add(w);
        }
        for (DataWriter<InternalRow> w : all) {
          share.files.add(w.toDataFile());
        }
        writers.clear();
        closed.clear();
        unpartitioned = null;
      }

      void abort() {
        if (layout == null) {
          return;
        }
        List<DataWriter<InternalRow>> open = new ArrayList<>(writers.values());
        if (unpartitioned != null) {
          open.add(unpartitioned);
        }
        open.addAll(closed);
        for (DataWriter<InternalRow> w : open) {
          try {
            w.close();
            layout.io.deleteFile(w.toDataFile().location());
          } catch (Exception e) {
            // Best effort: orphan-file cleanup removes what is left.
          }
        }
        for (DataFile f : share.files) {
          try {
            layout.io.deleteFile(f.location());
          } catch (Exception e) {
            // As above.
          }
        }
      }
    }
  }

  /** A Spark row as Iceberg's partition functions read it (Iceberg's internal values). */
  static final class RowWrapper implements StructLike {
    private final DataType[] types;
    private final RowWrapper[] nested;
    private InternalRow row;

    RowWrapper(StructType shape, Types.StructType iceberg) {
      int size = shape.size();
      types = new DataType[size];
      nested = new RowWrapper[size];
      List<Types.NestedField> fields = iceberg.fields();
      for (int i = 0; i < size; i++) {
        types[i] = shape.fields()[i].dataType();
        if (types[i] instanceof StructType && i < fields.size() && fields.get(i).type().isStructType()) {
          nested[i] = new RowWrapper((StructType) types[i], fields.get(i).type().asStructType());
        }
      }
    }

    RowWrapper wrap(InternalRow value) {
      this.row = value;
      return this;
    }

    @Override
    public int size() {
      return types.length;
    }

    @Override
    public <T> T get(int pos, Class<T> javaClass) {
      if (row.isNullAt(pos)) {
        return null;
      }
      DataType type = types[pos];
      Object value;
      if (nested[pos] != null) {
        value = nested[pos].wrap(row.getStruct(pos, ((StructType) type).size()));
      } else if (type instanceof StringType) {
        value = row.getUTF8String(pos).toString();
      } else if (type instanceof BinaryType) {
        value = ByteBuffer.wrap(row.getBinary(pos));
      } else if (type instanceof DecimalType) {
        DecimalType d = (DecimalType) type;
        value = row.getDecimal(pos, d.precision(), d.scale()).toJavaBigDecimal();
      } else {
        value = row.get(pos, type);
      }
      return javaClass.cast(value);
    }

    @Override
    public <T> void set(int pos, T value) {
      throw new UnsupportedOperationException("read-only");
    }
  }
}
