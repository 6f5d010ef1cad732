"""Sort orders of ``sort_by``: ``column [asc|desc] [nulls first|last]``, checked up front."""

from __future__ import annotations

import re
from dataclasses import dataclass

from frazil.config.variant_paths import is_variant_path, not_a_column

_SORT = re.compile(
    r"^(?P<column>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
    r"(?:\s+(?P<direction>asc|desc))?(?:\s+nulls\s+(?P<nulls>first|last))?$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SortField:
    """One parsed sort field.

    Attributes:
        column: The column (dotted for nested fields).
        descending: Whether the order is descending.
        nulls_first: Where nulls go (Iceberg's default: first when ascending, last when
            descending).
    """

    column: str
    descending: bool = False
    nulls_first: bool = True


def parse_sort_field(text: str) -> SortField:
    """Parse one ``sort_by`` entry such as ``created_at desc`` or ``id asc nulls last``.

    Raises:
        ValueError: The entry is not ``column [asc|desc] [nulls first|last]``.
    """
    if is_variant_path(text):
        raise not_a_column("sort_by", text.strip())
    match = _SORT.match(text.strip())
    if match is None:
        raise ValueError(
            f"{text!r} must be 'column [asc|desc] [nulls first|last]', e.g. 'created_at desc'"
        )
    descending = (match.group("direction") or "asc").lower() == "desc"
    nulls = match.group("nulls")
    nulls_first = (not descending) if nulls is None else nulls.lower() == "first"
    return SortField(match.group("column"), descending, nulls_first)
