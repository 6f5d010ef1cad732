package dev.frazil.spark;

import org.apache.iceberg.DataFile;
import org.apache.iceberg.io.FileIO;

/** Data files a commit that failed for certain leaves behind: nothing refers to them. */
final class UncommittedFiles {
  private UncommittedFiles() {}

  /**
   * Deletes {@code files}; a file that cannot be deleted is recorded on {@code failure} (the
   * commit's own error, which the caller rethrows) and left for orphan-file cleanup.
   */
  static void delete(FileIO io, Iterable<DataFile> files, Throwable failure) {
    for (DataFile file : files) {
      try {
        io.deleteFile(file.location());
      } catch (RuntimeException suppressed) {
        failure.addSuppressed(suppressed);
      }
    }
  }
}
