"""The settings that put tables and checkpoints on an S3-compatible object store.

Two clients reach the store, both built from the config's ``storage:`` section and the
environment's credentials (:mod:`frazil.config.storage`):

* Iceberg's **S3FileIO** writes and reads the tables' files (data, manifests, metadata), on the
  driver and on the executors: ``io-impl`` and its ``s3.*``/``client.region`` properties on the
  Spark catalog (:func:`catalog_properties`), and on PyIceberg's catalog for ``frazil status``
  (:func:`pyiceberg_properties`).
* Hadoop's **S3A** holds Spark's streaming checkpoints (``state_dir: s3a://…``): its
  ``spark.hadoop.fs.s3a.*`` settings (:func:`hadoop_conf`), registered for ``s3://`` and
  ``s3n://`` too so the same location works whichever scheme the config writes.

Credentials never enter these settings from the file. The driver inherits the environment;
the executors of a cluster get the same three variables through ``spark.executorEnv.*``
(:func:`executor_env`), which Spark's redaction hides on its UI and in its logs. Both clients
then read them through the AWS SDK's environment provider.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from frazil.config.models import FrazilConfig
from frazil.config.storage import (
    CREDENTIAL_VARIABLES,
    REGION,
    S3_SCHEMES,
    StorageConfig,
    credentials,
    is_s3,
)

#: Iceberg's FileIO for S3 (iceberg-aws, in the Spark runtime; its AWS SDK is iceberg-aws-bundle).
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
#: Hadoop's S3 file system (hadoop-aws).
S3A_FILE_SYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
#: The AWS SDK v2 provider reading AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN.
ENV_CREDENTIALS_PROVIDER = (
    "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
)
#: The region a self-hosted store is signed for when neither the file nor AWS_REGION says one:
#: the SDK refuses to build a client without a region, and such stores accept any.
DEFAULT_REGION = "us-east-1"


def uses_s3(config: FrazilConfig) -> bool:
    """Whether anything of ``config`` is on an object store (or a ``storage:`` section says so)."""
    return config.storage is not None or bool(config.s3_locations())


def region(storage: StorageConfig | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The signing region: the file's, else ``AWS_REGION``, else :data:`DEFAULT_REGION` for a
    store with an endpoint; None leaves AWS S3's region to the SDK's own lookup."""
    env = os.environ if environ is None else environ
    if storage is not None and storage.region:
        return storage.region
    if env.get(REGION):
        return env[REGION]
    if storage is not None and storage.endpoint:
        return DEFAULT_REGION
    return None


def catalog_properties(config: FrazilConfig) -> dict[str, str]:
    """Iceberg catalog properties for a warehouse on S3: S3FileIO and where the store is.

    Empty when the warehouse is not on S3, or with a Hadoop catalog (which reads and writes
    through Hadoop's file systems, S3A for ``s3a://``). ``catalog.properties`` the user wrote
    are applied after these and win.
    """
    if config.catalog.type == "hadoop" or not is_s3(config.catalog.warehouse):
        return {}
    storage = config.storage or StorageConfig()
    props = {"io-impl": S3_FILE_IO}
    if storage.endpoint:
        props["s3.endpoint"] = storage.endpoint
    if storage.path_style:
        props["s3.path-style-access"] = "true"
    signing = region(config.storage)
    if signing:
        props["client.region"] = signing
    return props


def hadoop_conf(config: FrazilConfig) -> dict[str, str]:
    """``spark.hadoop.fs.s3a.*``: S3A for checkpoints and the state folder on S3."""
    if not uses_s3(config):
        return {}
    storage = config.storage or StorageConfig()
    conf = {f"spark.hadoop.fs.{scheme}.impl": S3A_FILE_SYSTEM for scheme in S3_SCHEMES}
    prefix = "spark.hadoop.fs.s3a"
    if storage.endpoint:
        conf[f"{prefix}.endpoint"] = storage.endpoint
        conf[f"{prefix}.connection.ssl.enabled"] = str(
            storage.endpoint.startswith("https:")
        ).lower()
    conf[f"{prefix}.path.style.access"] = str(storage.path_style).lower()
    signing = region(config.storage)
    if signing:
        conf[f"{prefix}.endpoint.region"] = signing
    if credentials() is not None:
        # Only the environment: without it S3A tries its whole chain (an instance's role…),
        # slowly and with a message that hides that no credentials were given.
        conf[f"{prefix}.aws.credentials.provider"] = ENV_CREDENTIALS_PROVIDER
    return conf


def executor_env(config: FrazilConfig, master_is_local: bool) -> dict[str, str]:
    """``spark.executorEnv.*`` carrying the environment's credentials (and region) to a
    cluster's executors; nothing in local mode, whose executors are the driver's JVM."""
    if master_is_local or not uses_s3(config):
        return {}
    names = (*CREDENTIAL_VARIABLES, REGION)
    return {f"spark.executorEnv.{n}": os.environ[n] for n in names if os.environ.get(n)}


def pyiceberg_properties(config: FrazilConfig) -> dict[str, str]:
    """PyIceberg's FileIO properties for the same store (``frazil status``, tests' readers).

    Credentials are handed over in memory, from the environment.
    """
    if not uses_s3(config):
        return {}
    storage = config.storage or StorageConfig()
    props: dict[str, str] = {}
    if storage.endpoint:
        props["s3.endpoint"] = storage.endpoint
    # PyArrow addresses buckets by path unless told otherwise.
    props["s3.force-virtual-addressing"] = str(not storage.path_style).lower()
    signing = region(config.storage)
    if signing:
        props["s3.region"] = signing
    found = credentials()
    if found is not None:
        props["s3.access-key-id"] = found.access_key_id
        props["s3.secret-access-key"] = found.secret_access_key
        if found.session_token:
            props["s3.session-token"] = found.session_token
    return props
