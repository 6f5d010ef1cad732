"""The variant paths a pipeline's config names, for ``frazil plan``'s sampled check."""

from __future__ import annotations

from frazil.config.loader import parse_config
from frazil.engine.path_check import config_paths


def test_paths_named_by_the_route_and_the_transforms_each_once() -> None:
    pipeline = parse_config(
        {"pipelines": [{
            "name": "p", "topics": ["t"], "variant": "doc",
            "route": {"field": "doc:geo['a key'][0]", "table": "db.t_{value}"},
            "transforms": [
                {"derive": {"cc": "doc:geo.cc::string", "n": "doc:items[0].n::int + 1",
                            "z": "TRY_VARIANT_GET(doc, '$.zip', 'string')",
                            "other": "other_doc:x::string", "again": "doc:geo.cc::string"}},
                {"rename": {"cc": "country"}},
                {"filter": "doc:kind::string = 'x' AND variant_get(doc, '$.k', 'int') > 1"},
            ],
        }]}
    ).pipelines[0]  # fmt: skip
    assert config_paths(pipeline) == [
        ("route.field", "$.geo['a key'][0]"),
        ("transforms[0].derive.cc", "$.geo.cc"),
        ("transforms[0].derive.n", "$.items[0].n"),
        ("transforms[0].derive.z", "$.zip"),
        ("transforms[2].filter", "$.kind"),
        ("transforms[2].filter", "$.k"),
    ]


def test_no_variant_column_no_paths() -> None:
    pipeline = parse_config(
        {"pipelines": [{"name": "p", "topics": ["t"], "table": "db.t",
                        "transforms": [{"derive": {"a": "doc:x::string"}}]}]}
    ).pipelines[0]  # fmt: skip
    assert config_paths(pipeline) == []
