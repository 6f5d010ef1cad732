"""PyIceberg 0.12 reads the metadata of tables with a ``variant`` column.

PyIceberg 0.12 knows format version 3 but not its ``variant`` type: loading such a table's
metadata fails (``Unsupported field type: 'variant'``), and with it every command that reads
metadata without Spark (``frazil status``, ``frazil tables``, ``optimize --dry-run``, the run's
summary). Those commands read snapshots, manifests and partition values, never a variant's
data, so :func:`read_variant_columns` teaches PyIceberg's field-type parser the name: a field
of type ``variant`` (a column, or a struct's field at any depth) becomes a :class:`VariantType`,
which writes itself back as ``variant``. A PyIceberg that parses ``variant`` itself is left to
do so; the hook only answers where PyIceberg gives up.

A ``variant`` as a list's element or a map's value is not covered (PyIceberg parses those
without the hook); frazil's tables hold variants as columns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field
from pyiceberg.types import IcebergType, PrimitiveType

#: The field type's name in Iceberg's table metadata.
VARIANT = "variant"


class VariantType(PrimitiveType):
    """Iceberg's ``variant`` (format version 3), as far as metadata reads need it: a name."""

    root: Literal["variant"] = Field(default="variant")

    def minimum_format_version(self) -> Literal[3]:
        """Iceberg's variant type came with format version 3."""
        return 3


def read_variant_columns() -> None:
    """Make PyIceberg parse the ``variant`` field type (once per process; idempotent)."""
    if getattr(IcebergType, "_frazil_reads_variant", False):
        return
    # NestedField's field-type validator looks this classmethod up on IcebergType at each
    # call, so wrapping it reaches every field parsed from now on.
    parse: Callable[[Any, Any], IcebergType] = getattr(IcebergType, "handle_primitive_type")  # noqa: B009

    def handle(cls: type[IcebergType], value: Any, handler: Any) -> IcebergType:
        try:
            return parse(value, handler)
        except ValueError:
            if value == VARIANT:
                return VariantType()
            raise

    setattr(IcebergType, "handle_primitive_type", classmethod(handle))  # noqa: B010
    setattr(IcebergType, "_frazil_reads_variant", True)  # noqa: B010
