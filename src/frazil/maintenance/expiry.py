"""Which snapshots exactly-once recovery still needs, so that expiry never removes them.

A pipeline resumes from its newest marker, found by walking the table's current ancestry
(:func:`frazil.progress.markers.find_marker`). Expiring that snapshot, or any snapshot between
it and the current one, would break the walk: the table would look as if no run had ever
written it. So expiry keeps every snapshot from the oldest of the newest marker snapshots (one
per marker name: each pipeline, each dead-letter source) onwards.

Only markers of the config's pipelines pin (a pipeline's own, ``<pipeline>/dlq…`` of its
dead letters): the newest marker of a pipeline since renamed (run again under its new name
with ``--reset-offsets``) or removed from the config would otherwise keep every snapshot after
it for good. Such a marker is *retired*: it stays in the history and ``frazil tables`` names
it, but expiry passes it by.

Maintenance commits do not copy a marker forward: a compaction that began before a batch's
commit and lands after it would carry the older marker above the newer one, and a restart
would then read the batch again.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil.progress.markers import OFFSETS, PIPELINE

#: The marker name suffix of dead-letter replays' fences
#: (:data:`frazil.engine.replay_state.REPLAY_MARKER`; maintenance sits below the engine).
REPLAY_FENCE = "/dlq-replay"

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Protected:
    """The newest marker snapshot of each marker name, and the oldest of them."""

    #: marker name → commit time (epoch ms) of its newest marker snapshot.
    newest: dict[str, int]
    #: The same of markers that do not pin: their pipeline is not in the config.
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


def protected(
    spark: SparkSession, name: str, pipelines: Collection[str] | None = None
) -> Protected:
    """Read the newest marker snapshot per marker name among the current ancestors.

    Args:
        pipelines: The config's pipelines: markers of any other are retired. None: every
            marker pins.
    """
    rows = spark.sql(
        f"SELECT s.summary['{PIPELINE}'] AS p, max(unix_millis(s.committed_at)) AS at "
        f"FROM {name}.snapshots s JOIN {name}.history h ON s.snapshot_id = h.snapshot_id "
        f"WHERE h.is_current_ancestor AND s.summary['{OFFSETS}'] IS NOT NULL "
        f"AND s.summary['{PIPELINE}'] IS NOT NULL GROUP BY 1"
    ).collect()
    # A replay's fence marker (<pipeline>/dlq-replay) is nobody's progress: it never pins.
    found = {str(r[0]): int(r[1]) for r in rows if not str(r[0]).endswith(REPLAY_FENCE)}
    if pipelines is None:
        return Protected(found)
    keep = set(pipelines)
    return Protected(
        {n: at for n, at in found.items() if owner(n) in keep},
        {n: at for n, at in found.items() if owner(n) not in keep},
    )


def expiry_cutoff(now_ms: int, older_than_s: float, protected_ms: int | None) -> int:
    """Expire snapshots strictly older than this: ``older_than`` ago, or the protected
    marker snapshot's time if that is earlier."""
    cutoff = int(now_ms - older_than_s * 1000)
    return cutoff if protected_ms is None else min(cutoff, protected_ms)
