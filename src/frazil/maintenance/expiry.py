"""Which snapshots exactly-once recovery still needs, so that expiry never removes them.

A pipeline resumes from its newest marker, found by walking the table's current ancestry
(:func:`frazil.progress.table_markers.find_marker`). Expiring that snapshot, or any snapshot between
it and the current one, would break the walk: the table would look as if no run had ever
written it. So expiry keeps every snapshot from the oldest of the newest marker snapshots (one
per marker name: each pipeline, each dead-letter source) onwards.

A marker of a pipeline since renamed (run again under its new name with ``--reset-offsets``)
or reset away would otherwise keep every snapshot after it for good. ``--reset-offsets``
therefore *retires* the markers in the table of pipelines not in the resetting config: its
commit lists them (:data:`RETIRES`), and a marker whose newest snapshot is older than a
retirement naming it pins nothing. It stays in the history, and ``frazil table health``
names it.

Maintenance commits do not copy a marker forward: a compaction that began before a batch's
commit and lands after it would carry the older marker above the newer one, and a restart
would then read the batch again.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil.progress.markers import OFFSETS, PIPELINE, RETIRES

#: The marker name suffix of dead-letter replays' fences
#: (:data:`frazil.engine.replay_state.REPLAY_MARKER`; maintenance sits below the engine).
REPLAY_FENCE = "/dlq-replay"

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from frazil.maintenance.facts import SnapshotFacts


@dataclass(frozen=True)
class Protected:
    """The newest marker snapshot of each marker name, and the oldest of them."""

    #: marker name → commit time (epoch ms) of its newest marker snapshot.
    newest: dict[str, int]
    #: The same of markers that do not pin: a later reset retired them.
    retired: dict[str, int] = field(default_factory=dict)

    def pins(self, times: Collection[int]) -> list[tuple[str, int, bool]]:
        """Per marker name, the snapshots (of commit ``times``) at or after its newest marker
        snapshot, which it keeps from expiry (retired: would keep), newest name first:
        ``(name, snapshots, retired)``."""
        found = [(n, at, False) for n, at in self.newest.items()]
        found += [(n, at, True) for n, at in self.retired.items()]
        return [
            (name, sum(1 for t in times if t >= at), retired)
            for name, at, retired in sorted(found, key=lambda f: (f[1], f[0]))
        ]

    @property
    def since_ms(self) -> int | None:
        """Snapshots at or after this time are kept; None: no marker, nothing protected."""
        return min(self.newest.values()) if self.newest else None


def owner(marker: str) -> str:
    """The pipeline a marker name belongs to (``payments/dlq/db.t`` → ``payments``)."""
    return marker.split("/", 1)[0]


def protected(spark: SparkSession, name: str) -> Protected:
    """Read the newest marker snapshot per marker name among the current ancestors; those a
    later reset retired (:data:`RETIRES`) apart."""
    from frazil.maintenance.facts import spark_snapshots

    return protected_in(
        spark_snapshots(
            spark,
            name,
            f"summary['{RETIRES}'] IS NOT NULL OR (summary['{OFFSETS}'] IS NOT NULL "
            f"AND summary['{PIPELINE}'] IS NOT NULL)",
        )
    )


def protected_in(snapshots: Iterable[SnapshotFacts]) -> Protected:
    """:func:`protected` of a table's snapshots as read (:mod:`frazil.maintenance.facts`)."""
    newest: dict[str, int] = {}
    retired_at: dict[str, int] = {}
    for s in snapshots:
        if not s.current_ancestor:
            continue
        names = s.summary.get(RETIRES)
        if names is not None:
            for each in json.loads(names):
                retired_at[str(each)] = max(s.timestamp_ms, retired_at.get(str(each), 0))
        marker = s.summary.get(PIPELINE)
        # A replay's fence marker (<pipeline>/dlq-replay) is nobody's progress: it never pins.
        if marker is None or s.summary.get(OFFSETS) is None or marker.endswith(REPLAY_FENCE):
            continue
        newest[marker] = max(s.timestamp_ms, newest.get(marker, s.timestamp_ms))

    def retired(marker: str, at: int) -> bool:
        return at <= retired_at.get(marker, -1)

    return Protected(
        {n: at for n, at in newest.items() if not retired(n, at)},
        {n: at for n, at in newest.items() if retired(n, at)},
    )


def marker_names(spark: SparkSession, name: str) -> set[str]:
    """The marker names in the table's current ancestry (fence markers of replays apart)."""
    rows = spark.sql(
        f"SELECT DISTINCT s.summary['{PIPELINE}'] "
        f"FROM {name}.snapshots s JOIN {name}.history h ON s.snapshot_id = h.snapshot_id "
        f"WHERE h.is_current_ancestor AND s.summary['{OFFSETS}'] IS NOT NULL "
        f"AND s.summary['{PIPELINE}'] IS NOT NULL"
    ).collect()
    return {str(r[0]) for r in rows if not str(r[0]).endswith(REPLAY_FENCE)}


def to_retire(spark: SparkSession, name: str, pipelines: Collection[str]) -> list[str]:
    """What a ``--reset-offsets`` with a config of ``pipelines`` retires in the table: the
    markers of pipelines not in it (a former name's, a removed pipeline's), as
    :data:`RETIRES` lists them."""
    keep = set(pipelines)
    return sorted(n for n in marker_names(spark, name) if owner(n) not in keep)


def expiry_cutoff(now_ms: int, older_than_s: float, protected_ms: int | None) -> int:
    """Expire snapshots strictly older than this: ``older_than`` ago, or the protected
    marker snapshot's time if that is earlier."""
    cutoff = int(now_ms - older_than_s * 1000)
    return cutoff if protected_ms is None else min(cutoff, protected_ms)
