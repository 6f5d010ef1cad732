"""The simplest route: every record of the pipeline goes to its one ``table``."""

from __future__ import annotations

from dataclasses import dataclass

from frazil import columns as c


@dataclass(frozen=True)
class SingleTableRoute:
    """Routes every record to ``table`` (``namespace.table`` as written in the config)."""

    table: str

    @property
    def tables(self) -> tuple[str, ...]:
        """Every table this route can produce, known before any batch runs."""
        return (self.table,)

    def route(self, batch: c.Projection) -> c.Projection:
        """Set the table column of every record."""
        from pyspark.sql import functions as F

        return {**batch, c.TABLE: F.lit(self.table)}
