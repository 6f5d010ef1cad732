"""Which regular expressions of a pipeline are checked as Java patterns, under which key."""

from __future__ import annotations

from frazil.config import PipelineConfig, parse_config
from frazil.route.patterns import pipeline_patterns

_SCHEMA = {"id": "string", "kind": "string"}


def _pipeline(**fields: object) -> PipelineConfig:
    base = {"name": "events", "schema": _SCHEMA, **fields}
    return parse_config({"pipelines": [base]}).pipelines[0]


def test_topic_pattern_and_static_regex_keys_are_listed_with_their_keys() -> None:
    pipeline = _pipeline(
        topic_pattern=r"events\..*",
        route={"field": "kind", "tables": {"a": "db.a", "/b+|c/": "db.bc"}, "default": "skip"},
    )
    assert pipeline_patterns(pipeline) == [
        ("topic_pattern", r"events\..*"),
        ("route.tables['/b+|c/']", "b+|c"),
    ]


def test_topic_route_pattern_is_listed() -> None:
    pipeline = _pipeline(
        topics=["events.20240101"], route={"topic": r"events\.(\d{8})", "table": "db.events"}
    )
    assert pipeline_patterns(pipeline) == [("route.topic", r"events\.(\d{8})")]


def test_a_plain_table_has_no_patterns() -> None:
    assert pipeline_patterns(_pipeline(topics=["events"], table="db.events")) == []
