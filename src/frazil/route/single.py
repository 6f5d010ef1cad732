"""The simplest route: every record of the pipeline goes to its one ``table``."""

from __future__ import annotations

import re
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

    @property
    def dynamic(self) -> bool:
        """The one table is known up front."""
        return False

    @property
    def single(self) -> bool:
        """Every record goes to one table: the batch needs no fan-out."""
        return True

    @property
    def one_each(self) -> bool:
        """A record goes to one table at most."""
        return True

    def names(self) -> re.Pattern[str] | None:
        """No table names beyond :attr:`tables`."""
        return None

    def describe(self) -> str:
        """One line for ``frazil plan``."""
        return f"every record to {self.table}"

    def route(self, batch: c.Projection) -> c.Projection:
        """Set the table column of every record."""
        from pyspark.sql import functions as F

        return {**batch, c.TABLE: F.array(F.lit(self.table))}
