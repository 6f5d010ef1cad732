"""The field type language of ``schema:`` blocks, checked without starting Spark.

Types are Spark SQL type names, lower-case aliases accepted: ``string``, ``int``, ``long``,
``double``, ``boolean``, ``timestamp``, ``date``, ``decimal(10,2)``, ``array<string>``,
``map<string,long>``, ``struct<a:int,b:string>``. :func:`to_spark_ddl` returns the canonical
Spark DDL spelling, which Spark's own parser accepts.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from frazil.config.suggest import did_you_mean

_SIMPLE: dict[str, str] = {
    "string": "STRING",
    "str": "STRING",
    "varchar": "STRING",
    "int": "INT",
    "integer": "INT",
    "long": "BIGINT",
    "bigint": "BIGINT",
    "short": "SMALLINT",
    "smallint": "SMALLINT",
    "byte": "TINYINT",
    "tinyint": "TINYINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "bool": "BOOLEAN",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
    "date": "DATE",
    "binary": "BINARY",
    "bytes": "BINARY",
}

_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class TypeSyntaxError(ValueError):
    """A type string does not follow the schema type language."""


def _split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside of ``<>`` and ``()`` brackets."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
            if depth < 0:
                raise TypeSyntaxError(f"unbalanced brackets in {text!r}")
        if ch == sep and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise TypeSyntaxError(f"unbalanced brackets in {text!r}")
    parts.append("".join(current).strip())
    return parts


def to_spark_ddl(type_text: str) -> str:
    """Check a type string and return its canonical Spark DDL form.

    Args:
        type_text: A type such as ``long``, ``decimal(10,2)`` or ``array<struct<a:int>>``.

    Returns:
        The Spark SQL DDL spelling, e.g. ``BIGINT`` or ``ARRAY<STRUCT<a: INT>>``.

    Raises:
        TypeSyntaxError: The type is unknown or malformed; the message names it.
    """
    text = type_text.strip()
    lower = text.lower()
    if lower in _SIMPLE:
        return _SIMPLE[lower]
    decimal = _DECIMAL.match(lower)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        if not 1 <= precision <= 38 or scale > precision:
            raise TypeSyntaxError(
                f"decimal({precision},{scale}) needs 1 <= precision <= 38 and scale <= precision"
            )
        return f"DECIMAL({precision},{scale})"
    for kind in ("array", "map", "struct"):
        if lower.startswith(kind + "<"):
            if not text.endswith(">"):
                raise TypeSyntaxError(f"{type_text!r} is missing its closing '>'")
            inner = text[len(kind) + 1 : -1]
            parts = _split_top_level(inner)
            if kind == "array":
                if len(parts) != 1:
                    raise TypeSyntaxError(f"array takes one element type, got {type_text!r}")
                return f"ARRAY<{to_spark_ddl(parts[0])}>"
            if kind == "map":
                if len(parts) != 2:
                    raise TypeSyntaxError(f"map takes a key and a value type, got {type_text!r}")
                return f"MAP<{to_spark_ddl(parts[0])}, {to_spark_ddl(parts[1])}>"
            fields = []
            for part in parts:
                name, sep, field_type = part.partition(":")
                if not sep or not _FIELD_NAME.match(name.strip()):
                    raise TypeSyntaxError(f"struct field {part!r} must look like name:type")
                fields.append(f"{name.strip()}: {to_spark_ddl(field_type)}")
            return f"STRUCT<{', '.join(fields)}>"
    known = ", ".join(sorted({*_SIMPLE, "decimal(p,s)", "array<T>", "map<K,V>", "struct<...>"}))
    hint = (
        f" (did you mean {_OTHER_NAMES[lower]!r}?)"
        if lower in _OTHER_NAMES
        else did_you_mean(lower, _SIMPLE)
    )
    raise TypeSyntaxError(f"unknown type {type_text!r} (known: {known}){hint}")


#: What other systems call a type frazil spells differently: too far apart for a spelling
#: hint, but what a user coming from them writes.
_OTHER_NAMES = {
    "datetime": "timestamp",
    "timestamptz": "timestamp",
    "timestamp_tz": "timestamp",
    "text": "string",
    "number": "double",
    "numeric": "decimal(p,s)",
    "real": "float",
    "bytea": "binary",
    "blob": "binary",
}


def check_field_types(fields: dict[str, str], check_name: Callable[[str], object]) -> None:
    """A declared schema's fields: each name passes ``check_name`` and each type parses.

    Raises:
        ValueError: The first field that does not, naming it.
    """
    for _, reason in field_problems(fields, check_name)[:1]:
        raise ValueError(reason)


def field_problems(
    fields: dict[str, str], check_name: Callable[[str], object]
) -> list[tuple[str, str]]:
    """Every field of a declared schema whose name or type does not pass, with the reason
    :func:`check_field_types` gives for it (``field 'amount': unknown type …``)."""
    problems: list[tuple[str, str]] = []
    for name, type_text in fields.items():
        try:
            check_name(name)
        except ValueError as exc:
            problems.append((name, str(exc)))
            continue
        try:
            to_spark_ddl(type_text)
        except TypeSyntaxError as exc:
            problems.append((name, f"field {name!r}: {exc}"))
    return problems
