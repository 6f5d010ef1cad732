"""What decoders whose shape their config fixes have in common: nothing to learn from the
records, no semantic types; most of them one column rather than a struct."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil.decode import connect_types
from frazil.decode.connect_types import Semantics

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class NothingLearned:
    """A decoder whose shape the config fixes: the records teach it nothing."""

    def version(self) -> object:
        """Nothing is learned: every value has the one shape."""
        return None

    def semantics(self) -> Semantics:
        """The values say nothing of semantic types."""
        return connect_types.NONE

    def learn(self, raw: DataFrame, column: str) -> bool:
        """Nothing is learned."""
        del raw, column
        return False


class FixedShape(NothingLearned):
    """A decoder of one column whose type the config fixes (the payload as it is, a variant)."""

    @property
    def scalar(self) -> bool:
        """The column itself, not a struct."""
        return True
