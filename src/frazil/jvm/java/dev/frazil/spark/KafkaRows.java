package dev.frazil.spark;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.SparkSessionExtensionsProvider;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.SparkStrategy;
import org.apache.spark.sql.execution.datasources.v2.MicroBatchScanExec;
import org.apache.spark.sql.execution.datasources.v2.MicroBatchScanExec$;
import org.apache.spark.sql.execution.datasources.v2.StreamingDataSourceV2ScanRelation;
import scala.runtime.BoxedUnit;

/**
 * A micro-batch of Spark's Kafka source read without copying every record once more.
 *
 * <p>Spark plans a row-based micro-batch scan under a projection of all its columns, so that
 * whatever the source's reader returns is turned into Spark's {@code UnsafeRow}s ({@code
 * DataSourceV2Strategy}: "Add a Project here to make sure we produce unsafe rows"). Spark's
 * Kafka reader returns {@code UnsafeRow}s already ({@code KafkaBatchPartitionReader.get()}
 * is typed so), and the projection wrote each record's key, value and topic into another one:
 * a whole generated stage per batch, before {@code foreachBatch}'s plan reads the rows again
 * (its {@code Scan ExistingRDD} reads their fields as they are). This strategy, ahead of
 * Spark's own, plans a Kafka micro-batch scan with nothing between it and what reads it (the
 * stream itself, or a union, join or aggregate over it) as the scan alone; a projection or
 * filter on the stream is planned by Spark with the scan as before, and so are other sources
 * and batch reads of Kafka. Either way the rows are {@code UnsafeRow}s.
 */
public final class KafkaRows extends SparkStrategy {
  /** The scan of Spark's Kafka source ({@code spark-sql-kafka-0-10}). */
  static final String KAFKA_SCAN = "org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaScan";

  @Override
  @SuppressWarnings({"unchecked", "rawtypes"})
  public scala.collection.immutable.Seq<SparkPlan> apply(LogicalPlan plan) {
    if (!(plan instanceof StreamingDataSourceV2ScanRelation)) {
      return scala.collection.immutable.List$.MODULE$.empty();
    }
    StreamingDataSourceV2ScanRelation relation = (StreamingDataSourceV2ScanRelation) plan;
    if (relation.startOffset().isEmpty()
        || relation.endOffset().isEmpty()
        || !KAFKA_SCAN.equals(relation.scan().getClass().getName())
        || !(relation.stream() instanceof MicroBatchStream)) {
      return scala.collection.immutable.List$.MODULE$.empty();
    }
    SparkPlan scan =
        new MicroBatchScanExec(
            (scala.collection.immutable.Seq) relation.output(),
            relation.scan(),
            (MicroBatchStream) relation.stream(),
            relation.startOffset().get(),
            relation.endOffset().get(),
            MicroBatchScanExec$.MODULE$.apply$default$6(),
            MicroBatchScanExec$.MODULE$.apply$default$7());
    return scala.jdk.javaapi.CollectionConverters.asScala(java.util.List.of(scan)).toList();
  }

  /** Installs {@link KafkaRows} in a session ({@code spark.sql.extensions}). */
  public static final class Extension implements SparkSessionExtensionsProvider {
    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
      extensions.injectPlannerStrategy(session -> new KafkaRows());
      return BoxedUnit.UNIT;
    }
  }
}
