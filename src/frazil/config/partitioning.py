"""Partition transforms of ``partition_by``: Iceberg's hidden partitioning, checked up front."""

from __future__ import annotations

import re
from dataclasses import dataclass

from frazil.config.suggest import did_you_mean
from frazil.config.variant_paths import is_variant_path, not_a_column

#: Transforms that take only a column, with Iceberg/Spark's accepted aliases.
_UNARY: dict[str, str] = {
    "identity": "identity",
    "years": "years",
    "year": "years",
    "months": "months",
    "month": "months",
    "days": "days",
    "day": "days",
    "date": "days",
    "hours": "hours",
    "hour": "hours",
    "date_hour": "hours",
}
#: Transforms that take a width/count and a column.
_BINARY: dict[str, str] = {"bucket": "bucket", "truncate": "truncate"}

_COLUMN = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_PLAIN = re.compile(rf"^({_COLUMN})$")
_UNARY_CALL = re.compile(rf"^([a-z_]+)\(\s*({_COLUMN})\s*\)$")
_BINARY_CALL = re.compile(rf"^([a-z_]+)\(\s*(\d+)\s*,\s*({_COLUMN})\s*\)$")


@dataclass(frozen=True)
class PartitionField:
    """One parsed partition transform.

    Attributes:
        transform: Canonical transform name (``identity``, ``days``, ``bucket`` ...).
        column: The source column (dotted for nested fields).
        width: The bucket count or truncate width, for those transforms.
    """

    transform: str
    column: str
    width: int | None = None

    def to_spark_sql(self) -> str:
        """The transform as Spark SQL writes it in ``PARTITIONED BY (...)``."""
        if self.transform == "identity":
            return self.column
        if self.width is not None:
            return f"{self.transform}({self.width}, {self.column})"
        return f"{self.transform}({self.column})"


def parse_partition_field(text: str) -> PartitionField:
    """Parse one ``partition_by`` entry such as ``days(created_at)`` or ``bucket(16, id)``.

    Raises:
        ValueError: The transform is unknown or malformed; the message lists the known ones.
    """
    spec = text.strip()
    if is_variant_path(spec):
        raise not_a_column("partition_by", spec)
    plain = _PLAIN.match(spec)
    if plain:
        return PartitionField("identity", plain.group(1))
    unary = _UNARY_CALL.match(spec)
    if unary:
        name = unary.group(1)
        if name in _UNARY:
            return PartitionField(_UNARY[name], unary.group(2))
        if name in _BINARY:
            raise ValueError(
                f"{name}() needs a width and a column, e.g. {name}(16, {unary.group(2)})"
            )
    binary = _BINARY_CALL.match(spec)
    if binary and binary.group(1) in _BINARY:
        width = int(binary.group(2))
        if width < 1:
            raise ValueError(f"{binary.group(1)} width must be at least 1")
        return PartitionField(_BINARY[binary.group(1)], binary.group(3), width)
    call = re.match(r"^([A-Za-z_]+)\(", spec)
    if call and call.group(1) not in _UNARY and call.group(1) not in _BINARY:
        hint = did_you_mean(call.group(1), [*_UNARY.values(), *_BINARY.values()])
        raise ValueError(
            f"unknown partition transform {call.group(1)!r} "
            f"(known: identity, years, months, days, hours, bucket(N, col), truncate(W, col)){hint}"
        )
    raise ValueError(
        f"cannot parse partition transform {text!r}: expected col, days(col), bucket(N, col) ..."
    )
