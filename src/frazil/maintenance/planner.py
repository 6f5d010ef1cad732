"""What a maintenance pass does to one table: the actions its health and policy call for."""

from __future__ import annotations

import time
from dataclasses import dataclass

from frazil.config.durations import parse_duration
from frazil.config.maintenance import ResolvedPolicy
from frazil.maintenance.health import TableHealth

#: The order actions run in: fewer rows before compacting, compaction before the delete
#: rewrite and the manifest rewrite it makes worthwhile, expiry last but one (it frees the
#: files the rewrites replaced), orphans last.
ORDER = ("retention", "compaction", "deletes", "manifests", "expire", "orphans")


@dataclass(frozen=True)
class Planned:
    """One action to run on a table, and why."""

    action: str
    why: str


def plan(health: TableHealth, policy: ResolvedPolicy, now_ms: int | None = None) -> list[Planned]:
    """The actions for one table, in :data:`ORDER`."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    found: list[Planned] = []
    if policy.retention is not None:
        found.append(
            Planned(
                "retention",
                f"rows with {policy.retention.column} older than {policy.retention.older_than}",
            )
        )
    if policy.compaction.enabled and health.partitions_to_compact:
        found.append(
            Planned(
                "compaction",
                f"{health.partitions_to_compact} partition(s) with small files or deletes "
                f"({health.small_files} small, {health.delete_files} delete files)",
            )
        )
    if (
        policy.deletes.enabled
        and health.format_version == 2
        and health.delete_files >= policy.deletes.min_delete_files
    ):
        found.append(Planned("deletes", f"{health.delete_files} position-delete files"))
    if policy.manifests.enabled and health.manifests >= policy.manifests.min_manifests:
        found.append(Planned("manifests", f"{health.manifests} manifests"))
    if policy.expire.enabled and health.expirable_snapshots:
        found.append(
            Planned(
                "expire",
                f"{health.expirable_snapshots} snapshot(s) older than "
                f"{policy.expire.older_than} beyond the newest {policy.expire.retain_last}",
            )
        )
    if policy.orphans.enabled:
        every_ms = parse_duration(policy.orphans.every) * 1000
        last = health.orphans_checked_ms
        if last is None or now - last >= every_ms:
            found.append(
                Planned("orphans", f"files older than {policy.orphans.older_than} no snapshot uses")
            )
    return found
