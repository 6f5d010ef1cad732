"""A batch's decoded rows kept for the queries that read them again.

A cache (``persist``) keeps the plan that fills it: every query over it plans, describes and
ships to each task the whole lineage again — the Kafka read, the decode with its schemas, the
routes. A batch's MERGE per table, its checks and its dead-letter send are each such a query,
and over a Debezium envelope's decode that lineage cost a small routed batch more than its
writes (tasks deserialising it, plans built and described from it). Where the tasks run in
the driver's JVM (``local`` masters), a local checkpoint keeps the same rows (in memory,
spilling to disk) behind a scan of them alone. On a cluster the cache stays: an executor lost
with a local checkpoint's blocks fails the batch, while a cache reads them again from Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil.engine.jvm_tuning import is_local

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def keep(frame: DataFrame, sort_by: str) -> DataFrame:
    """``frame``'s rows, kept by the first job that reads them.

    Args:
        frame: The rows.
        sort_by: A cache's rows are sorted by it within each partition, so a reader filtering
            on it skips the blocks whose smallest and largest values rule them out.

    Returns:
        A frame reading the kept rows; until a job has read it, reading it computes them.
    """
    from pyspark import StorageLevel

    if _in_driver(frame):
        return frame.localCheckpoint(eager=False)
    return frame.sortWithinPartitions(sort_by).persist(StorageLevel.MEMORY_AND_DISK_DESER)


def let_go(frame: DataFrame) -> None:
    """Drop the rows :func:`keep` kept for ``frame`` (a local checkpoint's would go only once
    the driver's garbage collector found them unreferenced)."""
    if _in_driver(frame):
        frame._jdf.queryExecution().analyzed().rdd().unpersist(False)
    else:
        frame.unpersist()


def _in_driver(frame: DataFrame) -> bool:
    return is_local(frame.sparkSession.sparkContext.master or "")
