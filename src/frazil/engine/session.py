"""Building the SparkSession: pinned jars, the Iceberg catalog, quiet logging."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from frazil.config.models import CatalogConfig, FrazilConfig, is_remote, is_uri, local_path
from frazil.config.secrets import spark_redaction_conf
from frazil.engine.fence import jvm_option
from frazil.jvm.cds import java_options as cds_java_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def catalog_spark_conf(catalog: CatalogConfig) -> dict[str, str]:
    """Spark settings that register ``catalog`` as an Iceberg ``SparkCatalog``.

    The embedded default is Iceberg's JDBC catalog on ``<warehouse>/catalog.db`` (SQLite),
    which PyIceberg's SQL catalog can open under the same catalog name.
    """
    prefix = f"spark.sql.catalog.{catalog.name}"
    conf = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": catalog.type,
        f"{prefix}.warehouse": _as_uri(catalog.warehouse),
        # Tables written by another process (a second frazil run, a test) must be seen at once.
        f"{prefix}.cache-enabled": "false",
    }
    if catalog.type == "jdbc":
        # V1 adds view support; without it Spark's tableExists() fails on this catalog.
        conf[f"{prefix}.jdbc.schema-version"] = "V1"
    uri = catalog.resolved_uri()
    if uri:
        conf[f"{prefix}.uri"] = uri
    for key, value in catalog.properties.items():
        conf[f"{prefix}.{key}"] = value
    return conf


def _as_uri(location: str) -> str:
    if is_uri(location):
        return location
    return Path(location).resolve().as_uri()


def spark_conf(
    config: FrazilConfig, jars: list[Path], run_token: str | None = None
) -> dict[str, str]:
    """Every Spark setting frazil applies, user settings (``spark.conf``) last.

    Args:
        run_token: Put on the driver JVM's command line (``-Dfrazil.run=…``) so the run fence
            can tell this run's JVM from any other process that reuses its pid.
    """
    log_config = resources.files("frazil.engine").joinpath("log4j2.properties")
    java_opts = f"-Dlog4j2.configurationFile={log_config}"
    if run_token:
        java_opts += f" {jvm_option(run_token)}"
    cds = cds_java_options()
    if cds:
        # Classes parsed once at setup, mapped at start: seconds off every start.
        java_opts += f" {cds}"
    conf = {
        "spark.master": config.spark.master,
        "spark.app.name": config.spark.app_name,
        "spark.driver.memory": config.spark.driver_memory,
        "spark.driver.extraJavaOptions": java_opts,
        "spark.jars": ",".join(str(jar) for jar in jars),
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        "spark.sql.defaultCatalog": config.catalog.name,
        "spark.sql.session.timeZone": "UTC",
        # Micro-batches are small: a few shuffle partitions keep per-batch overhead low.
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.showConsoleProgress": "false",
        # The web UI costs start-up time and memory on every run; on when asked for.
        "spark.ui.enabled": str(config.spark.ui).lower(),
        # Each micro-batch is cached once, for a few seconds, to check it before committing:
        # compressing that cache costs more CPU than the memory it saves (bench/throughput).
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        "spark.sql.streaming.metricsEnabled": "true",
    }
    conf.update(catalog_spark_conf(config.catalog))
    # Spark's UI, event log and plan strings mask frazil's secrets too (user settings win).
    conf.update(spark_redaction_conf())
    conf.update(config.spark.conf)
    return conf


def build_spark(config: FrazilConfig, run_token: str | None = None) -> SparkSession:
    """Create (or return the running) SparkSession configured for ``config``.

    Fetches the pinned jars first if they are not in the cache yet.

    Args:
        run_token: The run fence's token for the driver JVM's command line.
    """
    from pyspark.sql import SparkSession

    from frazil.jvm.fetch import spark_jars

    if config.catalog.type == "jdbc" and not is_remote(config.catalog.warehouse):
        # SQLite creates its file but not the folder around it.
        Path(local_path(config.catalog.warehouse)).mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder
    for key, value in spark_conf(config, spark_jars(), run_token).items():
        builder = builder.config(key, value)
    # Local Spark binds to loopback like every frazil service; workers use the CLI's Python.
    if config.spark.master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _python() -> str:
    import sys

    return sys.executable
