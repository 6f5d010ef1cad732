"""How healthy a table is: files, sizes, deletes, snapshots, manifests, metadata, a score.

Measured from a table's files, snapshots, manifests and metadata files
(:class:`~frazil.maintenance.facts.TableFacts`), read through Iceberg's metadata tables in
Spark where a Spark application runs anyway (maintenance passes), or with PyIceberg by the
read-only commands, which then start no Spark.
The score starts at 100 and loses points for each problem, each with its reason; the same
findings tell a maintenance pass what to do (:mod:`frazil.maintenance.planner`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from frazil.config.durations import parse_duration
from frazil.config.maintenance import ResolvedPolicy
from frazil.maintenance.expiry import Protected, protected_in
from frazil.maintenance.facts import TableFacts, spark_facts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Snapshot-summary key frazil's maintenance commits carry (the action's name).
MAINTENANCE = "frazil.maintenance"
#: Table property: when orphan files were last looked for (epoch ms).
ORPHANS_AT = "frazil.maintenance.orphans-at"


@dataclass(frozen=True)
class PartitionHealth:
    """One partition's data and delete files."""

    partition: str
    data_files: int
    data_bytes: int
    small_files: int
    median_file_bytes: int
    delete_files: int
    records: int


@dataclass(frozen=True)
class TableHealth:
    """One table's state, and what its policy makes of it."""

    table: str
    target_file_bytes: int
    small_below_bytes: int
    data_files: int
    data_bytes: int
    records: int
    small_files: int
    delete_files: int
    avg_file_bytes: int
    median_file_bytes: int
    snapshots: int
    expirable_snapshots: int
    manifests: int
    metadata_files: int
    metadata_bytes: int
    last_commit_ms: int | None
    last_maintenance_ms: int | None
    orphans_checked_ms: int | None
    format_version: int
    score: int
    reasons: tuple[str, ...]
    partitions: tuple[PartitionHealth, ...] = field(default=())
    #: Partitions with enough small files (or deletes) to be worth compacting.
    partitions_to_compact: int = 0
    #: Per marker name, the snapshots its newest marker keeps from expiry, and whether it is
    #: retired (by a later ``--reset-offsets``: it keeps nothing); oldest marker first.
    pins: tuple[tuple[str, int, bool], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A plain dict for ``--output json``."""
        return asdict(self)


def _median(values: list[int]) -> int:
    if not values:
        return 0
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) // 2


def target_file_bytes(properties: Mapping[str, str], policy: ResolvedPolicy) -> int:
    """The compaction target: the policy's, else the table's write target, else 128MB."""
    prop = properties.get("write.target-file-size-bytes")
    return policy.compaction.target_bytes(int(prop) if prop is not None else None)


def read_health(
    spark: SparkSession,
    name: str,
    java_table: Any,
    policy: ResolvedPolicy,
    guard: Protected | None = None,
) -> TableHealth:
    """Measure one table (``name`` qualified for Spark SQL) against its policy.

    Args:
        guard: The newest marker snapshots (:func:`frazil.maintenance.expiry.protected`):
            snapshots from the oldest of them on are not expirable.
    """
    return health_of(spark_facts(spark, name, java_table), policy, guard)


def health_of(
    facts: TableFacts, policy: ResolvedPolicy, guard: Protected | None = None
) -> TableHealth:
    """A table's health against its policy, from what was read of it (through Spark or
    PyIceberg); ``guard`` as :func:`read_health`'s, else found in the facts' snapshots."""
    target = target_file_bytes(facts.properties, policy)
    small_below = int(target * policy.compaction.small_file_ratio)
    by_partition: dict[str, dict[str, list[int]]] = {}
    for f in facts.files:
        entry = by_partition.setdefault(f.partition, {"data": [], "deletes": [], "n": []})
        if f.content == 0:
            entry["data"].append(f.size)
            entry["n"].append(f.records)
        else:
            entry["deletes"].append(f.size)
            if f.content == 1:
                # Live rows, as frazil.progress.rows counts them: each position delete (or
                # deletion vector entry) hides one row of the partition's data files.
                entry["n"].append(-f.records)
    partitions = tuple(
        PartitionHealth(
            partition=p,
            data_files=len(e["data"]),
            data_bytes=sum(e["data"]),
            small_files=sum(1 for s in e["data"] if s < small_below),
            median_file_bytes=_median(e["data"]),
            delete_files=len(e["deletes"]),
            records=max(0, sum(e["n"])),
        )
        for p, e in sorted(by_partition.items())
    )
    sizes = [s for e in by_partition.values() for s in e["data"]]
    times = sorted(s.timestamp_ms for s in facts.snapshots)
    maintained = [s.timestamp_ms for s in facts.snapshots if s.summary.get(MAINTENANCE)]
    guard = guard if guard is not None else protected_in(facts.snapshots)
    expirable = _expirable(times, policy, guard.since_ms)
    orphans_at = facts.properties.get(ORPHANS_AT)
    health = TableHealth(
        table=facts.name,
        target_file_bytes=target,
        small_below_bytes=small_below,
        data_files=len(sizes),
        data_bytes=sum(sizes),
        records=sum(p.records for p in partitions),
        small_files=sum(p.small_files for p in partitions),
        delete_files=sum(p.delete_files for p in partitions),
        avg_file_bytes=sum(sizes) // len(sizes) if sizes else 0,
        median_file_bytes=_median(sizes),
        snapshots=len(times),
        expirable_snapshots=expirable,
        manifests=facts.manifests,
        metadata_files=facts.metadata_files,
        metadata_bytes=facts.metadata_bytes,
        last_commit_ms=max(times) if times else None,
        last_maintenance_ms=max(maintained) if maintained else None,
        orphans_checked_ms=int(orphans_at) if orphans_at is not None else None,
        format_version=facts.format_version,
        score=100,
        reasons=(),
        partitions=partitions,
        pins=tuple(guard.pins(times)),
    )
    return score(health, policy)


def _expirable(times: list[int], policy: ResolvedPolicy, protected_ms: int | None) -> int:
    """Snapshots an expiry would remove now: older than ``older_than``, beyond the newest
    ``retain_last``, and before the protected marker snapshots."""
    if not times:
        return 0
    cutoff = int(time.time() * 1000 - parse_duration(policy.expire.older_than) * 1000)
    if protected_ms is not None:
        cutoff = min(cutoff, protected_ms)
    candidates = sorted(times)[: max(0, len(times) - policy.expire.retain_last)]
    return sum(1 for t in candidates if t < cutoff)


def score(health: TableHealth, policy: ResolvedPolicy) -> TableHealth:
    """The health score (0-100) and its reasons, from what was measured."""
    from dataclasses import replace

    points = 100.0
    reasons: list[str] = []
    compaction = policy.compaction
    needy = [
        p
        for p in health.partitions
        if p.small_files >= compaction.min_small_files
        or (p.delete_files >= policy.deletes.min_delete_files and p.data_files > 0)
    ]
    small_in_needy = sum(
        p.small_files for p in needy if p.small_files >= compaction.min_small_files
    )
    if small_in_needy and health.data_files:
        points -= min(40.0, 40.0 * small_in_needy / health.data_files + 10.0)
        crowded = sum(1 for p in needy if p.small_files >= compaction.min_small_files)
        reasons.append(
            f"{small_in_needy} small data files (below {_mb(health.small_below_bytes)}) in "
            f"{crowded} partition(s) with {compaction.min_small_files} or more "
            "(maintenance.compaction.min_small_files)"
        )
    if health.delete_files >= policy.deletes.min_delete_files:
        points -= min(25.0, 25.0 * health.delete_files / max(1, health.data_files) + 5.0)
        reasons.append(f"{health.delete_files} delete files slow every read")
    if health.manifests >= policy.manifests.min_manifests:
        points -= 10.0
        reasons.append(
            f"{health.manifests} manifests (rewrite from {policy.manifests.min_manifests})"
        )
    if health.expirable_snapshots:
        points -= min(15.0, 5.0 + health.expirable_snapshots / 20)
        reasons.append(
            f"{health.expirable_snapshots} snapshots older than {policy.expire.older_than} "
            "can be expired"
        )
    return replace(
        health,
        score=max(0, round(points)),
        reasons=tuple(reasons),
        partitions_to_compact=len(needy),
    )


def _mb(size: int) -> str:
    return f"{size / 1024**2:.1f} MiB"
