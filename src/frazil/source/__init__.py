"""Reading Kafka: Spark's Kafka source options and topic/partition discovery."""
