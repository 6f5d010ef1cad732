"""Reading a Spark streaming checkpoint's offset and commit logs, through Hadoop's FileSystem.

Spark writes ``offsets/<batch>`` (the planned end offsets of every source) *before* running a
micro-batch and ``commits/<batch>`` after ``foreachBatch`` returned. frazil reads them to know
the exact range a batch covers (including partitions that had no records in it) and how far a
checkpoint claims to be. Every access goes through Hadoop's ``FileSystem``, so a checkpoint on
``s3a://`` works like a local one.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from frazil.errors import PipelineError
from frazil.jvm.classes import java_class
from frazil.source.offsets import TopicOffsets, offsets_from_json

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class Checkpoint:
    """One streaming query's checkpoint folder.

    Args:
        spark: The running session (for its JVM and Hadoop configuration).
        location: The checkpoint URI or local path.
    """

    def __init__(self, spark: SparkSession, location: str) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        self.location = location.rstrip("/")
        self._root = java_class(jvm, "org.apache.hadoop.fs.Path")(self.location)
        self._fs: Any = self._root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        #: ``batchTimestampMs`` of the offset log entries read last, by batch id.
        self._planned_at: dict[int, int | None] = {}

    def _path(self, *parts: str) -> Any:
        return java_class(self._jvm, "org.apache.hadoop.fs.Path")("/".join([self.location, *parts]))

    def _batch_ids(self, log: str) -> list[int]:
        folder = self._path(log)
        if not self._fs.exists(folder):
            return []
        return sorted(
            int(name)
            for name in (str(s.getPath().getName()) for s in self._fs.listStatus(folder))
            if name.isdigit()
        )

    def _read(self, *parts: str) -> str | None:
        path = self._path(*parts)
        if not self._fs.exists(path):
            return None
        stream = self._fs.open(path)
        try:
            text: str = java_class(self._jvm, "org.apache.commons.io.IOUtils").toString(
                stream, "UTF-8"
            )
        finally:
            stream.close()
        return text

    def has_progress(self) -> bool:
        """Whether Spark has planned any batch here (its offset log is not empty)."""
        return bool(self._batch_ids("offsets"))

    def last_planned(self) -> int | None:
        """The newest batch in the offset log (planned, committed or not); None if none."""
        planned = self._batch_ids("offsets")
        return planned[-1] if planned else None

    def planned_offsets(self, batch_id: int) -> TopicOffsets:
        """The end offsets Spark planned for ``batch_id``: every partition it reads, idle ones too.

        Raises:
            PipelineError: The offset log has no such entry (the checkpoint was tampered with).
        """
        text = self._read("offsets", str(batch_id))
        if text is None:
            raise PipelineError(
                f"checkpoint {self.location}: no offset log entry for batch {batch_id}"
            )
        self._planned_at[batch_id] = _planned_at(text)
        while len(self._planned_at) > 4:  # a batch and the one before are all that is asked
            del self._planned_at[next(iter(self._planned_at))]
        return _source_offsets(text, f"{self.location}/offsets/{batch_id}")

    def initial_offsets(self) -> TopicOffsets | None:
        """Where the query's Kafka source started (``sources/0/0``, which Spark's Kafka source
        writes once, before batch 0): batch 0's start. None if absent or not readable."""
        try:
            text = self._read("sources", "0", "0")
        except Exception:  # a hint only: the batch is then read as planned
            return None
        if text is None:
            return None
        # A leading NUL byte (Spark's old format's marker), "v1", then the offsets' JSON.
        lines = [line for line in text.lstrip("\x00").splitlines() if line.strip()]
        if len(lines) < 2 or not lines[0].startswith("v"):
            return None
        try:
            return offsets_from_json(lines[1])
        except (ValueError, TypeError, AttributeError):
            return None

    def planned_at_ms(self, batch_id: int) -> int | None:
        """When Spark planned ``batch_id`` (epoch ms, the entry's ``batchTimestampMs``): the
        moment its end offsets were Kafka's latest. None if the entry does not say."""
        if batch_id not in self._planned_at:
            self.planned_offsets(batch_id)
        return self._planned_at.get(batch_id)

    def committed_offsets(self) -> tuple[int, TopicOffsets] | None:
        """The newest batch Spark marked done, with its end offsets; None if there is none."""
        done = set(self._batch_ids("commits"))
        for batch_id in reversed(self._batch_ids("offsets")):
            if batch_id in done:
                return batch_id, self.planned_offsets(batch_id)
        return None

    def set_aside(self) -> str | None:
        """Rename the checkpoint out of the way, so the next query starts a fresh one.

        Returns:
            Where it now is, or None if there was no checkpoint.
        """
        if not self._fs.exists(self._root):
            return None
        target = f"{self.location}.superseded-{int(time.time() * 1000)}"
        if not self._fs.rename(
            self._root, java_class(self._jvm, "org.apache.hadoop.fs.Path")(target)
        ):
            raise PipelineError(f"could not move checkpoint {self.location} aside to {target}")
        return target


def _planned_at(text: str) -> int | None:
    """``batchTimestampMs`` of an offset log entry's metadata line, if it has one."""
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        stamp = json.loads(lines[1]).get("batchTimestampMs")
    except (IndexError, ValueError, AttributeError):
        return None
    return int(stamp) if isinstance(stamp, int) and stamp > 0 else None


def _source_offsets(text: str, where: str) -> TopicOffsets:
    """The Kafka source's line of an offset log entry (``v1``, metadata, then one per source)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise PipelineError(f"{where}: not a Spark offset log entry")
    source = lines[2]
    if source == "-":  # Spark writes '-' for a source without an offset yet
        return {}
    return offsets_from_json(source)
