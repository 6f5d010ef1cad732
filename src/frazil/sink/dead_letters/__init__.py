"""The dead-letter queue: failing records with their reason, in a Kafka topic and/or a table.

A record that a step could not handle carries an error struct (stage, reason, detail; see
:mod:`frazil.columns`). With ``errors.tolerance: all`` such records leave the batch for the
dead-letter queue instead of stopping the pipeline:

* the **table** (``errors.dlq_table``) gets one row per record: its raw key, value and headers,
  Kafka coordinates, stage, reason, detail, error class, pipeline and failure time; it is
  partitioned by day of failure and written with the pipeline's marker, so a replayed batch
  writes each record once;
* the **topic** (``errors.dlq_topic``) gets the record as it was read (key, value and headers
  byte for byte) plus headers of frazil's own, ``frazil.errors.*``, in the spirit of Kafka
  Connect's ``__connect.errors.*``. It is written with an idempotent producer, at least once:
  a batch replayed after a crash sends its failing records again.

One module per role: the dead letter's columns and the table's schema and settings
(:mod:`~frazil.sink.dead_letters.format`), the topic (:mod:`~frazil.sink.dead_letters.topic`),
and the queue that sends a batch's dead letters to both, the table's commits carrying the
pipeline's markers (:mod:`~frazil.sink.dead_letters.queue`). The engine finds a batch's
failing records and hands them over (``engine/dead_capture.py``, ``engine/dead_sender.py``).
"""
