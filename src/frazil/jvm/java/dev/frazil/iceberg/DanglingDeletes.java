package dev.frazil.iceberg;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileContent;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestReader;
import org.apache.iceberg.RewriteFiles;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.util.ContentFileUtil;

/**
 * Drops the position deletes that name one data file no longer in the table.
 *
 * <p>A MERGE on a merge-on-read table writes file-scoped position deletes (Iceberg's default
 * delete granularity): each marks rows of one data file. A compaction that rewrites that file
 * applies them, but Iceberg's {@code remove-dangling-deletes} only drops deletes older than
 * every data file of their partition: after a partial compaction (a pass capped at some files)
 * the rewritten files' deletes stay. They apply to nothing, yet every read opens them, and the
 * snapshot's {@code total-position-deletes} still counts them, so the table's live rows
 * (records less position deletes) read too few.
 */
public final class DanglingDeletes {
  private DanglingDeletes() {}

  /**
   * Removes the current snapshot's file-scoped position deletes (and deletion vectors) whose
   * data file is not live, in one rewrite commit carrying {@code property = value} in its
   * summary. Returns how many were removed (0: no commit).
   */
  public static int remove(Table table, String property, String value) {
    table.refresh();
    Snapshot snapshot = table.currentSnapshot();
    if (snapshot == null || snapshot.deleteManifests(table.io()).isEmpty()) {
      return 0;
    }
    Set<String> live = new HashSet<>();
    for (ManifestFile manifest : snapshot.dataManifests(table.io())) {
      try (ManifestReader<DataFile> reader =
          ManifestFiles.read(manifest, table.io(), table.specs())) {
        for (DataFile file : reader) {
          live.add(file.location());
        }
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    List<DeleteFile> dangling = new ArrayList<>();
    for (ManifestFile manifest : snapshot.deleteManifests(table.io())) {
      try (ManifestReader<DeleteFile> reader =
          ManifestFiles.readDeleteManifest(manifest, table.io(), table.specs())) {
        for (DeleteFile file : reader) {
          String target = ContentFileUtil.referencedDataFileLocation(file);
          if (file.content() == FileContent.POSITION_DELETES
              && target != null
              && !live.contains(target)) {
            dangling.add(file.copyWithoutStats());
          }
        }
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    if (dangling.isEmpty()) {
      return 0;
    }
    RewriteFiles rewrite = table.newRewrite().validateFromSnapshot(snapshot.snapshotId());
    for (DeleteFile file : dangling) {
      rewrite.deleteFile(file);
    }
    rewrite.set(property, value);
    rewrite.commit();
    return dangling.size();
  }
}
