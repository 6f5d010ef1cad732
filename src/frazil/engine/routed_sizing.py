"""How a routed batch's rows are expected to spread over its tables, guessed from the last
batch the job wrote (:class:`RowsSeen`): which known tables get less than a Parquet page
(:func:`small_tables`), which more than a core's share (:func:`hot_tables`), and whether a
batch is expected to meet no new table (:func:`meets_none_new`). Plain types, no Spark:
:mod:`frazil.engine.routed_job` sizes each batch's layout (:mod:`frazil.engine.routed_layout`)
with them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

#: Rows of a Parquet page by default (Iceberg's ``write.parquet.page-row-limit``): a table
#: expected to get fewer rows in a batch writes files smaller than a page, with the job's
#: small-file dictionary limit (``RoutedWrites.SMALL_FILE_PROPERTIES``).
PAGE_ROWS = 20_000


@dataclass(frozen=True)
class RowsSeen:
    """The rows each table got in the last batch the job wrote, and that batch's records."""

    rows: dict[str, int]
    records: int


def expected_rows(names: list[str], records: int, last: RowsSeen | None) -> dict[str, float]:
    """The rows each known table is expected to get in a batch of ``records``: its share of
    the last batch, else an even share among the known tables."""
    even = records / max(1, len(names))
    if last is None or not last.records:
        return dict.fromkeys(names, even)
    return {
        name: records * last.rows[name] / last.records if name in last.rows else even
        for name in names
    }


def small_tables(
    names: list[str], records: int | None, last: RowsSeen | None
) -> tuple[list[str], bool]:
    """The known tables expected to get fewer rows than a Parquet page in a batch of
    ``records`` (:func:`expected_rows`), and whether the tables it meets first are (an even
    share; all of the batch without known tables). Nothing when the batch's size is not
    known.
    """
    if not records:
        return [], False
    expected = expected_rows(names, records, last)
    small = [name for name in names if expected[name] < PAGE_ROWS]
    return small, records / max(1, len(names)) < PAGE_ROWS


def meets_none_new(known: Collection[str], last: RowsSeen | None) -> bool:
    """Whether a batch written with a layout of the ``known`` tables is expected to meet no
    table first: the last batch wrote rows to tables that are all known now (it created
    those it met first), so the tasks kept for new tables would run empty (~15 ms each, 32 of
    them in the batch after a route's tables were created)."""
    return last is not None and bool(last.rows) and all(name in known for name in last.rows)


def hot_tables(
    names: list[str], records: int | None, last: RowsSeen | None, cores: int
) -> tuple[str, ...]:
    """The known tables expected to get more than a core's share of a batch of ``records``
    (and at least a Parquet page): each is written by a task per Kafka partition rather than
    by one task, which would leave the other cores idle while it writes (a route that sends
    most records to one table).
    """
    if not records:
        return ()
    expected = expected_rows(names, records, last)
    share = records / max(1, cores)
    return tuple(name for name in names if expected[name] > share and expected[name] >= PAGE_ROWS)
