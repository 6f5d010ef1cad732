"""Building the SparkSession: pinned jars, the Iceberg catalog, quiet logging."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from frazil.config.models import CatalogConfig, FrazilConfig

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
    if "://" in location:
        return location
    return Path(location).resolve().as_uri()


def spark_conf(config: FrazilConfig, jars: list[Path]) -> dict[str, str]:
    """Every Spark setting frazil applies, user settings (``spark.conf``) last."""
    log_config = resources.files("frazil.engine").joinpath("log4j2.properties")
    java_opts = f"-Dlog4j2.configurationFile={log_config}"
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
        # Each micro-batch is cached once, for a few seconds, to check it before committing:
        # compressing that cache costs more CPU than the memory it saves (bench/throughput).
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        "spark.sql.streaming.metricsEnabled": "true",
    }
    conf.update(catalog_spark_conf(config.catalog))
    conf.update(config.spark.conf)
    return conf


def build_spark(config: FrazilConfig) -> SparkSession:
    """Create (or return the running) SparkSession configured for ``config``.

    Fetches the pinned jars first if they are not in the cache yet.
    """
    from pyspark.sql import SparkSession

    from frazil.jvm.fetch import spark_jars

    if config.catalog.type == "jdbc" and "://" not in config.catalog.warehouse:
        Path(config.catalog.warehouse).mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder
    for key, value in spark_conf(config, spark_jars()).items():
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
