"""Maintenance gives way to a pipeline's MERGE on the same table.

An upsert/CDC batch's MERGE reads the table, then commits deletes against the files it read;
a compaction (or a delete rewrite, or retention's DELETE) committed in between removes those
files, and the MERGE's commit fails and is run again (:data:`frazil.sink.merge.MERGE_ATTEMPTS`
times). A MERGE that keeps losing would stop the pipeline, so the writer has priority:

* **Inline** (``maintenance: {mode: inline}``, one process): a table's rewriting actions and
  its MERGEs take turns. An action waits until no MERGE of the table runs (at most its pass's
  budget, else it waits for the next pass); a MERGE that starts while an action runs waits for
  that action to end. So no rewrite ever commits under a running MERGE.
* **Another process** (``frazil maintain``): a MERGE that lost to a concurrent commit notes the
  time in the table's property :data:`MERGE_CONFLICT_AT`, and maintenance skips the table's
  rewriting actions for ``maintenance.merge_backoff`` after it (default :data:`BACKOFF_S`,
  with a log line saying so). A compaction runs in slices and reads the note between them,
  so one that was under way stops at the next slice rather than committing group after
  group under the MERGE's retries.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from frazil.sink.iceberg import split_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: Table property: when (epoch ms) a pipeline's MERGE last lost to a concurrent commit.
MERGE_CONFLICT_AT = "frazil.merge-conflict-at"
#: How long maintenance leaves a table's data alone after its MERGE lost to a commit, unless
#: ``maintenance.merge_backoff`` says otherwise.
BACKOFF_S = 600.0
#: The actions that rewrite or delete data files, which a running MERGE loses to. Manifest
#: rewrites and snapshot expiry (which keeps every snapshot from the newest marker on) do not
#: make it fail.
REWRITES = frozenset({"retention", "compaction", "deletes"})

_CONFLICTS = ("ValidationException", "CommitFailedException")


class _Turns:
    """Per table: MERGEs running and whether maintenance holds it."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.merging: dict[str, int] = {}
        self.maintained: set[str] = set()


_TURNS = _Turns()


def _key(table: str) -> str:
    return ".".join(split_name(table)).lower()


def merge_started(table: str) -> Callable[[], None]:
    """A MERGE into ``table`` begins (after any rewrite of it under way); call the returned
    function when it ends, whether it committed or not."""
    key = _key(table)
    with _TURNS.changed:
        if key in _TURNS.maintained:
            log.info("MERGE into %s waits for the maintenance action on it to end", table)
        _TURNS.changed.wait_for(lambda: key not in _TURNS.maintained)
        _TURNS.merging[key] = _TURNS.merging.get(key, 0) + 1

    def ended() -> None:
        with _TURNS.changed:
            _TURNS.merging[key] -= 1
            if not _TURNS.merging[key]:
                del _TURNS.merging[key]
            _TURNS.changed.notify_all()

    return ended


@contextmanager
def maintenance_turn(table: str, wait_s: float) -> Iterator[bool]:
    """Hold ``table`` for a rewriting action once no MERGE of it runs (MERGEs starting
    meanwhile wait). Yields False if MERGEs kept it for ``wait_s``: skip the action."""
    key = _key(table)
    with _TURNS.changed:
        free = _TURNS.changed.wait_for(lambda: key not in _TURNS.merging, timeout=wait_s)
        if free:
            _TURNS.maintained.add(key)
    try:
        yield free
    finally:
        if free:
            with _TURNS.changed:
                _TURNS.maintained.discard(key)
                _TURNS.changed.notify_all()


def merge_failed(spark: SparkSession, table: str, error: str) -> None:
    """A MERGE attempt into ``table`` failed with ``error``: if it lost to a concurrent
    commit, note when in :data:`MERGE_CONFLICT_AT`, so that maintenance elsewhere backs off.
    Never raises: the note must not fail the batch."""
    if not any(name in error for name in _CONFLICTS):
        return
    from frazil.sink.iceberg import IcebergTable

    try:
        IcebergTable(spark, table).java.updateProperties().set(
            MERGE_CONFLICT_AT, str(int(time.time() * 1000))
        ).commit()
    except Exception as exc:  # the MERGE's own retry matters, not this note
        log.info("could not note the MERGE conflict on %s: %s", table, str(exc)[:200])


def backing_off(
    noted: str | None, now_ms: int | None = None, backoff_s: float = BACKOFF_S
) -> float | None:
    """Seconds since the MERGE conflict noted in :data:`MERGE_CONFLICT_AT` (its value, or
    None), if within ``backoff_s`` (the table's rewrites wait), else None."""
    if noted is None:
        return None
    try:
        at = int(noted)
    except ValueError:
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    ago = max(0.0, (now - at) / 1000)
    return ago if ago < backoff_s else None
