package dev.frazil.spark;

import java.util.HashMap;
import java.util.Map;
import org.apache.iceberg.spark.CommitMetadata;
import org.apache.spark.sql.SparkSession;

/**
 * Runs a Spark SQL write with properties for the Iceberg snapshot it commits.
 *
 * <p>SQL writes (MERGE, UPDATE, DELETE) take no {@code snapshot-property.*} write options;
 * Iceberg reads the properties of such a commit from {@link CommitMetadata}, a thread-local
 * set around the statement. The statement must run on the thread that sets it, which a call
 * from Python through py4j does not guarantee across two calls: hence one call here.
 */
public final class Commits {
  private Commits() {}

  /**
   * Runs {@code sql} in {@code session}; the Iceberg commit it makes carries {@code properties}
   * in its snapshot summary.
   */
  public static void sqlWithProperties(
      SparkSession session, String sql, Map<String, String> properties) throws Exception {
    CommitMetadata.withCommitProperties(
        new HashMap<>(properties),
        () -> {
          session.sql(sql);
          return null;
        },
        Exception.class);
  }
}
