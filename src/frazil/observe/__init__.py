"""What operators see: Prometheus metrics, consumer-group offsets in Kafka's own tools, and
``frazil status`` rebuilt from the tables' own commit history."""
