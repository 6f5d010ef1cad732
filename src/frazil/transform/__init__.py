"""Shaping records between decoding and routing: Kafka metadata columns, the transform chain."""
