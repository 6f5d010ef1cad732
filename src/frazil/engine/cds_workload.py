"""The run the driver's class-data-sharing archive is made from (:mod:`frazil.jvm.cds`).

A representative run: frazil's own runner on a private broker, decoding JSON payments into a
partitioned table, as ``frazil run`` does, and routing the same records by a field to the
tables it names. Only the classes it loads end up in the archive,
so it goes through the real path: Kafka admin and source, the batch plan, the Iceberg write
and commit, the run report.

Then the same pipeline once more in the same driver JVM against the local stack's object
store and REST catalog (:mod:`frazil.local.stack`, on free ports in the work folder): the
table written through Iceberg's S3FileIO and committed through the REST client, the
checkpoint on ``s3a://``. A driver of the stack then maps the AWS SDK's, S3A's and the REST
client's classes too (~5,000 the embedded run never loads), and so do the stack's executors,
which map the driver's archive. Should the stack not start, the archive covers the embedded
run alone. ``frazil setup`` runs it as
``python -m frazil.engine.cds_workload <archive> <work folder>`` in a fresh process whose
driver JVM writes the archive when it exits.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frazil.local.stack import StackAddresses


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: The stack's catalog in the workload's session, beside the embedded one.
STACK_CATALOG = "stack"


def _start_stack(work: Path) -> StackAddresses | None:
    """The object store and the REST catalog on free ports, or None if they do not start."""
    from frazil.errors import FrazilError
    from frazil.local import stack

    ports = stack.StackPorts(s3=_free_port(), rest_catalog=_free_port())
    try:
        return stack.up(work / "stack", [stack.REST_CATALOG], ports, timeout=120)
    except (FrazilError, OSError) as exc:
        stack.down(work / "stack")  # a service started before the one that failed
        print(f"the archive leaves the stack's classes out: {exc}", file=sys.stderr)
        return None


def main(archive: str, work_dir: str) -> None:
    """Run the workload in ``work_dir``; the driver JVM writes ``archive`` when it exits."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from frazil.config import FrazilConfig, parse_config
    from frazil.engine import runner, session
    from frazil.generate.payments import PAYMENTS_SCHEMA
    from frazil.generate.producer import ensure_topic, produce_events
    from frazil.jvm.options import java_option
    from frazil.local import stack
    from frazil.local.broker import LocalBroker

    work = Path(work_dir)
    broker = LocalBroker(work / "broker", port=_free_port(), controller_port=_free_port())
    broker.up(timeout=120)
    started: StackAddresses | None = None
    try:
        started = _start_stack(work)
        ensure_topic(broker.bootstrap, "cds", partitions=2)
        produce_events(broker.bootstrap, "cds", 20000, progress=False, seed=1)
        pipeline = {
            "name": "cds",
            "topics": ["cds"],
            "table": "db.cds",
            "schema": dict(PAYMENTS_SCHEMA),
            "partition_by": ["days(created_at)"],
            "kafka_metadata": ["topic", "partition", "offset", "timestamp"],
            "max_offsets_per_trigger": 5000,
        }
        # The same records routed by a field to the tables it names (three payment types),
        # created with their first rows: the one job writing many tables, the template's
        # table creation, the commit of several tables at once and the routing expressions
        # load ~700 classes the single table never does.
        routed = {
            **pipeline,
            "name": "cds_routed",
            "route": {"field": "type", "table": "db.cds_{value}"},
        }
        del routed["table"]
        common = {
            "kafka": {"bootstrap_servers": broker.bootstrap},
            "pipelines": [pipeline, routed],
        }
        config = parse_config(
            {
                **common,
                "catalog": {"warehouse": str(work / "lake")},
                "state_dir": str(work / "state"),
                "spark": {"driver_memory": "1g"},
            }
        )
        on_stack: FrazilConfig | None = None
        if started is not None:
            # The driver JVM starts once, from the first run's settings, and inherits the
            # environment then: the store's credentials go there before it starts (this
            # process exists for the workload alone).
            os.environ.update(started.aws_environment())
            settings = started.config()
            settings["catalog"]["name"] = STACK_CATALOG
            on_stack = parse_config(
                {
                    **common,
                    **settings,
                    "state_dir": f"s3a://{started.bucket}/cds-state",
                    "spark": {"driver_memory": "1g"},
                }
            )
        original = session.spark_conf

        def conf(config: FrazilConfig, *args: Any, **kwargs: Any) -> dict[str, str]:
            values = original(config, *args, **kwargs)
            if on_stack is not None and config is not on_stack:
                # Spark copies spark.hadoop.* (S3A's settings) into its Hadoop configuration
                # once, when the context starts; a later run's session gets runtime settings
                # only. The stack's catalog is named from the start too, as it is in a stack
                # driver's own session.
                catalog = f"spark.sql.catalog.{STACK_CATALOG}"
                for key, value in original(on_stack, *args, **kwargs).items():
                    if key.startswith(("spark.hadoop.", f"{catalog}.")) or key == catalog:
                        values.setdefault(key, value)
            values["spark.driver.extraJavaOptions"] += " " + java_option(
                "-XX:ArchiveClassesAtExit=", archive
            )
            return values

        session.spark_conf = conf
        runner.run(config, until_caught_up=True)
        if on_stack is not None:
            try:
                runner.run(on_stack, until_caught_up=True)
            except Exception as exc:  # the stack's part is a bonus: keep the embedded run's
                print(f"the archive leaves part of the stack's classes out: {exc}", file=sys.stderr)
        spark = SparkSession.getActiveSession()
        assert spark is not None
        spark.sql("SELECT count(*) FROM lake.db.cds.snapshots").collect()
        gateway = SparkContext._gateway
        spark.stop()
        # The JVM writes the archive as it exits, when its stdin closes: seconds for ~30,000
        # classes. Wait for it, so the archive is complete when this process ends.
        process = getattr(gateway, "proc", None)
        if process is not None and process.stdin is not None:
            process.stdin.close()
            try:
                process.wait(timeout=300)
            except subprocess.TimeoutExpired:
                process.kill()  # no archive then (build_archive says so), no JVM left behind
                raise
    finally:
        if started is not None:
            stack.down(work / "stack")
        broker.down()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
