"""Names of the columns frazil adds while a batch is in flight; none of them reach a table."""

from __future__ import annotations

TOPIC = "__frazil_topic"
PARTITION = "__frazil_partition"
OFFSET = "__frazil_offset"
TIMESTAMP_MS = "__frazil_ts_ms"
CORRUPT = "__frazil_corrupt"
TOMBSTONE = "__frazil_tombstone"

INTERNAL = (TOPIC, PARTITION, OFFSET, TIMESTAMP_MS, CORRUPT, TOMBSTONE)

#: Prefix of the optional Kafka metadata columns that do reach the table (``kafka_metadata``).
METADATA_PREFIX = "_kafka_"
