"""Failing records carried out of the write's own pass, for the dead-letter queue.

A single-table write in dead-letter mode filters failing records out of the append and
observes them (``DataFrame.observe``) as the rows stream by. Each observed record carries its
position (topic, partition, offset), stage and reason, and, when its raw bytes are small
enough, the raw record itself (key, value, headers, timestamp, error detail). The dead-letter
queue is then written from what was observed: no second read of the batch from Kafka, no
second decode. Records too large to carry are read again by position after the commit.

Memory stays bounded whatever the batch holds: a record is carried only if its raw bytes fit
``budget / records in the batch``, so even a batch whose every record fails carries at most
the budget (a sixteenth of the driver's heap, and a quarter of ``spark.driver.maxResultSize``)
in raw bytes; the few copies Spark makes on the way (task buffers, task results, the merged
row) stay well within the heap.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from frazil import columns as c
from frazil.jvm.classes import java_class
from frazil.source.offsets import TopicOffsets

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation, SparkSession

#: Largest raw record (key + value + headers + error detail) carried in the write's pass.
MAX_CARRIED_BYTES = 64 * 1024
#: Bytes counted per failing record besides its raw bytes (position, stage, reason).
_RECORD_OVERHEAD = 128
#: The carried records' error column, in the DataFrame handed to the dead-letter queue.
ERROR_COLUMN = c.DEAD_ERROR
#: Raw columns carried, in the observed struct's order (headers only when read).
_RAW = (c.KEY, c.VALUE, c.TIMESTAMP_MS)
_SIZES = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def driver_budget(spark: SparkSession) -> int:
    """Bytes of failing records one batch may carry: a sixteenth of the driver's heap, and a
    quarter of ``spark.driver.maxResultSize`` (observed metrics travel in task results,
    which count against it; a job over it fails)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    heap = int(jvm.java.lang.Runtime.getRuntime().maxMemory())
    budget = heap // 16
    results = _bytes(str(spark.sparkContext.getConf().get("spark.driver.maxResultSize", "1g")))
    if results > 0:  # 0: no limit
        budget = min(budget, results // 4)
    return budget


def _bytes(size: str) -> int:
    """A Spark size (``1g``, ``512m``, ``2048``: MiB without a unit) in bytes."""
    match = re.fullmatch(r"(\d+)([kmgt]?)b?", size.strip().lower())
    if match is None:
        return 2**30
    return int(match.group(1)) * _SIZES[match.group(2) or "m"]


def records_upper_bound(planned: TopicOffsets, start: TopicOffsets | None) -> int:
    """At most how many records a batch holds: planned ends minus known starts (0 where a
    start is not known, which over-counts and so only makes the carried share smaller)."""
    total = 0
    for topic, parts in planned.items():
        for partition, end in parts.items():
            begin = (start or {}).get(topic, {}).get(partition, 0)
            total += max(0, end - begin)
    return total


def carry_limit(budget: int, records: int) -> int:
    """Largest raw size of one carried record, for a batch of at most ``records``."""
    share = budget // max(1, records) - _RECORD_OVERHEAD
    return max(0, min(MAX_CARRIED_BYTES, share))


def observed(error: Column, limit: int, has_headers: bool) -> Column:
    """The observation's column listing a batch's failing records (one struct each: topic,
    partition, offset, stage, reason, and ``raw`` when its bytes fit ``limit``)."""
    from pyspark.sql import functions as F

    size = (
        F.coalesce(F.length(F.col(c.KEY)), F.lit(0))
        + F.coalesce(F.length(F.col(c.VALUE)), F.lit(0))
        + F.coalesce(F.length(error["detail"]), F.lit(0))
    )
    raw = [F.col(name) for name in _RAW]
    if has_headers:
        size = size + F.coalesce(
            F.aggregate(
                F.col(c.HEADERS),
                F.lit(0),
                lambda total, h: (
                    total
                    + F.coalesce(F.length(h["key"]), F.lit(0))
                    + F.coalesce(F.length(h["value"]), F.lit(0))
                ),
            ),
            F.lit(0),
        )
        raw.append(F.col(c.HEADERS))
    # Quoted as the dead-letter table's own rows quote them (valid UTF-8, else hex): a Java
    # string made of invalid bytes would have them replaced instead.
    record = F.struct(*raw, c.quoted_text(error["detail"]).alias("detail"))
    # A limit of 0 carries nothing, not even a record without bytes (a tombstone).
    carried = F.when(size <= F.lit(limit) if limit > 0 else F.lit(False), record)
    return F.collect_list(
        F.when(
            error.isNotNull(),
            F.struct(
                F.col(c.TOPIC),
                F.col(c.PARTITION),
                F.col(c.OFFSET),
                error["stage"],
                c.quoted_text(error["reason"]).alias("reason"),
                carried.alias("raw"),
            ),
        )
    )


Position = tuple[str, int, int, str, str]


@dataclass(frozen=True)
class Failing:
    """A batch's failing records for one table, as its write found them."""

    #: Every failing record: (topic, partition, offset, stage, reason).
    positions: list[Position]
    #: The positions of the records not carried (read again from Kafka).
    missing: list[Position]
    #: The observed records in the JVM (a ``List<Row>``), when observed.
    records: Any = None
    observation: Observation | None = None

    @classmethod
    def observed(cls, jvm: Any, observation: Observation) -> Failing | None:
        """What the write's observation (:func:`observed`) found; None if nothing failed.

        Only the positions cross to Python (one JSON string): the records' bytes stay in the
        JVM unless :meth:`carried_rows` asks for them.
        """
        java = observation._jo
        assert java is not None  # the observed write ran
        row = java.getRow()
        if not int(row.getLong(row.fieldIndex("bad"))):
            return None
        # A record read twice (a range distribution's sampling job) is listed twice.
        files = java_class(jvm, "dev.frazil.spark.DeadLetterFiles")
        records = files.distinct(row.getList(row.fieldIndex("at")))
        positions: list[Position] = []
        missing: list[Position] = []
        for topic, partition, offset, stage, reason, carried in json.loads(
            files.positions(records)
        ):
            at = (str(topic), int(partition), int(offset), str(stage), str(reason))
            positions.append(at)
            if not carried:
                missing.append(at)
        return cls(positions, missing, records, observation)

    @classmethod
    def at(cls, rows: list[Any]) -> Failing:
        """Failing records known by position only (all to be read again)."""
        positions = [(str(r[0]), int(r[1]), int(r[2]), str(r[3]), str(r[4])) for r in rows]
        return cls(positions, list(positions))

    def carried_rows(self) -> list[Any]:
        """The carried records in Python (observed rows: position, stage, reason, raw)."""
        if self.observation is None:
            return []
        carried: dict[tuple[str, int, int], Any] = {}
        for r in self.observation.get["at"] or []:
            if r is not None and r[5] is not None:
                carried.setdefault((r[0], r[1], r[2]), r)  # each record once (read twice)
        return list(carried.values())


def carried_frame(spark: SparkSession, rows: list[Any], has_headers: bool) -> DataFrame:
    """The carried records as batch rows: the raw columns, the position and
    :data:`ERROR_COLUMN`, ready for the dead-letter queue."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    error_type = StructType.fromDDL(c.ERROR_DDL)
    fields = [
        StructField(c.KEY, BinaryType()),
        StructField(c.VALUE, BinaryType()),
        StructField(c.TOPIC, StringType()),
        StructField(c.PARTITION, IntegerType()),
        StructField(c.OFFSET, LongType()),
        StructField(c.TIMESTAMP_MS, LongType()),
        StructField(ERROR_COLUMN, error_type),
    ]
    if has_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField(c.HEADERS, ArrayType(header)))
    data = []
    for row in rows:
        raw = row[5]
        record: list[Any] = [
            raw[0],
            raw[1],
            row[0],
            row[1],
            row[2],
            raw[2],
            (row[3], row[4], raw[-1]),
        ]
        if has_headers:
            record.append(raw[3])
        data.append(tuple(record))
    return spark.createDataFrame(data, StructType(fields), verifySchema=False)
