"""Unsigned copies of pyspark's signed jars, ahead of them on the classpath.

pyspark ships Janino and its ``commons-compiler`` signed (``META-INF/DUMMY.SF``), and a JVM
leaves every class of a signed jar out of a class-data-sharing archive: each driver and each
executor loaded Janino's ~500 classes from the jar and checked their digests, on the way to
compiling the first batch's generated code (measured on an executor with
``-Xlog:class+load``: 332 of its ~600 classes not mapped from the archive were Janino's).
The same classes from a copy without the signature are archived like any other
(:mod:`frazil.jvm.cds`). Nothing checks these signatures: they are a build tool's dummy key,
and the jars come from pyspark's own wheel.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import zipfile
from pathlib import Path

from frazil.jvm.fetch import pyspark_home_key, pyspark_jars_dir
from frazil.paths import cache_dir

log = logging.getLogger(__name__)

#: A jar's signature files: the signer's manifest digests and its key block.
_SIGNATURE = re.compile(r"META-INF/[^/]+\.(SF|DSA|RSA|EC)$", re.IGNORECASE)

#: pyspark's signed jars, by name (their versions follow in the file name).
SIGNED_PREFIXES = ("janino-", "commons-compiler-")


def signed_jars() -> list[Path]:
    """pyspark's jars that carry a signature, by name."""
    return sorted(p for p in pyspark_jars_dir().glob("*.jar") if p.name.startswith(SIGNED_PREFIXES))


def unsigned_dir() -> Path:
    """Where the copies live: a folder per pyspark installation (virtual environment).

    A class-data archive records each classpath jar's size and time: a copy shared by two
    installations, made again from the other's jar, would invalidate the first's archive.
    """
    return cache_dir() / "jars" / "unsigned" / pyspark_home_key()


def is_unsigned_copy(jar: Path) -> bool:
    """Whether ``jar`` is one of the copies (found by where it lives, without pyspark)."""
    return jar.parent.parent.name == "unsigned" and jar.parent.parent.parent.name == "jars"


def unsigned_jars() -> list[Path]:
    """Unsigned copies of :func:`signed_jars`, made on first use and kept in the cache.

    The copies only make the JVM start faster: if they cannot be made (a read-only or full
    cache), Spark runs with pyspark's signed jars as before, and this returns no copy.
    """
    try:
        return [unsigned_copy(jar, unsigned_dir()) for jar in signed_jars()]
    except (OSError, zipfile.BadZipFile) as exc:
        log.warning("pyspark's Janino stays out of the class-data archive: %s", exc)
        return []


def unsigned_copy(jar: Path, folder: Path) -> Path:
    """``jar`` without its signature, as ``folder/<name>``; reused while it is up to date.

    The copy holds every entry but the signature files, and a manifest with only its main
    section (the per-entry digests go: they are what the signature signs).
    """
    target = folder / jar.name
    if target.is_file() and target.stat().st_mtime_ns == jar.stat().st_mtime_ns:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=folder, prefix=f".{jar.name}.")
    os.close(handle)
    partial = Path(name)
    try:
        with zipfile.ZipFile(jar) as source, zipfile.ZipFile(partial, "w") as copy:
            for entry in source.infolist():
                if _SIGNATURE.match(entry.filename):
                    continue
                data = source.read(entry)
                if entry.filename.upper() == "META-INF/MANIFEST.MF":
                    data = main_section(data)
                copy.writestr(entry, data)
        os.utime(partial, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns))
        partial.replace(target)  # atomic: a concurrent start reads the old copy or the new one
    finally:
        partial.unlink(missing_ok=True)  # only left if the copy failed
    return target


def main_section(manifest: bytes) -> bytes:
    """A manifest's main attributes only: everything up to its first blank line."""
    text = manifest.replace(b"\r\n", b"\n")
    head, _, _ = text.partition(b"\n\n")
    return head.rstrip(b"\n") + b"\n\n"
