"""Write modes: set each record's operation (append today; upsert and delete later)."""

from __future__ import annotations

from frazil import columns as c


def append_mode(batch: c.Projection) -> c.Projection:
    """Append every record; tombstones (null values) mean nothing to an append table: skip."""
    from pyspark.sql import functions as F

    op = F.when(batch[c.VALUE].isNull(), F.lit(c.OP_SKIP)).otherwise(F.lit(c.OP_APPEND))
    return {**batch, c.OP: op}
