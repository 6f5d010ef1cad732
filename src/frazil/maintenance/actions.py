"""The upkeep actions, run with Iceberg's own Spark actions in the driver JVM.

Each commit an action makes carries ``frazil.maintenance=<action>`` in its snapshot summary.
A commit that loses a race with a live writer (``CommitFailedException``, or a
``ValidationException`` when a writer's deletes touch a file being rewritten) is retried with
backoff; compaction commits file group by file group (partial progress), so a conflict costs
one group, not the pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from frazil.config.durations import parse_duration
from frazil.config.maintenance import ResolvedPolicy
from frazil.config.storage import is_s3
from frazil.errors import MaintenanceError
from frazil.jvm.classes import java_class
from frazil.maintenance.expiry import expiry_cutoff
from frazil.maintenance.health import MAINTENANCE, ORPHANS_AT, TableHealth

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Attempts of one action when its commit conflicts with a writer.
ATTEMPTS = 4
#: Seconds before the first retry (doubled each time).
BACKOFF_S = 0.5
_CONFLICTS = ("CommitFailedException", "ValidationException", "CommitStateUnknownException")


@dataclass(frozen=True)
class ActionResult:
    """What one action did to one table."""

    table: str
    action: str
    seconds: float
    detail: str
    error: str | None = None
    #: Why the action did not run this pass (a pipeline's MERGE holds the table), or None.
    skipped: str | None = None


def with_retries(what: str, call: Callable[[], T], attempts: int = ATTEMPTS) -> T:
    """Run ``call``, again after a commit conflict (with backoff), at most ``attempts`` times.

    Raises:
        MaintenanceError: It failed for another reason, or kept conflicting.
    """
    delay = BACKOFF_S
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as exc:
            text = str(exc)
            conflict = any(name in text for name in _CONFLICTS)
            if not conflict or attempt == attempts:
                raise MaintenanceError(f"{what} failed: {_cause(exc, text)[:500]}") from None
            log.info("%s: commit conflict, retrying in %.1fs (%s)", what, delay, text[:200])
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


def _cause(exc: Exception, text: str) -> str:
    """The failure in one line: a JVM call's own exception (py4j's first line only names
    the call), else the first line of the message."""
    for line in text.strip().splitlines():
        line = line.strip().lstrip(": ")
        if "Exception" in line or "Error" in line:
            return line
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


#: Data files one slice of a compaction rewrites when it must stop for a pipeline's MERGE
#: between slices (``frazil maintain`` next to an upsert/CDC run).
COMPACTION_SLICE_FILES = 200


def _compaction_text(
    rewritten: int, size: int, added: int, deletes: int, failed: int, overtaken: int = 0
) -> str:
    if rewritten == 0 and failed == 0 and deletes == 0:
        # Iceberg's partial progress only logs the file groups whose commit lost to a
        # concurrent commit: said here, or the pass reads "0 rewritten" for no reason.
        if overtaken:
            return (
                "nothing rewritten: another commit of the table (a pipeline writing it) came "
                "in while the compaction ran, and Iceberg dropped the rewrites it conflicted "
                "with; the next pass tries again"
            )
        return "nothing rewritten: Iceberg's planner found no file group to rewrite"
    return (
        f"{rewritten} data files ({size / 1024**2:.1f} MiB) rewritten into {added}, "
        f"{deletes} delete files removed"
        # A file group fails for a concurrent commit it conflicts with, or for an error that
        # Spark's log holds: its files stay as they were, for a later pass.
        + (f", {failed} left as they were (a file group failed)" if failed else "")
    )


class Actions:
    """Iceberg's Spark actions on one table."""

    def __init__(self, spark: SparkSession, name: str, java_table: Any) -> None:
        self.spark = spark
        self.name = name
        self.table = java_table
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        self._actions = java_class(jvm, "org.apache.iceberg.spark.actions.SparkActions").get(
            spark._jsparkSession
        )

    def compact(
        self,
        policy: ResolvedPolicy,
        health: TableHealth,
        keep_going: Callable[[], bool] | None = None,
        slice_files: int = COMPACTION_SLICE_FILES,
    ) -> str:
        """Rewrite small files, and files with deletes, of the partitions that need it.

        Args:
            keep_going: Asked before each slice of ``slice_files`` files after the first
                (None: one action for the whole pass): False stops the compaction there, so
                that a pipeline's MERGE into the table that lost to a slice's commit gets the
                table to itself instead of losing again to the next one.
        """
        budget = policy.compaction.max_files_per_pass
        if keep_going is None:
            return self._compact(policy, health, budget)
        totals = [0, 0, 0, 0, 0, 0]
        slices = 0
        while budget > 0:
            if slices and not keep_going():
                log.info(
                    "maintenance: %s: compaction stopped after %d slice(s): a pipeline's "
                    "MERGE into it lost to a concurrent commit",
                    self.name,
                    slices,
                )
                break
            self.table.refresh()
            counts = self._compact_counts(policy, health, min(slice_files, budget))
            slices += 1
            totals = [a + b for a, b in zip(totals, counts, strict=True)]
            if counts[0] == 0:
                break
            budget -= counts[0]
        return _compaction_text(*totals)

    def _compact(self, policy: ResolvedPolicy, health: TableHealth, files: int) -> str:
        return _compaction_text(*self._compact_counts(policy, health, files))

    def _compact_counts(
        self, policy: ResolvedPolicy, health: TableHealth, files: int
    ) -> tuple[int, int, int, int, int, int]:
        """One rewrite action of at most ``files`` data files: (files rewritten, bytes, files
        added, delete files removed, files left as they were: a failed file group, and 1 if
        another writer committed to the table while it ran, else 0)."""
        compaction = policy.compaction
        start = self.table.currentSnapshot()
        start_id = None if start is None else int(start.snapshotId())
        action = self._actions.rewriteDataFiles(self.table)
        if compaction.strategy == "sort":
            if compaction.sort_by:
                builder = java_class(self._jvm, "org.apache.iceberg.SortOrder").builderFor(
                    self.table.schema()
                )
                for column in compaction.sort_by:
                    builder = builder.asc(column)
                action = action.sort(builder.build())
            else:
                action = action.sort()
        elif compaction.strategy == "zorder":
            gateway = self.spark.sparkContext._gateway
            assert gateway is not None
            columns = gateway.new_array(
                java_class(self._jvm, "java.lang.String"), len(compaction.sort_by)
            )
            for i, column in enumerate(compaction.sort_by):
                columns[i] = column
            action = action.zOrder(columns)
        else:
            action = action.binPack()
        options = {
            "target-file-size-bytes": health.target_file_bytes,
            "min-file-size-bytes": health.small_below_bytes,
            "min-input-files": compaction.min_small_files,
            "partial-progress.enabled": "true",
            "max-files-to-rewrite": files,
            "remove-dangling-deletes": "true",
        }
        if policy.deletes.enabled:
            options["delete-file-threshold"] = policy.deletes.min_delete_files
        for key, value in options.items():
            action = action.option(key, str(value))
        result = action.snapshotProperty(MAINTENANCE, "compaction").execute()
        rewritten = int(result.rewrittenDataFilesCount())
        removed = int(result.removedDeleteFilesCount())
        if rewritten:
            # Iceberg keeps the file-scoped deletes of the files a partial pass rewrote (they
            # are older than other files of their partition): dropped here, or every read
            # opens them and the table's live rows count them twice.
            dangling = java_class(self._jvm, "dev.frazil.iceberg.DanglingDeletes")
            removed += int(dangling.remove(self.table, MAINTENANCE, "compaction"))
        return (
            rewritten,
            int(result.rewrittenBytesCount()),
            int(result.addedDataFilesCount()),
            removed,
            int(result.failedDataFilesCount()),
            int(self._overtaken(start_id)),
        )

    def _overtaken(self, start_id: int | None) -> bool:
        """Whether a commit other than maintenance's came in since snapshot ``start_id``."""
        self.table.refresh()
        current = self.table.currentSnapshot()
        for _ in range(1_000):
            if current is None or int(current.snapshotId()) == start_id:
                return False
            if current.summary().get(MAINTENANCE) is None:
                return True
            parent = current.parentId()
            current = None if parent is None else self.table.snapshot(parent)
        return False

    def rewrite_deletes(self, policy: ResolvedPolicy) -> str:
        """Combine position-delete files (and drop those whose data files are gone)."""
        result = (
            # Every delete file, however few: after a compaction the ones left point at
            # rewritten data files and this drops them (they are not "dangling" to the
            # compaction, which shares their sequence number).
            self._actions.rewritePositionDeletes(self.table)
            .option("rewrite-all", "true")
            .option("partial-progress.enabled", "true")
            .snapshotProperty(MAINTENANCE, "deletes")
            .execute()
        )
        return (
            f"{int(result.rewrittenDeleteFilesCount())} delete files rewritten into "
            f"{int(result.addedDeleteFilesCount())}"
        )

    def rewrite_manifests(self) -> str:
        """Rewrite the current snapshot's manifests into few large ones."""
        result = (
            self._actions.rewriteManifests(self.table)
            .snapshotProperty(MAINTENANCE, "manifests")
            .execute()
        )
        size = java_class(
            self._jvm, "org.apache.iceberg.relocated.com.google.common.collect.Iterables"
        ).size
        rewritten, added = (
            int(size(result.rewrittenManifests())),
            int(size(result.addedManifests())),
        )
        return f"{rewritten} manifests rewritten into {added}"

    def expire(self, policy: ResolvedPolicy, protected_ms: int | None) -> str:
        """Expire old snapshots, keeping the newest ``retain_last`` and every snapshot from
        the oldest newest-marker snapshot on (:mod:`frazil.maintenance.expiry`)."""
        cutoff = expiry_cutoff(
            int(time.time() * 1000), parse_duration(policy.expire.older_than), protected_ms
        )
        result = (
            self._actions.expireSnapshots(self.table)
            .expireOlderThan(cutoff)
            .retainLast(policy.expire.retain_last)
            .execute()
        )
        return (
            f"expired snapshots before {_iso(cutoff)}: deleted "
            f"{int(result.deletedDataFilesCount())} data, "
            f"{int(result.deletedPositionDeleteFilesCount())} delete, "
            f"{int(result.deletedManifestsCount())} manifest and "
            f"{int(result.deletedManifestListsCount())} manifest-list files"
        )

    def remove_orphans(self, policy: ResolvedPolicy) -> str:
        """Delete files no snapshot or metadata references, older than ``older_than``."""
        older = int(time.time() * 1000 - parse_duration(policy.orphans.older_than) * 1000)
        action = self._actions.deleteOrphanFiles(self.table).olderThan(older)
        if self._lists_by_prefix():
            # On an object store, the table's own FileIO (S3FileIO) lists the location by
            # prefix, as it deletes, instead of Hadoop walking "directories" S3 does not have.
            action = action.usePrefixListing(True)
        result = action.execute()
        removed = int(result.orphanFilesCount())
        self.table.updateProperties().set(ORPHANS_AT, str(int(time.time() * 1000))).commit()
        return f"{removed} orphan files older than {policy.orphans.older_than} removed"

    def _lists_by_prefix(self) -> bool:
        """Whether the table is on an object store whose FileIO lists by prefix."""
        location = str(self.table.location())
        if is_s3(location):
            # Found the way py4j finds Iceberg's classes (Spark's class loader on a cluster).
            prefix_io = java_class(
                self._jvm, "org.apache.iceberg.io.SupportsPrefixOperations"
            )._java_lang_class
            return bool(prefix_io.isInstance(self.table.io()))
        return False

    def retain(self, policy: ResolvedPolicy) -> str:
        """Delete rows older than the retention (whole files where the partitioning allows)."""
        retention = policy.retention
        assert retention is not None
        cutoff = int(time.time() * 1000 - parse_duration(retention.older_than) * 1000)
        column = "`" + retention.column.replace("`", "``") + "`"
        condition = f"{column} < timestamp_millis({cutoff})"
        found = self.spark.sql(f"SELECT 1 FROM {self.name} WHERE {condition} LIMIT 1").collect()
        if not found:
            return f"no rows older than {retention.older_than}"
        java_class(self._jvm, "dev.frazil.spark.Commits").sqlWithProperties(
            self.spark._jsparkSession,
            f"DELETE FROM {self.name} WHERE {condition}",
            {MAINTENANCE: "retention"},
        )
        return f"rows with {retention.column} before {_iso(cutoff)} deleted"


def _iso(epoch_ms: int) -> str:
    from frazil.progress.markers import format_ms

    return format_ms(epoch_ms)
