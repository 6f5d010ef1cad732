"""Paths into a ``variant`` column, written as Spark SQL writes them: ``payload:user.id``.

``route.field`` names a column, or (with ``:``) a path into a variant column: the column,
``:``, then the path's steps in Spark's colon syntax, an object key (``user``, ``.id``,
``['a key']``) or an array index (``[0]``). The route reads the value at that path as text
(Spark's ``try_variant_get(column, '$.path', 'string')``, in the JVM); a record without the
path reads null, which the route treats as matching no table.

``partition_by`` takes a path (with ``::type``), derived into a column of its own after the
transforms (:mod:`frazil.config.partitioning`): Iceberg partitions by columns, not by paths
inside a variant. ``sort_by`` names columns only: a path is derived into a column first
(``derive: {country: "payload:country::string"}``), then named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_KEY = r"\['[^'\\]*'\]"
_INDEX = r"\[\d+\]"
_FIRST = rf"(?:{_NAME}|{_KEY}|{_INDEX})"
_NEXT = rf"(?:\.{_NAME}|{_KEY}|{_INDEX})"
_COLUMN = rf"{_NAME}(?:\.{_NAME})*"
#: The steps of a path after ``column:``, as a regular expression (no groups).
VARIANT_PATH_STEPS = rf"{_FIRST}{_NEXT}*"
_VARIANT_PATH = re.compile(rf"^({_COLUMN}):({_FIRST}{_NEXT}*)$")


@dataclass(frozen=True)
class VariantPath:
    """A parsed ``column:path``.

    Attributes:
        column: The variant column (dotted when it sits in a struct).
        path: The path as written after ``:`` (``user.id``, ``items[0].sku``).
    """

    column: str
    path: str

    @property
    def json_path(self) -> str:
        """The path as ``variant_get`` takes it: ``$.user.id``, ``$['a key']``, ``$[0]``."""
        return "$" + ("" if self.path.startswith("[") else ".") + self.path

    def __str__(self) -> str:
        return f"{self.column}:{self.path}"


def is_variant_path(text: str) -> bool:
    """Whether ``text`` is written as a variant path (has a ``:``), valid or not."""
    return ":" in text


def parse_variant_path(text: str) -> VariantPath:
    """``column:path`` parsed.

    Raises:
        ValueError: ``text`` is not a column, ``:`` and a path of keys and indexes.
    """
    match = _VARIANT_PATH.match(text.strip())
    if match is None:
        raise ValueError(
            f"{text!r} is not a variant path: write the variant column, ':' and the path, "
            "e.g. payload:user.id, payload:items[0].sku or payload:['a key']"
        )
    return VariantPath(match.group(1), match.group(2))


def not_a_column(key: str, text: str) -> ValueError:
    """The error of a ``partition_by`` or ``sort_by`` entry naming a variant path."""
    path = re.search(rf"{_COLUMN}:\S*?(?=[\s),]|$)", text)
    written = path.group(0) if path else text
    leaf = re.findall(_NAME, written.split(":", 1)[-1]) or ["value"]
    return ValueError(
        f"{key} names table columns, and {written!r} is a path into a variant, which Iceberg "
        f"does not {'partition' if key == 'partition_by' else 'sort'} by: derive it into a "
        f'column first (transforms: [{{derive: {{{leaf[-1]}: "{written}::string"}}}}]) and '
        f"name that column"
    )
