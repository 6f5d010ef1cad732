"""Starting Spark beside other work: the analysis session ``frazil plan`` resolves on, and a
session built on a thread of its own while the caller checks Kafka, the registry and the
catalog (``frazil plan``, ``frazil run``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from frazil.config.models import FrazilConfig
from frazil.engine.session import attach_session, launch_session, spark_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def build_analysis_spark(config: FrazilConfig) -> SparkSession:
    """A session that only resolves pipelines' plans and samples their topics (``frazil
    plan``, which reads the tables' metadata with PyIceberg): one local core whatever the
    master, no Iceberg catalog, no object store; about a second sooner than
    :func:`~frazil.engine.session.build_spark`.
    """
    from frazil.jvm.classpath import spark_jars

    settings = spark_conf(config, spark_jars(), analysis=True)
    builder, _ = launch_session(config, settings)
    # A declared schema's first parse is cold (~0.12 s: the DDL parser and its JSON
    # rendering): warmed on a thread of its own while the session starts.
    threading.Thread(target=_warm_parser, name="frazil-parser-warm-up", daemon=True).start()
    return attach_session(builder, settings)


def _warm_parser() -> None:
    from pyspark import SparkContext

    jvm = SparkContext._jvm
    try:
        if jvm is not None:
            # What PySpark's StructType.fromDDL calls.
            jvm.org.apache.spark.sql.api.python.PythonSQLUtils.ddlToJson(
                "a int, b decimal(10,2), c array<string>, d timestamp"
            )
    except Exception:  # the warm-up is a bonus; the first schema parses it cold
        return


class SparkStart:
    """A session built (``build``: :func:`~frazil.engine.session.build_spark`,
    :func:`build_analysis_spark`) on a daemon thread of its own while the caller checks
    Kafka, the registry and the catalog: the JVM's start is most of a command's first
    seconds, the checks mostly waiting. A check that fails is reported at once; the JVM goes
    with the process."""

    def __init__(self, build: Callable[[], SparkSession]) -> None:
        self._build = build
        self._spark: SparkSession | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="frazil-spark-start", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._spark = self._build()
        except BaseException as exc:  # re-raised in the caller's thread
            self._error = exc

    def result(self) -> SparkSession:
        """The session, once started, made the calling thread's active one.

        Raises:
            BaseException: Whatever starting it raised.
        """
        self._thread.join()
        if self._error is not None:
            raise self._error
        spark = self._spark
        assert spark is not None
        # Active in the thread that built it only (PySpark pins a JVM thread to each Python
        # thread): the caller's thread looks catalogs up on its own active session.
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        return spark
