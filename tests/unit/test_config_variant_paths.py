"""Paths into a variant column in the config: ``route.field: payload:user.id`` parsed and
read as Spark's JSON path; ``partition_by`` derives a column of a path; ``sort_by`` refuses
them with the derive to write instead."""

from __future__ import annotations

from typing import Any

import pytest

from frazil.config import parse_config
from frazil.config.partitioning import PartitionField
from frazil.config.routing import StaticRoute
from frazil.config.variant_paths import VariantPath, parse_variant_path
from frazil.errors import ConfigError
from frazil.transform.chain import partition_paths
from frazil.transform.check import column_problems, route_root


@pytest.mark.parametrize(
    ("text", "column", "json_path"),
    [
        ("payload:country", "payload", "$.country"),
        ("payload:user.id", "payload", "$.user.id"),
        ("payload:items[0].sku", "payload", "$.items[0].sku"),
        ("payload:['a key'].x", "payload", "$['a key'].x"),
        ("payload:[2]", "payload", "$[2]"),
        ("event.doc:kind", "event.doc", "$.kind"),
    ],
)
def test_variant_paths_read_as_json_paths(text: str, column: str, json_path: str) -> None:
    parsed = parse_variant_path(text)
    assert (parsed.column, parsed.json_path, str(parsed)) == (column, json_path, text)


@pytest.mark.parametrize(
    "text", ["payload:", ":x", "payload:.x", "payload:a..b", "payload:a b", "pay load:x", "p:[x]"]
)
def test_what_is_not_a_variant_path(text: str) -> None:
    with pytest.raises(ValueError, match="is not a variant path"):
        parse_variant_path(text)


def _pipeline(**overrides: Any) -> dict[str, Any]:
    return {"name": "hooks", "topics": ["hooks"], "variant": "payload", **overrides}


def test_route_field_takes_a_variant_path() -> None:
    route = {"field": "payload:user.country", "tables": {"DE": "db.de"}, "default": "skip"}
    (pipeline,) = parse_config({"pipelines": [_pipeline(route=route)]}).pipelines
    assert isinstance(pipeline.route, StaticRoute)
    assert pipeline.route.field == "payload:user.country"
    assert route_root(pipeline.route.field) == "payload"
    assert column_problems(pipeline, ["payload"], index=0) == []
    assert column_problems(pipeline, ["doc"], index=0) == [
        (
            "pipelines[0].route.field",
            "column 'payload' is not in the records after decoding and transforms (columns: doc)",
        )
    ]


def test_route_field_with_a_malformed_variant_path() -> None:
    route = {"field": "payload:user..x", "table": "db.t_{value}"}
    with pytest.raises(ConfigError) as info:
        parse_config({"pipelines": [_pipeline(route=route)]})
    assert info.value.problems == [
        (
            "pipelines[0].route.field",
            "'payload:user..x' is not a variant path: write the variant column, ':' and the "
            "path, e.g. payload:user.id, payload:items[0].sku or payload:['a key']",
        )
    ]


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("payload:country",
         PartitionField("identity", "payload_country", None,
                        "try_variant_get(payload, '$.country', 'string')", "payload:country")),
        ("days(payload:event.at::timestamp)",
         PartitionField("days", "payload_event_at", None,
                        "try_variant_get(payload, '$.event.at', 'timestamp')", "payload:event.at")),
        ("bucket(8, payload:user.id::bigint)",
         PartitionField("bucket", "payload_user_id", 8,
                        "try_variant_get(payload, '$.user.id', 'bigint')", "payload:user.id")),
        ("truncate(2, payload:['a key'][0])",
         PartitionField("truncate", "payload_a_key_0", 2,
                        "try_variant_get(payload, '$[\\'a key\\'][0]', 'string')",
                        "payload:['a key'][0]")),
    ],
)  # fmt: skip
def test_partition_by_a_variant_path_derives_a_column(entry: str, field: PartitionField) -> None:
    (pipeline,) = parse_config(
        {"pipelines": [_pipeline(table="db.hooks", partition_by=[entry])]}
    ).pipelines
    assert pipeline.defaults.partition_fields() == [field]
    assert field.reads == "payload"
    assert partition_paths(pipeline) == [("partition_by[0]", field)]


def test_a_malformed_partition_path_says_how_to_write_one() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"pipelines": [_pipeline(table="db.t", partition_by=["payload:a..b"])]})
    assert info.value.problems == [
        (
            "pipelines[0].partition_by[0]",
            "cannot parse partition transform 'payload:a..b': a path into a variant is written "
            "column:path, with the type it is read as after '::' (string unless given), e.g. "
            "payload:geo.country, days(payload:at::timestamp), bucket(16, payload:user.id)",
        )
    ]


@pytest.mark.parametrize(
    ("key", "entry", "written", "leaf", "verb"),
    [("sort_by", "payload:ts desc", "payload:ts", "ts", "sort")],
)
def test_sort_by_refuses_a_variant_path(
    key: str, entry: str, written: str, leaf: str, verb: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"pipelines": [_pipeline(table="db.hooks", **{key: [entry]})]})
    assert info.value.problems == [
        (
            f"pipelines[0].{key}[0]",
            f"{key} names table columns, and {written!r} is a path into a variant, which "
            f"Iceberg does not {verb} by: derive it into a column first (transforms: "
            f'[{{derive: {{{leaf}: "{written}::string"}}}}]) and name that column',
        )
    ]


def test_variant_path_str() -> None:
    assert str(VariantPath("doc", "a[1]")) == "doc:a[1]"


def test_the_rest_column_is_known_to_the_static_checks() -> None:
    """With ``schema`` and ``variant``, the variant column of the rest is one of the columns a
    route and the transforms may name."""
    from frazil.transform.check import config_problems

    data = {"pipelines": [{
        "name": "p", "topics": ["t"], "schema": {"id": "bigint"}, "variant": "rest",
        "route": {"field": "rest:kind", "tables": {"a": "db.a"}, "default": "db.b"},
        "transforms": [{"derive": {"city": "try_variant_get(rest, '$.geo.city', 'string')"}}],
        "partition_by": ["city"],
    }]}  # fmt: skip
    (pipeline,) = parse_config(data, checks=config_problems).pipelines
    assert pipeline.value.variant == "rest"


def test_partition_by_a_path_of_the_rest_without_transforms() -> None:
    """The loader's own partition check (without transforms) knows the rest column too."""
    data = {"pipelines": [{
        "name": "p", "topics": ["t"], "table": "db.t", "schema": {"id": "bigint"},
        "variant": "rest", "partition_by": ["days(rest:at::timestamp)"],
    }]}  # fmt: skip
    (pipeline,) = parse_config(data).pipelines
    assert [f.column for f in pipeline.defaults.partition_fields()] == ["rest_at"]
