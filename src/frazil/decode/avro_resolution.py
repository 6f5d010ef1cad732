"""What Avro's schema resolution would misread, and the reader shape that reads it exactly.

Avro resolves a writer's record into a reader's by primitive types and ignores logical ones:
a ``timestamp-millis`` long read by a ``timestamp-micros`` reader comes out a thousand times
too small, and a decimal's unscaled bytes take the reader's scale (12.34 written at scale 2
reads as 1.234 at scale 3). The registry's compatibility checks do not look at logical types
either, so a subject's versions may differ that way.

:func:`bridge` walks a writer and a reader schema together (records by field name, arrays,
maps, unions by branch kind) and, where both sides carry different logical types, either
gives the reader that field's writer type — timestamps of another unit (Spark reads them into
the same type), a decimal the reader's can hold (cast to the reader's afterwards) — or names
the field as one the reader cannot take exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
#: Logical types Spark reads into one type whatever the unit.
_SAME_IN_SPARK = [
    {"timestamp-millis", "timestamp-micros", "timestamp-nanos"},
    {"local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos"},
]


@dataclass(frozen=True)
class Misread:
    """A field whose writer values the reader shape cannot hold exactly."""

    path: str
    writer: str
    reader: str


@dataclass
class Bridge:
    """How one writer schema is read into the reader shape.

    Attributes:
        reader: The reader schema to resolve the writer to (Avro JSON): the reader itself, or
            the reader with some fields' types taken from the writer.
        changed: Whether any field took the writer's type.
        cast: Whether the values then need a cast to the reader's Spark type (a decimal of
            another scale).
        misread: Fields the reader cannot take exactly, in schema order.
    """

    reader: str
    changed: bool = False
    cast: bool = False
    misread: list[Misread] = field(default_factory=list)


def bridge(writer_text: str, reader_text: str) -> Bridge:
    """The reader schema that reads ``writer_text``'s values exactly, where one does."""
    writer, reader = json.loads(writer_text), json.loads(reader_text)
    walk = _Walk(_named(writer), _named(reader))
    bridged = walk.schema(writer, reader, "")
    if not walk.changed:
        return Bridge(reader=reader_text, misread=walk.misread)
    return Bridge(reader=json.dumps(bridged), changed=True, cast=walk.cast, misread=walk.misread)


def _named(schema: Any, found: dict[str, Any] | None = None, space: str = "") -> dict[str, Any]:
    """Named types (records, enums, fixed) by name and by full name."""
    found = {} if found is None else found
    if isinstance(schema, list):
        for branch in schema:
            _named(branch, found, space)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            name = str(schema.get("name", ""))
            space = str(schema.get("namespace", space)) if "." not in name else ""
            found[name.rsplit(".", 1)[-1]] = schema
            found[f"{space}.{name}" if space else name] = schema
        for f in schema.get("fields", []) if kind in ("record", "error") else []:
            _named(f.get("type"), found, space)
        if kind == "array":
            _named(schema.get("items"), found, space)
        if kind == "map":
            _named(schema.get("values"), found, space)
        if isinstance(kind, (dict, list)):
            _named(kind, found, space)
    return found


def _logical(schema: Any) -> tuple[Any, ...] | None:
    if not isinstance(schema, dict) or "logicalType" not in schema:
        return None
    if schema["logicalType"] == "decimal":
        return ("decimal", schema.get("precision"), schema.get("scale", 0))
    return (schema["logicalType"],)


def _describe(schema: Any) -> str:
    logical = _logical(schema)
    if logical is None:
        return str(schema.get("type") if isinstance(schema, dict) else schema)
    if logical[0] == "decimal":
        return f"decimal({logical[1]},{logical[2]})"
    return str(logical[0])


class _Walk:
    def __init__(self, writer_names: dict[str, Any], reader_names: dict[str, Any]) -> None:
        self.writer_names = writer_names
        self.reader_names = reader_names
        self.changed = False
        self.cast = False
        self.misread: list[Misread] = []
        self._seen: set[tuple[str, str]] = set()

    def _definition(self, schema: Any, names: dict[str, Any]) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return names.get(schema, schema)
        return schema

    def _kind(self, schema: Any, names: dict[str, Any]) -> str:
        schema = self._definition(schema, names)
        if isinstance(schema, list):
            return "union"
        if isinstance(schema, dict):
            kind = schema.get("type")
            if isinstance(kind, (dict, list, str)) and kind not in (
                "record", "error", "enum", "fixed", "array", "map", *_PRIMITIVES
            ):  # fmt: skip
                return self._kind(kind, names)
            if kind in ("record", "error", "enum", "fixed"):
                return f"{kind}:{str(schema.get('name', '')).rsplit('.', 1)[-1]}"
            return str(kind)
        return str(schema)

    def schema(self, writer: Any, reader: Any, path: str) -> Any:
        """The reader at ``path``, with writer types where the logical types differ."""
        if isinstance(reader, str) and reader not in _PRIMITIVES:
            # A reference to a type defined elsewhere in the reader: changing it here would
            # define the name twice; its definition was walked where it stands.
            return reader
        writer = self._definition(writer, self.writer_names)
        if isinstance(reader, list):
            branches = writer if isinstance(writer, list) else [writer]
            out = []
            for branch in reader:
                kind = self._kind(branch, self.reader_names)
                match = next(
                    (b for b in branches if self._kind(b, self.writer_names) == kind), None
                )
                out.append(branch if match is None else self.schema(match, branch, path))
            return out
        if isinstance(writer, list):
            kind = self._kind(reader, self.reader_names)
            match = next((b for b in writer if self._kind(b, self.writer_names) == kind), None)
            return reader if match is None else self.schema(match, reader, path)
        if not isinstance(reader, dict) or not isinstance(writer, dict):
            return reader
        inner = reader.get("type")
        if isinstance(inner, (dict, list)):  # {"type": {...}}: the type itself
            return {**reader, "type": self.schema(writer, inner, path)}
        if inner in ("record", "error"):
            return self._record(writer, reader, path)
        if inner == "array" and writer.get("type") == "array":
            return {**reader, "items": self.schema(writer["items"], reader["items"], path + "[]")}
        if inner == "map" and writer.get("type") == "map":
            return {**reader, "values": self.schema(writer["values"], reader["values"], path)}
        return self._primitive(writer, reader, path)

    def _record(self, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Any:
        pair = (str(writer.get("name")), str(reader.get("name")))
        if pair in self._seen:  # a recursive type: walked once
            return reader
        self._seen.add(pair)
        by_name = {f["name"]: f for f in writer.get("fields", [])}
        for f in writer.get("fields", []):
            for alias in f.get("aliases", []):
                by_name.setdefault(alias, f)
        fields = []
        for f in reader.get("fields", []):
            found = by_name.get(f["name"]) or next(
                (by_name[a] for a in f.get("aliases", []) if a in by_name), None
            )
            where = f"{path}.{f['name']}" if path else str(f["name"])
            fields.append(
                f if found is None else {**f, "type": self.schema(found["type"], f["type"], where)}
            )
        return {**reader, "fields": fields}

    def _primitive(self, writer: dict[str, Any], reader: dict[str, Any], path: str) -> Any:
        lw, lr = _logical(writer), _logical(reader)
        if lw is None or lr is None or lw == lr:
            return reader  # Avro's resolution reads it as the producer meant
        if writer.get("type") == reader.get("type") and any(
            lw[0] in same and lr[0] in same for same in _SAME_IN_SPARK
        ):
            self.changed = True
            return dict(writer)
        if (
            lw[0] == lr[0] == "decimal"
            and writer.get("type") == reader.get("type") == "bytes"
            and isinstance(lw[1], int)
            and isinstance(lr[1], int)
        ):
            if lw[2] == lr[2]:
                return reader  # the same scale: the unscaled value reads as it was written
            if lr[2] >= lw[2] and lr[1] - lr[2] >= lw[1] - lw[2]:
                self.changed = self.cast = True
                return dict(writer)
        self.misread.append(Misread(path or "value", _describe(writer), _describe(reader)))
        return reader
