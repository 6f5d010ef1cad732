package dev.frazil.hadoop;

import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonPathCapabilities;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A streaming checkpoint's files written in place on an object store, not renamed into place.
 *
 * <p>Spark writes each offset-log and commit-log entry to a temporary file and renames it, so
 * that a reader never sees half a file. On S3 a rename is a copy and a delete, and the
 * listings and existence checks around them: a few hundred milliseconds on every batch, twice.
 * An object store whose output streams can be aborted (S3A) needs none of it: an object
 * appears whole when its upload completes, and an aborted upload leaves nothing. So there the
 * entry is created at its final path, and {@code cancel()} aborts the upload. This is what
 * Spark's {@code AbortableStreamBasedCheckpointFileManager} in {@code spark-hadoop-cloud}
 * does; that module is not among the jars frazil pins.
 *
 * <p>Everything else goes to the manager Spark would have chosen itself (its {@code
 * FileContext}-based one, or the {@code FileSystem}-based one for a scheme without a {@code
 * FileContext} binding, such as {@code s3://} mapped to S3A): an HDFS checkpoint is written
 * exactly as without this class. A local checkpoint on frazil's {@link LocalFileSystem} goes to
 * Spark's {@code FileSystem}-based manager (a temporary file renamed into place, as before),
 * which reaches the local disk without a process per file. Set as {@code
 * spark.sql.streaming.checkpointFileManagerClass}.
 */
public final class DirectCheckpointFileManager implements CheckpointFileManager {
  private static final Logger LOG = LoggerFactory.getLogger(DirectCheckpointFileManager.class);
  /** Spark's setting that names this class: unset for the delegate, which Spark then picks. */
  private static final String MANAGER_CLASS = "spark.sql.streaming.checkpointFileManagerClass";

  private final CheckpointFileManager spark;
  /** The file system of an abortable store, written in place; null: renamed by {@link #spark}. */
  private final FileSystem direct;

  public DirectCheckpointFileManager(Path path, Configuration hadoopConf) throws IOException {
    Configuration plain = new Configuration(hadoopConf);
    plain.unset(MANAGER_CLASS);
    FileSystem fs = path.getFileSystem(hadoopConf);
    // Spark's default goes through Hadoop's FileContext, whose local file system runs a
    // process for each permission change and link lookup without Hadoop's native library
    // (`chmod`, `stat`): ~40 ms writing each batch's offset-log entry, before the batch
    // starts, and ~90 ms its commit-log entry. frazil's local file system sets permissions
    // through java.nio; Spark's FileSystem-based manager writes and renames through it.
    spark =
        fs instanceof LocalFileSystem
            ? new FileSystemBasedCheckpointFileManager(path, plain)
            : CheckpointFileManager.create(path, plain);
    direct = fs.hasPathCapability(path, CommonPathCapabilities.ABORTABLE_STREAM) ? fs : null;
  }

  @Override
  public CheckpointFileManager.CancellableFSDataOutputStream createAtomic(
      Path path, boolean overwriteIfPossible) {
    if (direct == null) {
      return spark.createAtomic(path, overwriteIfPossible);
    }
    try {
      // Without overwrite, S3A refuses a path that exists (FileAlreadyExistsException); close()
      // looks again, for a second writer that finished in between.
      return new Direct(direct, path, overwriteIfPossible);
    } catch (IOException e) {
      throw DirectCheckpointFileManager.<RuntimeException>unchecked(e);
    }
  }

  @Override
  public FSDataInputStream open(Path path) {
    return spark.open(path);
  }

  @Override
  public FileStatus[] list(Path path, PathFilter filter) {
    return spark.list(path, filter);
  }

  @Override
  public void mkdirs(Path path) {
    spark.mkdirs(path);
  }

  @Override
  public boolean exists(Path path) {
    return spark.exists(path);
  }

  @Override
  public void delete(Path path) {
    spark.delete(path);
  }

  @Override
  public boolean isLocal() {
    return spark.isLocal();
  }

  @Override
  public Path createCheckpointDirectory() {
    return spark.createCheckpointDirectory();
  }

  @Override
  public void close() {
    spark.close();
  }

  /**
   * Rethrows a checked exception as is (not wrapped): Spark tells a {@link
   * FileAlreadyExistsException} by its type, and the Scala interface declares no exceptions.
   */
  @SuppressWarnings("unchecked")
  private static <T extends Throwable> T unchecked(Throwable e) throws T {
    throw (T) e;
  }

  /** Written at its final path; visible once closed, never if cancelled. */
  private static final class Direct extends CheckpointFileManager.CancellableFSDataOutputStream {
    private final FSDataOutputStream out;
    private final FileSystem fs;
    private final Path path;
    private final boolean overwrite;
    private boolean done;

    Direct(FileSystem fs, Path path, boolean overwrite) throws IOException {
      this(fs.create(path, overwrite), fs, path, overwrite);
    }

    private Direct(FSDataOutputStream out, FileSystem fs, Path path, boolean overwrite) {
      super(out);
      this.out = out;
      this.fs = fs;
      this.path = path;
      this.overwrite = overwrite;
    }

    @Override
    public synchronized void cancel() {
      if (done) {
        return;
      }
      done = true;
      try {
        out.abort();
      } catch (RuntimeException e) {
        // Called while Spark handles another failure: that one is the error to report.
        LOG.warn("could not abort the checkpoint write to {}", path, e);
      } finally {
        try {
          out.close();
        } catch (IOException | RuntimeException e) {
          LOG.warn("could not close the aborted checkpoint write to {}", path, e);
        }
      }
    }

    @Override
    public synchronized void close() throws IOException {
      if (done) {
        return;
      }
      if (!overwrite && fs.exists(path)) {
        // Another writer completed this entry since it was created here: keep theirs.
        cancel();
        throw new FileAlreadyExistsException(
            "checkpoint entry " + path + " was written by another writer in the meantime");
      }
      done = true;
      out.close();
    }
  }
}
