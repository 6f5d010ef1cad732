package dev.frazil.hadoop;

import java.io.IOException;
import java.util.EnumSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonPathCapabilities;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager;

/**
 * A streaming checkpoint's files written in place on an object store, not renamed into place.
 *
 * <p>Spark writes each offset-log and commit-log entry to a temporary file and renames it, so
 * that a reader never sees half a file. On S3 a rename is a copy and a delete, and the
 * listings and existence checks around them: a few hundred milliseconds on every batch, twice.
 * An object store whose output streams can be aborted (S3A) needs none of it: an object
 * appears whole when its upload completes, and an aborted upload leaves nothing. So there the
 * file is created at its final path, and {@code cancel()} aborts the upload. This is what
 * Spark's {@code AbortableStreamBasedCheckpointFileManager} in {@code spark-hadoop-cloud}
 * does; that module is not among the jars frazil pins.
 *
 * <p>Elsewhere (a local or HDFS checkpoint, where rename is atomic and cheap) it writes as
 * Spark's default manager does. Set as {@code spark.sql.streaming.checkpointFileManagerClass}.
 */
public class DirectCheckpointFileManager extends FileContextBasedCheckpointFileManager {
  private final boolean abortable;

  public DirectCheckpointFileManager(Path path, Configuration hadoopConf) throws IOException {
    super(path, hadoopConf);
    abortable = fc().hasPathCapability(path, CommonPathCapabilities.ABORTABLE_STREAM);
  }

  @Override
  public CheckpointFileManager.CancellableFSDataOutputStream createAtomic(
      Path path, boolean overwriteIfPossible) {
    if (!abortable) {
      return super.createAtomic(path, overwriteIfPossible);
    }
    // Without OVERWRITE, S3A refuses a path that exists (FileAlreadyExistsException): Spark's
    // metadata logs rely on that to detect a second writer of the same batch.
    EnumSet<CreateFlag> flags =
        overwriteIfPossible
            ? EnumSet.of(CreateFlag.CREATE, CreateFlag.OVERWRITE)
            : EnumSet.of(CreateFlag.CREATE);
    try {
      return new Direct(fc().create(path, flags, Options.CreateOpts.createParent()));
    } catch (IOException e) {
      // As thrown, not wrapped: Spark tells a FileAlreadyExistsException by its type. The
      // Scala interface declares no exceptions, so javac needs this way round.
      throw DirectCheckpointFileManager.<RuntimeException>unchecked(e);
    }
  }

  @SuppressWarnings("unchecked")
  private static <T extends Throwable> T unchecked(Throwable e) throws T {
    throw (T) e;
  }

  /** Written at its final path; visible once closed, never if cancelled. */
  private static final class Direct extends CheckpointFileManager.CancellableFSDataOutputStream {
    private final FSDataOutputStream out;
    private boolean done;

    Direct(FSDataOutputStream out) {
      super(out);
      this.out = out;
    }

    @Override
    public synchronized void cancel() {
      if (done) {
        return;
      }
      done = true;
      try {
        out.abort();
      } finally {
        try {
          out.close();
        } catch (IOException ignored) {
          // The upload was aborted; closing it has nothing left to write.
        }
      }
    }

    @Override
    public synchronized void close() throws IOException {
      if (done) {
        return;
      }
      done = true;
      out.close();
    }
  }
}
