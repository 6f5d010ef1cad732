"""Write modes: set each record's operation (append today; upsert and delete later)."""

from __future__ import annotations

from frazil import columns as c


def append_mode(batch: c.Projection) -> c.Projection:
    """Append every record, except those not to be written: skip them.

    A tombstone (null value) means nothing to an append table; a record an earlier step
    already set to skip (a transform's ``filter``) stays skipped.
    """
    from pyspark.sql import functions as F

    skipped = F.coalesce(batch[c.OP] == F.lit(c.OP_SKIP), F.lit(False))
    op = F.when(batch[c.VALUE].isNull() | skipped, F.lit(c.OP_SKIP)).otherwise(F.lit(c.OP_APPEND))
    return {**batch, c.OP: op}
