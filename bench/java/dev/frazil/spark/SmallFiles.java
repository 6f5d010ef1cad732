package dev.frazil.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.hadoop.HadoopTables;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.io.RollingDataWriter;
import org.apache.iceberg.types.Types;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * What a Parquet file costs beyond its rows, apart from Spark: the same payments-like rows
 * written by Iceberg's writers for Spark rows ({@link SparkRowWriters}, as the routed job
 * writes them) into one file, and into many small files, with each writer setting in turn,
 * in one JVM, one thread, rounds alternating. Prints one JSON object per variant and round.
 *
 * <p>Arguments: warehouse folder, rows, files, rounds, then variants as {@code
 * name=key:value,key:value} (a name alone: no writer properties; a variant named {@code one}
 * writes all rows to one file).
 */
public final class SmallFiles {
  private SmallFiles() {}

  public static void main(String[] args) throws Exception {
    String warehouse = args[0];
    int total = Integer.parseInt(args[1]);
    int files = Integer.parseInt(args[2]);
    int rounds = Integer.parseInt(args[3]);
    List<String> names = new ArrayList<>();
    List<Map<String, String>> properties = new ArrayList<>();
    for (int i = 4; i < args.length; i++) {
      String[] parts = args[i].split("=", 2);
      names.add(parts[0]);
      Map<String, String> props = new HashMap<>();
      if (parts.length > 1 && !parts[1].isEmpty()) {
        for (String kv : parts[1].split(",")) {
          String[] pair = kv.split(":", 2);
          props.put(pair[0], pair[1]);
        }
      }
      properties.add(props);
    }
    Schema schema =
        new Schema(
            Types.NestedField.optional(1, "id", Types.StringType.get()),
            Types.NestedField.optional(2, "type", Types.StringType.get()),
            Types.NestedField.optional(3, "created_at", Types.TimestampType.withZone()),
            Types.NestedField.optional(4, "document", Types.StringType.get()),
            Types.NestedField.optional(5, "payer", Types.StringType.get()),
            Types.NestedField.optional(6, "amount", Types.LongType.get()),
            Types.NestedField.optional(7, "kind", Types.StringType.get()));
    StructType shape =
        new StructType()
            .add("id", DataTypes.StringType)
            .add("type", DataTypes.StringType)
            .add("created_at", DataTypes.TimestampType)
            .add("document", DataTypes.StringType)
            .add("payer", DataTypes.StringType)
            .add("amount", DataTypes.LongType)
            .add("kind", DataTypes.StringType);
    Configuration conf = new Configuration();
    // As frazil's sessions set it: permissions without a chmod process per file.
    conf.set("fs.file.impl", "dev.frazil.hadoop.LocalFileSystem");
    HadoopTables tables = new HadoopTables(conf);
    Map<String, String> tableProperties = new HashMap<>();
    tableProperties.put("write.parquet.compression-codec", "zstd");
    Table table =
        tables.create(schema, PartitionSpec.unpartitioned(), tableProperties, warehouse + "/t");
    InternalRow[] rows = rows(total);
    for (int round = 0; round < rounds; round++) {
      for (int v = 0; v < names.size(); v++) {
        int variant = (v + round) % names.size();
        int count = names.get(variant).startsWith("one") ? 1 : files;
        write(table, shape, rows, count, properties.get(variant), names.get(variant), round);
      }
    }
  }

  private static InternalRow[] rows(int total) {
    Random random = new Random(1);
    String[] types = {"debit", "credit", "bank_slip"};
    String[] payers = new String[2000];
    for (int i = 0; i < payers.length; i++) {
      payers[i] = "Payer " + Integer.toString(random.nextInt(1 << 30), 36);
    }
    long start = 1_764_547_200_000_000L;
    InternalRow[] rows = new InternalRow[total];
    for (int i = 0; i < total; i++) {
      rows[i] =
          new GenericInternalRow(
              new Object[] {
                UTF8String.fromString(new UUID(random.nextLong(), random.nextLong()).toString()),
                UTF8String.fromString(types[random.nextInt(types.length)]),
                start + i * 1_000L,
                UTF8String.fromString(Integer.toString(random.nextInt(1_000_000))),
                UTF8String.fromString(payers[random.nextInt(payers.length)]),
                (long) random.nextInt(100_000) + 1,
                UTF8String.fromString("k" + (i % 100))
              });
    }
    return rows;
  }

  private static void write(
      Table table,
      StructType shape,
      InternalRow[] rows,
      int files,
      Map<String, String> writerProperties,
      String name,
      int round)
      throws Exception {
    int each = rows.length / files;
    long open = 0;
    long write = 0;
    long close = 0;
    long bytes = 0;
    for (int f = 0; f < files; f++) {
      long t0 = System.nanoTime();
      OutputFileFactory names =
          OutputFileFactory.builderFor(table, round, f)
              .format(FileFormat.PARQUET)
              .operationId(name)
              .build();
      RollingDataWriter<InternalRow> writer =
          new RollingDataWriter<>(
              new SparkRowWriters(table, shape, writerProperties),
              names,
              table.io(),
              Long.MAX_VALUE,
              table.spec(),
              null);
      long t1 = System.nanoTime();
      for (int i = f * each; i < (f + 1) * each; i++) {
        writer.write(rows[i]);
      }
      long t2 = System.nanoTime();
      writer.close();
      long t3 = System.nanoTime();
      for (DataFile file : writer.result().dataFiles()) {
        bytes += file.fileSizeInBytes();
        table.io().deleteFile(file.location());
      }
      open += t1 - t0;
      write += t2 - t1;
      close += t3 - t2;
    }
    System.out.println(
        String.format(
            Locale.ROOT,
            "{\"variant\": \"%s\", \"round\": %d, \"files\": %d, \"rows\": %d, \"open_ms\": %.3f,"
                + " \"write_ms\": %.3f, \"close_ms\": %.3f, \"bytes\": %d}",
            name,
            round,
            files,
            each * files,
            open / 1e6,
            write / 1e6,
            close / 1e6,
            bytes));
  }
}
