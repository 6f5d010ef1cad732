"""Patterns Python accepts but Java (which Spark runs them with) does not stop the start."""

from __future__ import annotations

from typing import Any

import pytest

from frazil.config import parse_config
from frazil.errors import ConfigError
from frazil.route.patterns import check_java_patterns


def _pipeline(route: dict[str, Any]) -> Any:
    return parse_config(
        {
            "pipelines": [
                {
                    "name": "events",
                    "topics": ["events.20240101"],
                    "schema": {"id": "string", "kind": "string"},
                    "route": route,
                }
            ]
        }
    ).pipelines[0]


def test_python_named_group_is_refused_with_its_key(spark: Any) -> None:
    pipeline = _pipeline({"topic": r"events\.(?P<day>\d{8})", "table": "db.events"})
    with pytest.raises(ConfigError) as caught:
        check_java_patterns(spark, pipeline)
    message = str(caught.value)
    assert message.startswith("pipeline 'events': route.topic: ")
    assert r"'events\\.(?P<day>\\d{8})' is not a valid Java regular expression" in message
    assert "(?<name>...)" in message


def test_java_compatible_patterns_pass(spark: Any) -> None:
    check_java_patterns(spark, _pipeline({"topic": r"events\.(\d{8})", "table": "db.events"}))
    static = {"field": "kind", "tables": {"/(?i)click.*/": "db.clicks"}, "default": "skip"}
    check_java_patterns(spark, _pipeline(static))
