"""The run the driver's class-data-sharing archive is made from (:mod:`frazil.jvm.cds`).

A representative run: frazil's own runner on a private broker, decoding JSON payments into a
partitioned table, as ``frazil run`` does. Only the classes it loads end up in the archive,
so it goes through the real path: Kafka admin and source, the batch plan, the Iceberg write
and commit, the run report. ``frazil setup`` runs it as
``python -m frazil.engine.cds_workload <archive> <work folder>`` in a fresh process whose
driver JVM writes the archive when it exits.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(archive: str, work_dir: str) -> None:
    """Run the workload in ``work_dir``; the driver JVM writes ``archive`` when it exits."""
    from pyspark.sql import SparkSession

    from frazil.config import parse_config
    from frazil.engine import runner, session
    from frazil.generate.payments import PAYMENTS_SCHEMA
    from frazil.generate.producer import ensure_topic, produce_events
    from frazil.local.broker import LocalBroker

    work = Path(work_dir)
    broker = LocalBroker(work / "broker", port=_free_port(), controller_port=_free_port())
    broker.up(timeout=120)
    try:
        ensure_topic(broker.bootstrap, "cds", partitions=2)
        produce_events(broker.bootstrap, "cds", 20000, progress=False, seed=1)
        config = parse_config(
            {
                "catalog": {"warehouse": str(work / "lake")},
                "kafka": {"bootstrap_servers": broker.bootstrap},
                "state_dir": str(work / "state"),
                "spark": {"driver_memory": "1g"},
                "pipelines": [
                    {
                        "name": "cds",
                        "topics": ["cds"],
                        "table": "db.cds",
                        "schema": dict(PAYMENTS_SCHEMA),
                        "partition_by": ["days(created_at)"],
                        "kafka_metadata": ["topic", "partition", "offset", "timestamp"],
                        "max_offsets_per_trigger": 5000,
                    }
                ],
            }
        )
        original = session.spark_conf

        def conf(*args: Any, **kwargs: Any) -> dict[str, str]:
            values = original(*args, **kwargs)
            values["spark.driver.extraJavaOptions"] += " -XX:ArchiveClassesAtExit=" + archive
            return values

        session.spark_conf = conf
        runner.run(config, until_caught_up=True)
        spark = SparkSession.getActiveSession()
        assert spark is not None
        spark.sql("SELECT count(*) FROM lake.db.cds.snapshots").collect()
        spark.stop()
    finally:
        broker.down()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
