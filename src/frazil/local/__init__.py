"""Local development services (a single-node Kafka broker)."""
