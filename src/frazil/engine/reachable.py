"""Before Spark starts: are the object store, the REST catalog and the Spark master there?

Each would otherwise be found missing deep inside Spark or Iceberg, after minutes of retries
(a standalone master is retried three times 20 s apart, the AWS SDK and the REST client back
off for a minute) and with a Java stack. :func:`check_services` tries a TCP connection to each
service the config names, at most :data:`CONNECT_SECONDS` each, and names the one that does
not answer with its address and the config key that points at it. Nothing has been read or
written then: a run that stops here commits nothing.

After Spark started, :func:`check_storage` reads each S3 location once from the driver, so
credentials the store refuses, or a bucket that does not exist, stop the run with that
reason (and never the credentials themselves) before any query starts. The commands that read
the tables without Spark (``frazil status``, ``frazil ui``) read a table's metadata file
through PyIceberg and stop with the same message
(:func:`frazil.config.storage.refused_credentials`).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from frazil.config.models import FrazilConfig
from frazil.config.storage import ACCESS_KEY_ID, SECRET_ACCESS_KEY, is_s3, refused_credentials
from frazil.errors import ServiceError
from frazil.jvm.classes import java_class

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: How long one service may take to accept a connection.
CONNECT_SECONDS = 5.0


@dataclass(frozen=True)
class Service:
    """A service the config points at: what it is, its address, the key naming it, and the
    addresses to try (any one answering is enough: a master URL may list several)."""

    what: str
    address: str
    key: str
    endpoints: tuple[tuple[str, int], ...]
    hint: str


def services(config: FrazilConfig) -> list[Service]:
    """The object store, REST catalog and Spark master ``config`` names, those it names."""
    found: list[Service] = []
    storage = config.storage
    if storage is not None and storage.endpoint and config.s3_locations():
        where = storage.host_port()
        assert where is not None
        found.append(
            Service(
                "object store",
                storage.endpoint,
                "storage.endpoint",
                (where,),
                "frazil local up --with s3",
            )
        )
    if config.catalog.type == "rest" and config.catalog.uri:
        parts = urlsplit(config.catalog.uri)
        if parts.hostname:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            found.append(
                Service(
                    "REST catalog",
                    config.catalog.uri,
                    "catalog.uri",
                    ((parts.hostname, port),),
                    "frazil local up --with rest-catalog",
                )
            )
    master = config.spark.master
    if master.startswith("spark://"):
        endpoints = []
        for host in master[len("spark://") :].split(","):
            parts = urlsplit(f"spark://{host}")
            if parts.hostname:
                endpoints.append((parts.hostname, parts.port or 7077))
        found.append(
            Service(
                "Spark master",
                master,
                "spark.master",
                tuple(endpoints),
                "frazil local up --with spark-cluster",
            )
        )
    return found


def check_services(
    config: FrazilConfig, timeout: float = CONNECT_SECONDS, *, spark: bool = True
) -> None:
    """Fail fast if the object store, the REST catalog or the Spark master does not answer.

    Args:
        spark: Whether the Spark master counts (not for the commands that start no Spark).

    Raises:
        ServiceError: Naming the first service that does not accept a connection, its
            address and the config key that names it.
    """
    for service in services(config):
        if not spark and service.key == "spark.master":
            continue
        reasons = [_connect(host, port, timeout) for host, port in service.endpoints]
        if service.endpoints and all(reasons):
            raise ServiceError(
                f"the {service.what} at {service.address} ({service.key}) cannot be reached: "
                f"{reasons[0]}; is it running? (`{service.hint}` starts one on this machine)"
            )


def _connect(host: str, port: int, timeout: float) -> str | None:
    """None if ``host:port`` accepts a TCP connection within ``timeout``, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except ConnectionRefusedError:
        return "connection refused"
    except socket.gaierror:
        return f"unknown host {host}"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def check_storage(spark: SparkSession, config: FrazilConfig, locations: list[str]) -> None:
    """Read each S3 location once from the driver (through Hadoop's S3A): the store must take
    the environment's credentials and hold the bucket.

    Raises:
        ServiceError: The store refused the credentials (named by their variables, never
            shown), has no such bucket, or could not be reached.
    """
    targets = [location for location in dict.fromkeys(locations) if is_s3(location)]
    if not targets:
        return
    jvm: Any = spark.sparkContext._jvm
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    address = config.storage.address() if config.storage else "AWS S3"
    for location in targets:
        try:
            path = java_class(jvm, "org.apache.hadoop.fs.Path")(location)
            path.getFileSystem(hadoop_conf).exists(path)
        except Exception as exc:
            raise ServiceError(_storage_reason(exc, location, address)) from exc


def _storage_reason(exc: BaseException, location: str, address: str) -> str:
    text = _java_text(exc)
    bucket = urlsplit(location).hostname or location
    if "NoSuchBucket" in text or "UnknownStoreException" in text:
        return f"the object store at {address} has no bucket {bucket!r} (for {location})"
    refused = refused_credentials(text, location, address)
    if refused is not None:
        return refused
    if "NoAuthWithAWSException" in text or "Unable to load credentials" in text:
        return (
            f"no credentials for the object store at {address} ({location}): set "
            f"{ACCESS_KEY_ID} and {SECRET_ACCESS_KEY} in the environment"
        )
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return f"the object store at {address} cannot be read ({location}): {first}"


def _java_text(exc: BaseException) -> str:
    """The Java exception's text (class names and messages of the whole cause chain)."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return str(exc)
    parts = []
    seen = 0
    while java is not None and seen < 10:
        parts.append(f"{java.getClass().getName()}: {java.getMessage()}")
        java = java.getCause()
        seen += 1
    return "\n".join(parts)
