"""A pipeline's flat keys and the groups they fill: what is read, reported and dumped."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frazil.config import parse_config
from frazil.config.table_settings import ResolvedTable
from frazil.errors import ConfigError


def _pipeline(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "p", "topics": ["t"], "table": "db.t"}
    base.update(overrides)
    return base


def _problems(**overrides: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config({"pipelines": [_pipeline(**overrides)]})
    return info.value.problems


def test_flat_keys_fill_the_value_key_and_table_groups() -> None:
    pipeline = parse_config(
        {
            "pipelines": [
                _pipeline(
                    schema={"id": "string", "ts": "timestamp"},
                    timestamp_format="yyyy",
                    key_format="json",
                    key_schema={"k": "int"},
                    key_column="k",
                    partition_by=["days(ts)"],
                    write={"mode": "upsert", "key": ["id"]},
                )
            ]
        }
    ).pipelines[0]
    assert (pipeline.value.part, pipeline.value.format, pipeline.value.column) == (
        "value",
        "json",
        "value",
    )
    assert pipeline.value.schema_ == {"id": "string", "ts": "timestamp"}
    assert pipeline.value.timestamp_format == "yyyy"
    assert pipeline.key is not None
    assert (pipeline.key.part, pipeline.key.schema_, pipeline.key.column) == (
        "key",
        {"k": "int"},
        "k",
    )
    assert pipeline.defaults.partition_by == ["days(ts)"]
    assert pipeline.defaults.write.key == ["id"]


def test_no_key_without_key_format() -> None:
    assert parse_config({"pipelines": [_pipeline()]}).pipelines[0].key is None
    assert parse_config({"pipelines": [_pipeline(key_format=None)]}).pipelines[0].key is None


@pytest.mark.parametrize("group", ["value", "key", "defaults"])
def test_group_names_are_not_config_keys(group: str) -> None:
    assert _problems(**{group: {}, "formt": "json"}) == [
        (f"pipelines[0].{group}", "unknown key"),
        ("pipelines[0].formt", "unknown key (did you mean 'format'?)"),
    ]


def test_problems_keep_the_order_of_the_flat_keys() -> None:
    # write and maintenance came after tables, key settings before table: so they stay.
    problems = _problems(
        write=5,
        tables={"db.t": 5},
        key_format="xml",
        trigger="soon",
        partition_by=["dayz(ts)"],
        format="xml",
    )
    assert [key for key, _ in problems] == [
        "pipelines[0].format",
        "pipelines[0].key_format",
        "pipelines[0].partition_by[0]",
        "pipelines[0].tables.db.t",
        "pipelines[0].write",
        "pipelines[0].trigger",
    ]


def test_unknown_keys_come_last_as_written() -> None:
    problems = _problems(zz=1, key=1, trigger="soon", aa=2)
    assert problems == [
        ("pipelines[0].trigger", "'soon' is not a duration such as 500ms, 1s, 5m or 1h"),
        ("pipelines[0].zz", "unknown key"),
        ("pipelines[0].key", "unknown key"),
        ("pipelines[0].aa", "unknown key"),
    ]


def test_key_settings_without_key_format_are_checked_then_refused() -> None:
    assert (
        _problems(key_schema={"k": "strng"}, key_column="a b")[0][0] == "pipelines[0].key_schema.k"
    )
    assert _problems(key_column="a b") == [
        ("pipelines[0].key_column", "String should match pattern '^[A-Za-z_][A-Za-z0-9_]*$'")
    ]
    assert _problems(key_subject="s") == [("pipelines[0]", "'key_subject' needs 'key_format'")]


def test_partition_columns_are_checked_next_to_other_problems() -> None:
    problems = _problems(
        schema={"ts": "timestamp"}, partition_by=["days(ts)", "nope", "dayz(ts)"], trigger="soon"
    )
    assert [key for key, _ in problems] == [
        "pipelines[0].partition_by[1]",
        "pipelines[0].partition_by[2]",
        "pipelines[0].trigger",
    ]


def test_a_dump_writes_the_flat_keys_in_their_order() -> None:
    config = parse_config(
        {
            "pipelines": [
                _pipeline(
                    key_format="string",
                    schema={"id": "string"},
                    tables={"db.t": {"sort_by": ["id"], "aliases": None}},
                )
            ]
        }
    )
    dumped = config.model_dump(mode="json", by_alias=True)["pipelines"][0]
    assert list(dumped)[7:24] == [
        "format",
        "schema",
        "schema_file",
        "subject",
        "message",
        "timestamp_format",
        "json_decoder",
        "variant",
        "variant_max_depth",
        "variant_max_bytes",
        "key_format",
        "key_schema",
        "key_schema_file",
        "key_subject",
        "key_message",
        "key_column",
        "table",
    ]
    assert list(dumped)[-8:] == [
        "aliases",
        "tables",
        "write",
        "maintenance",
        "errors",
        "trigger",
        "checkpoint",
        "valid_through_slack",
    ]
    # What a table leaves to the pipeline reads back as null, as it was read.
    assert dumped["tables"]["db.t"]["sort_by"] == ["id"]
    assert dumped["tables"]["db.t"]["partition_by"] is None
    assert dumped["tables"]["db.t"]["aliases"] is None
    # Without by_alias (a digest of the config): the value's schema under its field's name.
    assert "schema_" in json.loads(config.pipelines[0].model_dump_json())
    again = parse_config(config.model_dump(mode="json", by_alias=True))
    assert again == config


def test_key_column_without_key_format_is_dumped_as_written() -> None:
    config = parse_config({"pipelines": [_pipeline(key_column="k")]})
    assert config.pipelines[0].model_dump()["key_column"] == "k"
    assert config.pipelines[0].model_dump(exclude_none=True)["key_column"] == "k"
    assert "key_format" not in config.pipelines[0].model_dump(exclude_none=True)


def test_a_table_setting_set_to_null_is_the_pipelines() -> None:
    pipeline = parse_config(
        {
            "pipelines": [
                _pipeline(sort_by=["id"], tables={"db.t": {"sort_by": None, "aliases": {"a": "b"}}})
            ]
        }
    ).pipelines[0]
    settings = pipeline.settings_for("db.t")
    assert isinstance(settings, ResolvedTable)
    assert (settings.sort_by, settings.aliases) == (["id"], {"a": "b"})
    assert _problems(tables={"db.t": {"table_properties": None}}) == [
        ("pipelines[0].tables.db.t.table_properties", "Input should be a valid dictionary")
    ]


def test_key_column_reads_as_written_with_or_without_key_format() -> None:
    from frazil.config import parse_config

    def first(**extra: object) -> object:
        return parse_config(
            {"pipelines": [{"name": "p", "topics": ["t"], "table": "db.t", **extra}]}
        ).pipelines[0]

    assert first().key_column == "key"  # type: ignore[attr-defined]
    assert first(key_column="k").key_column == "k"  # type: ignore[attr-defined]
    assert first(key_format="string", key_column="k").key_column == "k"  # type: ignore[attr-defined]


def test_library_settings_written_as_numbers_or_booleans_are_text() -> None:
    # Users write Kafka's and Spark's settings as YAML numbers; the libraries read text.
    config = parse_config(
        {
            "catalog": {"properties": {"client.pool.size": 4}},
            "kafka": {"properties": {"max.partition.fetch.bytes": 65536, "check.crcs": False}},
            "spark": {
                "conf": {
                    "spark.sql.shuffle.partitions": 8,
                    "spark.ui.enabled": True,
                    "spark.memory.fraction": 0.6,
                    "spark.sql.autoBroadcastJoinThreshold": 1.0e6,
                }
            },
            "pipelines": [
                {
                    "name": "p",
                    "topics": ["t"],
                    "table": "db.t",
                    "table_properties": {"commit.retry.num-retries": 10},
                }
            ],
        }
    )
    assert config.catalog.properties == {"client.pool.size": "4"}
    assert config.kafka.properties == {"max.partition.fetch.bytes": "65536", "check.crcs": "false"}
    assert config.spark.conf == {
        "spark.sql.shuffle.partitions": "8",
        "spark.ui.enabled": "true",
        "spark.memory.fraction": "0.6",
        "spark.sql.autoBroadcastJoinThreshold": "1000000",
    }
    assert config.pipelines[0].defaults.table_properties == {"commit.retry.num-retries": "10"}
    with pytest.raises(ConfigError, match=r"kafka\.properties\.a: Input should be a valid string"):
        parse_config(
            {"kafka": {"properties": {"a": [1]}}, "pipelines": [{"name": "p", "topics": ["t"]}]}
        )
