"""Config of formats: schema sources, keys, the schema registry; exact key paths and reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from frazil.config import parse_config
from frazil.errors import ConfigError

_REGISTRY = {"url": "http://127.0.0.1:8081/apis/ccompat/v7"}


def _pipeline(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {"name": "orders", "topics": ["orders"], "table": "db.orders"}
    base.update(overrides)
    return base


def _problems(data: dict[str, object]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return info.value.problems


@pytest.mark.parametrize(
    ("pipeline", "source"),
    [
        ({}, "inferred"),
        ({"schema": {"id": "string"}}, "declared"),
        ({"schema_file": "orders.schema.json"}, "file"),
        ({"subject": "orders-value"}, "registry"),
        ({"format": "avro"}, "registry"),
        ({"format": "avro", "schema_file": "o.avsc"}, "file"),
        ({"format": "protobuf", "schema_file": "o.proto", "message": "shop.Order"}, "file"),
        ({"format": "protobuf"}, "registry"),
        ({"format": "string"}, "none"),
        ({"format": "bytes"}, "none"),
    ],
)
def test_where_the_value_schema_comes_from(pipeline: dict[str, object], source: str) -> None:
    config = parse_config(
        {"schema_registry": _REGISTRY, "pipelines": [_pipeline(**pipeline)]}, base_dir=Path("/x")
    )
    assert config.pipelines[0].value.source() == source


def test_registry_subjects_default_to_the_topic_name_strategy() -> None:
    config = parse_config(
        {"schema_registry": _REGISTRY, "pipelines": [_pipeline(format="avro", key_format="avro")]}
    )
    pipeline = config.pipelines[0]
    assert pipeline.key is not None
    assert pipeline.value.subject_name(pipeline.topics) == "orders-value"
    assert pipeline.key.subject_name(pipeline.topics) == "orders-key"
    assert pipeline.key.source() == "registry"


def test_registry_formats_need_a_registry() -> None:
    problems = _problems({"pipelines": [_pipeline(format="avro")]})
    assert problems == [
        (
            "(top level)",
            "pipeline 'orders' reads values through the schema registry (no schema or "
            "schema_file given): set schema_registry.url",
        )
    ]


def test_key_registry_format_needs_a_registry_too() -> None:
    problems = _problems({"pipelines": [_pipeline(key_format="protobuf")]})
    assert problems[0][1].startswith("pipeline 'orders' reads keys through the schema registry")


@pytest.mark.parametrize(
    ("pipeline", "reason"),
    [
        (
            {"format": "avro", "schema": {"id": "string"}},
            "'schema' declares JSON fields; format avro takes 'schema_file' or the schema "
            "registry",
        ),
        (
            {"format": "protobuf", "schema_file": "o.proto"},
            "'message' is required with 'schema_file': the full name of the message the "
            "records hold (e.g. shop.v1.Order)",
        ),
        ({"format": "avro", "message": "x.Y"}, "'message' applies to format protobuf only"),
        ({"format": "string", "schema_file": "x"}, "'schema_file' does not apply to format string"),
        ({"schema": {"a": "int"}, "schema_file": "x.json"},
         "set 'schema' or 'schema_file', not both"),
        ({"key_schema": {"a": "int"}}, "'key_schema' needs 'key_format'"),
        (
            {"key_format": "avro", "key_schema": {"a": "int"}},
            "'key_schema' declares JSON fields; key_format avro takes 'key_schema_file' or "
            "the schema registry",
        ),
        ({"format": "avro", "schema_file": "a.avsc", "timestamp_format": "yyyy"},
         "'timestamp_format' applies to format json only"),
        ({"format": "avro", "schema_file": "a.avsc", "json_decoder": "frazil"},
         "'json_decoder' applies to format json (or key_format json) only"),
    ],
)  # fmt: skip
def test_schema_source_mistakes(pipeline: dict[str, object], reason: str) -> None:
    problems = _problems({"schema_registry": _REGISTRY, "pipelines": [_pipeline(**pipeline)]})
    assert problems == [("pipelines[0]", reason)]


def test_unknown_format_lists_the_known_ones() -> None:
    problems = _problems({"pipelines": [_pipeline(format="xml")]})
    assert problems == [
        (
            "pipelines[0].format",
            "Input should be 'json', 'avro', 'protobuf', 'string' or 'bytes'",
        )
    ]


def test_registry_config_checks() -> None:
    problems = _problems(
        {
            "schema_registry": {"url": "127.0.0.1:8081", "username": "u", "timeout": "0s"},
            "pipelines": [_pipeline()],
        }
    )
    assert ("schema_registry.url", "String should match pattern '^https?://'") in problems
    assert ("schema_registry.timeout", "must be longer than zero") in problems


def test_registry_auth_needs_both_parts() -> None:
    problems = _problems(
        {"schema_registry": {**_REGISTRY, "username": "u"}, "pipelines": [_pipeline()]}
    )
    assert problems == [("schema_registry", "set both 'username' and 'password', or neither")]


def test_registry_password_is_a_secret() -> None:
    from frazil.config.loader import redacted

    config = parse_config(
        {
            "schema_registry": {**_REGISTRY, "username": "u", "password": "hunter2-secret"},
            "pipelines": [_pipeline()],
        }
    )
    assert "hunter2-secret" not in str(redacted(config))


def test_schema_files_resolve_against_the_config_folder(tmp_path: Path) -> None:
    config = parse_config(
        {
            "pipelines": [
                _pipeline(
                    format="avro",
                    schema_file="schemas/o.avsc",
                    key_format="avro",
                    key_schema_file="k.avsc",
                )
            ]
        },
        base_dir=tmp_path,
    )
    value, key = config.pipelines[0].value, config.pipelines[0].key
    assert value.schema_file == str(tmp_path / "schemas" / "o.avsc")
    assert key is not None and key.schema_file == str(tmp_path / "k.avsc")


def test_key_column_must_be_an_identifier() -> None:
    problems = _problems({"pipelines": [_pipeline(key_format="string", key_column="my key")]})
    assert problems == [
        ("pipelines[0].key_column", "String should match pattern '^[A-Za-z_][A-Za-z0-9_]*$'")
    ]


def test_json_decoder_is_frazil_or_spark() -> None:
    problems = _problems({"pipelines": [_pipeline(json_decoder="jackson")]})
    assert problems == [("pipelines[0].json_decoder", "Input should be 'frazil' or 'spark'")]


def test_json_decoder_defaults_and_applies_to_a_json_key() -> None:
    from frazil.config import parse_config
    from frazil.config.decoding import DEFAULT_JSON_DECODER

    plain = parse_config({"pipelines": [_pipeline()]}).pipelines[0]
    assert plain.value.json_decoder == DEFAULT_JSON_DECODER
    chosen = parse_config({"pipelines": [_pipeline(json_decoder="frazil")]}).pipelines[0]
    assert chosen.value.json_decoder == "frazil"
    keyed = _pipeline(format="string", key_format="json", json_decoder="spark")
    assert parse_config({"pipelines": [keyed]}).pipelines[0].value.json_decoder == "spark"
