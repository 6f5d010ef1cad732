"""What a way of writing a batch hands back to the handler: per table, what its commit holds
(:class:`Written`), all of them together (:class:`Wrote`), or why the batch goes on another
way (:class:`Bad`, :class:`NotThisWay`).

The ways commit and nothing else: the handler takes these values to the one step that sends
failing records to the dead-letter queue and records each commit in the ledger."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from frazil.engine import kept_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from frazil.engine.cached_table import CachedTable
    from frazil.engine.dead_capture import Failing
    from frazil.engine.window import Partition
    from frazil.progress import markers, table_markers
    from frazil.sink.tables import Target


@dataclass(frozen=True)
class FailingRecords:
    """A table's failing records of the batch, for the dead-letter queue once it committed."""

    #: The batch the write read: the planned batch (one table), or the batch's cache.
    frame: DataFrame
    #: What the cached way counted of the table's rows; None: ``frame`` is the planned batch.
    counted: CachedTable | None
    #: Where they are, as the write found them; None: the table held the batch already (a
    #: replay), so the whole batch is looked at, against the table's schema of that commit.
    seen: Failing | None


@dataclass(frozen=True)
class Written:
    """One table's part of a batch: its commit and what the commit holds."""

    target: Target
    #: The marker the commit carries; None: the table held the batch already (nothing new).
    marker: markers.Marker | None
    records: int = 0
    #: The largest Kafka timestamp per partition among its records.
    timestamps: Mapping[Partition, Any] = field(default_factory=dict)
    bytes: int = 0
    #: Its failing records, for the dead-letter queue after the commit.
    failing: FailingRecords | None = None
    #: Records the write dropped as configured (a filter, a skipped tombstone), when it
    #: counted them itself.
    filtered: int = 0
    #: A table new to the pipeline: its state, as the commit that created it left it (the
    #: table joins the pipeline's when the commit is recorded).
    opened: table_markers.TableState | None = None


@dataclass(frozen=True)
class Wrote:
    """What one way did with a batch: each table it wrote, and the batch's counts."""

    tables: dict[str, Written]
    #: Records a route matched to no table.
    unmatched: int = 0
    #: Records dropped as configured, counted for the whole batch.
    filtered: int = 0
    #: A table's write failed: raised once the other tables' commits are recorded.
    failure: BaseException | None = None
    #: The batch's cache, kept until its failing records are sent.
    cache: DataFrame | None = None

    def release(self) -> None:
        """Let the batch's cache go."""
        if self.cache is not None:
            kept_rows.let_go(self.cache)


@dataclass(frozen=True)
class Bad:
    """Records marked with an error met the write; nothing of the batch was committed."""

    #: The rows the write read (the marked ones among them).
    rows: DataFrame
    #: Whether a decoder may learn from them (a new schema id, new JSON fields).
    may_learn: bool = True


@dataclass(frozen=True)
class NotThisWay:
    """This way leaves the batch to the next one (the cached way)."""

    why: str
    #: Tables it committed all the same (new ones created before a refit was found): their
    #: commits are recorded, and the next way finds the batch in them.
    wrote: Wrote | None = None
