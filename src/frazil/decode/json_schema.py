"""JSON Schema (draft 4 to 2020-12) → the Spark struct that ``from_json`` decodes into.

| JSON Schema | Spark |
| --- | --- |
| ``string`` | string |
| ``string`` + ``format: date-time`` | timestamp |
| ``string`` + ``format: date`` | date |
| ``string`` + ``contentEncoding: base64`` | binary |
| ``integer`` | bigint |
| ``number`` | double |
| ``boolean`` | boolean |
| ``object`` with ``properties`` | struct (properties in order) |
| ``object`` with only ``additionalProperties`` | map<string, T> |
| ``array`` with ``items`` | array<T> |
| ``["null", T]``, ``anyOf``/``oneOf`` of null and one T | T (nullable) |
| ``$ref`` to ``#/definitions/…`` or ``#/$defs/…`` | the referenced schema |
| anything else (mixed unions, no type) | string (the raw JSON text) |
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from frazil.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

#: Nesting beyond this is a recursive ``$ref`` (a tree type): kept as JSON text.
_MAX_DEPTH = 16


def json_schema_to_spark(document: Any, where: str) -> StructType:
    """The Spark struct of a JSON Schema whose root is an object.

    Args:
        document: The parsed JSON Schema.
        where: Where it comes from (file or subject), for messages.

    Raises:
        ConfigError: The root is not an object schema with properties.
    """
    from pyspark.sql.types import StructType

    if not isinstance(document, dict):
        raise ConfigError(f"{where}: a JSON Schema is a JSON object")
    root = _resolve(document, document)
    result = _convert(root, document, 0)
    if not isinstance(result, StructType) or not result.fields:
        raise ConfigError(
            f"{where}: the JSON Schema's root must be an object with properties "
            "(each property becomes a column)"
        )
    return result


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise ConfigError(f"JSON Schema $ref {ref!r}: only local references (#/...) work")
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise ConfigError(f"JSON Schema $ref {ref!r} points nowhere")
            target = target[part]
        node = target
        seen += 1
        if seen > _MAX_DEPTH:
            raise ConfigError(f"JSON Schema $ref {ref!r} refers to itself")
    return node


def _non_null(options: list[Any]) -> list[Any]:
    return [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]


def _convert(node: Any, root: dict[str, Any], depth: int) -> DataType:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        BooleanType,
        DateType,
        DoubleType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return StringType()
    node = _resolve(node, root)
    for key in ("anyOf", "oneOf"):
        if key in node:
            options = _non_null(node[key])
            return _convert(options[0], root, depth + 1) if len(options) == 1 else StringType()
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            return StringType()
        kind = kinds[0]
    if kind is None and "properties" in node:
        kind = "object"
    if kind == "object":
        properties = node.get("properties") or {}
        if properties:
            return StructType(
                [
                    StructField(name, _convert(sub, root, depth + 1), True)
                    for name, sub in properties.items()
                ]
            )
        extra = node.get("additionalProperties")
        values = _convert(extra, root, depth + 1) if isinstance(extra, dict) else StringType()
        return MapType(StringType(), values, True)
    if kind == "array":
        items = node.get("items")
        return ArrayType(_convert(items, root, depth + 1) if items else StringType(), True)
    if kind == "integer":
        return LongType()
    if kind == "number":
        return DoubleType()
    if kind == "boolean":
        return BooleanType()
    if kind == "string":
        fmt = node.get("format")
        if fmt == "date-time":
            return TimestampType()
        if fmt == "date":
            return DateType()
        if node.get("contentEncoding") == "base64":
            return BinaryType()
        return StringType()
    return StringType()
