"""Which sampled JSON keys are Kafka Connect's ``{schema, payload}`` wrappers."""

from __future__ import annotations

import json

from frazil.decode.connect_key import merged_schema, wrapped_key_schemas

SCHEMA = {"type": "struct", "fields": [{"field": "id", "type": "int32"}], "optional": False}


def _key(value: object) -> bytes:
    return json.dumps(value).encode()


def test_the_first_json_key_decides() -> None:
    wrapped = _key({"schema": SCHEMA, "payload": {"id": 1}})
    assert wrapped_key_schemas([b"not json", wrapped, _key({"id": 1})]) == [SCHEMA]
    assert wrapped_key_schemas([_key({"id": 1}), wrapped]) == []


def test_each_topics_key_schema_is_met_and_merged() -> None:
    orders = {"type": "struct", "fields": [{"field": "order_id", "type": "int64"}]}
    keys = [_key({"schema": s, "payload": {}}) for s in (SCHEMA, orders, SCHEMA)]
    assert wrapped_key_schemas(keys) == [SCHEMA, orders]
    assert merged_schema([SCHEMA, orders])["fields"] == [
        {"field": "id", "type": "int32", "optional": True},
        {"field": "order_id", "type": "int64", "optional": True},
    ]
    assert merged_schema([{"type": "int64"}, orders]) == {"type": "int64"}


def test_a_registry_header_is_skipped() -> None:
    wrapped = b"\x00\x00\x00\x00\x07" + _key({"schema": {"type": "int64"}, "payload": 5})
    assert wrapped_key_schemas([wrapped]) == [{"type": "int64"}]


def test_objects_with_other_fields_or_unreadable_schemas_are_plain_keys() -> None:
    assert wrapped_key_schemas([_key({"schema": SCHEMA, "payload": {}, "x": 1})]) == []
    assert wrapped_key_schemas([_key({"schema": "text", "payload": 1})]) == []
    assert wrapped_key_schemas([_key({"schema": {"type": "int128"}, "payload": 1})]) == []
    assert wrapped_key_schemas([]) == []
