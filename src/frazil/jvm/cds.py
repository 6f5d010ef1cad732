"""A class-data-sharing archive of the Spark driver JVM, built at setup, to start faster.

Starting Spark loads tens of thousands of classes (Spark, Iceberg, the SQL parser) and
verifies each one. A dynamic AppCDS archive (``-XX:ArchiveClassesAtExit``, JDK 13+) holds
them already parsed; a driver started with ``-XX:SharedArchiveFile`` maps it instead (measured
here: the SparkSession and first table lookup in ~8-9 s instead of ~15-16 s).

The archive is only valid for the JVM, the classpath and the jars it was made with, so its
name carries a digest of them; a stale or unusable archive is skipped silently by the JVM
(``-Xshare:auto``, CDS logging off) and frazil then starts as it would without one.

Executors started on this machine (a Spark master on its loopback address, the local
stack's) map the same archive: their classpath is the driver's (frazil's jars first, then
pyspark's configuration folder and jars), and the classes a task runs are those the
workload ran in its local driver.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from frazil.jvm.classpath import spark_jars
from frazil.jvm.fetch import java_executable, pyspark_home_key, pyspark_jars_dir
from frazil.jvm.options import java_option
from frazil.paths import cache_dir

#: Set to 0 to start Spark without the archive (comparisons, troubleshooting).
CDS_ENV = "FRAZIL_CDS"

_QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"

log = logging.getLogger(__name__)
#: Whether this process has said that there is no archive (once is enough).
_told = False


def _digest() -> str:
    """What the archive depends on: the JVM binary, pyspark's jars and frazil's pinned jars."""
    java = Path(java_executable()).resolve()
    parts = {
        "layout": _LAYOUT,
        "java": [str(java), java.stat().st_mtime_ns],
        "pyspark": sorted(p.name for p in pyspark_jars_dir().glob("*.jar")),
        "jars": [str(p) for p in spark_jars()],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def archive_path() -> Path:
    """Where the archive for the current JVM and jars lives (it may not exist yet)."""
    return cache_dir() / "cds" / f"spark-driver-{pyspark_home_key()}-{_digest()}.jsa"


def java_options() -> str:
    """Driver JVM options that use the archive, or '' when there is none (or it is disabled)."""
    if os.environ.get(CDS_ENV, "1") == "0":
        return ""
    try:
        path = archive_path()
    except Exception:  # no Java or no jars yet: nothing to share
        return ""
    if not path.is_file():
        _tell_missing()
        return ""
    return f"{java_option('-XX:SharedArchiveFile=', path)} {_QUIET}"


def _tell_missing() -> None:
    """Say once per process that Spark starts without an archive: the JVM would not, and an
    install upgraded without ``frazil setup`` (new jars, a new JVM) starts seconds later."""
    global _told
    if _told:
        return
    _told = True
    log.warning(
        "no class-data archive for this JVM and these jars: Spark starts ~3-4 s slower; "
        "`frazil setup` builds one"
    )


#: Bumped when what the archive covers changes (the workload, how jars are loaded), so an
#: archive built the old way is ignored and rebuilt by the next ``frazil setup``.
_LAYOUT = 4

#: The representative run the archive is made from (a module above this package: it runs
#: frazil's own runner on a private broker).
WORKLOAD_MODULE = "frazil.engine.cds_workload"


def build_archive(timeout: float = 600) -> Path:
    """Run the workload (:data:`WORKLOAD_MODULE`) in a fresh driver JVM that writes the archive
    when it exits.

    Returns:
        The archive's path.

    Raises:
        RuntimeError: The workload failed or left no archive.
    """
    path = archive_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    env = {**os.environ, CDS_ENV: "0"}
    with tempfile.TemporaryDirectory(prefix="frazil-cds-") as work:
        done = subprocess.run(
            [sys.executable, "-m", WORKLOAD_MODULE, str(partial), work],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    if done.returncode != 0 or not partial.is_file():
        raise RuntimeError(f"building the CDS archive failed:\n{done.stderr[-2000:]}")
    for old in path.parent.glob(f"spark-driver-{pyspark_home_key()}-*.jsa"):
        old.unlink()  # this installation's archives of other JVMs or jar sets: useless now
    partial.replace(path)
    return path
