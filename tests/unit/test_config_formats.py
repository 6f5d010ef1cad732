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


def test_variant_lands_json_values_whole_with_default_limits() -> None:
    (pipeline,) = parse_config({"pipelines": [_pipeline(variant="payload")]}).pipelines
    value = pipeline.value
    assert (value.variant, value.source()) == ("payload", "variant")
    assert (value.max_depth(), value.max_bytes()) == (64, 16 * 1024**2)
    limited = _pipeline(variant="doc", variant_max_depth=8, variant_max_bytes="1MiB")
    (pipeline,) = parse_config({"pipelines": [limited]}).pipelines
    assert (pipeline.value.max_depth(), pipeline.value.max_bytes()) == (8, 1024**2)
    assert pipeline.value.variant_max_bytes == "1MiB"  # dumped as written


def test_a_variant_config_dumps_and_reads_back() -> None:
    config = parse_config({"pipelines": [_pipeline(variant="doc", variant_max_depth=3)]})
    dumped = config.model_dump(mode="json", by_alias=True)
    assert dumped["pipelines"][0]["variant"] == "doc"
    assert parse_config(dumped).pipelines[0].value == config.pipelines[0].value


@pytest.mark.parametrize(
    ("pipeline", "problem"),
    [
        ({"variant": "a b"},
         ("pipelines[0].variant", "field name 'a b' must be letters, digits and '_'")),
        (
            {"variant": "_kafka_doc"},
            ("pipelines[0].variant",
             "field name '_kafka_doc': the prefix '_kafka_' is reserved for kafka_metadata "
             "columns"),
        ),
        ({"variant": "doc", "variant_max_depth": 0},
         ("pipelines[0].variant_max_depth", "Input should be greater than or equal to 1")),
        ({"variant": "doc", "variant_max_depth": 1001},
         ("pipelines[0].variant_max_depth", "Input should be less than or equal to 1000")),
        (
            {"variant": "doc", "variant_max_bytes": "17MiB"},
            ("pipelines[0].variant_max_bytes",
             "must be between 1 byte and 16MiB (16777216 bytes): the longest JSON text Jackson "
             "and Spark's variant builder always take"),
        ),
        ({"variant": "doc", "variant_max_bytes": "lots"},
         ("pipelines[0].variant_max_bytes",
          "'lots' is not a size such as 128MB, 64MiB or 1048576")),
        ({"variant_max_depth": 3},
         ("pipelines[0]", "'variant_max_depth' applies with 'variant' only")),
        ({"variant_max_bytes": "1MiB"},
         ("pipelines[0]", "'variant_max_bytes' applies with 'variant' only")),
        ({"variant": "doc", "format": "avro"},
         ("pipelines[0]", "'variant' lands JSON values; format avro is not JSON")),
        ({"variant": "doc", "format": "string"},
         ("pipelines[0]", "'variant' lands JSON values; format string is not JSON")),
        (
            {"variant": "Doc", "schema": {"a": "int", "doc": "string"}},
            ("pipelines[0]",
             "variant column 'Doc' is also a field 'schema' declares ('doc'); name the column "
             "of the rest otherwise"),
        ),
        (
            {"variant": "doc", "schema_file": "x.json"},
            ("pipelines[0]",
             "set 'schema_file' or 'variant', not both: 'variant' lands each value whole, or "
             "with 'schema', the fields it declares in columns and the rest in the variant"),
        ),
        (
            {"variant": "doc", "timestamp_format": "yyyy"},
            ("pipelines[0]",
             "'timestamp_format' applies to declared columns: 'variant' without 'schema' lands "
             "each value whole, timestamps as the text they are"),
        ),
        (
            {"variant": "doc", "table_properties": {"format-version": "2"}},
            ("pipelines[0]",
             "table_properties format-version 2: a 'variant' column needs Iceberg format "
             "version 3 (the default for such tables)"),
        ),
        (
            {"variant": "doc",
             "tables": {"db.orders": {"table_properties": {"format-version": "1"}}}},
            ("pipelines[0]",
             "tables.db.orders.table_properties format-version 1: a 'variant' column needs "
             "Iceberg format version 3 (the default for such tables)"),
        ),
    ],
)  # fmt: skip
def test_variant_settings_are_checked(
    pipeline: dict[str, object], problem: tuple[str, str]
) -> None:
    assert _problems({"pipelines": [_pipeline(**pipeline)]}) == [problem]


def test_variant_with_a_schema_keeps_the_rest() -> None:
    typed = _pipeline(variant="rest", schema={"id": "bigint"}, timestamp_format="yyyy")
    (pipeline,) = parse_config({"pipelines": [typed]}).pipelines
    assert pipeline.value.source() == "declared" and pipeline.value.variant == "rest"


def test_variant_takes_a_json_key_and_its_decoder() -> None:
    keyed = _pipeline(variant="doc", key_format="json", json_decoder="spark")
    (pipeline,) = parse_config({"pipelines": [keyed]}).pipelines
    assert pipeline.key is not None and pipeline.value.json_decoder == "spark"
