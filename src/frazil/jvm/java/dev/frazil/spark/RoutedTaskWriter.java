package dev.frazil.spark;

import static dev.frazil.spark.RoutedWrites.DEFERRED;
import static dev.frazil.spark.RoutedWrites.FIRST_STRUCT;
import static dev.frazil.spark.RoutedWrites.KIND_COLUMN;
import static dev.frazil.spark.RoutedWrites.PARTITION_COLUMN;
import static dev.frazil.spark.RoutedWrites.SLOT_COLUMN;
import static dev.frazil.spark.RoutedWrites.TABLE_COLUMN;
import static dev.frazil.spark.RoutedWrites.TIMESTAMP_COLUMN;
import static dev.frazil.spark.RoutedWrites.TOPIC_COLUMN;

import dev.frazil.spark.RoutedWrites.TableWritten;
import dev.frazil.spark.RoutedWrites.TaskOutput;
import dev.frazil.spark.RoutedWrites.TaskTables;
import java.io.IOException;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.PartitionKey;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.io.FanoutDataWriter;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.io.RollingDataWriter;
import org.apache.iceberg.util.PropertyUtil;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One task of {@link RoutedWrites#write}: routes each row of the batch's layout to its table's
 * writer and hands back what it wrote ({@link RoutedWrites.TaskOutput}), nothing committed.
 */
final class RoutedTaskWriter {
  private final TaskTables tables;
  private final Map<String, Table> known;
  private final TemplateTable template;
  private final StructType[] shapes;
  private final String operation;
  private final int partitionIndex;
  private final long taskId;
  private final TaskOutput output = new TaskOutput();
  private final Map<UTF8String, Sink> sinks = new HashMap<>();
  /** The known tables' sinks by slot: a row of a known table finds its own by number. */
  private final Sink[] bySlot;
  private final Map<UTF8String, String> topics = new HashMap<>();

  RoutedTaskWriter(
      TaskTables tables, StructType[] shapes, String operation, int partitionIndex) {
    this.tables = tables;
    this.known = tables.known;
    this.template = tables.template;
    this.shapes = shapes;
    this.operation = operation;
    this.partitionIndex = partitionIndex;
    TaskContext context = TaskContext.get();
    this.taskId = context == null ? 0 : context.taskAttemptId();
    this.bySlot = new Sink[tables.slots.length];
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
        int slot = row.getInt(SLOT_COLUMN);
        Sink sink = slot >= 0 ? bySlot[slot] : null;
        if (sink == null) {
          // A known table's rows carry its slot, their name column null (a smaller shuffle).
          UTF8String name =
              slot >= 0
                  ? UTF8String.fromString(tables.slots[slot])
                  : row.getUTF8String(TABLE_COLUMN);
          sink = sinks.get(name);
          if (sink == null) {
            sink = open(name.toString(), kind);
            sinks.put(name.clone(), sink);
          }
          if (slot >= 0) {
            bySlot[slot] = sink;
          }
        }
        if (sink.written == null) {
          output.counts.add(DEFERRED);
          continue;
        }
        InternalRow values = row.getStruct(FIRST_STRUCT + kind, shapes[kind].size());
        sink.write(values);
        sink.written.records++;
        sink.stamp(
            row.isNullAt(TOPIC_COLUMN) ? tables.topic : topic(row.getUTF8String(TOPIC_COLUMN)),
            row.getInt(PARTITION_COLUMN),
            row.getLong(TIMESTAMP_COLUMN));
      }
      for (Sink sink : sinks.values()) {
        if (sink.written != null) {
          sink.written.files.addAll(sink.finish());
          output.tables.put(sink.written.table, sink.written);
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
    Table table = known.get(name);
    boolean created = false;
    if (table == null) {
      table = template == null ? null : template.tableOf(name);
      if (table == null) {
        if (!output.refused.contains(name)) {
          output.refused.add(name);
        }
        return new Sink(null, false, null, null, null, null);
      }
      created = true;
    }
    TableWritten written =
        new TableWritten(name, created, table.location(), table.schema().columns().size());
    // Iceberg's file names, <task index>-<task attempt>-<operation>-<file number>.parquet as
    // in Spark's writes; the operation is the job's id and the table's number in this task:
    // each table numbers its files from 1, and tables may share a data directory
    // (write.data.path), where the job's id alone would repeat a name.
    OutputFileFactory files =
        OutputFileFactory.builderFor(table, partitionIndex, taskId)
            .format(FileFormat.PARQUET)
            .operationId(operation + "-" + (sinks.size() + 1))
            .build();
    Map<String, String> properties = tables.writerProperties(name, table, created);
    return new Sink(table, created, shapes[kind], written, files, properties);
  }

  /**
   * One table's writer in this task: Iceberg's own, as its Spark writes use them: a {@link
   * FanoutDataWriter} for a partitioned table (the rows are not clustered by
   * partition, so each partition's file stays open until the task ends), a {@link
   * RollingDataWriter} otherwise; both roll to a new file at the table's {@code
   * write.target-file-size-bytes}.
   */
  final class Sink {
    final Table table;
    final boolean created;
    final TableWritten written;
    final PartitionSpec spec;
    final PartitionKey key;
    final RowWrapper wrapper;
    final FanoutDataWriter<InternalRow> partitioned;
    final RollingDataWriter<InternalRow> unpartitioned;
    /** The partition of the rows being written and their largest timestamp (see stamp). */
    private String stampTopic;
    private int stampPartition;
    private long stampMax;

    Sink(
        Table table,
        boolean created,
        StructType shape,
        TableWritten written,
        OutputFileFactory files,
        Map<String, String> writerProperties) {
      this.table = table;
      this.created = created;
      this.written = written;
      if (table == null) {
        spec = null;
        key = null;
        wrapper = null;
        partitioned = null;
        unpartitioned = null;
        return;
      }
      spec = table.spec();
      SparkRowWriters writers = new SparkRowWriters(table, shape, writerProperties);
      long targetFileSize =
          PropertyUtil.propertyAsLong(
              table.properties(),
              TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
              TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT);
      if (spec.isUnpartitioned()) {
        key = null;
        wrapper = null;
        partitioned = null;
        unpartitioned =
            new RollingDataWriter<>(writers, files, table.io(), targetFileSize, spec, null);
      } else {
        key = new PartitionKey(spec, table.schema());
        wrapper = new RowWrapper(shape, table.schema().asStruct());
        partitioned = new FanoutDataWriter<>(writers, files, table.io(), targetFileSize);
        unpartitioned = null;
      }
    }

    void write(InternalRow values) {
      if (partitioned != null) {
        key.partition(wrapper.wrap(values));
        partitioned.write(values, spec, key);
      } else {
        unpartitioned.write(values);
      }
      if (created) {
        boolean[] seen = written.withValues;
        for (int i = 0; i < seen.length; i++) {
          if (!seen[i] && !values.isNullAt(i)) {
            seen[i] = true;
          }
        }
      }
    }

    /**
     * Keeps the largest timestamp of the Kafka partition the rows come from, into {@link
     * TableWritten#maxTimestamps} when another partition's rows follow: a task's rows of one
     * table come a partition at a time, and a key built and looked up per row was 4% of a
     * routed batch's write stage (bench/routing, 2026-11-30).
     */
    void stamp(String topic, int partition, long timestampMs) {
      if (partition == stampPartition && topic.equals(stampTopic)) {
        stampMax = Math.max(stampMax, timestampMs);
        return;
      }
      keepStamp();
      stampTopic = topic;
      stampPartition = partition;
      stampMax = timestampMs;
    }

    private void keepStamp() {
      if (stampTopic != null) {
        written.maxTimestamps.merge(stampTopic + "\u0000" + stampPartition, stampMax, Math::max);
      }
    }

    /** Closes the files (again: a no-op) and returns them. */
    List<DataFile> finish() throws IOException {
      keepStamp();
      stampTopic = null;
      if (partitioned != null) {
        partitioned.close();
        return partitioned.result().dataFiles();
      }
      unpartitioned.close();
      return unpartitioned.result().dataFiles();
    }

    /** Deletes this table's files, as Iceberg's Spark writes abort a task's: best effort. */
    void abort() {
      if (table == null) {
        return;
      }
      List<DataFile> files;
      try {
        files = finish();
      } catch (Exception e) {
        return; // A file that did not close: orphan-file cleanup removes what is left.
      }
      for (DataFile f : files) {
        try {
          table.io().deleteFile(f.location());
        } catch (Exception e) {
          // As above.
        }
      }
    }
  }
}
