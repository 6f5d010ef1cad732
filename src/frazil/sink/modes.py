"""Write modes: set each record's operation (append today; upsert and delete later)."""

from __future__ import annotations

from frazil import columns as c

#: Reason of a tombstone sent to the dead-letter queue by an append pipeline.
TOMBSTONE = "null value (a tombstone): an append table has no row to delete"


def append_mode(batch: c.Projection, dead_letters: bool = False) -> c.Projection:
    """Append every record, except those not to be written: skip them.

    A tombstone (null value) means nothing to an append table: it is skipped, or, with a
    dead-letter queue (where nothing is dropped unless configured), marked so that it goes
    there. A record an earlier step already set to skip (a transform's ``filter``) stays
    skipped.
    """
    from pyspark.sql import functions as F

    from frazil.decode.errors import decode_error

    skipped = F.coalesce(batch[c.OP] == F.lit(c.OP_SKIP), F.lit(False))
    tombstone = batch[c.VALUE].isNull()
    if not dead_letters:
        op = F.when(tombstone | skipped, F.lit(c.OP_SKIP)).otherwise(F.lit(c.OP_APPEND))
        return {**batch, c.OP: op}
    error = F.coalesce(
        batch[c.ERROR],
        F.when(tombstone & ~skipped, decode_error(F.lit(TOMBSTONE), F.lit(""))).cast(c.ERROR_DDL),
    )
    op = F.when(skipped, F.lit(c.OP_SKIP)).otherwise(F.lit(c.OP_APPEND))
    return {**batch, c.OP: op, c.ERROR: error}
