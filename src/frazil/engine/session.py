"""Building the SparkSession: pinned jars, the Iceberg catalog (its settings in
:mod:`frazil.engine.catalog_conf`), quiet logging."""

from __future__ import annotations

import contextlib
import os
import re
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
from frazil.jvm.cds import java_options as cds_java_options
from frazil.jvm.options import java_option
from frazil.jvm.unsigned import is_unsigned_copy
from frazil.progress.fence import jvm_option

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
#: An analysis session's master (:func:`spark_conf`): plans resolve in the driver, and a
#: sample of the topics is a job of one task per partition.
ANALYSIS_MASTER = "local[1]"
#: An analysis session's JIT: the client compiler only.
ANALYSIS_JIT_OPTIONS = ("-XX:TieredStopAtLevel=1",)
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
    # The default threshold (~20 MB) triggers a full collection while Spark loads its classes.
    user_opts = config.spark.conf.get("spark.driver.extraJavaOptions", "")
    if not _GC_FLAG.search(user_opts):
        # The JVM refuses two collectors: one chosen by the user replaces frazil's.
        java_opts += f" {gc_option(master)}"
    java_opts += " -XX:MetaspaceSize=256m"
    if is_local(master) and not analysis:
        java_opts += f" {initial_heap(config.spark.driver_memory)}"
    if "ICEBERG_WORKER_NUM_THREADS" not in os.environ:
        # Iceberg writes each commit's manifests on a pool shared by the JVM (one thread per
        # core by default) and polls for them in 10 ms sleeps: routed batches commit many
        # tables at once (FANOUT_THREADS), which queued there for ~80 ms a commit on two cores.
        threads = max(ICEBERG_WORKER_THREADS, os.cpu_count() or 1)
        java_opts += f" -Diceberg.worker.num-threads={threads}"
    if analysis:
        # Seconds of resolving: C1's quick code at once beats C2's better code later
        # (0.5 s of the session's 2.5 s start-up, measured).
        java_opts += f" {' '.join(ANALYSIS_JIT_OPTIONS)}"
    elif is_local(master):
        java_opts += f" {' '.join(JIT_OPTIONS)}"
        directives = Path(str(resources.files("frazil.engine").joinpath(JIT_DIRECTIVES)))
        if (
            os.environ.get(JIT_DIRECTIVES_ENV, "1") != "0"
            # A JVM given a directives file it cannot read does not start; without tiered
            # compilation there is no C1 for what the directives keep from C2.
            and directives.is_file()
            and "-XX:-TieredCompilation" not in user_opts
        ):
            # The JVM says "N compiler directives added" on its own output: on stderr (the
            # JVM's log), not stdout, where `frazil sql -o json` writes its rows.
            java_opts += (
                " -XX:+DisplayVMOutputToStderr -XX:+UnlockDiagnosticVMOptions"
                f" {java_option('-XX:CompilerDirectivesFile=', directives)}"
            )
    elif _shares_few_cores(master):
        java_opts += f" {' '.join(STACK_DRIVER_JIT_OPTIONS)}"
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
    }
    if not analysis:
        conf["spark.sql.extensions"] = ICEBERG_EXTENSIONS
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
        if _shares_few_cores(master):
            executor_opts.extend(STACK_EXECUTOR_JIT_OPTIONS)
        user_executor_opts = config.spark.conf.get("spark.executor.extraJavaOptions", "")
        if not _GC_FLAG.search(user_executor_opts):
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


#: JIT thresholds for a local driver, 4-5x HotSpot's defaults. Spark runs tens of thousands of
#: methods once or a few times (start-up, planning): with the defaults the JIT compiles them
#: all and takes a whole core for the first ~25 s of a run, next to the two task threads.
#: Higher thresholds leave run-once code interpreted and still compile the per-record loop
#: (measured: ~12% less CPU and ~10% less time on 2M records, docs/benchmarks.md).
JIT_OPTIONS = (
    "-XX:Tier3InvocationThreshold=1000",
    "-XX:Tier3MinInvocationThreshold=500",
    "-XX:Tier3CompileThreshold=5000",
    "-XX:Tier4InvocationThreshold=20000",
    "-XX:Tier4MinInvocationThreshold=5000",
    "-XX:Tier4CompileThreshold=30000",
)

#: Code a local driver runs at start-up and once per batch, never per record, that C2 is not
#: to compile (HotSpot's compiler directives; C1 still does, without profiling): the SQL
#: parser, Janino, the bytecode spinning of lambdas and method handles, jar and class
#: loading, Hadoop's XML configuration, py4j. C2 compiled for 2.3 s of a ~4 s start and 1.9 s
#: of a 2.6 s first batch, beside the tasks on two cores, much of it such code (ASM's frames,
#: ANTLR, jar entries); with these directives 1.0 s and 1.4 s (compilation logs). 2M records
#: in 3 paired rounds: 14.7 s and 21.2 CPU seconds against 15.9 s and 24.1 (medians,
#: docs/benchmarks.md). A user's own ``-XX:CompilerDirectivesFile`` comes later and wins.
JIT_DIRECTIVES = "jit_directives.json"
#: ``FRAZIL_JIT_DIRECTIVES=0``: C2 compiles whatever gets hot, as HotSpot decides.
JIT_DIRECTIVES_ENV = "FRAZIL_JIT_DIRECTIVES"


#: The JIT of a driver whose executors run on this machine (a master on the loopback address:
#: the local stack), on two cores or fewer: C1 only. That driver runs no task, only plans and
#: commits, next to the executors and the stack's servers on the same cores, and its C2
#: compiler mostly compiled the start-up's class loading, lambda spinning and
#: deserialization: 12-17 of the driver's 20-30 CPU seconds on 1-3M records. With C1 alone on
#: 3M records the run took 0.81x the time (0.61x -> 0.76x local[2]'s events/s) and the warm
#: batches kept their pace. The executors keep C2 (below): with C1 alone their warm batches
#: took 1.35x as long (docs/benchmarks.md, "The cluster's JIT"). The user's extraJavaOptions
#: come after and win (``-XX:TieredStopAtLevel=4`` restores C2).
STACK_DRIVER_JIT_OPTIONS = (
    "-XX:TieredStopAtLevel=1",
    # C1 alone would also shrink the code cache to 48 MB, unsegmented: a long-running driver
    # could fill it and have its compiler turned off. Tiered compilation's size is kept.
    "-XX:ReservedCodeCacheSize=240m",
)

#: The JIT of the executors on this machine (the local stack's): C2 for methods called tens of
#: thousands of times, not thousands (HotSpot's Tier4 thresholds are 5,000/600/15,000), as a
#: local driver's. Each executor loads ~17,000 classes and deserializes its tasks, and with the
#: defaults C2 compiled that start-up code in both JVMs (15-18 of their ~30 CPU seconds on 1M
#: records) while their first batches ran. Thresholds three to four times these
#: (60,000/20,000/90,000) left the per-record path longer in C1's profiling tier: over 8 paired
#: rounds on 1M records these kept 0.90x local[2]'s events/s after the first commit against
#: 0.80x (ahead in 7 of 8 rounds), and 0.74x against 0.70x end to end, within the rounds'
#: spread (docs/benchmarks.md, 2026-11-27; measured on 1M only). C1's thresholds stay HotSpot's:
#: raising them too, as a local driver's are, was slower (2026-11-26, 3M: 0.69x against 0.76x).
STACK_EXECUTOR_JIT_OPTIONS = (
    "-XX:Tier4InvocationThreshold=20000",
    "-XX:Tier4MinInvocationThreshold=5000",
    "-XX:Tier4CompileThreshold=30000",
)


_GC_FLAG = re.compile(r"-XX:\+Use\w*GC\b")


def is_local(master: str) -> bool:
    """Whether ``master`` runs executors inside the driver JVM (``local``, ``local[N]``...)."""
    return master == "local" or master.startswith("local[")


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
    if _on_loopback(master):
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


def gc_option(master: str) -> str:
    """The driver JVM's garbage collector: a throughput collector, not the default G1.

    A micro-batch lasts seconds, so pauses of tens of milliseconds do not matter while every
    CPU-second does. G1's concurrent work and write barriers made a 2M-record run ~15% slower
    on a 2-core machine (docs/benchmarks.md); the serial collector runs the same batches in as
    little CPU and the smallest footprint when the executors share the driver's few cores, the
    parallel collector when there are more cores or the driver only plans (a cluster).
    """
    if is_local(master) and (os.cpu_count() or 1) <= 2:
        return "-XX:+UseSerialGC"
    return "-XX:+UseParallelGC"


def initial_heap(driver_memory: str) -> str:
    """The local driver's heap at its full size from the start.

    The JVM starts with 1/64 of the machine's memory and the serial collector grows the heap
    only when a full collection leaves too little free: the young generation stayed a third
    of ~375 MB, so a 500k-record batch ran ~20 young collections and a full one every ~1.5 s,
    all stopping the tasks. At full size, a 2M-record run took 0.92x the CPU per record and
    1.14x the events/s (docs/benchmarks.md). A user's own ``-Xms`` comes later and wins.
    """
    return f"-Xms{driver_memory}"


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
    if master.startswith("local") or _on_loopback(master):
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


def _shares_few_cores(master: str) -> bool:
    """Whether a cluster's driver and executors share this machine's few cores: a master on
    the loopback address (the local stack) on a machine of two cores or fewer, where the
    stack's JIT settings were measured."""
    return _on_loopback(master) and (os.cpu_count() or 1) <= 2


def _on_loopback(master: str) -> bool:
    """Whether a ``spark://`` master is on this machine's loopback address."""
    from urllib.parse import urlsplit

    if not master.startswith("spark://"):
        return False
    hosts = [urlsplit(f"spark://{h}").hostname for h in master[len("spark://") :].split(",")]
    return all(h in ("127.0.0.1", "localhost", "::1") for h in hosts)


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
