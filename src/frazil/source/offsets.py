"""Kafka offsets: Spark's JSON form and the arithmetic on them."""

from __future__ import annotations

import json

#: ``TopicOffsets`` maps topic -> partition -> next offset to read (Spark's JSON shape).
TopicOffsets = dict[str, dict[int, int]]


def offsets_to_json(offsets: TopicOffsets) -> str:
    """Spark's ``startingOffsets`` JSON: ``{"topic": {"0": 42}}``."""
    return json.dumps(
        {topic: {str(p): o for p, o in sorted(parts.items())} for topic, parts in offsets.items()},
        sort_keys=True,
        separators=(",", ":"),
    )


def offsets_from_json(text: str) -> TopicOffsets:
    """Inverse of :func:`offsets_to_json`."""
    raw = json.loads(text)
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in raw.items()}


def merge_offsets(base: TopicOffsets, newer: TopicOffsets) -> TopicOffsets:
    """Union of two offset maps, keeping the larger offset per partition."""
    merged = {topic: dict(parts) for topic, parts in base.items()}
    for topic, parts in newer.items():
        target = merged.setdefault(topic, {})
        for partition, offset in parts.items():
            target[partition] = max(offset, target.get(partition, -1))
    return merged


def records_between(start: TopicOffsets, earliest: TopicOffsets, latest: TopicOffsets) -> int:
    """Records from ``start`` to ``latest``, over the partitions of ``latest``.

    ``start`` is in Spark's JSON form: -2 is the earliest offset, -1 the latest; a partition it
    lacks is read from the earliest (as Spark reads a new partition), and an offset below the
    earliest (records removed by retention) counts from there.
    """
    total = 0
    for topic, parts in latest.items():
        for partition, end in parts.items():
            first = earliest.get(topic, {}).get(partition, end)
            at = start.get(topic, {}).get(partition, -2)
            at = first if at == -2 else end if at == -1 else max(at, first)
            total += max(end - at, 0)
    return total
