"""Where a config points: whether a location (the warehouse, the state folder, a path) is a URI,
on another file system than the local one, or a local path.

Kept apart from the models: the loader resolves relative paths with it before any model sees
them, and the catalog's config, the engine, the run fence and ``frazil status`` use it too.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

# A scheme of two or more characters, then ':/': s3a://b/x, file:///x and file:/x are URIs,
# a relative path such as lake/x (or a Windows drive, C:/x) is not.
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")


def is_uri(location: str) -> bool:
    """Whether a location is a URI (``s3a://b/x``, ``file:///x``) rather than a local path."""
    return bool(_URI.match(location))


def is_remote(location: str) -> bool:
    """Whether a location is a URI on another file system than the local one (not ``file:``)."""
    match = _URI.match(location)
    return match is not None and match.group(1).lower() != "file"


def local_path(location: str) -> str:
    """The local path of a ``file:`` URI; any other location unchanged."""
    if is_uri(location) and not is_remote(location):
        return unquote(urlsplit(location).path)
    return location


#: URI schemes of object stores, where a rename is a copy and a delete, not atomic.
OBJECT_STORE_SCHEMES = frozenset(
    {"s3", "s3a", "s3n", "gs", "abfs", "abfss", "wasb", "wasbs", "oss", "cos", "cosn", "obs"}
)

#: File system types (``/proc/mounts``) of network file systems, where SQLite's locks are
#: unreliable (SQLite's own documentation warns against them).
NETWORK_FILE_SYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre",
     "gpfs", "fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.juicefs", "fuse.mountpoint-s3"}
)  # fmt: skip


def on_object_store(location: str) -> bool:
    """Whether a location is a URI on an object store (``s3a://``, ``gs://``, ``abfss://`` …)."""
    match = _URI.match(location)
    return match is not None and match.group(1).lower() in OBJECT_STORE_SCHEMES


def network_file_system(path: str, mounts: str = "/proc/mounts") -> str | None:
    """The type of the network file system holding a local ``path`` (its nearest existing
    folder), or None for a local one or when the mounts cannot be read."""
    try:
        table = Path(mounts).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    where = Path(os.path.abspath(local_path(path)))
    while not where.exists() and where != where.parent:
        where = where.parent
    with contextlib.suppress(OSError):  # a loop of links: the path as given
        where = where.resolve()
    best, kind = "", None
    for line in table:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = str(where) == point or str(where).startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind if kind in NETWORK_FILE_SYSTEMS else None
