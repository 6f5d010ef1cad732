"""JSON Schema → Spark struct, row by row of the table in frazil.decode.json_schema."""

from __future__ import annotations

import pytest

from frazil.decode.json_schema import json_schema_to_spark
from frazil.errors import ConfigError


def _ddl(properties: dict[str, object], **root: object) -> str:
    return json_schema_to_spark(
        {"type": "object", "properties": properties, **root}, "t"
    ).simpleString()


@pytest.mark.parametrize(
    ("node", "spark"),
    [
        ({"type": "string"}, "string"),
        ({"type": "string", "format": "date-time"}, "timestamp"),
        ({"type": "string", "format": "date"}, "date"),
        ({"type": "string", "contentEncoding": "base64"}, "binary"),
        ({"type": "integer"}, "bigint"),
        ({"type": "number"}, "double"),
        ({"type": "boolean"}, "boolean"),
        ({"type": ["null", "integer"]}, "bigint"),
        ({"anyOf": [{"type": "null"}, {"type": "number"}]}, "double"),
        ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, "string"),
        ({"type": ["integer", "string"]}, "string"),
        ({}, "string"),
        ({"type": "array", "items": {"type": "integer"}}, "array<bigint>"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "map<string,bigint>"),
        ({"type": "object"}, "map<string,string>"),
        (
            {"type": "object", "properties": {"b": {"type": "boolean"}, "a": {"type": "string"}}},
            "struct<b:boolean,a:string>",
        ),
        ({"$ref": "#/definitions/Money"}, "struct<amount:double,currency:string>"),
        ({"$ref": "#/$defs/Tag"}, "string"),
    ],
)
def test_each_mapping_row(node: dict[str, object], spark: str) -> None:
    definitions = {
        "Money": {
            "type": "object",
            "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}},
        }
    }
    ddl = _ddl({"x": node}, definitions=definitions, **{"$defs": {"Tag": {"type": "string"}}})
    assert ddl == f"struct<x:{spark}>"


def test_recursive_reference_stops_as_json_text() -> None:
    schema = {
        "type": "object",
        "properties": {"tree": {"$ref": "#/definitions/Node"}},
        "definitions": {
            "Node": {
                "type": "object",
                "properties": {
                    "children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}
                },
            }
        },
    }
    ddl = json_schema_to_spark(schema, "t").simpleString()
    assert ddl.startswith("struct<tree:struct<children:array<struct<children:")
    assert "string" in ddl


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ([], "t: a JSON Schema is a JSON object"),
        ({"type": "string"}, "t: the JSON Schema's root must be an object with properties"),
        ({"$ref": "http://x/y.json"}, "only local references"),
        ({"$ref": "#/nowhere"}, "points nowhere"),
    ],
)
def test_unusable_schemas(schema: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        json_schema_to_spark(schema, "t")
