"""The error mark a decoder sets on a record it cannot decode."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil import columns as c

if TYPE_CHECKING:
    from pyspark.sql import Column


def decode_error(reason: Column, detail: Column) -> Column:
    """The error struct of stage ``decode`` (``columns.ERROR_DDL``)."""
    from pyspark.sql import functions as F

    return F.struct(
        F.lit(c.STAGE_DECODE).alias("stage"),
        reason.cast("string").alias("reason"),
        detail.cast("string").alias("detail"),
    )


def hex_prefix(data: Column, length: int = 32) -> Column:
    """The first ``length`` bytes of a binary value in hex, quoted in error details."""
    from pyspark.sql import functions as F

    return F.hex(F.substring(data, 1, length))
