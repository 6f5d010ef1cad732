package dev.frazil.spark;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.TimeZone;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;
import org.apache.spark.sql.catalyst.util.RebaseDateTime;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.kafka010.KafkaBatchInputPartition;
import org.apache.spark.sql.kafka010.KafkaOffsetRange;
import org.apache.spark.sql.kafka010.consumer.KafkaDataConsumer;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Reads one Kafka partition's range of a micro-batch into Spark's rows, as Spark's own reader
 * ({@code KafkaBatchPartitionReader}) does, with the same consumer pool, offsets, polls and
 * data-loss checks ({@code KafkaDataConsumer.get}), but each record written straight into one
 * reused {@code UnsafeRow}.
 *
 * <p>Spark's reader builds a generic row per record (the topic's name encoded again as a
 * {@code UTF8String}, the partition, offset and timestamp type boxed, the timestamp through a
 * {@code java.sql.Timestamp} and the JVM's default {@code TimeZone}, which is cloned at each
 * call) and projects it into an {@code UnsafeRow}: about 300 bytes of garbage per record, a
 * sixth of what a steady run allocated outside Parquet and the decoder. The row here holds the
 * same values in the same layout (the source's schema without headers): key and value bytes,
 * topic, partition, offset, the timestamp in microseconds (rebased from the Julian calendar as
 * Spark's {@code DateTimeUtils.fromJavaTimestamp} does, which changes nothing after 1582) and
 * the timestamp type's id.
 *
 * <p>Its consumers hand over each key and value as the Kafka client read them ({@link
 * Buffers}: a {@code ByteBuffer} over the fetched or decompressed bytes), which are written into
 * the row from there: Spark's consumers copy each into a {@code byte[]} first ({@code
 * ByteArrayDeserializer}), a copy as large as the records, made only to be copied again. The
 * consumers are Spark's ({@code KafkaDataConsumer}), pooled under a group id of their own (the
 * pool keys consumers and their fetched records by group id and partition, and refuses other
 * settings under one key: a query reading one topic through both readers would fail, or hand
 * Spark's reader these records). They are assigned partitions and commit nothing, so the group
 * id only names them. None of Spark's code reads a record's key or value between the consumer
 * and this reader.
 */
final class KafkaRecordReader implements PartitionReader<InternalRow> {
  private static final int KEY = 0;
  private static final int VALUE = 1;
  private static final int TOPIC = 2;
  private static final int PARTITION = 3;
  private static final int OFFSET = 4;
  private static final int TIMESTAMP = 5;
  private static final int TIMESTAMP_TYPE = 6;

  private final KafkaDataConsumer consumer;
  private final long untilOffset;
  private final long pollTimeoutMs;
  private final boolean failOnDataLoss;
  private final UTF8String topic;
  private final String zone = TimeZone.getDefault().getID();
  private final UnsafeRowWriter writer = new UnsafeRowWriter(7, 256);
  private long nextOffset;

  KafkaRecordReader(KafkaBatchInputPartition partition) {
    KafkaOffsetRange range = partition.offsetRange();
    TopicPartition topicPartition = range.topicPartition();
    Map<String, Object> params = new HashMap<>(partition.executorKafkaParams());
    params.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, Buffers.class.getName());
    params.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, Buffers.class.getName());
    params.put(
        ConsumerConfig.GROUP_ID_CONFIG, params.get(ConsumerConfig.GROUP_ID_CONFIG) + "-frazil");
    this.consumer = KafkaDataConsumer.acquire(topicPartition, params);
    this.nextOffset = range.fromOffset();
    this.untilOffset = range.untilOffset();
    this.pollTimeoutMs = partition.pollTimeoutMs();
    this.failOnDataLoss = partition.failOnDataLoss();
    this.topic = UTF8String.fromString(topicPartition.topic());
  }

  /**
   * Whether frazil's reader reads this partition: a micro-batch range with both ends resolved
   * and no headers asked for. Others (headers, a range bound late) go to Spark's reader.
   */
  static boolean reads(InputPartition partition) {
    if (!(partition instanceof KafkaBatchInputPartition)) {
      return false;
    }
    KafkaBatchInputPartition p = (KafkaBatchInputPartition) partition;
    return !p.includeHeaders() && p.offsetRange().fromOffset() >= 0
        && p.offsetRange().untilOffset() >= 0;
  }

  @Override
  public boolean next() {
    if (nextOffset >= untilOffset) {
      return false;
    }
    // Typed byte[] by Spark; its key and value are what Buffers returned (raw: no cast).
    @SuppressWarnings("rawtypes")
    ConsumerRecord record = consumer.get(nextOffset, untilOffset, pollTimeoutMs, failOnDataLoss);
    if (record == null) {
      return false; // the rest of the range is gone and failOnDataLoss is off
    }
    writer.reset();
    writer.zeroOutNullBytes();
    write(KEY, record.key());
    write(VALUE, record.value());
    writer.write(TOPIC, topic);
    writer.write(PARTITION, record.partition());
    writer.write(OFFSET, record.offset());
    writer.write(
        TIMESTAMP,
        RebaseDateTime.rebaseJulianToGregorianMicros(
            zone, Math.multiplyExact(record.timestamp(), 1000L)));
    writer.write(TIMESTAMP_TYPE, record.timestampType().id);
    nextOffset = record.offset() + 1;
    return true;
  }

  private void write(int ordinal, Object bytes) {
    if (bytes == null) {
      writer.setNullAt(ordinal);
    } else if (bytes instanceof ByteBuffer) {
      ByteBuffer buffer = (ByteBuffer) bytes;
      if (buffer.hasArray()) {
        writer.write(
            ordinal, buffer.array(), buffer.arrayOffset() + buffer.position(), buffer.remaining());
      } else {
        byte[] copy = new byte[buffer.remaining()];
        buffer.duplicate().get(copy);
        writer.write(ordinal, copy);
      }
    } else {
      writer.write(ordinal, (byte[]) bytes);
    }
  }

  @Override
  public InternalRow get() {
    return writer.getRow();
  }

  @Override
  public void close() {
    consumer.release();
  }

  @Override
  public CustomTaskMetric[] currentMetricsValues() {
    return new CustomTaskMetric[] {
      metric("offsetOutOfRange", consumer.getNumOffsetOutOfRange()),
      metric("dataLoss", consumer.getNumDataLoss())
    };
  }

  private static CustomTaskMetric metric(String name, long value) {
    return new CustomTaskMetric() {
      @Override
      public String name() {
        return name;
      }

      @Override
      public long value() {
        return value;
      }
    };
  }

  /**
   * A record's key or value as the Kafka client read it: the {@code ByteBuffer} over the
   * fetched or decompressed bytes (the client never reuses a fetch's memory; the reader reads
   * it once, writing the record's row), or the bytes given.
   */
  public static final class Buffers implements Deserializer<Object> {
    @Override
    public Object deserialize(String topic, byte[] data) {
      return data;
    }

    @Override
    public Object deserialize(String topic, Headers headers, ByteBuffer data) {
      return data;
    }
  }

  /**
   * Spark's Kafka reader factory with {@link KafkaRecordReader} for the partitions it reads;
   * the others are Spark's.
   */
  static final class Factory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final PartitionReaderFactory spark;

    Factory(PartitionReaderFactory spark) {
      this.spark = spark;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      if (reads(partition)) {
        return new KafkaRecordReader((KafkaBatchInputPartition) partition);
      }
      return spark.createReader(partition);
    }
  }
}
