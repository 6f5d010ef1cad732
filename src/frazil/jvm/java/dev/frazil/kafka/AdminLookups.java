package dev.frazil.kafka;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * What a micro-batch asks Kafka's admin client, in one call from Python each: which
 * partitions a batch read up to a rate limit left behind (latest offsets), and whether its
 * topics are still the ones the query met (topic ids). Building the requests and reading the
 * answers object by object took some 35 and 8 py4j round trips (~40 and ~10 ms a batch).
 */
public final class AdminLookups {
  private AdminLookups() {}

  /**
   * Offsets of the named partitions.
   *
   * @param partitions {@code topic NUL partition} pairs joined by NUL NUL
   * @param latest the latest offsets (the next to be written, or the last stable one with
   *     {@code read_committed} options), else the earliest
   * @return {@code topic NUL partition NUL offset} lines joined by {@code \n}
   */
  public static String offsets(
      Admin admin, String partitions, boolean latest, ListOffsetsOptions options, long timeoutMs)
      throws Exception {
    OffsetSpec spec = latest ? OffsetSpec.latest() : OffsetSpec.earliest();
    Map<TopicPartition, OffsetSpec> request = new HashMap<>();
    for (String pair : partitions.split("\0\0", -1)) {
      if (pair.isEmpty()) {
        continue;
      }
      int cut = pair.lastIndexOf('\0');
      request.put(
          new TopicPartition(pair.substring(0, cut), Integer.parseInt(pair.substring(cut + 1))),
          spec);
    }
    if (request.isEmpty()) {
      return "";
    }
    Map<TopicPartition, ListOffsetsResultInfo> answer =
        admin.listOffsets(request, options).all().get(timeoutMs, TimeUnit.MILLISECONDS);
    StringBuilder lines = new StringBuilder();
    for (Map.Entry<TopicPartition, ListOffsetsResultInfo> entry : answer.entrySet()) {
      if (lines.length() > 0) {
        lines.append('\n');
      }
      TopicPartition tp = entry.getKey();
      lines.append(tp.topic()).append('\0').append(tp.partition()).append('\0');
      lines.append(entry.getValue().offset());
    }
    return lines.toString();
  }

  /**
   * Kafka's id of each named topic that exists; a topic deleted since is left out.
   *
   * @param names topic names joined by NUL
   * @return {@code name NUL id} lines joined by {@code \n}
   */
  public static String topicIds(Admin admin, String names, long timeoutMs) throws Exception {
    List<String> wanted = new ArrayList<>();
    for (String name : names.split("\0", -1)) {
      if (!name.isEmpty()) {
        wanted.add(name);
      }
    }
    if (wanted.isEmpty()) {
      return "";
    }
    Map<String, KafkaFuture<TopicDescription>> described =
        admin.describeTopics(wanted).topicNameValues();
    StringBuilder lines = new StringBuilder();
    for (String name : wanted) {
      KafkaFuture<TopicDescription> future = described.get(name);
      if (future == null) {
        continue;
      }
      TopicDescription description;
      try {
        description = future.get(timeoutMs, TimeUnit.MILLISECONDS);
      } catch (ExecutionException e) {
        if (e.getCause() instanceof UnknownTopicOrPartitionException) {
          continue; // deleted since the query met it
        }
        throw e;
      }
      if (lines.length() > 0) {
        lines.append('\n');
      }
      lines.append(name).append('\0').append(description.topicId());
    }
    return lines.toString();
  }
}
