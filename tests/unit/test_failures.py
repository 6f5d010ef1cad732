"""The CLI's error boundary: each kind of exception becomes a line or two naming what and where.

Spark's and Py4J's exceptions need a JVM; they are covered by tests/integration/test_cli_errors.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError as LibKafkaError
from confluent_kafka import KafkaException
from confluent_kafka.schema_registry.error import SchemaRegistryError

from frazil.cli.failures import _java_text, _strip_class, describe
from frazil.errors import ConfigError, PipelineError, PipelineFailed, short_quotes


def test_frazil_errors_are_printed_as_they_are_written() -> None:
    message = "pipelines[0].topics: topic(s) x do not exist at 127.0.0.1:9092"
    assert describe(PipelineError(message)) == message
    assert describe(ConfigError("c.yaml: 1 problem")) == "c.yaml: 1 problem"


def test_a_failed_batch_names_its_pipeline_then_its_cause() -> None:
    # Spark reports a failed foreachBatch as "An exception was raised by the Python Proxy",
    # the cause a line deep in a traceback: the runner raises the batch's own exception.
    try:
        try:
            raise KafkaException(LibKafkaError(LibKafkaError._TRANSPORT, "Broker down"))
        except KafkaException as cause:
            raise PipelineFailed("iot", cause) from cause
    except PipelineFailed as exc:
        assert describe(exc) == "pipeline 'iot' failed: Kafka: Broker down (_TRANSPORT)"
        # Its own text keeps the cause's first line, for callers of run() and logs.
        assert str(exc).startswith("pipeline 'iot' failed: ")
        assert "Broker down" in str(exc)


def test_a_kafka_exception_gives_its_reason_and_code_not_its_repr() -> None:
    error = LibKafkaError(LibKafkaError._TRANSPORT, "Failed to get metadata: Broker down")
    assert (
        describe(KafkaException(error)) == "Kafka: Failed to get metadata: Broker down (_TRANSPORT)"
    )


def test_a_registry_error_says_it_comes_from_the_registry() -> None:
    text = describe(SchemaRegistryError(503, 50301, "unavailable"))
    assert text == "schema registry: unavailable (HTTP status code 503, SR code 50301)"


def test_a_missing_file_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(OSError) as caught:
        missing.read_text()
    assert describe(caught.value) == f"[Errno 2] No such file or directory: '{missing}'"


def test_anything_else_is_one_line_that_points_at_verbose() -> None:
    text = describe(ValueError("bad thing\nsecond line\n  third"))
    assert text == "ValueError: bad thing (an unexpected error: `frazil --verbose ...` shows where)"
    assert describe(TimeoutError()).startswith("TimeoutError: TimeoutError ")


def test_a_java_line_keeps_spark_conditions_and_short_class_names() -> None:
    spark = (
        "org.apache.spark.sql.AnalysisException: [TABLE_OR_VIEW_NOT_FOUND] The table or view "
        "`db`.`x` cannot be found."
    )
    assert (
        _strip_class(spark)
        == "[TABLE_OR_VIEW_NOT_FOUND] The table or view `db`.`x` cannot be found."
    )
    kafka = (
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server does not "
        "host this topic-partition."
    )
    assert _strip_class(kafka) == (
        "UnknownTopicOrPartitionException: This server does not host this topic-partition."
    )
    assert _strip_class("no class here: just text") == "no class here: just text"


class _GoneJvmError(Exception):
    """Py4JJavaError's text when the JVM can no longer be asked for the exception."""

    def __str__(self) -> str:
        return (
            "An error occurred while calling o103.sql.\n"
            ": org.apache.spark.sql.AnalysisException: [UNRESOLVED_COLUMN.WITH_SUGGESTION] "
            "A column with name `nope` cannot be resolved. SQLSTATE: 42703; line 1 pos 7;\n"
            "\tat org.apache.spark.sql.errors.QueryCompilationErrors$.x(Q.scala:430)\n"
        )


def test_the_py4j_text_gives_the_jvm_exception_line_when_the_jvm_is_gone() -> None:
    assert _java_text(_GoneJvmError()) == (
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column with name `nope` cannot be resolved. "
        "SQLSTATE: 42703; line 1 pos 7"
    )


def _wide_struct_mismatch() -> str:
    """Spark's message when try_variant_get is given a decoded record instead of its variant
    column: the record's whole expression and struct type, quoted, twice."""
    fields = ", ".join(f"field_{i}" for i in range(40))
    types = ", ".join(f"field_{i}: STRING" for i in range(40))
    expression = f"named_struct({fields}, rest, to_variant_object(from_json(value)))"
    return (
        "org.apache.spark.sql.catalyst.ExtendedAnalysisException: "
        f'[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] Cannot resolve "try_variant_get('
        f'{expression}, $.geo.cc)" due to data type mismatch: The first parameter requires the '
        f'"VARIANT" type, however "{expression}" has the type "STRUCT<{types}>". '
        "SQLSTATE: 42K09;"
    )


def test_long_expressions_in_a_spark_message_are_cut_short_the_sentence_kept() -> None:
    line = _strip_class(_wide_struct_mismatch())

    assert len(line) < 500
    assert line.startswith(
        '[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] Cannot resolve "try_variant_get(named_struct('
        "field_0, field_1,"
    )
    assert '…" due to data type mismatch: The first parameter requires the "VARIANT" type, ' in (
        line
    )
    assert line.endswith('…". SQLSTATE: 42K09')
    assert '"STRUCT<field_0: STRING,' in line


def test_short_quotes_keeps_short_quotes_and_text_outside_quotes() -> None:
    assert short_quotes('requires the "VARIANT" type, not "INT"') == (
        'requires the "VARIANT" type, not "INT"'
    )
    assert short_quotes('a "' + "x" * 100 + '" b', limit=10) == 'a "xxxxxxxxx…" b'
    assert short_quotes('an unclosed "' + "x" * 100) == 'an unclosed "' + "x" * 100


class _SparkError(Exception):
    """A PySpark error as :func:`describe` sees one (no Java exception to ask)."""

    __module__ = "pyspark.errors.exceptions.captured"

    def __init__(self, desc: str) -> None:
        super().__init__(desc)
        self._desc = desc


def test_a_pyspark_error_is_its_first_line_with_long_quotes_cut() -> None:
    desc = _wide_struct_mismatch().split(": ", 1)[1] + "\n'Project [unresolvedalias(...)]\n"

    text = describe(_SparkError(desc))

    assert text.startswith("[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] Cannot resolve")
    assert text.endswith("SQLSTATE: 42K09") and "\n" not in text and len(text) < 500


def test_a_driver_jvm_that_is_gone_is_named_not_a_bare_connection_error() -> None:
    """py4j connecting again to a JVM that was killed raises the socket's own error."""
    import socket

    from py4j.clientserver import ClientServer, JavaParameters, PythonParameters

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    gateway = ClientServer(JavaParameters(port=port), PythonParameters(port=0))
    try:
        with pytest.raises(ConnectionRefusedError) as caught:
            gateway.jvm.java.lang.System.currentTimeMillis()
    finally:
        gateway.shutdown()
    assert describe(caught.value) == (
        "the Spark driver (JVM) stopped answering: [Errno 111] Connection refused (did its "
        "process exit: killed, or out of memory?)"
    )
    # The same error raised elsewhere is not taken for the driver's.
    assert describe(ConnectionRefusedError(111, "Connection refused")).startswith(
        "ConnectionRefusedError: "
    )
