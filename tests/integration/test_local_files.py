"""Local files (the embedded warehouse): Hadoop's file system with frazil's permission
setting, which runs no `chmod` process per file."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any


def _local_fs(spark: Any) -> Any:
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    return jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), conf)


def test_local_files_and_folders_get_hadoops_permissions(spark: Any, tmp_path: Path) -> None:
    fs = _local_fs(spark)
    assert fs.getClass().getName() == "dev.frazil.hadoop.LocalFileSystem"
    jvm = spark.sparkContext._jvm
    umask = os.umask(0)
    os.umask(umask)

    folder = tmp_path / "a" / "b"
    # As Iceberg creates its files: the missing folders too.
    out = fs.create(jvm.org.apache.hadoop.fs.Path((folder / "data.bin").as_uri()), True)
    out.write(b"frazil")
    out.close()

    assert (folder / "data.bin").read_bytes() == b"frazil"
    # Hadoop's defaults under the process's umask, as its `chmod` would have set them; the
    # checksum file is written the same way.
    assert stat.S_IMODE((folder / "data.bin").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((folder / ".data.bin.crc").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~umask

    perm = jvm.org.apache.hadoop.fs.permission.FsPermission("640")
    fs.setPermission(jvm.org.apache.hadoop.fs.Path((folder / "data.bin").as_uri()), perm)
    assert stat.S_IMODE((folder / "data.bin").stat().st_mode) == 0o640
    status = fs.getFileStatus(jvm.org.apache.hadoop.fs.Path((folder / "data.bin").as_uri()))
    assert status.getPermission().toShort() == 0o640


def test_a_folder_keeps_the_set_group_id_bit_as_chmod_would(spark: Any, tmp_path: Path) -> None:
    # GNU chmod with a 4-digit mode keeps a directory's set-group-ID bit (a shared warehouse
    # passing its group down); a plain mode change would clear it, so frazil's defers there.
    fs = _local_fs(spark)
    jvm = spark.sparkContext._jvm
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o2775)
    child = shared / "table"
    perm = jvm.org.apache.hadoop.fs.permission.FsPermission("775")
    assert fs.mkdirs(jvm.org.apache.hadoop.fs.Path(child.as_uri()), perm)
    assert child.stat().st_mode & stat.S_ISGID
    # Without the bit, the folder gets the mode asked for (through java.nio).
    plain = tmp_path / "plain" / "table"
    assert fs.mkdirs(jvm.org.apache.hadoop.fs.Path(plain.as_uri()), perm)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(plain.stat().st_mode) == 0o775 & ~umask
