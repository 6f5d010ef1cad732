"""Running pipelines on Spark: the session, the micro-batch handler and the runner."""
