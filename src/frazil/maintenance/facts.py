"""What a table's health is measured from: its live files, snapshots, manifests and metadata
files, read through Spark or PyIceberg.

A maintenance pass runs inside a Spark application and reads Iceberg's metadata tables
(``<table>.files``, ``.snapshots``, ``.history``, ``.manifests``,
``.metadata_log_entries``). The read-only commands (``frazil tables``, ``table health``,
``optimize --dry-run``) read the same from the table's metadata with PyIceberg, in a second
instead of a Spark start-up; both give the same :class:`TableFacts`.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Metadata files whose sizes are asked for at once (one request each on an object store).
_SIZE_READERS = 16


@dataclass(frozen=True)
class FileFacts:
    """One live file of the current snapshot."""

    #: The file's partition as JSON (``{"created_at_day":"2026-11-28"}``); "" unpartitioned.
    partition: str
    #: 0 data, 1 position deletes (or a deletion vector), 2 equality deletes.
    content: int
    size: int
    records: int


@dataclass(frozen=True)
class SnapshotFacts:
    """One snapshot the table's metadata keeps."""

    timestamp_ms: int
    summary: Mapping[str, str]
    #: Whether it is the current snapshot or one of its ancestors (its real history).
    current_ancestor: bool


@dataclass(frozen=True)
class TableFacts:
    """A table's state as health measures it."""

    name: str
    properties: Mapping[str, str]
    format_version: int
    files: tuple[FileFacts, ...]
    #: Oldest commit first.
    snapshots: tuple[SnapshotFacts, ...]
    manifests: int
    metadata_files: int
    metadata_bytes: int


def spark_facts(spark: SparkSession, name: str, java_table: Any) -> TableFacts:
    """Read ``name`` (qualified for Spark SQL) through Iceberg's metadata tables."""
    files = spark.table(f"{name}.files")
    rows = files.selectExpr(
        "to_json(partition)" if "partition" in files.columns else "'' AS p",
        "content",
        "file_size_in_bytes",
        "record_count",
    ).collect()
    manifests = int(spark.sql(f"SELECT count(*) FROM {name}.manifests").first()[0])  # type: ignore[index]
    metadata = [
        str(r[0]) for r in spark.sql(f"SELECT file FROM {name}.metadata_log_entries").collect()
    ]
    io = java_table.io()
    properties = {str(k): str(v) for k, v in dict(java_table.properties()).items()}
    return TableFacts(
        # As the config names it (db.table): the catalog is the config's.
        name=name.replace("`", "").split(".", 1)[1],
        properties=properties,
        format_version=_format(properties, java_table),
        files=tuple(
            FileFacts(str(p or ""), int(content), int(size), int(records))
            for p, content, size, records in rows
        ),
        snapshots=tuple(spark_snapshots(spark, name)),
        manifests=manifests,
        metadata_files=len(metadata),
        metadata_bytes=_total_size(metadata, lambda path: int(io.newInputFile(path).getLength())),
    )


def spark_snapshots(spark: SparkSession, name: str, where: str = "") -> list[SnapshotFacts]:
    """The table's snapshots (those ``where`` selects, a condition on ``summary``), oldest
    commit first, through the ``.snapshots`` and ``.history`` metadata tables."""
    ancestors = {
        int(r[0])
        for r in spark.sql(
            f"SELECT snapshot_id FROM {name}.history WHERE is_current_ancestor"
        ).collect()
    }
    rows = spark.sql(
        f"SELECT snapshot_id, unix_millis(committed_at), summary FROM {name}.snapshots "
        + (f"WHERE {where} " if where else "")
        + "ORDER BY committed_at"
    ).collect()
    return [
        SnapshotFacts(int(at), dict(summary or {}), int(sid) in ancestors)
        for sid, at, summary in rows
    ]


def _format(properties: Mapping[str, str], java_table: Any) -> int:
    if properties.get("format-version"):
        return int(properties["format-version"])
    try:
        return int(java_table.operations().current().formatVersion())
    except Exception:
        return 2


def pyiceberg_facts(table: Any, name: str) -> TableFacts:
    """Read a table loaded with PyIceberg (``name`` as the output names it) from its metadata
    and manifests; no data file is opened."""
    from pyiceberg.table.snapshots import ancestors_of

    metadata = table.metadata
    current = table.current_snapshot()
    files: list[FileFacts] = []
    manifests = 0
    if current is not None:
        listed = current.manifests(table.io)
        manifests = len(listed)
        specs = metadata.specs()
        schema = metadata.schema()
        for manifest in listed:
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                f = entry.data_file
                files.append(
                    FileFacts(
                        _partition_json(specs.get(f.spec_id), schema, f.partition),
                        int(f.content),
                        int(f.file_size_in_bytes),
                        int(f.record_count),
                    )
                )
    ancestors = {s.snapshot_id for s in ancestors_of(current, metadata)} if current else set()
    snapshots = sorted(
        (
            SnapshotFacts(int(s.timestamp_ms), summary_of(s), s.snapshot_id in ancestors)
            for s in metadata.snapshots
        ),
        key=lambda s: s.timestamp_ms,
    )
    paths = [e.metadata_file for e in metadata.metadata_log] + [table.metadata_location]
    return TableFacts(
        name=name,
        properties=dict(metadata.properties),
        format_version=int(metadata.format_version),
        files=tuple(files),
        snapshots=tuple(snapshots),
        manifests=manifests,
        metadata_files=len(paths),
        metadata_bytes=_total_size(paths, lambda path: len(table.io.new_input(path))),
    )


def _partition_json(spec: Any, schema: Any, partition: Any) -> str:
    """A partition as Spark's ``to_json(partition)`` writes it: field name to value, null
    fields left out, a day (and other dates) in words (``2026-11-28``), a timestamp as
    ``2026-11-28T10:00:00.000Z``, a decimal as a number; "" for an unpartitioned table."""
    from pyiceberg.types import (
        BooleanType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        StringType,
        TimestampType,
        TimestamptzType,
    )

    if spec is None or not spec.fields:
        return ""
    values: dict[str, object] = {}
    for i, field in enumerate(spec.fields):
        value = partition[i]
        if value is None:
            continue
        kind = field.transform.result_type(schema.find_field(field.source_id).field_type)
        if isinstance(value, float) and not math.isfinite(value):
            values[field.name] = (
                "NaN" if math.isnan(value) else ("-" if value < 0 else "") + "Infinity"
            )
        elif isinstance(
            kind, BooleanType | IntegerType | LongType | FloatType | DoubleType | StringType
        ):
            values[field.name] = value
        elif isinstance(kind, DecimalType):
            values[field.name] = _Number(str(value))
        elif isinstance(kind, TimestampType | TimestamptzType):
            at = datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=int(value))
            text = at.isoformat(timespec="milliseconds")
            values[field.name] = text + ("Z" if isinstance(kind, TimestamptzType) else "")
        else:
            values[field.name] = field.transform.to_human_string(kind, value)
    return (
        "{"
        + ",".join(
            json.dumps(k) + ":" + (str(v) if isinstance(v, _Number) else json.dumps(v))
            for k, v in values.items()
        )
        + "}"
    )


class _Number(str):
    """A number written as it is (a decimal keeps its scale: ``0.50``)."""


def summary_of(snapshot: Any) -> dict[str, str]:
    """A PyIceberg snapshot's summary entries other than the operation.

    PyIceberg's Summary is a Mapping whose iteration is broken (0.12); the entries are in
    ``additional_properties``.
    """
    summary = snapshot.summary
    extra = getattr(summary, "additional_properties", None) if summary is not None else None
    return {str(k): str(v) for k, v in (extra or {}).items()}


def _total_size(paths: Iterable[str], size_of: Any) -> int:
    """The files' total size, asked for in parallel; a file removed since it was listed (an
    expiry, a cleanup) counts 0."""

    def one(path: str) -> int:
        try:
            return int(size_of(path))
        except Exception:
            return 0

    listed = list(paths)
    if len(listed) <= 1:
        return sum(one(p) for p in listed)
    with ThreadPoolExecutor(min(_SIZE_READERS, len(listed))) as pool:
        return sum(pool.map(one, listed))
