"""Class-data-sharing archives of the local services' JVMs, to start them faster.

JVM services can start from a class-data-sharing archive (:func:`cds_archive`): the first
run of a given JVM and classpath writes one when it stops cleanly (``-XX:ArchiveClassesAtExit``),
later runs map it and start in about half the time on this 2-core machine. A run that fails
to start leaves none: it may have stopped before loading what a service needs. ``FRAZIL_CDS=0``
starts without it. (The Spark driver's archive is made otherwise, at setup:
:mod:`frazil.jvm.cds`.)

:class:`~frazil.local.daemon.Daemon` settles the archive a process wrote when it stops it
(:func:`settle_archive`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from frazil.jvm.cds import CDS_ENV
from frazil.paths import cache_dir

# A stale or unusable archive is skipped silently: the JVM then starts as without one.
_CDS_QUIET = ["-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
# Bumped when what an archive covers changes, so one made the old way is not used.
_CDS_LAYOUT = 1
# Archives of processes that never stopped cleanly are removed after this long.
_CDS_PARTIAL_MAX_AGE_S = 24 * 3600


def cds_archive(name: str, java: str, classpath: Sequence[Path]) -> Path | None:
    """Where the class-data archive of service ``name`` on this JVM and classpath lives.

    An archive only fits the JVM binary and the jars it was made with, so its name carries a
    digest of them. None when ``FRAZIL_CDS=0``.
    """
    if os.environ.get(CDS_ENV, "1") == "0":
        return None
    parts: list[object] = [_CDS_LAYOUT, name]
    for path in (Path(java).resolve(), *classpath):
        try:
            parts += [str(path), path.stat().st_mtime_ns]
        except OSError:
            parts += [str(path), None]
    digest = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]
    return cache_dir() / "cds" / f"{name}-{digest}.jsa"


def cds_options(archive: Path | None) -> tuple[list[str], Path | None]:
    """JVM options that map ``archive``, or that write it at exit when it is not made yet.

    Returns:
        The options, and the temporary file the JVM will write (pass it to
        :meth:`~frazil.local.daemon.Daemon.start` as ``cds_partial``), None when mapping or
        when off.
    """
    if archive is None:
        return [], None
    if archive.is_file():
        return [f"-XX:SharedArchiveFile={archive}", *_CDS_QUIET], None
    partial = archive.with_name(f"{archive.name}.{uuid.uuid4().hex[:12]}.partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    return [f"-XX:ArchiveClassesAtExit={partial}", *_CDS_QUIET], partial


def settle_archive(partial: Path, *, keep: bool) -> None:
    """Install the archive a process wrote at exit (or drop it), and drop old leftovers."""
    final = partial.with_name(partial.name.split(".jsa.")[0] + ".jsa")
    prefix = final.name.rsplit("-", 1)[0]
    if keep and partial.is_file() and partial.stat().st_size > 0:
        for old in final.parent.glob(f"{prefix}-*.jsa"):
            if old != final:
                old.unlink(missing_ok=True)  # archives of other JVMs or jars: useless now
        os.replace(partial, final)
    else:
        partial.unlink(missing_ok=True)
    now = time.time()
    for leftover in final.parent.glob(f"{prefix}-*.partial"):
        with contextlib.suppress(OSError):
            if now - leftover.stat().st_mtime > _CDS_PARTIAL_MAX_AGE_S:
                leftover.unlink()
