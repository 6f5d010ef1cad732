"""No stack trace without --verbose: each error path of the `frazil` command, run as a user
runs it (the entry point in a subprocess) against the session's broker, prints a line or two
that say what and where.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from frazil.errors import PipelineFailed
from frazil.generate.producer import ensure_topic, produce_events
from tests.conftest import free_ports
from tests.integration.helpers import drain, in_one_process, payments_pipeline

pytestmark = pytest.mark.integration

FRAZIL = str(Path(sys.executable).parent / "frazil")


def frazil(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FRAZIL, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "80"},
    )


def side_by_side(*commands: list[str], config: Path) -> list[subprocess.CompletedProcess[str]]:
    """``frazil COMMAND -c CONFIG ...`` for each command, all at once, each in its own process.

    CI time: commands that wait for Kafka's answer (a timeout when it is down) wait together.
    """
    with ThreadPoolExecutor(len(commands)) as pool:
        return list(pool.map(lambda c: frazil(c[0], "-c", str(config), *c[1:]), commands))


def short_error(result: subprocess.CompletedProcess[str], most_lines: int = 3) -> str:
    """The command failed with a short message and no stack trace; returns its stderr."""
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "\tat " not in result.stderr, result.stderr[-3000:]  # no Java stack either
    lines = result.stderr.strip().splitlines()
    assert 1 <= len(lines) <= most_lines, result.stderr[-3000:]
    assert lines[0].startswith("error: "), result.stderr
    return result.stderr


def write_config(
    path: Path, lake_dir: Path, bootstrap: str, pipelines: list[dict[str, Any]], **top: Any
) -> Path:
    data: dict[str, Any] = {
        "catalog": {"warehouse": str(lake_dir / "warehouse")},
        "kafka": {"bootstrap_servers": bootstrap},
        "state_dir": str(path.parent / "state"),
        "spark": {"driver_memory": "1g"},
        "pipelines": pipelines,
    }
    data.update(top)
    path.write_text(yaml.safe_dump(data))
    return path


def test_sql_with_a_wrong_column_or_table_prints_sparks_first_line(
    lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "c.yaml",
        lake_dir,
        kafka_bootstrap,
        [payments_pipeline(f"s_{unique}", f"s-{unique}", f"db.s_{unique}")],
    )

    # All in one process (one Spark driver JVM: CI time), each with its own exit and stderr;
    # --verbose last (it sets the process's FRAZIL_VERBOSE for the commands after it).
    column_done, table_done, verbose = in_one_process(
        ["sql", "-c", str(config), "SELECT nope FROM VALUES (1) AS t(a)"],
        ["sql", "-c", str(config), f"SELECT * FROM db.none_{unique}"],
        ["--verbose", "sql", "-c", str(config), "SELECT nope FROM VALUES (1) AS t(a)"],
        env={"COLUMNS": "80"},
    )
    column, table = short_error(column_done), short_error(table_done)

    assert "[UNRESOLVED_COLUMN.WITH_SUGGESTION]" in column and "`nope`" in column
    assert "line 1 pos 7" in column
    assert "[TABLE_OR_VIEW_NOT_FOUND]" in table and f"`none_{unique}`" in table
    # --verbose: the stack trace, then the same line.
    assert verbose.returncode == 1, verbose.stderr[-3000:]
    assert "Traceback" in verbose.stderr, verbose.stderr[-3000:]
    assert column.strip() in verbose.stderr, verbose.stderr[-3000:]


def test_plan_on_a_missing_topic_fails_as_run_does(
    lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic = f"absent-{unique}"
    config = write_config(
        tmp_path / "c.yaml",
        lake_dir,
        kafka_bootstrap,
        [payments_pipeline(f"m_{unique}", topic, f"db.m_{unique}")],
    )

    planned, ran = (
        short_error(done)
        for done in side_by_side(["plan"], ["run", "--until-caught-up"], config=config)
    )

    expected = (
        f"error: pipelines[0].topics: topic(s) {topic} do not exist at {kafka_bootstrap} "
        "(fix the name, or create them in Kafka; `frazil generate` fills a topic with sample "
        "payments)"
    )
    assert planned.strip() == expected
    assert ran.strip() == expected


def test_plan_with_kafka_down_fails_as_run_does(
    lake_dir: Path, unique: str, tmp_path: Path
) -> None:
    (port,) = free_ports(1)
    down = f"127.0.0.1:{port}"
    config = write_config(
        tmp_path / "c.yaml",
        lake_dir,
        down,
        [payments_pipeline(f"d_{unique}", f"d-{unique}", f"db.d_{unique}")],
    )

    planned, ran = (
        short_error(done)
        for done in side_by_side(["plan"], ["run", "--until-caught-up"], config=config)
    )

    assert planned.startswith(f"error: Kafka does not answer at {down} (kafka.bootstrap_servers)")
    assert planned == ran


def test_plan_with_the_registry_down_fails_before_spark_starts(
    lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic = f"reg-{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    pipeline = {"name": f"r_{unique}", "topics": [topic], "table": f"db.r_{unique}"}
    config = write_config(
        tmp_path / "c.yaml",
        lake_dir,
        kafka_bootstrap,
        [{**pipeline, "format": "avro"}],
        schema_registry={"url": url, "retries": 2, "timeout": "2s"},
    )

    planned = short_error(frazil("plan", "-c", str(config)))

    assert planned.startswith(
        f"error: schema registry at {url} did not answer the request for subject "
        f"'{topic}-value' after 3 attempt(s)"
    )


def test_generate_with_no_broker_prints_one_line_not_librdkafkas_log() -> None:
    (port,) = free_ports(1)

    result = frazil("generate", "-t", "x", "-n", "10", "-b", f"127.0.0.1:{port}", timeout=120)

    stderr = short_error(result, most_lines=2)
    assert stderr.startswith(
        f"error: Kafka does not answer at 127.0.0.1:{port} (--bootstrap-servers): Connect to"
    )
    assert "Connection refused" in stderr
    assert "rdkafka" not in stderr and "%3|" not in stderr


def test_ui_on_a_taken_port_says_which_port(
    lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "c.yaml",
        lake_dir,
        kafka_bootstrap,
        [payments_pipeline(f"u_{unique}", f"u-{unique}", f"db.u_{unique}")],
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        result = frazil("ui", "-c", str(config), "--port", str(port), timeout=120)

    assert short_error(result, most_lines=1).strip() == (
        f"error: cannot serve the status page on 127.0.0.1:{port}: Address already in use "
        "(choose another port)"
    )


class _Run:
    """A `frazil run` subprocess whose stderr lines are collected as they come."""

    def __init__(self, config: Path) -> None:
        self.proc = subprocess.Popen(
            [FRAZIL, "run", "-c", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return True
            if self.proc.poll() is not None:
                self._reader.join(5)
                return any(text in line for line in self.lines)
            time.sleep(0.05)
        return False

    def output(self) -> str:
        self._reader.join(10)
        return "".join(self.lines)


def test_a_first_ctrl_c_says_what_it_does_and_a_second_stops_at_once_with_what_was_committed(
    lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, table, name = f"int-{unique}", f"db.int_{unique}", f"i_{unique}"
    produce_events(kafka_bootstrap, topic, 1_000, progress=False, seed=1)
    # Small batches, so that a batch is in flight when the signals come.
    pipeline = payments_pipeline(name, topic, table, max_offsets_per_trigger=20_000)
    config = write_config(tmp_path / "c.yaml", lake_dir, kafka_bootstrap, [pipeline])
    run = _Run(config)
    try:
        assert run.wait_for("batch 0: 1,000 records", timeout=600), run.output()
        produce_events(kafka_bootstrap, topic, 200_000, progress=False, seed=2)
        time.sleep(2)  # the next batch is being written

        run.proc.send_signal(signal.SIGINT)
        assert run.wait_for("stopping after the batch in flight commits", timeout=30), run.output()
        run.proc.send_signal(signal.SIGINT)
        code = run.proc.wait(timeout=120)
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait(30)

    output = run.output()
    assert "Traceback" not in output and "\tat " not in output, output
    assert code == 130, output
    lines = output.splitlines()
    assert "stopping after the batch in flight commits (Ctrl-C again to stop now)" in lines
    assert lines[-3:-1] == [
        "stopped now: the next run reads the batch in flight again",
        "committed by this run:",
    ], output
    assert re.fullmatch(rf"  {table}: [\d,]+ records in \d+ batch(es)? \(total [\d,]+\)", lines[-1])


def test_a_jvm_error_keeps_the_java_exceptions_line_and_its_root_cause(spark: Any) -> None:
    # PySpark turns Py4J's errors into its own (NumberFormatException, UnknownException…);
    # either way the Java exception's chain is what the message comes from.
    from frazil.cli.failures import describe

    jvm = spark.sparkContext._jvm
    future = jvm.java.util.concurrent.CompletableFuture
    with pytest.raises(Exception) as parse:
        jvm.java.lang.Integer.parseInt("x")
    with pytest.raises(Exception) as wrapped:
        future.failedFuture(jvm.java.lang.IllegalStateException("boom")).get()
    with pytest.raises(Exception) as caused:
        inner = jvm.java.lang.IllegalArgumentException("no such partition")
        future.failedFuture(jvm.java.lang.RuntimeException("the write failed", inner)).join()
    with pytest.raises(Exception) as analysis:
        spark.sql("SELECT nope FROM VALUES (1) AS t(a)")

    assert describe(parse.value) == 'NumberFormatException: For input string: "x"'
    # A wrapper (ExecutionException) gives way to the exception it wraps.
    assert describe(wrapped.value) == "IllegalStateException: boom"
    assert describe(caused.value) == (
        "RuntimeException: the write failed\n"
        "  caused by: IllegalArgumentException: no such partition"
    )
    analysed = describe(analysis.value)
    assert analysed.startswith("[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column")
    assert analysed.endswith("SQLSTATE: 42703; line 1 pos 7") and "\n" not in analysed


def test_a_batch_failing_in_spark_names_the_pipeline_and_the_root_cause(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    # With dead letters on, the batch's jobs run from frazil's Python callback: Spark reports
    # their failure as "An exception was raised by the Python Proxy", the cause a line deep
    # in the Python traceback it quotes. The run raises the batch's own exception instead.
    from frazil.cli.failures import describe

    topic = f"badprop-{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    produce_events(kafka_bootstrap, topic, 50)
    pipeline = payments_pipeline(
        f"bp_{unique}",
        topic,
        f"db.bp_{unique}",
        errors={"tolerance": "all", "dlq_table": f"db.bp_{unique}_dlq"},
    )
    kafka = {"bootstrap_servers": kafka_bootstrap, "properties": {"max.poll.records": "abc"}}
    config = write_config(tmp_path / "c.yaml", lake_dir, kafka_bootstrap, [pipeline], kafka=kafka)

    with pytest.raises(PipelineFailed) as failed:
        drain(spark, config)

    text = describe(failed.value)
    assert text.startswith(f"pipeline 'bp_{unique}' failed: "), text
    assert "Invalid value abc for configuration max.poll.records" in text, text
    assert "Python Proxy" not in text and "Traceback" not in text, text


def test_under_verbose_a_spark_error_after_the_transforms_check_is_sparks_own(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `frazil --verbose` leaves PySpark's query-context loggers alone; the transforms' check
    # (sql.quiet) then created them as plain loggers, and PySpark's logging of the next
    # analysis error (with file=, line=) raised TypeError in place of the error itself.
    import logging

    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    from frazil.cli.failures import describe
    from frazil.transform import sql

    names = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")
    manager = logging.Logger.manager
    others = {k: v for k, v in manager.loggerDict.items() if k not in names}
    monkeypatch.setattr(manager, "loggerDict", others)
    with sql.quiet():
        pass
    record = F.struct(*[F.lit("x").alias(f"field_{i}") for i in range(40)])

    with pytest.raises(AnalysisException) as caught:
        spark.range(1).select(F.try_variant_get(record, "$.a", "string")).collect()

    text = describe(caught.value)
    assert text.startswith('[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] Cannot resolve "'), text
    # The 40 fields' expression and type, quoted by Spark, cut short; the sentence kept.
    assert "…" in text and "due to data type mismatch" in text and len(text) < 500, text
