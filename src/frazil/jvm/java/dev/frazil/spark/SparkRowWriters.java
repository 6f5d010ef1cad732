package dev.frazil.spark;

import java.util.Map;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.RegistryBasedFileWriterFactory;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.StructType;

/**
 * Iceberg's data writers for Spark rows of one shape, built from Iceberg's file format
 * registry as Iceberg's own Spark writes build theirs: {@code
 * org.apache.iceberg.spark.source.SparkFileWriterFactory} (package-private in Iceberg 1.11,
 * so not usable here) is this same subclass of {@link RegistryBasedFileWriterFactory}, plus
 * delete writers the job does not need. Each file gets the table's properties and {@link
 * org.apache.iceberg.MetricsConfig#forTable}, as there, and the writer properties given over
 * them, as a Spark write's options are. No sort order: the job writes only unsorted tables,
 * and its files record none, as before.
 */
final class SparkRowWriters extends RegistryBasedFileWriterFactory<InternalRow, StructType> {
  SparkRowWriters(Table table, StructType shape, Map<String, String> writerProperties) {
    super(
        table,
        FileFormat.PARQUET,
        InternalRow.class,
        table.schema(),
        null,
        FileFormat.PARQUET,
        null,
        null,
        null,
        writerProperties,
        shape,
        null);
  }
}
