"""Avro schemas Spark cannot read, found in the schema's JSON and said in a user's words.

spark-avro refuses two kinds of valid Avro schema when it maps one to a Spark type: a record
that holds itself (a linked list, a tree), and a decimal of more than 38 digits. Its own
errors name neither the field nor the record (``Decimal precision 40 exceeds max precision
38``), so frazil looks for them first and names the field; anything else spark-avro refuses
is reported with the first line of its message (:func:`spark_reason`).
"""

from __future__ import annotations

import json
from typing import Any

#: The most digits a Spark decimal holds.
MAX_PRECISION = 38

_PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))


def unreadable(schema_text: str) -> str | None:
    """Why Spark cannot read a valid Avro schema, naming the field; None when it can (as far
    as these checks go)."""
    try:
        schema = json.loads(schema_text)
    except ValueError:
        return None  # not JSON: Avro's parser says so elsewhere
    return _Walk().visit(schema, "", None)


def spark_reason(exc: BaseException) -> str:
    """The first line of spark-avro's own message, without the JVM's wrapping."""
    text = str(exc)
    if ": " in text and text.startswith("An error occurred while calling"):
        text = text.split("\n: ", 1)[-1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else type(exc).__name__
    if first.endswith("Exception:") and len(lines) > 1:
        first = lines[1]  # the class name alone on the first line, the message on the next
    return first.split("Exception: ", 1)[-1]


class _Walk:
    def __init__(self) -> None:
        self.named: dict[str, Any] = {}
        self.open: list[str] = []

    def visit(self, schema: Any, path: str, namespace: str | None) -> str | None:
        if isinstance(schema, list):
            for branch in schema:
                found = self.visit(branch, path, namespace)
                if found is not None:
                    return found
            return None
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return None
            full = self._full(schema, namespace)
            if full in self.open or schema in self.open:
                record = full if full in self.open else schema
                return (
                    f"field {path!r} holds record {record!r} again, inside itself: Spark does "
                    "not read recursive Avro types"
                )
            known = self.named.get(full, self.named.get(schema))
            return None if known is None else self._named(known, path, namespace)
        if not isinstance(schema, dict):
            return None
        kind = schema.get("type")
        if isinstance(kind, (list, dict)):
            return self.visit(kind, path, namespace)
        if kind in ("record", "error"):
            full = self._full(str(schema.get("name", "")), schema.get("namespace") or namespace)
            self.named[full] = schema
            return self._named(schema, path, namespace)
        if kind in ("enum", "fixed"):
            name = str(schema.get("name", ""))
            self.named[self._full(name, schema.get("namespace") or namespace)] = schema
        if schema.get("logicalType") == "decimal" and kind in ("bytes", "fixed"):
            precision, scale = schema.get("precision"), schema.get("scale", 0)
            if isinstance(precision, int) and precision > MAX_PRECISION:
                return (
                    f"field {path!r} is decimal({precision},{scale}): Spark's decimals hold "
                    f"at most {MAX_PRECISION} digits"
                )
        if kind == "array":
            return self.visit(schema.get("items"), f"{path}[]", namespace)
        if kind == "map":
            return self.visit(schema.get("values"), f"{path}{{}}", namespace)
        return None

    def _named(self, schema: dict[str, Any], path: str, namespace: str | None) -> str | None:
        if schema.get("type") not in ("record", "error"):
            return None
        inner = schema.get("namespace") or namespace
        name = str(schema.get("name", ""))
        full = self._full(name, inner)
        if "." in name:
            inner = name.rsplit(".", 1)[0]
        self.open.append(full)
        try:
            for f in schema.get("fields", []):
                if not isinstance(f, dict):
                    continue
                field_path = f"{path}.{f.get('name')}" if path else str(f.get("name"))
                found = self.visit(f.get("type"), field_path, inner)
                if found is not None:
                    return found
        finally:
            self.open.pop()
        return None

    @staticmethod
    def _full(name: str, namespace: str | None) -> str:
        return name if "." in name or not namespace else f"{namespace}.{name}"
