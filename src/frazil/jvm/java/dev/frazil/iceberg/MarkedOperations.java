package dev.frazil.iceberg;

import java.util.Map;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.TableMetadata;
import org.apache.iceberg.TableOperations;
import org.apache.iceberg.encryption.EncryptionManager;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.LocationProvider;

/**
 * A table's operations whose commit refuses a pipeline's batch planned on a stale marker.
 *
 * <p>Every commit frazil makes for a pipeline carries in its snapshot summary, besides its marker,
 * {@link #AFTER}: the commit id of the pipeline's marker the batch was planned after ({@link
 * #NONE} when the table had none). Iceberg calls {@link #commit} with the metadata the update was
 * applied on ({@code base}, refreshed on each of its retries) and the catalog then swaps {@code
 * base} for the new metadata atomically, or fails if the table moved. Checking here that {@code
 * base}'s newest marker of the pipeline is still that one therefore makes the marker part of the
 * commit's own optimistic check: commits of others in between (maintenance, other pipelines,
 * dead letters) carry no marker of the pipeline and are retried over as Iceberg does; a marker of
 * the pipeline in between (another run), or a marker gone (a rollback), refuses the commit with
 * {@link StaleMarkerException}, which Iceberg does not retry.
 *
 * <p>Commits without {@link #AFTER} (maintenance, other writers, frazil's resets) are not checked.
 */
public final class MarkedOperations implements TableOperations {
  static final String PIPELINE = "frazil.pipeline";
  static final String OFFSETS = "frazil.offsets";
  static final String COMMIT_ID = "frazil.commit-id";
  static final String BATCH_ID = "frazil.batch-id";
  static final String QUERY_ID = "frazil.query-id";
  static final String RUN_BY = "frazil.run-by";
  static final String AFTER = "frazil.after";
  /** {@link #AFTER} of a batch planned on a table without a marker of its pipeline. */
  static final String NONE = "-";

  private final TableOperations ops;
  private final String name;

  MarkedOperations(TableOperations ops, String name) {
    this.ops = ops;
    this.name = name;
  }

  /**
   * Checks the marker, then commits; a commit whose answer says it failed, or never came (a
   * 5xx, a timeout, a dropped connection, a 409 to a retry of a request the catalog had
   * applied), is looked for in the table before the failure is passed on: if the table holds
   * the commit's new snapshot, it went in and the commit returns normally. Otherwise Iceberg
   * (and Spark's write) would retry over a base holding it, or delete the files it refers to.
   */
  @Override
  public void commit(TableMetadata base, TableMetadata metadata) {
    check(base, metadata, name);
    try {
      ops.commit(base, metadata);
    } catch (ValidationException e) {
      throw e; // refused before anything was sent
    } catch (RuntimeException e) {
      if (landed(ops, base, metadata, e)) {
        return;
      }
      throw e;
    }
  }

  /**
   * Whether the table, read again, holds the snapshot {@code metadata} adds over {@code base}:
   * the commit that failed with {@code failure} was applied by the catalog. False for a change
   * without a new snapshot (nothing to look for) and when the table cannot be read (recorded on
   * {@code failure}).
   */
  public static boolean landed(
      TableOperations ops, TableMetadata base, TableMetadata metadata, RuntimeException failure) {
    Snapshot head = metadata.currentSnapshot();
    if (head == null || (base != null && base.snapshot(head.snapshotId()) != null)) {
      return false;
    }
    try {
      TableMetadata now = ops.refresh();
      Snapshot found = now == null ? null : now.snapshot(head.snapshotId());
      return found != null && inAncestry(now, found.snapshotId());
    } catch (RuntimeException unreadable) {
      failure.addSuppressed(unreadable);
      return false;
    }
  }

  /** Whether snapshot {@code id} is the current snapshot of {@code metadata} or one of its ancestors. */
  private static boolean inAncestry(TableMetadata metadata, long id) {
    for (Snapshot s = metadata.currentSnapshot();
        s != null;
        s = s.parentId() == null ? null : metadata.snapshot(s.parentId())) {
      if (s.snapshotId() == id) {
        return true;
      }
    }
    return false;
  }

  /**
   * Refuses the commit of {@code metadata} over {@code base} to table {@code name} if a snapshot
   * it adds was planned after another marker than {@code base}'s newest: {@link #commit}'s check,
   * also made by {@link MarkedCatalog#commitTables} for each table of a multi-table commit.
   */
  static void check(TableMetadata base, TableMetadata metadata, String name) {
    if (base == null) {
      return;
    }
    Snapshot head = metadata.currentSnapshot();
    Snapshot before = base.currentSnapshot();
    // The snapshots this commit puts on the main branch: from its head back to base's.
    for (Snapshot s = head;
        s != null
            && (before == null || s.snapshotId() != before.snapshotId())
            && base.snapshot(s.snapshotId()) == null;
        s = s.parentId() == null ? null : metadata.snapshot(s.parentId())) {
      check(s, base, name);
    }
  }

  /** Refuses {@code snapshot} if it was planned after another marker than {@code base}'s newest. */
  private static void check(Snapshot snapshot, TableMetadata base, String name) {
    Map<String, String> summary = snapshot.summary();
    String after = summary == null ? null : summary.get(AFTER);
    String pipeline = summary == null ? null : summary.get(PIPELINE);
    if (after == null || pipeline == null) {
      return;
    }
    Snapshot newest = newestMarker(base, pipeline);
    String found = newest == null ? NONE : orEmpty(newest.summary().get(COMMIT_ID));
    if (found.equals(after)) {
      return;
    }
    String what =
        newest == null
            ? "the table holds no marker of it now"
            : String.format(
                "the table's newest marker of it is commit %s (batch %s, query %s%s, snapshot %d)",
                found,
                orEmpty(newest.summary().get(BATCH_ID)),
                orEmpty(newest.summary().get(QUERY_ID)),
                newest.summary().containsKey(RUN_BY) ? ", run " + newest.summary().get(RUN_BY) : "",
                newest.snapshotId());
    throw new StaleMarkerException(
        String.format(
            "table %s: batch %s of pipeline %s was planned after marker %s, but %s: another run "
                + "committed in between, or the table was rolled back; nothing was committed",
            name, orEmpty(summary.get(BATCH_ID)), pipeline, after, what));
  }

  /** The newest snapshot of {@code base}'s main ancestry carrying a marker of {@code pipeline}. */
  static Snapshot newestMarker(TableMetadata base, String pipeline) {
    Snapshot s = base.currentSnapshot();
    while (s != null) {
      Map<String, String> summary = s.summary();
      if (summary != null && pipeline.equals(summary.get(PIPELINE)) && summary.containsKey(OFFSETS)) {
        return s;
      }
      s = s.parentId() == null ? null : base.snapshot(s.parentId());
    }
    return null;
  }

  private static String orEmpty(String value) {
    return value == null ? "" : value;
  }

  /** The operations this one checks commits for. */
  public TableOperations delegate() {
    return ops;
  }

  @Override
  public TableMetadata current() {
    return ops.current();
  }

  @Override
  public TableMetadata refresh() {
    return ops.refresh();
  }

  @Override
  public FileIO io() {
    return ops.io();
  }

  @Override
  public EncryptionManager encryption() {
    return ops.encryption();
  }

  @Override
  public String metadataFileLocation(String fileName) {
    return ops.metadataFileLocation(fileName);
  }

  @Override
  public LocationProvider locationProvider() {
    return ops.locationProvider();
  }

  @Override
  public TableOperations temp(TableMetadata uncommittedMetadata) {
    return ops.temp(uncommittedMetadata);
  }

  @Override
  public long newSnapshotId() {
    return ops.newSnapshotId();
  }

  @Override
  public boolean requireStrictCleanup() {
    return ops.requireStrictCleanup();
  }
}
