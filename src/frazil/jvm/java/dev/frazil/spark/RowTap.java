package dev.frazil.spark;

import java.io.Serializable;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.AccumulatorV2;
import scala.Option;

/**
 * What a batch's write counts of its rows as they stream by: whether a row is written (the
 * expression's value, for the write's filter), and into an accumulator the records written,
 * the records dropped as configured and the largest Kafka timestamp of each partition's
 * written records.
 *
 * <p>Spark's {@code observe} ({@code CollectMetrics}) takes the same figures, but Spark never
 * generates code for it: the rows before it are written into {@code UnsafeRow}s once more,
 * between two generated stages (measured: ~4% of a steady append's CPU per record). This
 * expression is generated code inside the stage that reads, decodes and writes the rows.
 *
 * <p>It is not deterministic: the optimizer must neither move it past another operator nor
 * evaluate it twice, and a projection evaluates it once per row ({@code ProjectExec} does not
 * defer nondeterministic expressions). Its counts reach the driver as any accumulator's do,
 * from successful task attempts only, and are kept there by stage and partition: rows Spark
 * runs twice (a range distribution's sampling job) count once (see {@link Counts}).
 */
public final class RowTap extends Expression implements Serializable {
  private static final long serialVersionUID = 1L;

  private final Expression wanted;
  private final Expression dropped;
  private final Expression topic;
  private final Expression partition;
  private final Expression timestamp;
  private final Counts counts;

  /**
   * A tap over the named columns, its counts registered with the driver's SparkContext.
   *
   * @param wanted whether a row is written (null: not written)
   * @param dropped whether a row is dropped as configured (counted whether written or not)
   * @param partitions the batch's partitions, {@code topic NUL partition} joined by NUL NUL
   *     (index {@code i}: the timestamp {@code ts_i})
   */
  public static RowTap create(
      Column wanted,
      Column dropped,
      String topicColumn,
      String partitionColumn,
      String timestampColumn,
      String partitions) {
    String[] pairs = partitions.isEmpty() ? new String[0] : partitions.split("\0\0", -1);
    String[] topics = new String[pairs.length];
    int[] numbers = new int[pairs.length];
    for (int i = 0; i < pairs.length; i++) {
      int cut = pairs[i].lastIndexOf('\0');
      topics[i] = pairs[i].substring(0, cut);
      numbers[i] = Integer.parseInt(pairs[i].substring(cut + 1));
    }
    Counts counts = new Counts(topics, numbers);
    counts.register(SparkContext.getOrCreate(), Option.empty(), false);
    return new RowTap(
        ExpressionUtils.expression(wanted),
        ExpressionUtils.expression(dropped),
        ExpressionUtils.expression(functions.col(topicColumn)),
        ExpressionUtils.expression(functions.col(partitionColumn)),
        ExpressionUtils.expression(functions.col(timestampColumn)),
        counts);
  }

  RowTap(
      Expression wanted,
      Expression dropped,
      Expression topic,
      Expression partition,
      Expression timestamp,
      Counts counts) {
    this.wanted = wanted;
    this.dropped = dropped;
    this.topic = topic;
    this.partition = partition;
    this.timestamp = timestamp;
    this.counts = counts;
  }

  /** The tap as a boolean column: true for a row to write. */
  public Column column() {
    return ExpressionUtils.column(this);
  }

  /**
   * The counts merged on the driver so far, as one line (one py4j round trip): records
   * written, records dropped, then each partition's largest timestamp (empty: none), comma
   * separated.
   */
  public String values() {
    long[] value = counts.value();
    StringBuilder line = new StringBuilder();
    for (int i = 0; i < value.length; i++) {
      if (i > 0) {
        line.append(',');
      }
      if (i < 2 || value[i] != Long.MIN_VALUE) {
        line.append(value[i]);
      }
    }
    return line.toString();
  }

  @Override
  public Object eval(InternalRow input) {
    Object w = wanted.eval(input);
    Object d = dropped.eval(input);
    Object t = topic.eval(input);
    Object p = partition.eval(input);
    Object s = timestamp.eval(input);
    return counts.tap(
        w != null && (Boolean) w,
        d != null && (Boolean) d,
        (UTF8String) t,
        p == null ? -1 : (Integer) p,
        s == null ? Long.MIN_VALUE : (Long) s);
  }

  @Override
  public ExprCode doGenCode(CodegenContext context, ExprCode ev) {
    ExprCode w = wanted.genCode(context);
    ExprCode d = dropped.genCode(context);
    ExprCode t = topic.genCode(context);
    ExprCode p = partition.genCode(context);
    ExprCode s = timestamp.genCode(context);
    String tap = context.addReferenceObj("frazilTap", counts, Counts.class.getName());
    String code =
        w.code() + "\n" + d.code() + "\n" + t.code() + "\n" + p.code() + "\n" + s.code()
            + "\nboolean " + ev.isNull() + " = false;"
            + "\nboolean " + ev.value() + " = " + tap + ".tap("
            + "!" + w.isNull() + " && " + w.value() + ", "
            + "!" + d.isNull() + " && " + d.value() + ", "
            + t.isNull() + " ? null : " + t.value() + ", "
            + p.isNull() + " ? -1 : " + p.value() + ", "
            + s.isNull() + " ? Long.MIN_VALUE : " + s.value() + ");";
    return ev.copy(
        Catalyst.code(code),
        ev.isNull(),
        ev.value());
  }

  @Override
  public boolean deterministic() {
    return false;
  }

  @Override
  public scala.collection.immutable.Seq<Expression> children() {
    return Catalyst.children(wanted, dropped, topic, partition, timestamp);
  }

  @Override
  public DataType dataType() {
    return DataTypes.BooleanType;
  }

  @Override
  public boolean nullable() {
    return false;
  }

  @Override
  public String prettyName() {
    return "frazil_tap";
  }

  @Override
  public Expression withNewChildrenInternal(
      scala.collection.immutable.IndexedSeq<Expression> children) {
    return new RowTap(
        children.apply(0),
        children.apply(1),
        children.apply(2),
        children.apply(3),
        children.apply(4),
        counts);
  }

  @Override
  public int productArity() {
    return 5;
  }

  @Override
  public Object productElement(int n) {
    switch (n) {
      case 0:
        return wanted;
      case 1:
        return dropped;
      case 2:
        return topic;
      case 3:
        return partition;
      default:
        return timestamp;
    }
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof RowTap;
  }

  @Override
  public boolean equals(Object other) {
    // Two taps are one only with the same counts: a batch's tap never stands for another's.
    if (!(other instanceof RowTap)) {
      return false;
    }
    RowTap o = (RowTap) other;
    return counts == o.counts
        && wanted.equals(o.wanted)
        && dropped.equals(o.dropped)
        && topic.equals(o.topic)
        && partition.equals(o.partition)
        && timestamp.equals(o.timestamp);
  }

  @Override
  public int hashCode() {
    return Objects.hash(System.identityHashCode(counts), wanted, dropped, topic, partition);
  }

  /**
   * A task's counts, merged on the driver: {@code [records, dropped, ts_0, ts_1, …]}, a
   * timestamp {@link Long#MIN_VALUE} while its partition has no written record.
   *
   * <p>The driver keeps each task's counts by its stage and partition, and reads those of the
   * last stage that ran the tap: a partition is counted once even when Spark runs the rows
   * twice (a range distribution's sampling job reads every row before the write's own stage;
   * a resubmitted stage runs some partitions again). Spark's {@code observe} counts both.
   */
  public static final class Counts extends AccumulatorV2<Object, long[]> {
    private static final long serialVersionUID = 1L;

    private final String[] topics;
    private final int[] partitions;
    /** This task's counts: {@code [records, dropped, ts_0, …]}. */
    private final long[] own;
    /** This task's stage and partition (-1: no row tapped yet). */
    private int stage = -1;
    private int partition = -1;
    /** On the driver: each task's counts, by stage (high 32 bits) and partition. */
    private final Map<Long, long[]> byTask = new HashMap<>();

    /** Topic → its partitions' timestamp indexes (-1: not the batch's), built per task. */
    private transient Map<UTF8String, int[]> indexes;
    private transient UTF8String lastTopic;
    private transient int[] lastIndexes;

    Counts(String[] topics, int[] partitions) {
      this.topics = topics;
      this.partitions = partitions;
      this.own = empty(topics.length);
    }

    private static long[] empty(int timestamps) {
      long[] counts = new long[2 + timestamps];
      Arrays.fill(counts, 2, counts.length, Long.MIN_VALUE);
      return counts;
    }

    /** Counts one row; returns whether it is written (the generated code's call). */
    public boolean tap(
        boolean wanted, boolean drop, UTF8String topic, int partition, long timestamp) {
      if (stage < 0) {
        TaskContext task = TaskContext.get();
        stage = task == null ? 0 : task.stageId();
        this.partition = task == null ? 0 : task.partitionId();
      }
      if (drop) {
        own[1]++;
      }
      if (!wanted) {
        return false;
      }
      own[0]++;
      if (timestamp != Long.MIN_VALUE && topic != null) {
        int[] slots = slots(topic);
        if (slots != null && partition >= 0 && partition < slots.length) {
          int i = slots[partition];
          if (i >= 0 && timestamp > own[2 + i]) {
            own[2 + i] = timestamp;
          }
        }
      }
      return true;
    }

    private int[] slots(UTF8String topic) {
      if (lastTopic != null && lastTopic.equals(topic)) {
        return lastIndexes;
      }
      if (indexes == null) {
        Map<UTF8String, int[]> built = new HashMap<>();
        for (int i = 0; i < topics.length; i++) {
          UTF8String key = UTF8String.fromString(topics[i]);
          int[] slots = built.get(key);
          int size = Math.max(slots == null ? 0 : slots.length, partitions[i] + 1);
          int[] grown = new int[size];
          Arrays.fill(grown, -1);
          if (slots != null) {
            System.arraycopy(slots, 0, grown, 0, slots.length);
          }
          grown[partitions[i]] = i;
          built.put(key, grown);
        }
        indexes = built;
      }
      lastTopic = topic.clone(); // the row's bytes are reused by the next row
      lastIndexes = indexes.get(lastTopic);
      return lastIndexes;
    }

    @Override
    public synchronized boolean isZero() {
      return stage < 0 && byTask.isEmpty();
    }

    @Override
    public Counts copy() {
      Counts copy = new Counts(topics, partitions);
      synchronized (this) {
        System.arraycopy(own, 0, copy.own, 0, own.length);
        copy.stage = stage;
        copy.partition = partition;
        for (Map.Entry<Long, long[]> entry : byTask.entrySet()) {
          copy.byTask.put(entry.getKey(), entry.getValue().clone());
        }
      }
      return copy;
    }

    @Override
    public synchronized void reset() {
      System.arraycopy(empty(topics.length), 0, own, 0, own.length);
      stage = -1;
      partition = -1;
      byTask.clear();
    }

    @Override
    public void add(Object v) {
      throw new UnsupportedOperationException("a RowTap's counts grow through tap()");
    }

    @Override
    public synchronized void merge(AccumulatorV2<Object, long[]> other) {
      Counts o = (Counts) other;
      if (o.stage >= 0) { // a task that tapped no row counted nothing
        // A later attempt of the same stage and partition replaces the earlier one.
        byTask.put(((long) o.stage << 32) | (o.partition & 0xffffffffL), o.own.clone());
      }
    }

    @Override
    public synchronized long[] value() {
      long[] value = empty(topics.length);
      long last = -1;
      for (long key : byTask.keySet()) {
        last = Math.max(last, key >>> 32);
      }
      for (Map.Entry<Long, long[]> entry : byTask.entrySet()) {
        if (entry.getKey() >>> 32 != last) {
          continue; // an earlier stage ran the same rows (a sampling job)
        }
        long[] counts = entry.getValue();
        value[0] += counts[0];
        value[1] += counts[1];
        for (int i = 2; i < value.length; i++) {
          value[i] = Math.max(value[i], counts[i]);
        }
      }
      return value;
    }
  }
}
