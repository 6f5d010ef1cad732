"""Which routes send a record to one table at most (the routed job's row per record)."""

from __future__ import annotations

import pytest

from frazil.config import PipelineConfig, parse_config
from frazil.route.rules import build_route

_SCHEMA = {"id": "string", "kind": "string"}


def _pipeline(**fields: object) -> PipelineConfig:
    base = {"name": "events", "topics": ["events"], "schema": _SCHEMA, **fields}
    return parse_config({"pipelines": [base]}).pipelines[0]


@pytest.mark.parametrize(
    ("fields", "one_each"),
    [
        ({"table": "db.events"}, True),
        ({"route": {"field": "kind", "table": "db.t_{value}"}}, True),
        ({"route": {"field": "kind", "table": "db.t_{value}", "default": "db.other"}}, True),
        ({"route": {"field": "kind", "tables": {"a": "db.a", "/b|c/": "db.bc"}}}, True),
        ({"route": {"field": "kind", "tables": {"a": ["db.a", "db.a"]}}}, True),
        ({"route": {"field": "kind", "tables": {"a": "db.a", "b": ["db.b", "db.all"]}}}, False),
        ({"route": {"topic": r"events", "table": "db.events"}}, True),
    ],
)
def test_routes_sending_a_record_to_one_table_at_most(
    fields: dict[str, object], one_each: bool
) -> None:
    assert build_route(_pipeline(**fields)).one_each is one_each
