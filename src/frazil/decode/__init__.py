"""Decoding Kafka record values into typed columns: a registry of formats (JSON today)."""
