"""Building the SparkSession: pinned jars, the Iceberg catalog (its settings in
:mod:`frazil.engine.catalog_conf`), quiet logging."""

from __future__ import annotations

import contextlib
import os
import threading
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from frazil.config import storage_clients
from frazil.config.locations import is_remote, local_path
from frazil.config.models import FrazilConfig
from frazil.config.secrets import spark_redaction_conf
from frazil.config.storage import is_s3
from frazil.engine.catalog_conf import catalog_spark_conf, embedded_catalog_lock, is_embedded
from frazil.engine.driver_jvm import RestCheck, launch_jvm, stop_jvm
from frazil.engine.jvm_tuning import (
    chooses_collector,
    driver_jit_options,
    executor_jit_options,
    gc_option,
    initial_heap,
    is_local,
    on_loopback,
)
from frazil.engine.py4j_replies import prompt_replies
from frazil.jvm.cds import java_options as cds_java_options
from frazil.jvm.options import java_option
from frazil.jvm.unsigned import is_unsigned_copy
from frazil.progress.fence import jvm_option

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
#: Kafka micro-batches planned without Spark's copy of every record into another row
#: (``dev.frazil.spark.KafkaRows``).
KAFKA_ROWS_EXTENSION = "dev.frazil.spark.KafkaRows$Extension"
#: An analysis session's master (:func:`spark_conf`): plans resolve in the driver, and a
#: sample of the topics is a job of one task per partition.
ANALYSIS_MASTER = "local[1]"
#: Threads of Iceberg's worker pool in the driver (``iceberg.worker.num-threads``), at least
#: (one per core beyond): one per table a routed batch commits at once (FANOUT_THREADS).
ICEBERG_WORKER_THREADS = 16
#: Hadoop's local file system, setting permissions without a process (frazil's jar).
LOCAL_FILE_SYSTEM = "dev.frazil.hadoop.LocalFileSystem"
#: Writes a checkpoint's log entries in place on S3 instead of renaming (a copy and a delete).
DIRECT_CHECKPOINTS = "dev.frazil.hadoop.DirectCheckpointFileManager"


def spark_conf(
    config: FrazilConfig,
    jars: list[Path],
    run_token: str | None = None,
    *,
    analysis: bool = False,
) -> dict[str, str]:
    """Every Spark setting frazil applies, user settings (``spark.conf``) last.

    Args:
        run_token: Put on the driver JVM's command line (``-Dfrazil.run=…``) so the run fence
            can tell this run's JVM from any other process that reuses its pid.
        analysis: For a session that only resolves plans and samples topics (``frazil plan``):
            one local core whatever the master, no Iceberg catalog, a JIT for short lives.
    """
    master = ANALYSIS_MASTER if analysis else config.spark.master
    log_config = resources.files("frazil.engine").joinpath("log4j2.properties")
    java_opts = java_option("-Dlog4j2.configurationFile=", str(log_config))
    log_file = jvm_log_file(config)
    if log_file is not None:
        # Spark's, the JVM's and the Kafka clients' lines go there; errors reach the terminal
        # too, warnings only with --verbose.
        console = "warn" if os.environ.get("FRAZIL_VERBOSE") else "error"
        java_opts += f" {java_option('-Dfrazil.log.file=', log_file)}"
        java_opts += f" -Dfrazil.log.console={console}"
    if run_token:
        java_opts += f" {jvm_option(run_token)}"
    cds = cds_java_options()
    if cds:
        # Classes parsed once at setup, mapped at start: seconds off every start.
        java_opts += f" {cds}"
    user_opts = config.spark.conf.get("spark.driver.extraJavaOptions", "")
    if not chooses_collector(user_opts):
        java_opts += f" {gc_option(master)}"
    # The default threshold (~20 MB) triggers a full collection while Spark loads its classes.
    java_opts += " -XX:MetaspaceSize=256m"
    if is_local(master) and not analysis:
        java_opts += f" {initial_heap(config.spark.driver_memory)}"
    if "ICEBERG_WORKER_NUM_THREADS" not in os.environ:
        # Iceberg writes each commit's manifests on a pool shared by the JVM (one thread per
        # core by default) and polls for them in 10 ms sleeps: routed batches commit many
        # tables at once (FANOUT_THREADS), which queued there for ~80 ms a commit on two cores.
        threads = max(ICEBERG_WORKER_THREADS, os.cpu_count() or 1)
        java_opts += f" -Diceberg.worker.num-threads={threads}"
    jit = driver_jit_options(master, user_opts, analysis=analysis)
    if jit:
        java_opts += f" {jit}"
    if user_opts:
        # Appended, not replacing ours: the JVM takes the last of repeated flags, so the
        # user's win, and the run fence's token and the log settings stay.
        java_opts += f" {user_opts}"
    jar_settings = jar_conf(master, jars)
    conf = {
        "spark.master": master,
        "spark.app.name": config.spark.app_name,
        "spark.driver.memory": config.spark.driver_memory,
        **jar_settings,
        "spark.sql.session.timeZone": "UTC",
        # Micro-batches are small: a few shuffle partitions keep per-batch overhead low.
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.showConsoleProgress": "false",
        # The web UI costs start-up time and memory on every run; on when asked for.
        "spark.ui.enabled": str(config.spark.ui).lower(),
        "spark.sql.streaming.metricsEnabled": "true",
        # A JSON object with a key twice lands in a variant column with the last value, as
        # from_json and frazil's JSON decoder read it, rather than being a dead letter.
        "spark.sql.variant.allowDuplicateKeys": "true",
        # PySpark records the Python call site of every column expression for error context:
        # about six py4j round trips per expression (the active session, a setting, the
        # origin set and cleared), some 150 per micro-batch, for a context that names
        # frazil's own lines. frazil names the record and the config key itself.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # Catalyst's constraint propagation doubles a projection's constraint set for each
        # alias whose expression occurs in another's (Project.getAllValidConstraints): a
        # batch's projection names each column's decoded value and reuses it in the
        # record's error checks, so a routed Debezium batch of some 13 columns with tables
        # of their own keys took minutes and the driver's heap (OutOfMemoryError) planning
        # its kept rows. The filters it infers (IS NOT NULL on join keys) spare frazil's
        # queries nothing: keys are checked per record, and Iceberg prunes files by stats.
        "spark.sql.constraintPropagation.enabled": "false",
    }
    if not analysis:
        conf["spark.sql.extensions"] = f"{ICEBERG_EXTENSIONS},{KAFKA_ROWS_EXTENSION}"
        conf["spark.sql.defaultCatalog"] = config.catalog.name
    if is_local(master):
        # Where frazil's jar is on the JVM's own classpath: local files written through
        # Hadoop's FileSystem (the embedded warehouse's data and metadata) get their
        # permissions set without a `chmod` process per file (dev.frazil.hadoop.LocalFileSystem).
        conf["spark.hadoop.fs.file.impl"] = LOCAL_FILE_SYSTEM
    if (
        is_local(master)
        or is_s3(config.state_dir)
        or any(is_s3(config.checkpoint_for(p)) for p in config.pipelines)
    ):
        # Two log entries a batch. On S3 each a rename otherwise: ~0.3 s less per batch. On
        # the local disk, Spark's FileContext runs `readlink` and `chmod` processes for each
        # (some ten per entry): written through frazil's local file system instead. HDFS
        # checkpoints are written as Spark's own manager writes them.
        conf["spark.sql.streaming.checkpointFileManagerClass"] = DIRECT_CHECKPOINTS
    if not analysis:
        conf.update(catalog_spark_conf(config.catalog))
        prefix = f"spark.sql.catalog.{config.catalog.name}"
        for key, value in storage_clients.catalog_properties(config).items():
            # S3FileIO for a warehouse on S3; catalog.properties the user wrote win.
            conf.setdefault(f"{prefix}.{key}", value)
    conf.update(storage_clients.hadoop_conf(config))
    conf.update(storage_clients.executor_env(config, is_local(master)))
    # Spark's UI, event log and plan strings mask frazil's secrets too (user settings win).
    conf.update(spark_redaction_conf())
    conf.update(config.spark.conf)
    conf["spark.driver.extraJavaOptions"] = java_opts
    for key in ("spark.driver.extraClassPath", "spark.executor.extraClassPath"):
        ours = jar_settings.get(key)
        user_classpath = config.spark.conf.get(key)
        if ours and user_classpath:
            conf[key] = os.pathsep.join([ours, user_classpath])
    if "spark.executor.extraClassPath" in jar_settings:
        # Executors on this machine with the driver's classpath: they map the driver's
        # class-data archive too, and log as the driver does (warnings, Kafka's errors)
        # instead of Spark's default INFO, a line per Kafka fetch. The user's options last.
        executor_opts = [
            java_option("-Dlog4j2.configurationFile=", str(log_config)),
            cds_java_options(),
        ]
        executor_opts.extend(executor_jit_options(master))
        user_executor_opts = config.spark.conf.get("spark.executor.extraJavaOptions", "")
        if not chooses_collector(user_executor_opts):
            # Executors sharing the driver's few cores: the driver's rule for local mode.
            executor_opts.append(gc_option("local"))
        executor_opts.append(user_executor_opts)
        conf["spark.executor.extraJavaOptions"] = " ".join(o for o in executor_opts if o)
    return conf


def jvm_log_file(config: FrazilConfig) -> Path | None:
    """Where the driver JVM's log lines go: ``<state_dir>/logs/spark.log`` (for a remote
    state folder, the local cache's). None if the folder cannot be made (then the terminal
    gets them, as before)."""
    from frazil.progress.fence import runs_dir

    folder = runs_dir(config.state_dir).parent / "logs"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder / "spark.log"


def jar_conf(master: str, jars: list[Path]) -> dict[str, str]:
    """How frazil's jars reach the JVMs that need them.

    The driver runs here, in client mode, whatever the master: the jars go on its classpath
    at launch (``spark.driver.extraClassPath``), loaded by the JVM's own class loader, so the
    class-data archive (made with that classpath) maps and Spark does not copy them into a
    temporary folder at every start. In local mode the executors live in the driver JVM.

    A cluster's executors get them through ``spark.jars`` (Spark's file server copies each
    jar into every executor's folder and loads it with a class loader of its own), except
    when the master is on this machine's loopback address: its workers run here too and find
    the jars where the driver does, so they go on the executors' classpath at launch
    (``spark.executor.extraClassPath``): nothing copied, and the driver's archive maps.
    """
    classpath = os.pathsep.join(str(jar) for jar in jars)
    if is_local(master):
        return {"spark.driver.extraClassPath": classpath}
    if on_loopback(master):
        return {
            "spark.driver.extraClassPath": classpath,
            "spark.executor.extraClassPath": classpath,
        }
    # Executors elsewhere load Janino from their own classpath first: the unsigned copies
    # (:mod:`frazil.jvm.unsigned`) would only be shipped for nothing.
    shipped = [jar for jar in jars if not is_unsigned_copy(jar)]
    return {
        "spark.driver.extraClassPath": classpath,
        "spark.jars": ",".join(str(jar) for jar in shipped),
    }


def build_spark(config: FrazilConfig, run_token: str | None = None) -> SparkSession:
    """Create (or return the running) SparkSession configured for ``config``.

    Fetches the pinned jars first if they are not in the cache yet.

    Raises:
        ServiceError: The object store, the REST catalog or the Spark master the config names
            does not answer, the store refuses the environment's credentials, or the REST
            catalog refuses the config's.

    Args:
        run_token: The run fence's token for the driver JVM's command line.
    """
    from frazil.engine.reachable import check_services, check_storage
    from frazil.jvm.classpath import spark_jars
    from frazil.jvm.fetch import artifacts_cached

    # The object store, the REST catalog and the master first: one that does not answer is
    # named in seconds, not after Spark's and the SDK's minutes of retries.
    check_services(config)
    rest_check = RestCheck(config) if config.catalog.type == "rest" else None
    if rest_check is not None and not artifacts_cached("spark"):
        rest_check.result()  # before minutes of fetching, not after
    try:
        if config.catalog.type == "jdbc" and not is_remote(config.catalog.warehouse):
            # SQLite creates its file but not the folder around it.
            Path(local_path(config.catalog.warehouse)).mkdir(parents=True, exist_ok=True)
        settings = spark_conf(config, spark_jars(), run_token)
        builder, launched = launch_session(config, settings)
    except BaseException:
        if rest_check is not None:
            rest_check.result()  # a refused credential is the first thing to report
        raise
    if rest_check is not None:
        try:
            rest_check.result()
        except BaseException:
            if launched:
                stop_jvm()
            raise
    spark = attach_session(builder, settings)
    _open_embedded_catalog(spark, config)
    opening = _open_rest_catalog(spark, config)
    # Credentials the store refuses, or a missing bucket, stop here, before any query.
    check_storage(spark, config, config.s3_locations())
    if opening is not None:
        opening.join()
    return spark


def launch_session(
    config: FrazilConfig, settings: dict[str, str]
) -> tuple[SparkSession.Builder, bool]:
    """The session's builder, its driver JVM started; and whether it was started here."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    # Local Spark binds to loopback like every frazil service, and so does a driver whose
    # cluster is on this machine's loopback (the local stack's); workers use the CLI's Python.
    master = settings["spark.master"]
    if master.startswith("local") or on_loopback(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    # Else spark-submit's script starts a Python process to find the home of pip's PySpark.
    os.environ.setdefault("SPARK_HOME", _spark_home())
    return builder, launch_jvm(settings, jvm_log_file(config))


def _spark_home() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent)


def attach_session(builder: SparkSession.Builder, settings: dict[str, str]) -> SparkSession:
    """The session on the started JVM, Spark's and the query contexts' logging quieted.

    A new session is made as PySpark's builder makes it, on a SparkContext with ``settings``,
    except that Spark ML's session extension is not run (``dev.frazil.spark.SessionStart``:
    ~0.9 s of the session's start, for functions of Spark Connect's ML client).
    """
    from py4j.java_gateway import JavaClass
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    running = SparkSession._instantiatedSession
    if running is not None and running._sc._jsc is not None:
        spark = builder.getOrCreate()
    else:
        conf = SparkConf()
        for key, value in settings.items():
            conf.set(key, value)
        context = SparkContext.getOrCreate(conf)
        start = getattr(context._jvm, "dev.frazil.spark.SessionStart")
        if isinstance(start, JavaClass):
            # PySpark's SparkSession on a given JVM session sets it as the default and
            # active one, as its builder does.
            spark = SparkSession(context, jsparkSession=start.create(context._jsc.sc(), settings))
        else:  # frazil's jar not on the classpath
            spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    _quiet_query_context_loggers()
    prompt_replies(spark)
    return spark


def _open_rest_catalog(spark: SparkSession, config: FrazilConfig) -> threading.Thread | None:
    """Open a REST catalog in Spark on a thread of its own, beside the storage check.

    Iceberg's REST client starts on first use (its HTTP client, the server's config, the
    classes of both): ~0.5 s that the first table lookup paid after the storage check's first
    use of S3A, one after the other. Opening only reads (``GET /v1/config``); nothing is
    created before the store is checked. A failure here is left to that first lookup, which
    reports it as always.
    """
    if config.catalog.type != "rest":
        return None
    name = config.catalog.name

    def open_catalog() -> None:
        # A failure is reported by the first real use, with the run's wording.
        with contextlib.suppress(Exception):
            spark._jsparkSession.sessionState().catalogManager().catalog(name)

    thread = threading.Thread(target=open_catalog, name="frazil-open-catalog", daemon=True)
    thread.start()
    return thread


def _open_embedded_catalog(spark: SparkSession, config: FrazilConfig) -> None:
    """Open the embedded catalog once, holding its lock
    (:func:`~frazil.engine.catalog_conf.embedded_catalog_lock`)."""
    if is_embedded(config):
        with embedded_catalog_lock(config):
            # Through the catalog manager, as the first table lookup would: Spark's SQL
            # parser and analyzer stay cold (~0.4 s of a start).
            spark._jsparkSession.sessionState().catalogManager().catalog(config.catalog.name)


def _quiet_query_context_loggers() -> None:
    """PySpark logs every analysis error with its whole Java stack (as a JSON line) before
    raising it; the CLI prints the error's first line itself, and ``--verbose`` the stack."""
    if os.environ.get("FRAZIL_VERBOSE"):
        return
    import logging

    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        # Created as PySparkLoggers, which is what PySpark expects to find under these names.
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def _python() -> str:
    import sys

    return sys.executable
