"""The dead-letter table's rows in a replay (:mod:`~frazil.engine.replay`): the dead letters
read as of the replay's snapshot, the rows sent back stamped with when their record first
failed, and the replayed rows deleted once the replay's writes are committed.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import datetime
from typing import TYPE_CHECKING

from frazil.errors import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# The replay's logger: a replay's messages keep the one name users and tests follow.
log = logging.getLogger("frazil.engine.replay")

#: Attempts of the delete when it loses to a concurrent commit (a run's dead letters).
DELETE_ATTEMPTS = 6
DELETE_BACKOFF_S = 0.5
_CONFLICTS = ("ValidationException", "CommitFailedException")


def read(
    spark: SparkSession,
    name: str,
    snapshot: int,
    pipeline: str,
    stage: str | None,
    since: datetime | None,
) -> DataFrame:
    """The dead letters of ``pipeline`` in the dead-letter table ``name`` as of ``snapshot``:
    of ``stage`` only, and failed at or after ``since``, when given."""
    from pyspark.sql import functions as F

    rows = spark.read.option("versionAsOf", str(snapshot)).table(name)
    rows = rows.where(F.col("pipeline") == pipeline)
    if stage is not None:
        rows = rows.where(F.col("stage") == stage)
    if since is not None:
        rows = rows.where(F.col("failed_at") >= F.lit(since))
    return rows


#: How much later than the row it replaces a record sent back by a replay is stamped.
SENT_BACK_AFTER = "INTERVAL 1 MICROSECOND"


def first_failure(back: DataFrame, source: DataFrame) -> DataFrame:
    """The sent-back rows with the failure time of the rows they replace: ``failed_at``
    stays when a record first failed (``frazil dlq show``'s "first failed"), not the replay's
    time. One microsecond later, so that the replay's delete, which matches position and
    failure time exactly, tells the row it replaces from the one it sent back."""
    from pyspark.sql import functions as F

    keys = ["topic", "partition", "offset"]
    first = source.groupBy(*keys).agg(F.min("failed_at").alias("_first_failed_at"))
    stamped = F.coalesce(
        F.col("_first_failed_at") + F.expr(SENT_BACK_AFTER), F.col("failed_at")
    ).alias("failed_at")
    return back.join(first, keys, "left").select(
        *[stamped if name == "failed_at" else F.col(name) for name in back.columns]
    )


def delete(spark: SparkSession, name: str, source: DataFrame, pipeline: str) -> None:
    """Delete the replayed rows, matched exactly (position and failure time), so rows the
    replay sent back, and later dead letters of the same records, stay."""
    view = f"frazil_replayed_{uuid.uuid4().hex}"
    source.select("pipeline", "topic", "partition", "offset", "failed_at").createOrReplaceTempView(
        view
    )
    statement = (
        f"MERGE INTO {name} t USING {view} s ON t.pipeline = s.pipeline "
        "AND t.topic = s.topic AND t.partition = s.partition AND t.offset = s.offset "
        "AND t.failed_at = s.failed_at WHEN MATCHED THEN DELETE"
    )
    try:
        delay = DELETE_BACKOFF_S
        for attempt in range(1, DELETE_ATTEMPTS + 1):
            try:
                spark.sql(statement)
                return
            except Exception as exc:  # py4j wraps Spark's error
                text = str(exc)
                if attempt < DELETE_ATTEMPTS and any(n in text for n in _CONFLICTS):
                    # A run's dead letters (or maintenance) committed while the MERGE ran;
                    # nothing was deleted. The exact match makes running it again on the new
                    # snapshot safe.
                    log.info(
                        "%s: deleting the replayed dead letters from %s lost to a concurrent "
                        "commit; retrying (attempt %d of %d)",
                        pipeline,
                        name,
                        attempt + 1,
                        DELETE_ATTEMPTS,
                    )
                    time.sleep(delay)
                    delay *= 2
                    continue
                raise PipelineError(
                    f"pipeline {pipeline!r}: could not delete the replayed dead letters from "
                    f"{name}: {_cause(text)}. The replay stays open: run `frazil dlq "
                    "replay` again to finish it (what it wrote is not written again)"
                ) from None
    finally:
        spark.catalog.dropTempView(view)


def _cause(text: str) -> str:
    """The JVM's own exception line of a py4j error (its first line only names the call)."""
    lines = [line.strip().lstrip(": ") for line in text.strip().splitlines()]
    found = next((line for line in lines if "Exception" in line or "Error" in line), None)
    return (found or (lines[0] if lines else "unknown error"))[:300]
