"""Table upkeep: health, and the Iceberg actions that restore it (compaction, delete-file and
manifest rewrites, snapshot expiry that keeps exactly-once markers, orphan removal, row
retention), run by ``frazil optimize``, ``frazil maintain`` or inline in ``frazil run``."""
