"""Freshness and lag: one definition for the run log, the run summary, ``frazil status``,
the Prometheus metrics and the status page.

* **valid-through** of a table is the mark its newest marker of the pipeline records
  (``frazil.valid-through-ms``): every record stamped at or before it is in the table. Of a
  pipeline, the lowest over its tables, and unknown while one of them has none. A commit
  records what the commits before it observed (a batch's own largest timestamps are known
  only once it is written), so while a pipeline runs the recorded mark trails by one batch;
  the next commit, or the marker a run writes when it stops, brings it up to date.
* **freshness** at a moment *t* is *t − valid-through* (never below zero): how far behind
  *t* the tables are known to be complete. The run log and the status page take *t* at each
  commit, ``frazil status`` and the metrics at the moment they are asked, the run summary at
  the commit that made the newest records visible.
* **lag** is what Kafka holds beyond the tables' offsets (the lowest offset over the
  pipeline's tables, per partition): in records, and in seconds as *t* minus the newest
  committed record's Kafka timestamp of a lagging partition (0 when caught up).

See docs/operations.md (Freshness and lag).
"""

from __future__ import annotations

from collections.abc import Iterable

from frazil.source.offsets import TopicOffsets


def pipeline_valid_through(marks: Iterable[int | None]) -> int | None:
    """A pipeline's valid-through from its tables' recorded marks: the lowest, or None when a
    table has none (nothing can be said for all of them) or there is no table."""
    values = list(marks)
    if not values or any(v is None for v in values):
        return None
    return min(v for v in values if v is not None)


def freshness_ms(valid_through_ms: int | None, at_ms: float) -> int | None:
    """Freshness at ``at_ms`` (epoch ms) in milliseconds: ``at_ms − valid_through_ms``, never
    below zero; None without a valid-through."""
    if valid_through_ms is None:
        return None
    return max(0, int(at_ms) - int(valid_through_ms))


def freshness_seconds(valid_through_ms: int | None, at_ms: float) -> float | None:
    """:func:`freshness_ms` in seconds."""
    found = freshness_ms(valid_through_ms, at_ms)
    return None if found is None else found / 1000


def lowest_offsets(tables: Iterable[TopicOffsets]) -> TopicOffsets:
    """Per partition, the smallest offset over the tables: every record below it is in all."""
    found: TopicOffsets = {}
    for offsets in tables:
        for topic, parts in offsets.items():
            for partition, offset in parts.items():
                current = found.setdefault(topic, {}).get(partition)
                if current is None or offset < current:
                    found[topic][partition] = offset
    return found


def lag_records(committed: int, latest: int | None) -> int:
    """Records of a partition in Kafka beyond the tables' offset (0 when Kafka's latest is
    not known)."""
    return 0 if latest is None else max(0, latest - committed)


def lag_seconds(behind: int, newest_ms: int | None, at_ms: float) -> float:
    """Lag in seconds of a partition ``behind`` records behind: ``at_ms`` minus the newest
    committed record's Kafka timestamp, 0 when caught up or when no timestamp is known."""
    if behind == 0 or newest_ms is None:
        return 0.0
    return max(0.0, (at_ms - newest_ms) / 1000)
