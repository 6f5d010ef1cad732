"""Packaged JVM applications (``tar.gz`` archives on Maven Central), fetched and unpacked once.

Maven resolves the archive alone (``dependency:get``, no transitive resolution: the partial
Maven mirror frazil can reach lacks some parent POMs) into its local repository; frazil unpacks
it into ``<cache>/apps/<artifact>-<version>/``, marked complete only once fully unpacked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from frazil.errors import ArtifactError
from frazil.jvm.fetch import java_executable
from frazil.jvm.pins import AppArchive
from frazil.paths import cache_dir

_MARKER = ".complete"
#: dependency:get 3.x reads the artifact's POM chain even with -Dtransitive=false, and the
#: Maven mirror frazil can reach lacks Apicurio's parent POM; 2.8 fetches the archive alone.
_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:2.8"
_MVN_TIMEOUT_S = 30 * 60


def app_dir(app: AppArchive) -> Path:
    """The unpacked application's folder (whether or not it was fetched yet)."""
    c = app.coordinate
    return cache_dir() / "apps" / f"{c.artifact}-{c.version}"


def ensure_app(app: AppArchive) -> Path:
    """The application's main jar, fetching and unpacking the archive on first use.

    Raises:
        ArtifactError: Java or Maven is missing, or Maven cannot fetch the archive.
    """
    java_executable()
    target = app_dir(app)
    if (target / _MARKER).exists():
        return target / app.main_jar
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ArtifactError(
            f"mvn (Apache Maven) not found on PATH: it is needed once to fetch {app}; "
            "install it (e.g. `apt-get install maven`) and run `frazil setup`"
        )
    repo = Path.home() / ".m2" / "repository"
    cmd = [
        mvn, "-B", "-q", "-U", "-Dstyle.color=never", f"-Dmaven.repo.local={repo}",
        f"{_PLUGIN}:get", f"-Dartifact={app}", "-Dtransitive=false",
    ]  # fmt: skip
    try:
        proc = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=_MVN_TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise ArtifactError(f"Maven did not fetch {app} within 30 minutes") from None
    c = app.coordinate
    archive = (
        repo.joinpath(*c.group.split("."), c.artifact, c.version)
        / f"{c.artifact}-{c.version}-{app.classifier}.{app.extension}"
    )
    if proc.returncode != 0 or not archive.exists():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ArtifactError(f"Maven failed to fetch {app} (exit {proc.returncode}):\n{tail}")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(staging, filter="data")
    (staging / _MARKER).write_text(str(app))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
    return target / app.main_jar
