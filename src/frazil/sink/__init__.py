"""Writing to Iceberg: table creation, exactly-once commits, commit markers."""
