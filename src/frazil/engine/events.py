"""Typed events the engine emits while it runs (for progress output, tests, later metrics)."""

from __future__ import annotations

from dataclasses import dataclass


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
    valid_through_ms: int | None
    seconds: float


Event = BatchStarted | BatchSkipped | SchemaEvolved | CommitEvent
