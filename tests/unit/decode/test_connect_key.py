"""Which sampled JSON keys are Kafka Connect's ``{schema, payload}`` wrappers."""

from __future__ import annotations

import json

from frazil.decode.connect_key import wrapped_key_schema

SCHEMA = {"type": "struct", "fields": [{"field": "id", "type": "int32"}], "optional": False}


def _key(value: object) -> bytes:
    return json.dumps(value).encode()


def test_the_first_json_key_decides() -> None:
    wrapped = _key({"schema": SCHEMA, "payload": {"id": 1}})
    assert wrapped_key_schema([b"not json", wrapped]) == SCHEMA
    assert wrapped_key_schema([_key({"id": 1}), wrapped]) is None


def test_a_registry_header_is_skipped() -> None:
    wrapped = b"\x00\x00\x00\x00\x07" + _key({"schema": {"type": "int64"}, "payload": 5})
    assert wrapped_key_schema([wrapped]) == {"type": "int64"}


def test_objects_with_other_fields_or_unreadable_schemas_are_plain_keys() -> None:
    assert wrapped_key_schema([_key({"schema": SCHEMA, "payload": {}, "x": 1})]) is None
    assert wrapped_key_schema([_key({"schema": "text", "payload": 1})]) is None
    assert wrapped_key_schema([_key({"schema": {"type": "int128"}, "payload": 1})]) is None
    assert wrapped_key_schema([]) is None
