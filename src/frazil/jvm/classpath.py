"""The jars the Spark driver adds to pyspark's own: what fetching, building and unsigning
make, put together here so that none of those modules imports another's caller."""

from __future__ import annotations

from pathlib import Path

from frazil.jvm.build import frazil_jar
from frazil.jvm.fetch import ensure_artifacts
from frazil.jvm.unsigned import unsigned_jars


def spark_jars() -> list[Path]:
    """Jars to add to pyspark's classpath: Kafka source, Avro, Iceberg, SQLite, frazil's own,
    after unsigned copies of pyspark's signed jars (:mod:`frazil.jvm.unsigned`)."""
    return [*unsigned_jars(), *ensure_artifacts("spark"), frazil_jar()]
