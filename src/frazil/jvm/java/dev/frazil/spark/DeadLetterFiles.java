package dev.frazil.spark;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.PartitionKey;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.data.GenericAppenderFactory;
import org.apache.iceberg.data.GenericRecord;
import org.apache.iceberg.data.InternalRecordWrapper;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.encryption.EncryptedOutputFile;
import org.apache.iceberg.exceptions.CommitStateUnknownException;
import org.apache.iceberg.io.DataWriter;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.Types;
import org.apache.spark.sql.Row;

/**
 * Appends a batch's dead letters, carried by the write's observation, straight to the
 * dead-letter table: data files written in the driver with Iceberg's generic writers and one
 * commit, no Spark job (a Spark append of a few thousand rows costs ~0.4 s of fixed work; this
 * ~0.1 s).
 *
 * <p>Each observed record is a row (topic, partition, offset, stage, reason, raw), raw being
 * (key, value, timestamp millis, [headers,] detail) or null for a record too large to carry
 * (those are written by the caller through Spark instead).
 */
public final class DeadLetterFiles {
  private static final ObjectMapper JSON = new ObjectMapper();

  private DeadLetterFiles() {}

  /**
   * Writes the carried records of {@code observed} not below {@code covered} to {@code table}
   * in one commit whose snapshot summary carries {@code summary}.
   *
   * @param covered offsets already in the table, keyed {@code topic + "\u0000" + partition}:
   *     records below them are skipped (a re-planned batch)
   * @param targetTable the table the records failed for (null: before routing)
   * @param errorClasses error class per stage ({@code FrazilError} otherwise)
   * @param present records to skip as well, keyed {@code topic + "\u0000" + partition +
   *     "\u0000" + offset}: the table holds them (another run's commit in between)
   * @return the number of records appended (0: nothing committed)
   */
  public static long append(
      Table table,
      List<Row> observed,
      boolean hasHeaders,
      String pipeline,
      String targetTable,
      Map<String, String> errorClasses,
      Map<String, ? extends Number> covered,
      List<String> present,
      Map<String, String> summary) {
    java.util.Set<String> skip = new java.util.HashSet<>(present);
    Schema schema = table.schema();
    PartitionSpec spec = table.spec();
    long failedAtMillis = System.currentTimeMillis();
    Map<PartitionKey, List<Record>> byPartition = new LinkedHashMap<>();
    PartitionKey key = new PartitionKey(spec, schema);
    InternalRecordWrapper wrapper = new InternalRecordWrapper(schema.asStruct());
    long count = 0;
    for (Row row : observed) {
      if (row == null || row.isNullAt(5)) {
        continue;
      }
      String topic = row.getString(0);
      int partition = row.getInt(1);
      long offset = row.getLong(2);
      Number below = covered.get(topic + "\u0000" + partition);
      if (below != null && offset < below.longValue()) {
        continue;
      }
      if (skip.contains(topic + "\u0000" + partition + "\u0000" + offset)) {
        continue;
      }
      Row raw = row.getStruct(5);
      GenericRecord record = GenericRecord.create(schema);
      setIfPresent(record, schema, "key", bytes(raw.get(0)));
      setIfPresent(record, schema, "value", bytes(raw.get(1)));
      if (hasHeaders) {
        setIfPresent(record, schema, "headers", headers(schema, raw.getList(3)));
      }
      setIfPresent(record, schema, "topic", topic);
      setIfPresent(record, schema, "partition", partition);
      setIfPresent(record, schema, "offset", offset);
      Object stamp = raw.isNullAt(2) ? null : raw.getLong(2);
      setIfPresent(
          record, schema, "timestamp", stamp == null ? null : time(schema, "timestamp", (Long) stamp));
      String stage = row.getString(3);
      setIfPresent(record, schema, "stage", stage);
      setIfPresent(record, schema, "reason", row.getString(4));
      setIfPresent(record, schema, "detail", raw.getString(raw.length() - 1));
      setIfPresent(
          record, schema, "error_class", errorClasses.getOrDefault(stage, "FrazilError"));
      setIfPresent(record, schema, "pipeline", pipeline);
      setIfPresent(record, schema, "target_table", targetTable);
      setIfPresent(record, schema, "failed_at", time(schema, "failed_at", failedAtMillis));
      key.partition(wrapper.wrap(record));
      byPartition.computeIfAbsent(key.copy(), k -> new ArrayList<>()).add(record);
      count++;
    }
    if (count == 0) {
      return 0;
    }
    FileFormat format =
        FileFormat.fromString(
            table
                .properties()
                .getOrDefault(
                    TableProperties.DEFAULT_FILE_FORMAT, TableProperties.DEFAULT_FILE_FORMAT_DEFAULT));
    GenericAppenderFactory appenders = new GenericAppenderFactory(schema, spec);
    // The table's own write settings (codec, metrics, row-group size), as Spark's writes use.
    appenders.setAll(table.properties());
    OutputFileFactory files =
        OutputFileFactory.builderFor(table, 1, System.nanoTime())
            .format(format)
            .operationId(UUID.randomUUID().toString())
            .build();
    List<DataFile> written = new ArrayList<>();
    try {
      for (Map.Entry<PartitionKey, List<Record>> entry : byPartition.entrySet()) {
        PartitionKey partitionKey = spec.isUnpartitioned() ? null : entry.getKey();
        written.add(write(appenders, files.newOutputFile(spec, partitionKey), format, partitionKey,
            entry.getValue()));
      }
      // A merging append, as Spark's: the dead-letter table's manifests do not pile up.
      AppendFiles append = table.newAppend();
      written.forEach(append::appendFile);
      for (Map.Entry<String, String> entry : summary.entrySet()) {
        append.set(entry.getKey(), entry.getValue());
      }
      append.commit();
    } catch (CommitStateUnknownException e) {
      throw e; // the files may be in the table: leave them
    } catch (RuntimeException e) {
      UncommittedFiles.delete(table.io(), written, e);
      throw e;
    }
    return count;
  }

  /**
   * The observed failing records, each once (by topic, partition and offset; nulls left out):
   * a range distribution's sampling job reads every row before the write's own stage, and the
   * observation lists a record once per read.
   */
  public static List<Row> distinct(List<Row> observed) {
    Map<String, Row> byPosition = new LinkedHashMap<>();
    for (Row row : observed) {
      if (row != null) {
        String at = row.getString(0) + "\0" + row.getInt(1) + "\0" + row.getLong(2);
        byPosition.putIfAbsent(at, row);
      }
    }
    return new ArrayList<>(byPosition.values());
  }

  /**
   * The observed records' positions as a JSON array of {@code [topic, partition, offset, stage,
   * reason, carried]}: one string crosses to Python instead of every record's bytes.
   */
  public static String positions(List<Row> observed) throws JsonProcessingException {
    List<Object[]> out = new ArrayList<>(observed.size());
    for (Row row : observed) {
      if (row != null) {
        out.add(
            new Object[] {
              row.getString(0),
              row.getInt(1),
              row.getLong(2),
              row.getString(3),
              row.getString(4),
              !row.isNullAt(5)
            });
      }
    }
    return JSON.writeValueAsString(out);
  }

  private static DataFile write(
      GenericAppenderFactory appenders,
      EncryptedOutputFile out,
      FileFormat format,
      PartitionKey partition,
      List<Record> records) {
    DataWriter<Record> writer = appenders.newDataWriter(out, format, partition);
    RuntimeException failure = null;
    try {
      for (Record record : records) {
        writer.write(record);
      }
    } catch (RuntimeException e) {
      failure = e;
    }
    try {
      writer.close();
    } catch (IOException e) {
      UncheckedIOException closing = new UncheckedIOException(e);
      if (failure == null) {
        failure = closing;
      } else {
        failure.addSuppressed(closing);
      }
    }
    if (failure != null) {
      throw failure;
    }
    return writer.toDataFile();
  }

  private static void setIfPresent(GenericRecord record, Schema schema, String name, Object value) {
    if (schema.findField(name) != null) {
      record.setField(name, value);
    }
  }

  private static ByteBuffer bytes(Object value) {
    return value == null ? null : ByteBuffer.wrap((byte[]) value);
  }

  private static Object time(Schema schema, String name, long millis) {
    Types.NestedField field = schema.findField(name);
    if (field == null) {
      return null;
    }
    Instant instant = Instant.ofEpochMilli(millis);
    Type type = field.type();
    if (type instanceof Types.TimestampType && !((Types.TimestampType) type).shouldAdjustToUTC()) {
      return LocalDateTime.ofInstant(instant, ZoneOffset.UTC);
    }
    return OffsetDateTime.ofInstant(instant, ZoneOffset.UTC);
  }

  private static List<Record> headers(Schema schema, List<Row> headers) {
    Types.NestedField field = schema.findField("headers");
    if (headers == null || field == null || !field.type().isListType()) {
      return null;
    }
    Types.StructType element = field.type().asListType().elementType().asStructType();
    List<Record> out = new ArrayList<>(headers.size());
    for (Row header : headers) {
      GenericRecord record = GenericRecord.create(element);
      record.setField("key", header.isNullAt(0) ? null : header.getString(0));
      record.setField("value", bytes(header.get(1)));
      out.add(record);
    }
    return out;
  }
}
