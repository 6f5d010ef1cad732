"""frazil's own JVM classes (src/frazil/jvm/java), compiled into a jar in the cache once.

They are compiled with ``javac`` against pyspark's jars, the pinned protobuf-java, the
Iceberg Spark runtime, Spark's Kafka source and the Kafka client it brings, at
``frazil setup`` or when a session first needs them; the jar is named by a hash of the sources
and of the versions they compile against, so an upgrade builds a new one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from frazil.errors import ArtifactError
from frazil.jvm.fetch import ensure_artifacts, java_executable, pyspark_jars_dir
from frazil.jvm.pins import ICEBERG_VERSION, PROTOBUF_JAVA_VERSION, SPARK_VERSION
from frazil.paths import cache_dir, locked

#: The Java sources, shipped inside the package.
SOURCES = Path(__file__).parent / "java"
#: Stand-ins for Spark classes that javac cannot extend as they are (Scala case classes):
#: compiled first and put ahead of Spark's jars when compiling ``SOURCES``, never shipped.
STUBS = Path(__file__).parent / "stubs"
_JAR = "frazil-jvm.jar"


def _sources() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def _stubs() -> list[Path]:
    return sorted(STUBS.rglob("*.java"))


def _digest() -> str:
    digest = hashlib.sha256(
        f"spark={SPARK_VERSION} protobuf={PROTOBUF_JAVA_VERSION} iceberg={ICEBERG_VERSION}".encode()
    )
    for root, sources in ((SOURCES, _sources()), (STUBS, _stubs())):
        for source in sources:
            digest.update(str(source.relative_to(root)).encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()[:12]


def frazil_jar() -> Path:
    """The jar of frazil's JVM classes, compiled on first use.

    Raises:
        ArtifactError: No ``javac`` (a JDK) is found, or compiling fails.
    """
    target = cache_dir() / "jars" / f"frazil-jvm-{_digest()}" / _JAR
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(target.parent / ".lock"):
        if not target.is_file():
            extra = [
                j
                for j in ensure_artifacts("spark", quiet=True)
                if any(
                    n in j.name
                    for n in (
                        "protobuf-java",
                        "iceberg-spark-runtime",
                        "kafka-clients",
                        "spark-sql-kafka",
                    )
                )
            ]
            classpath = [pyspark_jars_dir() / "*", *extra]
            compile_jar(_sources(), classpath, target, "frazil's JVM classes", stubs=_stubs())
    return target


def javac(what: str) -> str:
    """The ``javac`` beside the ``java`` frazil runs, else the one on PATH.

    Args:
        what: What is compiled, for the message when there is no JDK.

    Raises:
        ArtifactError: If no ``javac`` is found.
    """
    java = Path(java_executable()).resolve()
    candidate = java.parent / "javac"
    if os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which("javac")
    if found is None:
        raise ArtifactError(
            f"javac not found: frazil compiles {what} once with a JDK; install one (e.g. "
            "`apt-get install openjdk-17-jdk-headless`) or set JAVA_HOME to a JDK"
        )
    return found


def compile_jar(
    sources: Sequence[Path],
    classpath: Sequence[Path],
    target: Path,
    what: str,
    stubs: Sequence[Path] = (),
) -> None:
    """Compile ``sources`` against ``classpath`` (Java 17) into the jar ``target``, which
    appears whole or not at all.

    Args:
        sources: The Java files whose classes go into the jar.
        classpath: What they compile against.
        target: The jar.
        what: What is compiled, for messages.
        stubs: Java files compiled first and put ahead of ``classpath``, left out of the jar.

    Raises:
        ArtifactError: If no ``javac`` is found or compiling fails.
    """
    with tempfile.TemporaryDirectory(prefix="frazil-javac-") as work:
        classes = Path(work) / "classes"
        if stubs:
            stub_classes = Path(work) / "stubs"
            _javac(what, stubs, classpath, stub_classes)
            classpath = [stub_classes, *classpath]
        _javac(what, sources, classpath, classes)
        partial = target.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                jar.write(path, str(path.relative_to(classes)))
        os.replace(partial, target)


def _javac(what: str, sources: Sequence[Path], classpath: Sequence[Path], out: Path) -> None:
    cmd = [javac(what), "-nowarn", "--release", "17", "-d", str(out)]
    cmd += ["-cp", os.pathsep.join(str(p) for p in classpath)]
    proc = subprocess.run(
        [*cmd, *map(str, sources)],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise ArtifactError(f"compiling {what} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
