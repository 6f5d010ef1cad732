package dev.frazil.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * The first rows of every partition of a batch read, in one Spark job: each task stops
 * reading once it has its share. A schema is inferred (or a Kafka Connect schema read) from
 * the start of each topic-partition, so a pipeline over a topic per source table meets every
 * table's shape; {@code limit} would read the first partition only (Spark's {@code
 * CollectLimit} takes rows from as few partitions as it can).
 */
public final class Samples {
  private Samples() {}

  /**
   * Up to {@code max(minimum, ceil(total / partitions))} rows of each partition of {@code
   * frame}, as a frame of its schema.
   */
  public static Dataset<Row> perPartition(Dataset<Row> frame, int total, int minimum) {
    JavaRDD<Row> rows = frame.javaRDD();
    int partitions = Math.max(1, rows.getNumPartitions());
    int each = Math.max(minimum, (total + partitions - 1) / partitions);
    JavaRDD<Row> first =
        rows.mapPartitions(
            iterator -> {
              List<Row> taken = new ArrayList<>();
              while (taken.size() < each && iterator.hasNext()) {
                taken.add(iterator.next());
              }
              return taken.iterator();
            });
    return frame.sparkSession().createDataFrame(first, frame.schema());
  }
}
