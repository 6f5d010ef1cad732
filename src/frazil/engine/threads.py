"""Work across a routed pipeline's tables at once, and the test hooks that pause it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")

#: Tables a routed batch writes at once: most of a small table's write is driver-side
#: (analysis, Iceberg's write planning and commit), which overlaps other tables' Spark jobs
#: (bench/routing: 8 threads wrote 20 tables in 4.7 s where 4 took 5.2-6 s).
FANOUT_THREADS = 8
#: Test hook: ``<table>:<seconds>`` sleeps before writing that table, while the batch's other
#: tables commit (a kill -9 between two tables' commits).
_PAUSE_ENV = "FRAZIL_TEST_PAUSE_BEFORE_WRITE"
#: Test hook: seconds to sleep after a table committed and before its failing records go to
#: the dead-letter queue (a kill -9 in between).
_DEAD_PAUSE_ENV = "FRAZIL_TEST_PAUSE_BEFORE_DEAD_LETTERS"


def each(items: Sequence[_T], call: Callable[[_T], _R]) -> list[_R]:
    """``call`` for each item, in order: inline for one, else FANOUT_THREADS at a time (a
    routed pipeline's tables: catalog round trips and commits, mostly waiting). The first
    failure, in order, is raised, once every item is done."""
    if len(items) <= 1:
        return [call(item) for item in items]
    results: list[_R] = []
    for result, error in each_outcome(items, call):
        if error is not None:
            raise error
        results.append(result)  # type: ignore[arg-type]
    return results


def each_outcome(
    items: Sequence[_T], call: Callable[[_T], _R]
) -> list[tuple[_R | None, BaseException | None]]:
    """``call`` for each item, FANOUT_THREADS at a time, waiting for all of them: each item's
    result or failure, in the items' order (a failure does not stop the others, whose
    commits must be known)."""
    from concurrent.futures import ThreadPoolExecutor

    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(len(items), FANOUT_THREADS)) as pool:
        futures = [pool.submit(call, item) for item in items]
        outcomes: list[tuple[_R | None, BaseException | None]] = []
        for future in futures:
            error = future.exception()
            outcomes.append((None, error) if error is not None else (future.result(), None))
    return outcomes


class Pause:
    """The test hook that holds one table's write back (read once per batch)."""

    def __init__(self) -> None:
        value = os.environ.get(_PAUSE_ENV)
        self._at: tuple[str, float] | None = None
        if value and ":" in value:
            table, seconds = value.rsplit(":", 1)
            self._at = (table, float(seconds))

    @property
    def active(self) -> bool:
        """Whether the hook holds some table back (its tables are then written one by one)."""
        return self._at is not None

    def before_write(self, table: str) -> None:
        """Sleep if the hook names this table."""
        if self._at is not None and self._at[0] == table:
            time.sleep(self._at[1])


def pause_before_dead_letters() -> None:
    """The test hook between a table's commit and its dead letters."""
    pause = os.environ.get(_DEAD_PAUSE_ENV)
    if pause:
        time.sleep(float(pause))
