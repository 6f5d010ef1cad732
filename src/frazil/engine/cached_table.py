"""One table's rows in a cached routed batch, as the cached way's aggregation counted them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil import columns as c

if TYPE_CHECKING:
    from pyspark.sql import Column, Row


@dataclass(frozen=True)
class CachedTable:
    """One table's rows in a cached routed batch: how many, the columns they fill, their
    largest Kafka timestamps and where the cache keeps them."""

    #: Records to append.
    records: int
    #: The user columns holding a value in at least one of its records.
    with_values: set[str]
    #: Largest Kafka timestamp per partition among its records.
    timestamps: tuple[tuple[tuple[str, int], int | None], ...]
    #: The table's :data:`~frazil.columns.ROUTE_HASH` in the batch's cache.
    route_hash: int | None = None
    #: Records to append that no stage marked (``records`` counts the marked ones too).
    unmarked: int = 0


def of_table(name: str, counted: CachedTable | None) -> Column:
    """A routed batch's rows for table ``name`` (by hash first: the cache's blocks are
    pruned by it)."""
    from pyspark.sql import functions as F

    mine = F.col(c.ROUTE_TABLE) == F.lit(name)
    if counted is None or counted.route_hash is None:
        return mine
    return (F.col(c.ROUTE_HASH) == F.lit(counted.route_hash)) & mine


def with_values_columns(user: list[str], among: Column | None = None) -> list[Column]:
    """Aggregate columns saying, for each of the ``user`` columns, whether one of a group's
    rows (``among`` them, if given) holds a value in it (read back with :func:`with_values`):
    a table gets new columns only where its records fill them."""
    from pyspark.sql import functions as F

    def filled(name: str) -> Column:
        held = F.col(name).isNotNull()
        return held if among is None else held & among

    return [F.max(filled(n)).alias(f"v{i}") for i, n in enumerate(user)]


def with_values(row: Row, user: list[str]) -> set[str]:
    """The ``user`` columns holding a value in at least one of a group's rows, from the
    group's aggregated row (:func:`with_values_columns`)."""
    return {n for i, n in enumerate(user) if row[f"v{i}"]}
