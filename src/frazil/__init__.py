"""frazil: exactly-once streaming ingestion from Apache Kafka into Apache Iceberg tables."""

__version__ = "0.1.0"
