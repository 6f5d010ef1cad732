"""What a pipeline does with records it cannot write: ``errors:``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from frazil.config.routing import check_table_name

Tolerance = Literal["none", "all"]


class ErrorsConfig(BaseModel):
    """Error tolerance and the dead-letter queue of one pipeline.

    Attributes:
        tolerance: ``none`` (the default): the first failing record stops the pipeline before
            anything of its batch is committed. ``all``: failing records go to the dead-letter
            queue with their reason, the batch's other records are committed, and the
            pipeline goes on.
        dlq_topic: A Kafka topic receiving each failing record as it was read (key, value
            and headers byte for byte) plus ``frazil.errors.*`` headers; at least once.
        dlq_table: An Iceberg table (``namespace.table``) receiving each failing record with
            its raw bytes and reason; exactly once, in the same micro-batch.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tolerance: Tolerance = "none"
    dlq_topic: str | None = None
    dlq_table: str | None = None

    @field_validator("dlq_table")
    @classmethod
    def _table(cls, value: str | None) -> str | None:
        return None if value is None else check_table_name(value)

    @field_validator("dlq_topic")
    @classmethod
    def _topic(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must name a topic")
        return value

    @model_validator(mode="after")
    def _check(self) -> ErrorsConfig:
        has_dlq = self.dlq_topic is not None or self.dlq_table is not None
        if self.tolerance == "all" and not has_dlq:
            raise ValueError(
                "tolerance 'all' needs a dead-letter queue: set dlq_topic, dlq_table or both "
                "(frazil never drops a failing record silently)"
            )
        if self.tolerance == "none" and has_dlq:
            raise ValueError(
                "a dead-letter queue is only used with tolerance 'all' (with 'none' the first "
                "failing record stops the pipeline)"
            )
        return self

    @property
    def dead_letters(self) -> bool:
        """Whether failing records go to a dead-letter queue (rather than stop the run)."""
        return self.tolerance == "all"

    def describe(self) -> str:
        """Where a record that cannot be written goes, in words (``frazil validate`` and
        ``frazil plan``)."""
        places = [
            *([f"table {self.dlq_table}"] if self.dlq_table else []),
            *([f"topic {self.dlq_topic}"] if self.dlq_topic else []),
        ]
        if self.dead_letters and places:
            return f"dead letters to {' and '.join(places)}"
        return "a bad record stops the pipeline (errors.tolerance: none)"
