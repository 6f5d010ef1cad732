"""A pipeline's regular expressions checked the way Spark runs them.

The config is validated without a JVM, with Python's ``re``; Spark then runs the same
patterns (``rlike``, ``regexp_extract``, the Kafka source's ``subscribePattern``) with Java's
``java.util.regex``. The two differ on some syntax: Python's named groups ``(?P<name>…)``
and backreferences ``(?P=name)`` are errors in Java. :func:`check_java_patterns` compiles
each pattern in the JVM when the pipeline starts, so such a pattern stops it with the config
key instead of failing inside the first batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil.config.pipeline import PipelineConfig
from frazil.config.routing import StaticRoute, TopicRoute, is_regex_key
from frazil.errors import ConfigError
from frazil.jvm.classes import java_class

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def pipeline_patterns(pipeline: PipelineConfig) -> list[tuple[str, str]]:
    """Each regular expression of the pipeline, with its config key."""
    found: list[tuple[str, str]] = []
    if pipeline.topic_pattern is not None:
        found.append(("topic_pattern", pipeline.topic_pattern))
    route = pipeline.route
    if isinstance(route, StaticRoute):
        found.extend(
            (f"route.tables[{key!r}]", key[1:-1]) for key in route.tables if is_regex_key(key)
        )
    elif isinstance(route, TopicRoute):
        found.append(("route.topic", route.topic))
    return found


def check_java_patterns(spark: SparkSession, pipeline: PipelineConfig) -> None:
    """Compile the pipeline's regular expressions with ``java.util.regex``.

    Raises:
        ConfigError: A pattern Python accepted is not a valid Java regular expression.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    for key, pattern in pipeline_patterns(pipeline):
        try:
            java_class(jvm, "java.util.regex.Pattern").compile(pattern)
        except Exception as exc:  # py4j wraps java.util.regex.PatternSyntaxException
            detail = str(exc).split("PatternSyntaxException:", 1)[-1].strip().splitlines()[0]
            raise ConfigError(
                f"pipeline {pipeline.name!r}: {key}: {pattern!r} is not a valid Java regular "
                f"expression, which Spark runs it as ({detail}); Java writes named groups "
                "as (?<name>...)"
            ) from None
