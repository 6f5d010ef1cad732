package dev.frazil.iceberg;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestWriter;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.SnapshotSummary;
import org.apache.iceberg.TableMetadata;
import org.apache.iceberg.TableOperations;
import org.apache.iceberg.encryption.PlaintextEncryptionManager;
import org.apache.iceberg.io.FileIO;

/**
 * An append's new data files written to a manifest in the committing thread, and appended as
 * that manifest.
 *
 * <p>Iceberg writes an append's new files to a manifest on its shared worker pool and waits for
 * it by polling in 10 ms sleeps ({@code Tasks.waitFor}), so every append commit lasts at least
 * 10 ms whatever its size; a batch of 100 routed tables applied 16 at a time waited that long
 * seven times over. A manifest whose entries inherit the commit's snapshot id (format v2 and
 * later) can be written beforehand and appended as it is ({@link AppendFiles#appendManifest}):
 * the same manifest, the same entries, written here. Iceberg's summary then counts the
 * manifest's files and rows; the files' size and partitions it counts from data files only,
 * so they are set here as it would ({@code added-files-size}, {@code changed-partition-count}).
 *
 * <p>Format v1 tables and encrypted tables get their files appended as data files, as before.
 * A manifest written here and never committed is deleted by {@link #deleteUncommitted}
 * (Iceberg leaves appended manifests to their writer).
 */
public final class OwnManifests {
  private OwnManifests() {}

  /**
   * Adds {@code files} to {@code append} (of the table {@code ops} operates, as of {@code
   * base}): as manifests written here where the table allows it, else as data files.
   *
   * @return the manifests written (to delete should the commit certainly fail)
   */
  public static List<ManifestFile> add(
      TableOperations ops, TableMetadata base, AppendFiles append, List<DataFile> files) {
    if (files.isEmpty()
        || base.formatVersion() < 2
        || !(ops.encryption() instanceof PlaintextEncryptionManager)) {
      files.forEach(append::appendFile);
      return List.of();
    }
    Map<Integer, List<DataFile>> bySpec = new LinkedHashMap<>();
    // Keyed as Iceberg's summary keys a changed partition (an unpartitioned table's is "").
    Set<String> partitions = new HashSet<>();
    long bytes = 0;
    for (DataFile f : files) {
      bySpec.computeIfAbsent(f.specId(), id -> new ArrayList<>()).add(f);
      PartitionSpec spec = base.spec(f.specId());
      partitions.add(f.specId() + "/" + spec.partitionToPath(f.partition()));
      bytes += f.fileSizeInBytes();
    }
    List<ManifestFile> written = new ArrayList<>(bySpec.size());
    try {
      for (Map.Entry<Integer, List<DataFile>> group : bySpec.entrySet()) {
        String location =
            ops.metadataFileLocation(FileFormat.AVRO.addExtension(UUID.randomUUID() + "-m0"));
        ManifestWriter<DataFile> writer =
            ManifestFiles.write(
                base.formatVersion(),
                base.spec(group.getKey()),
                ops.io().newOutputFile(location),
                null);
        try {
          for (DataFile f : group.getValue()) {
            writer.add(f);
          }
        } finally {
          writer.close();
        }
        written.add(writer.toManifestFile());
      }
    } catch (IOException e) {
      deleteUncommitted(ops.io(), written, e);
      throw new UncheckedIOException(e);
    } catch (RuntimeException e) {
      deleteUncommitted(ops.io(), written, e);
      throw e;
    }
    for (ManifestFile manifest : written) {
      append.appendManifest(manifest);
    }
    append.set(SnapshotSummary.ADDED_FILE_SIZE_PROP, String.valueOf(bytes));
    append.set(SnapshotSummary.CHANGED_PARTITION_COUNT_PROP, String.valueOf(partitions.size()));
    return written;
  }

  /** Deletes manifests written by {@link #add} that no commit refers to (best effort). */
  public static void deleteUncommitted(FileIO io, List<ManifestFile> manifests, Exception failure) {
    for (ManifestFile m : manifests) {
      try {
        io.deleteFile(m.path());
      } catch (RuntimeException suppressed) {
        failure.addSuppressed(suppressed); // left for orphan-file cleanup
      }
    }
  }
}
