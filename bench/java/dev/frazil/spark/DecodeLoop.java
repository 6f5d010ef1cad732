package dev.frazil.spark;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.types.DataTypes;

/**
 * frazil's JSON decoder alone, apart from Spark's tasks and Kafka: the values of a file (one
 * JSON document a line) decoded with {@link JsonDecoder#decodeValue} round after round. Prints one JSON object per round: the thread's CPU nanoseconds per value and a
 * checksum of the decoded rows (the same for every decoder that reads them alike).
 *
 * <p>Arguments: the values file, the schema as Spark's JSON form of a struct type, rounds,
 * threads (each with a decoder of its own, as Spark's tasks have; 1 by default). The CPU per
 * value is the threads' mean.
 */
public final class DecodeLoop {
  private DecodeLoop() {}

  public static void main(String[] args) throws IOException {
    List<byte[]> values = new ArrayList<>();
    for (String line : Files.readAllLines(Path.of(args[0]))) {
      values.add(line.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }
    String schema = args[1];
    int rounds = Integer.parseInt(args[2]);
    int threads = args.length > 3 ? Integer.parseInt(args[3]) : 1;
    int width = ((org.apache.spark.sql.types.StructType) org.apache.spark.sql.types.DataType.fromJson(schema)).size();
    // Each thread its own decoder, as each Spark task deserializes its own.
    long[][] cpu = new long[threads][rounds];
    long[] sums = new long[threads];
    java.util.concurrent.CyclicBarrier barrier = new java.util.concurrent.CyclicBarrier(threads);
    List<Thread> started = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      int me = t;
      Thread thread =
          new Thread(
              () -> {
                JsonDecoder decoder =
                    new JsonDecoder(
                        new BoundReference(0, DataTypes.BinaryType, true), schema, null, "UTC", null);
                ThreadMXBean beans = ManagementFactory.getThreadMXBean();
                try {
                  for (int round = 0; round < rounds; round++) {
                    barrier.await(120, java.util.concurrent.TimeUnit.SECONDS);
                    long sum = 0;
                    long before = beans.getCurrentThreadCpuTime();
                    for (byte[] value : values) {
                      InternalRow row = decoder.decodeValue(value);
                      // Every decoded field: jars that decode alike give equal sums.
                      sum = 31 * sum + (row.isNullAt(0) ? 1 : row.getStruct(0, width).toString().hashCode());
                    }
                    cpu[me][round] = beans.getCurrentThreadCpuTime() - before;
                    sums[me] = sum;
                  }
                } catch (Exception e) {
                  throw new IllegalStateException(e);
                }
              });
      thread.start();
      started.add(thread);
    }
    for (Thread thread : started) {
      try {
        thread.join();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
    for (int round = 0; round < rounds; round++) {
      long total = 0;
      for (int t = 0; t < threads; t++) {
        total += cpu[t][round];
      }
      System.out.printf(
          "{\"round\": %d, \"values\": %d, \"threads\": %d, \"cpu_ns_per_value\": %.1f,"
              + " \"checksum\": %d}%n",
          round, values.size(), threads, (double) total / threads / values.size(), sums[0]);
    }
  }
}
