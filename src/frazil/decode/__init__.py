"""Decoding Kafka record values and keys into typed columns: a registry of formats (JSON, Avro,
Protobuf, string, bytes), plain or in the Schema Registry wire format."""
