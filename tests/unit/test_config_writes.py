"""``write:``: modes, keys, operation codes, Debezium, per-table keys; exact messages."""

from __future__ import annotations

from typing import Any

import pytest

from frazil.config import parse_config
from frazil.config.writes import MERGE_ON_READ_PROPERTIES, OpCodes
from frazil.errors import ConfigError


def _config(write: dict[str, Any], **pipeline: Any) -> Any:
    return parse_config(
        {"pipelines": [{"name": "p", "topics": ["t"], "table": "db.t", "write": write, **pipeline}]}
    )


@pytest.mark.parametrize(
    ("write", "extra", "message"),
    [
        ({"mode": "upsert"}, {}, "pipelines[0]: write: mode upsert needs 'key'"),
        ({"mode": "cdc", "key": ["id"]}, {}, "mode cdc needs 'op_field'"),
        ({"key": ["id"]}, {}, "'key' applies to modes upsert and cdc, not append"),
        ({"debezium": True}, {}, "'debezium' applies to mode cdc"),
        ({"ops": {"delete": "X"}}, {}, "'ops' applies to mode cdc"),
        ({"mode": "upsert", "key": ["id"], "op_field": "op"}, {}, "apply to mode cdc"),
        ({"mode": "cdc", "key": ["id"], "debezium": True, "op_field": "op"}, {},
         "remove 'op_field'"),
        ({"mode": "cdc", "key": ["id"], "op_field": "op", "debezium_fields": ["ts_ms"]}, {},
         "'debezium_fields' applies to 'debezium: true'"),
        ({"mode": "upsert", "key": ["id", "id"]}, {}, "lists a column twice"),
        ({"mode": "upsert", "key": ["a.b"]}, {}, "must be a top-level column name"),
        ({"mode": "cdc", "key": ["id"], "op_field": "op", "ops": {"insert": "I", "delete": "I"}},
         {}, "code 'I' is listed under both insert and delete"),
        ({"mode": "upsert", "key": ["id"], "tombstones": "delete"}, {}, "needs 'key_format'"),
        ({"mode": "cdc", "key": ["id"], "debezium": True}, {"format": "protobuf"},
         "reads Debezium envelopes as json or avro"),
        ({"mode": "upsert", "key": ["id"]}, {"identifier_fields": ["other"]},
         "identifier_fields must equal write.key"),
        ({}, {"tables": {"db.t": {"write": {"key": ["id"]}}}},
         "tables.db.t.write: a table's key and order_by apply to pipelines with"),
        ({"mode": "upsert", "key": ["id"]}, {"tables": {"db.t": {"write": {"mode": "cdc"}}}},
         "pipelines[0].tables.db.t.write.mode: unknown key"),
    ],
)  # fmt: skip
def test_write_errors(write: dict[str, Any], extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as failed:
        _config(write, **extra)
    assert message in str(failed.value)


def test_upsert_tables_are_identified_by_their_key_and_merge_on_read() -> None:
    config = _config(
        {"mode": "upsert", "key": ["id"], "order_by": "v"},
        table_properties={"write.merge.mode": "copy-on-write"},
    )
    settings = config.pipelines[0].settings_for("db.t")
    assert settings.identifier_fields == ["id"]
    assert settings.table_properties == {
        **MERGE_ON_READ_PROPERTIES,
        "write.merge.mode": "copy-on-write",  # the user's word wins
    }
    assert settings.write.order_by == "v"


def test_a_routed_table_has_its_own_key() -> None:
    config = parse_config(
        {
            "pipelines": [
                {
                    "name": "p",
                    "topics": ["t"],
                    "route": {"field": "kind", "tables": {"a": "db.a", "b": "db.b"}},
                    "write": {"mode": "cdc", "key": ["id"], "op_field": "op"},
                    "tables": {"db.b": {"write": {"key": ["b_id"], "order_by": "v"}}},
                }
            ]
        }
    )
    pipeline = config.pipelines[0]
    assert pipeline.settings_for("db.a").write.key == ["id"]
    b = pipeline.settings_for("db.b")
    assert (b.write.key, b.write.order_by, b.identifier_fields) == (["b_id"], "v", ["b_id"])
    assert b.write.op_field == "op"


def _routed(route: dict[str, Any], tables: dict[str, Any]) -> Any:
    return parse_config(
        {
            "pipelines": [
                {
                    "name": "p",
                    "topic_pattern": "db\\..*",
                    "route": route,
                    "write": {"mode": "cdc", "debezium": True},
                    "tables": tables,
                }
            ]
        }
    )


def test_a_routed_pipeline_without_write_key_takes_each_tables_own() -> None:
    own = {"db.a": {"write": {"key": ["a_id"]}}, "db.b": {"write": {"key": ["b_id"]}}}
    pipeline = _routed({"topic": "db\\.(\\w+)", "table": "db.{1}"}, own).pipelines[0]
    assert pipeline.defaults.write.key == []
    a, b = pipeline.settings_for("db.a"), pipeline.settings_for("db.b")
    assert (a.write.key, a.identifier_fields) == (["a_id"], ["a_id"])
    assert (b.write.key, b.identifier_fields) == (["b_id"], ["b_id"])


@pytest.mark.parametrize(
    ("route", "tables", "message"),
    [
        ({"topic": "db\\.(\\w+)", "table": "db.{1}"}, {},
         "pipelines[0]: write: mode cdc needs 'key': the columns identifying a row (a routed "
         "pipeline may instead set each table's own in tables.<name>.write.key)"),
        ({"field": "kind", "tables": {"a": "db.a", "b": "db.b"}},
         {"db.a": {"write": {"key": ["id"]}}},
         "pipelines[0]: tables.db.b.write.key: the route sends changes to db.b and write.key "
         "is not set: mode cdc needs the columns identifying its rows"),
        ({"topic": "db\\.(\\w+)", "table": "db.{1}", "default": "db.other"},
         {"db.a": {"write": {"key": ["id"]}}},
         "pipelines[0]: tables.db.other.write.key: the route sends changes to db.other"),
    ],
)  # fmt: skip
def test_a_routed_pipeline_without_write_key_needs_a_key_for_each_table_it_names(
    route: dict[str, Any], tables: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as failed:
        _routed(route, tables)
    assert message in str(failed.value)


def test_append_tables_are_unchanged() -> None:
    settings = _config({}).pipelines[0].settings_for("db.t")
    assert settings.identifier_fields == [] and settings.table_properties == {}
    assert not settings.write.merges


def test_op_codes_take_a_string_or_a_list() -> None:
    codes = OpCodes.model_validate({"insert": "c", "update": ["u", "r"], "delete": "d"})
    assert codes.mapping() == {"c": "upsert", "u": "upsert", "r": "upsert", "d": "delete"}


def test_a_dumped_config_loads_again() -> None:
    config = _config({"mode": "cdc", "key": ["id"], "op_field": "op"})
    again = parse_config(config.model_dump(mode="json", by_alias=True))
    assert again.pipelines[0].defaults.write == config.pipelines[0].defaults.write
