"""A table's live rows, the one figure of a table's size that every view of frazil shows.

A merge-on-read table (upserts, CDC) keeps replaced and deleted rows in its data files and
marks them in position-delete files or deletion vectors, so the snapshot summary's
``total-records`` counts them too. Live rows are ``total-records`` less
``total-position-deletes``: exact for the deletes frazil's MERGE writes (each marks one live
row: a MERGE reads the table with its deletes applied) and after compaction, which drops the
deletes of rewritten files (``remove-dangling-deletes``). Equality deletes, which frazil
never writes, cannot be counted without a scan and are not subtracted.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Snapshot summary keys (Iceberg's ``SnapshotSummary``).
TOTAL_RECORDS = "total-records"
TOTAL_POSITION_DELETES = "total-position-deletes"


def live_rows(summary: Mapping[str, str] | None) -> int:
    """Rows a reader of the snapshot sees, from its summary (0 for none)."""
    if not summary:
        return 0
    records = int(summary.get(TOTAL_RECORDS) or 0)
    deleted = int(summary.get(TOTAL_POSITION_DELETES) or 0)
    return max(0, records - deleted)
