"""Partition transforms of ``partition_by``: Iceberg's hidden partitioning, checked up front."""

from __future__ import annotations

import re
from dataclasses import dataclass

from frazil.config.suggest import did_you_mean
from frazil.config.variant_paths import VARIANT_PATH_STEPS, is_variant_path, parse_variant_path

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
#: A path into a variant column, with the type it is read as (``::string`` unless given).
_PATH = rf"{_COLUMN}:{VARIANT_PATH_STEPS}(?:::[a-z_]+)?"
_TERM = rf"(?:{_PATH}|{_COLUMN})"
_PLAIN = re.compile(rf"^({_TERM})$")
_UNARY_CALL = re.compile(rf"^([a-z_]+)\(\s*({_TERM})\s*\)$")
_BINARY_CALL = re.compile(rf"^([a-z_]+)\(\s*(\d+)\s*,\s*({_TERM})\s*\)$")


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
    #: For a path into a variant (``payload:geo.country::string``): the Spark SQL that
    #: derives :attr:`column` from it (``try_variant_get``), and the path as written.
    source: str | None = None
    path: str | None = None

    @property
    def reads(self) -> str:
        """The column the records must have: the partition column, or the variant column a
        path reads."""
        return self.column if self.path is None else self.path.split(":", 1)[0]

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
    plain = _PLAIN.match(spec)
    if plain:
        return _field("identity", plain.group(1))
    unary = _UNARY_CALL.match(spec)
    if unary:
        name = unary.group(1)
        if name in _UNARY:
            return _field(_UNARY[name], unary.group(2))
        if name in _BINARY:
            raise ValueError(
                f"{name}() needs a width and a column, e.g. {name}(16, {unary.group(2)})"
            )
    binary = _BINARY_CALL.match(spec)
    if binary and binary.group(1) in _BINARY:
        width = int(binary.group(2))
        if width < 1:
            raise ValueError(f"{binary.group(1)} width must be at least 1")
        return _field(_BINARY[binary.group(1)], binary.group(3), width)
    call = re.match(r"^([A-Za-z_]+)\(", spec)
    if call and call.group(1) not in _UNARY and call.group(1) not in _BINARY:
        hint = did_you_mean(call.group(1), [*_UNARY.values(), *_BINARY.values()])
        raise ValueError(
            f"unknown partition transform {call.group(1)!r} "
            f"(known: identity, years, months, days, hours, bucket(N, col), truncate(W, col)){hint}"
        )
    if is_variant_path(spec):
        raise ValueError(
            f"cannot parse partition transform {text!r}: a path into a variant is written "
            "column:path, with the type it is read as after '::' (string unless given), e.g. "
            "payload:geo.country, days(payload:at::timestamp), bucket(16, payload:user.id)"
        )
    raise ValueError(
        f"cannot parse partition transform {text!r}: expected col, days(col), bucket(N, col) ..."
    )


def _field(transform: str, term: str, width: int | None = None) -> PartitionField:
    """A partition field of a column, or of a path into a variant column: the path is
    derived into a column of its own, named after it (``payload:geo.country`` →
    ``payload_geo_country``), which the table is partitioned by."""
    if not is_variant_path(term):
        return PartitionField(transform, term, width)
    written, _, cast = term.partition("::")
    path = parse_variant_path(written)
    name = re.sub(r"[^A-Za-z0-9]+", "_", f"{path.column}_{path.path}").strip("_")
    literal = path.json_path.replace("\\", "\\\\").replace("'", "\\'")
    source = f"try_variant_get({path.column}, '{literal}', '{cast or 'string'}')"
    return PartitionField(transform, name, width, source=source, path=written)
