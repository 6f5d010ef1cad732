"""Fetch the pinned JVM artifact sets with Maven into the shared artifact cache.

Each set of :data:`frazil.jvm.pins.ARTIFACT_SETS` lands in
``cache_dir()/jars/<name>-<fingerprint>/``; a marker file (which also lists the resolved
artifacts) is written last, so a folder without it is a half-done fetch and is redone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path
from xml.sax.saxutils import escape

from frazil.errors import ArtifactError
from frazil.jvm.pins import (
    ARTIFACT_SETS,
    MAVEN_DEPENDENCY_PLUGIN_VERSION,
    ArtifactSet,
    Coordinate,
)
from frazil.paths import cache_dir, locked

_MARKER = ".complete.json"
_DEPENDENCY_LIST = "dependencies.txt"
_PLUGIN = f"org.apache.maven.plugins:maven-dependency-plugin:{MAVEN_DEPENDENCY_PLUGIN_VERSION}"
_MVN_TIMEOUT_S = 30 * 60
_OUTPUT_TAIL_LINES = 25
# Maven's generic advice after every failure; it would push the actual error out of the tail.
_MVN_BOILERPLATE = re.compile(
    r"re-run Maven|For more information about the errors|\[Help \d+\] http|"
    r"To see the full stack trace",
    re.IGNORECASE,
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# One line of `dependency:list`: group:artifact:type[:classifier]:version:scope [-- module ..]
_LIST_LINE = re.compile(
    r"^\s*(?P<group>[^:\s]+):(?P<artifact>[^:\s]+):(?P<type>[^:\s]+):"
    r"(?:(?P<classifier>[^:\s]+):)?(?P<version>[^:\s]+):"
    r"(?P<scope>compile|runtime|provided|system|test)\b"
)


@dataclasses.dataclass(frozen=True)
class ResolvedArtifact:
    """One jar Maven resolved for a set (direct or transitive)."""

    group: str
    artifact: str
    version: str
    file: str


def java_executable() -> str:
    """Path of the ``java`` launcher: ``$JAVA_HOME/bin/java`` if set, else ``java`` on PATH.

    Raises:
        ArtifactError: If no Java runtime can be found.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise ArtifactError(
            "java not found: frazil runs Spark and Kafka on a Java 17+ runtime; install one "
            "(e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME"
        )
    return found


def artifact_dir(name: str) -> Path:
    """Cache folder of artifact set ``name`` (whether or not it was fetched yet).

    Raises:
        ArtifactError: If ``name`` is not a known artifact set.
    """
    aset = _artifact_set(name)
    return cache_dir() / "jars" / f"{aset.name}-{aset.fingerprint()}"


def artifacts_cached(name: str) -> bool:
    """Whether artifact set ``name`` is in the cache already (:func:`ensure_artifacts` would
    fetch nothing).

    Raises:
        ArtifactError: If ``name`` is not a known artifact set.
    """
    return _read_marker(artifact_dir(name)) is not None


def ensure_artifacts(name: str, *, quiet: bool = False) -> list[Path]:
    """Return the jars of artifact set ``name``, fetching them with Maven on first use.

    Later calls only read the marker file. For sets marked ``skip_pyspark_provided`` the
    jars whose artifact pyspark already ships are left out of the result.

    Args:
        name: A key of :data:`frazil.jvm.pins.ARTIFACT_SETS` (``"spark"``, ``"kafka"``,
            ``"s3proxy"``, ``"rest-catalog"``).
        quiet: Do not print a note on stderr when a fetch starts.

    Returns:
        Absolute jar paths, sorted by file name.

    Raises:
        ArtifactError: If the set is unknown, Java or Maven is missing, or Maven fails.
    """
    aset = _artifact_set(name)
    java_executable()
    target = artifact_dir(name)
    resolved = _read_marker(target)
    if resolved is None:
        target.parent.mkdir(parents=True, exist_ok=True)
        with locked(target.parent / f".{target.name}.lock"):
            # Another process may have finished the same fetch while we waited.
            resolved = _read_marker(target)
            if resolved is None:
                if not quiet:
                    print(
                        f"frazil: fetching JVM artifacts '{name}' with Maven into {target} "
                        "(first use only)...",
                        file=sys.stderr,
                        flush=True,
                    )
                resolved = _fetch(aset, target)
    skipped = (
        _pyspark_provided({r.artifact for r in resolved}) if aset.skip_pyspark_provided else set()
    )
    return sorted(
        (target / r.file for r in resolved if r.artifact not in skipped), key=lambda p: p.name
    )


def kafka_classpath() -> list[Path]:
    """The complete classpath of the local Kafka broker and its tools."""
    return ensure_artifacts("kafka")


def s3proxy_jar() -> Path:
    """The s3proxy jar-with-dependencies (the local object store), fetched on first use."""
    return ensure_artifacts("s3proxy")[0]


def rest_catalog_classpath() -> list[Path]:
    """The classpath of Iceberg's REST catalog server (the local REST catalog).

    The pinned ``rest-catalog`` set plus pyspark's shaded Hadoop client jars, which hold the
    ``org.apache.hadoop.conf.Configuration`` the server creates.

    Raises:
        ArtifactError: If the set cannot be fetched or pyspark ships no Hadoop client jars.
    """
    hadoop = sorted(pyspark_jars_dir().glob("hadoop-client-*.jar"))
    if not any(p.name.startswith("hadoop-client-api-") for p in hadoop):
        raise ArtifactError(
            f"no hadoop-client-api jar in pyspark's {pyspark_jars_dir()}: the REST catalog "
            "server needs Hadoop's Configuration class from it"
        )
    return [*ensure_artifacts("rest-catalog"), *hadoop]


def pyspark_jars_dir() -> Path:
    """The ``jars`` folder of the installed pyspark (found without importing pyspark).

    Raises:
        ArtifactError: If pyspark is not installed.
    """
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ArtifactError("pyspark is not installed; cannot tell which jars it ships")
    return Path(spec.origin).parent / "jars"


def pyspark_home_key() -> str:
    """Which pyspark installation (virtual environment) this is: a short digest of its jars
    folder, for what the shared cache keeps per installation (the class-data archive, the
    unsigned jar copies), since the JVM checks an archive against the classpath's paths."""
    return hashlib.sha256(str(pyspark_jars_dir().resolve()).encode()).hexdigest()[:8]


def _artifact_set(name: str) -> ArtifactSet:
    try:
        return ARTIFACT_SETS[name]
    except KeyError:
        known = ", ".join(sorted(ARTIFACT_SETS))
        raise ArtifactError(f"unknown JVM artifact set {name!r} (known: {known})") from None


def _pyspark_provided(artifact_ids: set[str]) -> set[str]:
    # pyspark's jar names are artifactId-version.jar; a version always starts with a digit,
    # which keeps e.g. hadoop-client from matching hadoop-client-api-3.4.1.jar.
    names = [p.name for p in pyspark_jars_dir().glob("*.jar")]
    return {a for a in artifact_ids if any(re.match(rf"{re.escape(a)}-\d", n) for n in names)}


def _read_marker(target: Path) -> list[ResolvedArtifact] | None:
    try:
        data = json.loads((target / _MARKER).read_text())
        resolved = [ResolvedArtifact(**item) for item in data["artifacts"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not all((target / r.file).is_file() for r in resolved):
        return None
    return resolved


def _fetch(aset: ArtifactSet, target: Path) -> list[ResolvedArtifact]:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ArtifactError(
            f"mvn (Apache Maven) not found on PATH: it is needed once to fetch the "
            f"'{aset.name}' JVM artifacts ({_describe(aset)}); install it "
            "(e.g. `apt-get install maven`) and run `frazil setup`"
        )
    staging = target.with_name(target.name + ".partial")
    for leftover in (staging, target):
        shutil.rmtree(leftover, ignore_errors=True)
    staging.mkdir(parents=True)
    pom = staging / "pom.xml"
    pom.write_text(_pom(aset))
    with tempfile.TemporaryDirectory(prefix="frazil-mvn-") as work:
        # Maven writes target/ next to the POM it builds; keep that out of the cache.
        work_pom = Path(work) / "pom.xml"
        shutil.copyfile(pom, work_pom)
        cmd = [
            mvn,
            "-B",
            "-q",
            # A failed download is cached by Maven and not retried for a day without -U;
            # fetches are rare, so always retry.
            "-U",
            "-Dstyle.color=never",
            "-f",
            str(work_pom),
            f"{_PLUGIN}:copy-dependencies",
            f"{_PLUGIN}:list",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
            f"-DoutputFile={staging / _DEPENDENCY_LIST}",
            "-DoutputAbsoluteArtifactFilename=false",
        ]
        try:
            proc = subprocess.run(
                cmd,
                cwd=work,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=_MVN_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ArtifactError(
                f"Maven did not finish fetching the '{aset.name}' JVM artifacts "
                f"({_describe(aset)}) within {_MVN_TIMEOUT_S // 60} minutes"
            ) from None
    if proc.returncode != 0:
        output = [
            line
            for line in _ANSI.sub("", proc.stdout + proc.stderr).splitlines()
            if line.strip() not in ("", "[ERROR]") and not _MVN_BOILERPLATE.search(line)
        ]
        tail = "\n".join(output[-_OUTPUT_TAIL_LINES:])
        raise ArtifactError(
            f"Maven failed to fetch the '{aset.name}' JVM artifacts ({_describe(aset)}); "
            f"exit code {proc.returncode}, last lines of its output:\n{tail}"
        )
    resolved = _parse_dependency_list(aset, staging)
    (staging / _MARKER).write_text(
        json.dumps(
            {
                "set": aset.name,
                "dependencies": [str(c) for c in aset.dependencies],
                "managed": [str(c) for c in aset.managed],
                "artifacts": [dataclasses.asdict(r) for r in resolved],
            },
            indent=2,
        )
    )
    os.replace(staging, target)
    return resolved


def _parse_dependency_list(aset: ArtifactSet, staging: Path) -> list[ResolvedArtifact]:
    resolved: list[ResolvedArtifact] = []
    for line in (staging / _DEPENDENCY_LIST).read_text().splitlines():
        m = _LIST_LINE.match(line)
        if m is None or m["type"] != "jar":
            continue
        suffix = f"-{m['classifier']}" if m["classifier"] else ""
        file = f"{m['artifact']}-{m['version']}{suffix}.jar"
        if not (staging / file).is_file():
            raise ArtifactError(
                f"Maven listed {m['group']}:{m['artifact']}:{m['version']} for the "
                f"'{aset.name}' JVM artifacts but did not copy {file} into {staging}"
            )
        resolved.append(ResolvedArtifact(m["group"], m["artifact"], m["version"], file))
    if not resolved:
        raise ArtifactError(
            f"Maven resolved no jars for the '{aset.name}' JVM artifacts ({_describe(aset)})"
        )
    return resolved


def _describe(aset: ArtifactSet) -> str:
    return ", ".join(str(c) for c in aset.dependencies)


def _dependency_xml(c: Coordinate, *, intransitive: bool = False) -> str:
    exclusions = (
        "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion>"
        "</exclusions>"
        if intransitive
        else ""
    )
    classifier = f"<classifier>{escape(c.classifier)}</classifier>" if c.classifier else ""
    return (
        f"<dependency><groupId>{escape(c.group)}</groupId>"
        f"<artifactId>{escape(c.artifact)}</artifactId>"
        f"<version>{escape(c.version)}</version>{classifier}{exclusions}</dependency>"
    )


def _pom(aset: ArtifactSet) -> str:
    managed = "\n      ".join(_dependency_xml(c) for c in aset.managed)
    deps = "\n    ".join(
        _dependency_xml(c, intransitive=aset.intransitive) for c in aset.dependencies
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by frazil (frazil.jvm.fetch) to resolve the '{aset.name}' artifact set. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.frazil.fetch</groupId>
  <artifactId>{aset.name}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencyManagement>
    <dependencies>
      {managed}
    </dependencies>
  </dependencyManagement>
  <dependencies>
    {deps}
  </dependencies>
</project>
"""
