"""Decoding Kafka record values into typed columns (JSON today; Avro and Protobuf next)."""
