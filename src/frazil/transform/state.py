"""The batch while transforms apply, and the column operations the transforms share.

A :class:`State` holds the user columns (name → expression, in order) and the record's error
and op columns; each transform is a :class:`Step` of entries, functions from one state to the
next. Paths into structs are exact names (resolved by :mod:`frazil.transform.fields`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.transform import sql
from frazil.transform.fields import Fields, find

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType

#: Characters of a bad value quoted in the error's detail, and in its reason.
QUOTED = 200
IN_REASON = 60


@dataclass(frozen=True)
class State:
    """The batch while transforms apply.

    Attributes:
        columns: The user columns, in order.
        error: The record's error column (:data:`frazil.columns.ERROR`).
        op: The record's operation (:data:`frazil.columns.OP`).
        skipped: True for records a ``filter`` skipped; None before any filter.
    """

    columns: dict[str, Column]
    error: Column
    op: Column
    skipped: Column | None = None

    def with_columns(self, columns: dict[str, Column]) -> State:
        """The same state with other user columns."""
        return replace(self, columns=columns)

    def mark(self, failed: Column, reason: Column, detail: Column) -> State:
        """Mark records where ``failed`` holds, unless an earlier error (or a filter) won."""
        from pyspark.sql import functions as F

        error = F.struct(
            F.lit(c.STAGE_TRANSFORM).alias("stage"),
            reason.alias("reason"),
            detail.alias("detail"),
        ).cast(c.ERROR_DDL)
        if self.skipped is not None:
            # A record a filter skipped is not written: what later transforms make of it
            # is no error (and a skipped record must carry none, or it would be lost).
            failed = failed & ~self.skipped
        return replace(self, error=F.coalesce(self.error, F.when(failed, error)))


Entry = Callable[[State], State]


@dataclass(frozen=True)
class Step:
    """One transform: its config name, a one-line description, its entries in order."""

    name: str
    description: str
    entries: tuple[Entry, ...]

    def apply(self, state: State) -> State:
        """Apply every entry in order."""
        for entry in self.entries:
            state = entry(state)
        return state


@dataclass(frozen=True)
class Context:
    """What building a step needs besides the transform.

    Attributes:
        jvm: The session's JVM handles.
        fields: The columns entering the transform (Spark's types).
        probe: Resolves a column over the columns entering the transform and returns its
            type and whether it is a plain projection (no aggregate, window or generator);
            raises :class:`~frazil.transform.sql.SqlError` when Spark refuses it.
    """

    jvm: sql.Jvm
    fields: Fields
    probe: Callable[[Column], tuple[DataType, bool]]


def quoted_path(names: tuple[str, ...]) -> str:
    """A nested field path as ``withField``/``dropFields`` read it (names may hold dots)."""
    return ".".join("`" + name.replace("`", "``") + "`" for name in names)


def get_path(columns: dict[str, Column], names: tuple[str, ...]) -> Column:
    """The column or struct field at exact ``names``."""
    column = columns[names[0]]
    for name in names[1:]:
        column = column.getField(name)
    return column


def set_path(
    columns: dict[str, Column], names: tuple[str, ...], value: Column
) -> dict[str, Column]:
    """The columns with the column or struct field at ``names`` replaced by ``value``."""
    if len(names) > 1:
        value = columns[names[0]].withField(quoted_path(names[1:]), value)
    return {k: (value if k == names[0] else v) for k, v in columns.items()}


def remove_path(columns: dict[str, Column], names: tuple[str, ...]) -> dict[str, Column]:
    """The columns without the column or struct field at ``names``."""
    if len(names) == 1:
        return {k: v for k, v in columns.items() if k != names[0]}
    return set_path(columns, names[:1], columns[names[0]].dropFields(quoted_path(names[1:])))


def put_column(columns: dict[str, Column], name: str, value: Column) -> dict[str, Column]:
    """Replace the column called ``name`` in its place, or append it.

    Names match as in :func:`frazil.transform.fields.put`, which plans the same change.
    """
    index = find(list(columns), name)
    if index is None:
        return {**columns, name: value}
    old = list(columns)[index]
    return {(name if k == old else k): (value if k == old else v) for k, v in columns.items()}


def resolver(columns: dict[str, Column]) -> Callable[[tuple[str, ...]], Column]:
    """Column references of a SQL expression → the batch's columns (Spark's name matching)."""
    names = list(columns)

    def resolve_reference(parts: tuple[str, ...]) -> Column:
        index = find(names, parts[0])
        assert index is not None, parts  # checked when the step was built
        column = columns[names[index]]
        for part in parts[1:]:
            column = column.getField(part)
        return column

    return resolve_reference


def as_text(value: Column) -> Column:
    """A value as text for a message (never raises, never null)."""
    from pyspark.sql import functions as F

    return F.coalesce(value.try_cast("string"), F.lit(""))


def value_reason(before: str, value: Column, after: str) -> Column:
    """``<before> '<value, shortened>' <after>``."""
    from pyspark.sql import functions as F

    text = as_text(value)
    short = F.when(
        F.length(text) > IN_REASON, F.concat(F.substring(text, 1, IN_REASON), F.lit("…"))
    ).otherwise(text)
    return F.concat(F.lit(f"{before} '"), short, F.lit(f"' {after}"))


def value_detail(value: Column) -> Column:
    """The value as text for the error's detail, cut to :data:`QUOTED` characters."""
    from pyspark.sql import functions as F

    return F.substring(as_text(value), 1, QUOTED)


def shorten(text: str, limit: int = 100) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
