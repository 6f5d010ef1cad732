package dev.frazil.spark;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.SparkSessionExtensionsProvider;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.SparkStrategy;
import org.apache.spark.sql.execution.datasources.v2.MicroBatchScanExec;
import org.apache.spark.sql.execution.datasources.v2.StreamingDataSourceV2ScanRelation;
import scala.Option;
import scala.collection.immutable.Seq;
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
 *
 * <p>The scan planned here reads its partitions with {@link KafkaRecordReader} (the same
 * consumers and offsets, rows written without Spark's per-record generic row); with the
 * session's {@code spark.frazil.kafka.reader} set to {@code spark}, with Spark's reader.
 */
public final class KafkaRows extends SparkStrategy {
  /** The scan of Spark's Kafka source ({@code spark-sql-kafka-0-10}). */
  static final String KAFKA_SCAN = "org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaScan";

  /** The session setting that chooses the partitions' reader: {@code frazil} or {@code spark}. */
  static final String READER = "spark.frazil.kafka.reader";

  private final SparkSession session;

  KafkaRows(SparkSession session) {
    this.session = session;
  }

  private static final Option NONE = Option.empty();

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
    Seq output = relation.output();
    MicroBatchStream stream = (MicroBatchStream) relation.stream();
    Offset start = relation.startOffset().get();
    Offset end = relation.endOffset().get();
    Object scan =
        "spark".equals(session.conf().get(READER, "frazil"))
            ? new MicroBatchScanExec(output, relation.scan(), stream, start, end, NONE, NONE)
            : new KafkaMicroBatchScanExec(output, relation.scan(), stream, start, end, NONE, NONE);
    return scala.jdk.javaapi.CollectionConverters.asScala(java.util.List.of((SparkPlan) scan)).toList();
  }

  /** Installs {@link KafkaRows} in a session ({@code spark.sql.extensions}). */
  public static final class Extension implements SparkSessionExtensionsProvider {
    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
      extensions.injectPlannerStrategy(KafkaRows::new);
      return BoxedUnit.UNIT;
    }
  }
}
