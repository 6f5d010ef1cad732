"""A local S3-compatible object store: s3proxy (from Maven Central) on its filesystem backend.

``frazil local up --with s3`` runs it as a detached JVM on 127.0.0.1 (port 9000 by default),
path-style only (no virtual-host buckets), checking AWS v2 and v4 signatures against one
identity, :data:`ACCESS_KEY` / :data:`SECRET_KEY`: fixed, documented credentials for local
development only. Everything lives under ``<state_dir>/s3/``:

* ``data/<bucket>/<key>``: the objects, as plain files (kept across restarts),
* ``s3proxy.properties``: its configuration, rewritten on every start (owner-only: it holds
  the secret),
* ``s3proxy.log`` and ``s3proxy.pid``.

The bucket :data:`BUCKET` is created at every start if missing. Why s3proxy and not moto's
server: see :data:`frazil.jvm.pins.S3PROXY_VERSION`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from frazil.errors import ServiceError
from frazil.jvm.fetch import java_executable, s3proxy_jar
from frazil.local.cds import cds_archive, cds_options
from frazil.local.daemon import Daemon
from frazil.local.host import http_get, tree_size, write_private

#: The local object store's access key (its only identity). Local development only.
ACCESS_KEY = "frazil"
#: The local object store's secret key. Local development only; documented, not a secret.
SECRET_KEY = "frazil-local-secret"
#: The bucket created at start; the REST catalog's warehouse lives in it.
BUCKET = "frazil"
#: The region clients sign for (s3proxy accepts any; AWS SDKs need one).
REGION = "us-east-1"
DEFAULT_PORT = 9000
_HEAP = "256m"
_NAME = "the local object store (s3proxy)"


@dataclasses.dataclass(frozen=True)
class ObjectStoreStatus:
    """What :meth:`LocalObjectStore.status` reports.

    Attributes:
        running: Whether s3proxy runs.
        endpoint: Its S3 endpoint URL (of the running one, if any).
        pid: Its process id, if running.
        data_dir: Where the objects live (one folder per bucket).
        data_bytes: Disk space the objects use.
        log_file: Its log.
    """

    running: bool
    endpoint: str
    pid: int | None
    data_dir: Path
    data_bytes: int
    log_file: Path

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view (paths as strings)."""
        data = dataclasses.asdict(self)
        data["data_dir"] = str(self.data_dir)
        data["log_file"] = str(self.log_file)
        return data


class LocalObjectStore:
    """s3proxy under ``state_dir/s3``.

    Args:
        state_dir: frazil's state folder; the store uses its ``s3`` subfolder.
        port: HTTP port on 127.0.0.1.
    """

    def __init__(self, state_dir: Path, port: int = DEFAULT_PORT) -> None:
        self.state_dir = Path(state_dir).resolve()
        self.port = port
        self.s3_dir = self.state_dir / "s3"
        self.data_dir = self.s3_dir / "data"
        self.config_file = self.s3_dir / "s3proxy.properties"
        self.daemon = Daemon(_NAME, self.s3_dir, "s3proxy", service="s3")

    @property
    def endpoint(self) -> str:
        """The S3 endpoint URL this store is configured to serve on."""
        return f"http://127.0.0.1:{self.port}"

    def up(self, timeout: float = 60) -> str:
        """Start s3proxy (fetching it on first use), wait until it answers, create the bucket.

        Idempotent: if it runs already on this port, only checks that it answers.

        Returns:
            The endpoint URL.

        Raises:
            ServiceError: If it runs on another port, the port is in use, or it exits or does
                not answer within ``timeout`` seconds (the message names its log).
            ArtifactError: If s3proxy cannot be fetched or Java is missing.
        """
        with self.daemon.locked():
            command: list[str] = []
            partial = None
            if self.daemon.running() is None:
                self.data_dir.mkdir(parents=True, exist_ok=True)
                write_private(self.config_file, self._properties())
                java, jar = java_executable(), s3proxy_jar()
                cds, partial = cds_options(cds_archive("s3proxy", java, [jar]))
                command = [
                    java,
                    f"-Xmx{_HEAP}",
                    # One small heap, no parallel GC threads: this runs next to Spark on a
                    # laptop.
                    "-XX:+UseSerialGC",
                    "-XX:+ExitOnOutOfMemoryError",
                    *cds,
                    "-jar",
                    str(jar),
                    "--properties",
                    str(self.config_file),
                ]
            self.daemon.start(
                command,
                address=self.endpoint,
                ports=[self.port],
                healthy=self._answers,
                timeout=timeout,
                port_hint="pick another with --s3-port",
                cds_partial=partial,
            )
            self._ensure_bucket()
        return self.endpoint

    def down(self, timeout: float = 30) -> bool:
        """Stop s3proxy (the objects are kept). Whether one was running."""
        return self.daemon.down(timeout)

    def status(self) -> ObjectStoreStatus:
        """Whether it runs, where, and how much data it holds."""
        running = self.daemon.running()
        return ObjectStoreStatus(
            running=running is not None,
            endpoint=running.address if running else self.endpoint,
            pid=running.pid if running else None,
            data_dir=self.data_dir,
            data_bytes=tree_size(self.data_dir),
            log_file=self.daemon.log_file,
        )

    def _properties(self) -> str:
        return properties_text(self.port, self.data_dir)

    def _answers(self, timeout: float) -> bool:
        # Unsigned, so refused (403) once it serves: any HTTP answer means it is up.
        return http_get(f"{self.endpoint}/", timeout) is not None

    def _ensure_bucket(self) -> None:
        try:
            create_bucket(self.endpoint, BUCKET)
        except OSError as exc:
            raise ServiceError(
                f"{_NAME} at {self.endpoint} answers but creating bucket {BUCKET!r} failed: "
                f"{exc}; its log: {self.daemon.log_file}"
            ) from None


def properties_text(port: int, data_dir: Path) -> str:
    """s3proxy's configuration for ``127.0.0.1:port`` with its objects under ``data_dir``."""
    settings = {
        "s3proxy.endpoint": f"http://127.0.0.1:{port}",
        # Both signature versions: pyarrow and the AWS SDK v2 sign v4, older tools v2.
        "s3proxy.authorization": "aws-v2-or-v4",
        "s3proxy.identity": ACCESS_KEY,
        "s3proxy.credential": SECRET_KEY,
        "jclouds.provider": "filesystem",
        "jclouds.filesystem.basedir": str(data_dir),
        # No s3proxy.virtual-host: path-style access only, bucket names never have to
        # resolve as host names.
    }
    lines = ["# Written by frazil on every start; edits are overwritten."]
    lines += [f"{key}={_escape(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def create_bucket(endpoint: str, bucket: str) -> None:
    """Create ``bucket`` on the local store at ``endpoint`` (signed request) if missing.

    Raises:
        OSError: If the store refuses or cannot be reached.
    """
    # pyarrow (a frazil dependency through PyIceberg) signs S3 requests; no boto3 needed.
    from pyarrow import fs  # type: ignore[import-untyped]

    s3 = fs.S3FileSystem(
        access_key=ACCESS_KEY,
        secret_key=SECRET_KEY,
        endpoint_override=endpoint,
        scheme=endpoint.partition("://")[0] or "http",
        region=REGION,
        force_virtual_addressing=False,
        allow_bucket_creation=True,
        connect_timeout=5,
        request_timeout=10,
    )
    if s3.get_file_info(bucket).type == fs.FileType.NotFound:
        s3.create_dir(bucket)


def _escape(value: str) -> str:
    """Escape a value for a Java ``.properties`` file (backslashes and line breaks)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
