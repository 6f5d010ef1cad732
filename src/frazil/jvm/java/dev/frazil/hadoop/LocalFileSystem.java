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
 * java.nio}, and defers to Hadoop where the native library is loaded, where the file system
 * has no POSIX permissions, and for a sticky bit or a directory with a set-user/group-ID bit
 * (which {@code chmod 0755} keeps on a directory and a plain mode change would clear).
 */
public final class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {
  public LocalFileSystem() {
    super(new Raw());
  }

  /** The raw (checksum-less) file system underneath, with the permission change above. */
  public static final class Raw extends RawLocalFileSystem {
    /** The set-user-ID and set-group-ID bits of a file mode. */
    private static final int SET_ID = 06000;

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      if (NativeIO.isAvailable() || permission.getStickyBit()) {
        super.setPermission(p, permission);
        return;
      }
      java.nio.file.Path path = pathToFile(p).toPath();
      try {
        if (Files.isDirectory(path)
            && ((Integer) Files.getAttribute(path, "unix:mode") & SET_ID) != 0) {
          super.setPermission(p, permission);
          return;
        }
        Files.setPosixFilePermissions(path, posix(permission));
      } catch (UnsupportedOperationException | IllegalArgumentException e) {
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
