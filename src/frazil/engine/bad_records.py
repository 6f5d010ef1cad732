"""Records marked bad while a batch is written: how they fail the write, which ones a decoder
may learn from, and the error that stops the pipeline when they cannot go anywhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.errors import DecodeError, PipelineError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: How many bad records a rejected batch quotes.
QUOTED_BAD_RECORDS = 3
#: Marks the failure of a write that met a record marked bad (see :func:`failure`).
BAD_RECORD = "frazil-bad-record"


class BadRecords(Exception):
    """A write met records marked bad; ``rows`` are the rows it wrote from."""

    def __init__(self, rows: DataFrame) -> None:
        super().__init__("bad records")
        self.rows = rows


def failure() -> Column:
    """What a write evaluates for a record marked bad: it fails the job, naming the record."""
    from pyspark.sql import functions as F

    return F.raise_error(
        F.format_string(
            f"{BAD_RECORD} topic %s partition %d offset %d",
            F.col(c.TOPIC),
            F.col(c.PARTITION),
            F.col(c.OFFSET),
        )
    )


def is_bad_record_failure(exc: BaseException) -> bool:
    """Whether a failed write failed on :func:`failure` (py4j and Spark wrap the job's
    failure; the mark survives in the message)."""
    return BAD_RECORD in str(exc)


def learnable(error: Column) -> Column:
    """Whether a record's error is one a decoder may learn from (a new schema id, new JSON
    fields, another Protobuf message in a routed pipeline): such records replan the batch
    rather than go to the dead-letter queue (they do when nothing is learned)."""
    from frazil.decode.json import NEW_FIELDS, NEW_SCHEMA
    from frazil.decode.protobuf import ANOTHER_MESSAGE

    reason = error["reason"]
    return error.isNotNull() & (
        reason.startswith("unknown schema id")
        | reason.startswith(NEW_FIELDS)  # frazil's decoder names the first: "…: 'info.b'"
        | (reason == NEW_SCHEMA)
        | reason.endswith(ANOTHER_MESSAGE)
    )


def own_error(error: Column, routed: bool) -> Column:
    """A table's own marks of a record (values it cannot take). In a routed batch the
    records marked before routing go to the dead-letter queue once, for the whole batch."""
    from pyspark.sql import functions as F

    return F.when(F.col(c.ERROR).isNull(), error) if routed else error


#: The two ways past a record that stops a pipeline with ``errors.tolerance: none``: it will
#: fail the same way at every run until one of them is taken.
WAYS_FORWARD = (
    "To go on: fix the records' producer or the config (schema, transforms, route) and run again, "
    "or set `errors.tolerance: all` with a dead-letter queue (`errors.dlq_topic` or "
    "`errors.dlq_table`) to set such records aside and keep going (docs/dead-letters.md)."
)


def rejected(
    rows: DataFrame, pipeline: str, value_format: str, batch_id: int, no_dlq: bool = True
) -> PipelineError:
    """The error that stops a batch holding marked records, quoting the first ones.

    Args:
        rows: The batch's rows (marked ones among them).
        pipeline: The pipeline's name.
        value_format: The format its values are decoded as.
        batch_id: The batch.
        no_dlq: The pipeline has no dead-letter queue (``errors.tolerance: none``): the
            message ends with :data:`WAYS_FORWARD`.
    """
    from pyspark.sql import functions as F

    bad_rows = rows.where(F.col(c.ERROR).isNotNull())
    total = bad_rows.count()
    bad = (
        bad_rows.orderBy(c.TOPIC, c.PARTITION, c.OFFSET)
        .select(c.TOPIC, c.PARTITION, c.OFFSET, c.ERROR)
        .limit(QUOTED_BAD_RECORDS)
        .collect()
    )
    quoted = "\n".join(
        f"  topic {r[c.TOPIC]} partition {r[c.PARTITION]} offset {r[c.OFFSET]}: "
        f"{r[c.ERROR]['stage']}: {r[c.ERROR]['reason']}: {r[c.ERROR]['detail']!r}"
        for r in bad
    )
    stages = sorted({r[c.ERROR]["stage"] for r in bad})
    kind = DecodeError if stages == [c.STAGE_DECODE] else PipelineError
    what = (
        f"do not decode as {value_format} with the pipeline's schema"
        if kind is DecodeError
        else "failed"
    )
    return kind(
        f"pipeline {pipeline!r}: {total} record(s) in batch {batch_id} {what}; "
        f"nothing of this batch was committed and the pipeline stopped so no record is "
        f"lost. First ones:\n{quoted}" + (f"\n{WAYS_FORWARD}" if no_dlq else "")
    )
