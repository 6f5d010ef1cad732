package org.apache.spark.sql.execution.datasources.v2;

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import scala.Option;
import scala.collection.immutable.Seq;

/**
 * What frazil's {@code KafkaMicroBatchScanExec} uses of Spark 4.1's {@code MicroBatchScanExec}:
 * its constructor and its reader factory, with their signatures in Spark's bytecode.
 *
 * <p>Compiled only to compile against, never shipped: {@code javac} cannot extend the Scala
 * case class itself (its erased generic bridges, {@code withNewChildrenInternal} and the final
 * {@code mapChildren}, do not type-check as Java overrides), while the JVM links a subclass that
 * overrides a non-final method and calls an existing constructor. At run time the subclass
 * extends Spark's class.
 */
public class MicroBatchScanExec {
  public MicroBatchScanExec(
      Seq<Attribute> output,
      Scan scan,
      MicroBatchStream stream,
      Offset start,
      Offset end,
      Option<Seq<Expression>> keyGroupedPartitioning,
      Option<Seq<SortOrder>> ordering) {
    throw new UnsupportedOperationException("a compile-time stub");
  }

  public PartitionReaderFactory readerFactory() {
    throw new UnsupportedOperationException("a compile-time stub");
  }
}
