package dev.frazil.spark;

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.execution.datasources.v2.MicroBatchScanExec;
import scala.Option;
import scala.collection.immutable.Seq;

/**
 * Spark's scan of a Kafka micro-batch ({@code MicroBatchScanExec}: the same stream, offsets,
 * partitions and metrics, and the same node to Spark's progress reports), whose partitions are
 * read by {@link KafkaRecordReader}. Its constructor is Spark's, so that Catalyst copies it as
 * it copies Spark's node.
 *
 * <p>It is compiled against a stand-in for Spark's class ({@code src/frazil/jvm/stubs}): the
 * JVM links it to Spark's own.
 */
public final class KafkaMicroBatchScanExec extends MicroBatchScanExec {
  private transient PartitionReaderFactory factory;

  public KafkaMicroBatchScanExec(
      Seq<Attribute> output,
      Scan scan,
      MicroBatchStream stream,
      Offset start,
      Offset end,
      Option<Seq<Expression>> keyGroupedPartitioning,
      Option<Seq<SortOrder>> ordering) {
    super(output, scan, stream, start, end, keyGroupedPartitioning, ordering);
  }

  @Override
  public synchronized PartitionReaderFactory readerFactory() {
    if (factory == null) {
      factory = new KafkaRecordReader.Factory(super.readerFactory());
    }
    return factory;
  }
}
