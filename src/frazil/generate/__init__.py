"""Synthetic test data: payment events and a rate-limited Kafka producer for them."""
