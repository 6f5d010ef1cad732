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
from frazil.errors import ConfigError, PipelineError


def test_frazil_errors_are_printed_as_they_are_written() -> None:
    message = "pipelines[0].topics: topic(s) x do not exist at 127.0.0.1:9092"
    assert describe(PipelineError(message)) == message
    assert describe(ConfigError("c.yaml: 1 problem")) == "c.yaml: 1 problem"


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
