package dev.frazil.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.io.nativeio.NativeIO;

/**
 * Hadoop's local file system ({@code file:}), setting permissions without a process.
 *
 * <p>Hadoop sets the permission of every file it creates on the local file system (and of
 * its checksum file); without Hadoop's native library, which pip's PySpark does not ship, it
 * does so by running {@code chmod} in a new process each time. A routed batch creates a few
 * hundred files (data files, manifests, manifest lists, metadata, their checksums), so that
 * cost ~5 ms of fork and exec per file. This one sets the same bits through {@code
 * java.nio}, and defers to Hadoop where the native library is loaded or the file system has
 * no POSIX permissions.
 */
public final class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {
  public LocalFileSystem() {
    super(new Raw());
  }

  /** The raw (checksum-less) file system underneath, with the permission change above. */
  public static final class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      if (NativeIO.isAvailable() || permission.getStickyBit()) {
        super.setPermission(p, permission);
        return;
      }
      try {
        Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission));
      } catch (UnsupportedOperationException e) {
        super.setPermission(p, permission);
      }
    }

    static Set<PosixFilePermission> posix(FsPermission permission) {
      Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
      add(out, permission.getUserAction(),
          PosixFilePermission.OWNER_READ,
          PosixFilePermission.OWNER_WRITE,
          PosixFilePermission.OWNER_EXECUTE);
      add(out, permission.getGroupAction(),
          PosixFilePermission.GROUP_READ,
          PosixFilePermission.GROUP_WRITE,
          PosixFilePermission.GROUP_EXECUTE);
      add(out, permission.getOtherAction(),
          PosixFilePermission.OTHERS_READ,
          PosixFilePermission.OTHERS_WRITE,
          PosixFilePermission.OTHERS_EXECUTE);
      return out;
    }

    private static void add(
        Set<PosixFilePermission> out,
        FsAction action,
        PosixFilePermission read,
        PosixFilePermission write,
        PosixFilePermission execute) {
      if (action.implies(FsAction.READ)) {
        out.add(read);
      }
      if (action.implies(FsAction.WRITE)) {
        out.add(write);
      }
      if (action.implies(FsAction.EXECUTE)) {
        out.add(execute);
      }
    }
  }
}
