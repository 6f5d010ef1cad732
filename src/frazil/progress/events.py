"""Typed events the engine emits while it runs (progress output, metrics, tests)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BatchStarted:
    """A micro-batch began; nothing of it is committed yet."""

    pipeline: str
    batch_id: int


@dataclass(frozen=True)
class BatchSkipped:
    """A micro-batch was wholly in its tables already (a replay) and was not read."""

    pipeline: str
    batch_id: int


@dataclass(frozen=True)
class SchemaEvolved:
    """A table's schema was changed for a micro-batch, before its write."""

    pipeline: str
    table: str
    batch_id: int
    changes: tuple[str, ...]


@dataclass(frozen=True)
class CommitEvent:
    """A table was committed for a micro-batch."""

    pipeline: str
    table: str
    batch_id: int
    records: int
    total_records: int
    #: The valid-through the commit's marker records (frazil.progress.freshness): what
    #: ``frazil status`` reads back from the table.
    valid_through_ms: int | None
    seconds: float
    #: The table's marker after the commit: next offset per topic and partition.
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    #: Largest Kafka timestamp (epoch ms) committed per (topic, partition) in this batch.
    max_timestamps: dict[tuple[str, int], int] = field(default_factory=dict)
    #: Records in Kafka beyond the table's offsets, as last seen (None: not known).
    lag_records: int | None = None
    #: Bytes of the data files the commit added.
    bytes_written: int = 0


@dataclass(frozen=True)
class BatchDone:
    """A micro-batch is done: every table it wrote is committed (its CommitEvents came first).

    Attributes:
        offsets: The batch's planned end offsets (next offset to read) per topic and partition.
        read: Kafka records the batch covered (its end offsets minus its start), None when
            its start is not known (the first batch of a query).
        lag_records: Records in Kafka beyond ``offsets``, as last seen (None: not known).
    """

    pipeline: str
    batch_id: int
    seconds: float
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    read: int | None = None
    lag_records: int | None = None


@dataclass(frozen=True)
class MaintenanceDone:
    """An inline maintenance action on a table ran, failed or was skipped.

    Attributes:
        detail: What it did (``12 data files (3.1 MiB) rewritten into 1, …``).
        error: Why it failed (the table is as it was), None if it did not.
        skipped: Why it did not run this pass, None if it ran.
    """

    table: str
    action: str
    seconds: float
    detail: str
    error: str | None = None
    skipped: str | None = None


Event = BatchStarted | BatchSkipped | SchemaEvolved | CommitEvent | BatchDone | MaintenanceDone
