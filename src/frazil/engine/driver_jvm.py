"""The driver's JVM process: started before the SparkSession attaches to it (its output to a
log file), stopped again when a check made beside its start fails.

The REST catalog's check (:class:`RestCheck`) runs on a thread while the JVM starts: the check
is mostly importing PyIceberg (~0.6 s), the start mostly waiting for the JVM.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from pathlib import Path
from typing import IO, Any

from frazil.config.models import FrazilConfig

log = logging.getLogger(__name__)


def launch_jvm(settings: dict[str, str], log_file: Path | None) -> bool:
    """Start the driver JVM with its own output (the launcher's "Using incubator modules"
    line, anything printed outside log4j) going to the log file next to log4j's, unless
    ``--verbose`` (then to the terminal); the session then attaches to it. Nothing to do when
    a JVM runs already.

    The JVM starts with the command Spark's launcher built for the same settings before
    (:mod:`~frazil.engine.driver_command`), else through Spark's scripts.

    Returns:
        Whether a JVM was started here (else the session starts it, or one runs already).
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return False
    to_terminal = log_file is None or bool(os.environ.get("FRAZIL_VERBOSE"))
    with contextlib.ExitStack() as stack:
        output = None
        if log_file is not None and not to_terminal:
            output = stack.enter_context(log_file.with_name("jvm.log").open("ab"))
        gateway = _start_kept(settings, output, log_file)
        if gateway is None:
            if to_terminal:
                return False  # the session starts it, its output on the terminal
            conf = SparkConf()
            for key, value in settings.items():
                conf.set(key, value)
            # The same command line the session would start, its stderr to the file.
            gateway = launch_gateway(conf, popen_kwargs={"stderr": output})  # type: ignore[no-untyped-call]
    SparkContext._ensure_initialized(gateway=gateway)
    return True


def _start_kept(
    settings: dict[str, str], output: IO[bytes] | None, log_file: Path | None = None
) -> Any | None:
    """The driver JVM started with the command Spark's launcher built for these settings
    (kept between runs: :mod:`~frazil.engine.driver_command`); None where it cannot be, or
    did not start (then PySpark starts it through Spark's scripts).

    The run's token and the log file (under the pipeline's state folder) are its values per
    run: pipelines on the machine with the same driver settings share the command, so a new
    one's first run does not start Spark's launcher either.
    """
    from frazil.engine.driver_command import DriverCommand, start_gateway
    from frazil.progress.fence import run_token_in

    home = os.environ.get("SPARK_HOME")
    if home is None or not DriverCommand.usable(Path(home)):
        return None
    token = run_token_in(settings.get("spark.driver.extraJavaOptions", ""))
    per_run = tuple(value for value in (token, log_file and str(log_file)) if value)
    command = DriverCommand(Path(home), settings, per_run=per_run)
    try:
        return start_gateway(command, stderr=output)
    except Exception as exc:  # the usual start reports what is wrong, in Spark's words
        log.debug("could not start the driver with its kept command: %s", exc)
        command.forget()
        return None


class RestCheck:
    """The REST catalog opened with PyIceberg (:func:`open_rest_catalog`) on a thread of its
    own, while the driver JVM starts: the check is mostly importing PyIceberg (~0.6 s), the
    start mostly waiting. A token or credential the catalog refuses is named by its key in
    seconds; Spark would meet it at the first query, as a Java stack.

    The thread is a daemon: a catalog that accepts the connection and never answers does not
    keep the process from exiting (Ctrl-C).
    """

    def __init__(self, config: FrazilConfig) -> None:
        self._config = config
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="frazil-rest-check", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from frazil.config.catalog_clients import open_rest_catalog

        try:
            open_rest_catalog(self._config)
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def result(self) -> None:
        """Wait for the check; raise what it raised (a :class:`ServiceError` for a refusal)."""
        self._thread.join()
        if self._error is not None:
            raise self._error


def stop_jvm() -> None:
    """Stop the driver JVM :func:`launch_jvm` started, before any session used it. Best
    effort: the error that made the run stop is what the caller reports."""
    from pyspark import SparkContext

    gateway: Any = SparkContext._gateway
    SparkContext._gateway = None
    SparkContext._jvm = None
    if gateway is None:
        return
    try:
        gateway.shutdown()
    except Exception as exc:
        log.debug("could not shut the gateway down: %s", exc)
    try:
        # The JVM exits when its stdin closes; a kill if it does not.
        gateway.proc.stdin.close()
        gateway.proc.wait(10)
    except Exception:
        gateway.proc.kill()
