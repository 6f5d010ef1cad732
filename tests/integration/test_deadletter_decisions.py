"""A batch replayed after a crash between its table's commit and its dead letters sends the
failures that commit left out: decided as the commit decided them, not against a table made
looser since or a decoder that has not yet learned what the crashed run had."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from frazil.generate.producer import ensure_topic
from tests.integration.helpers import drain

pytestmark = [pytest.mark.integration]


def _config(path: Path, lake_dir: Path, bootstrap: str, pipeline: dict[str, Any]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "catalog": {"warehouse": str(lake_dir / "warehouse")},
                "kafka": {"bootstrap_servers": bootstrap},
                "state_dir": str(path.parent / "state"),
                "spark": {"driver_memory": "1g"},
                "pipelines": [pipeline],
            }
        )
    )
    return path


def produce_json(
    bootstrap: str, topic: str, records: list[dict[str, Any] | str], partitions: int
) -> None:
    """Record ``n`` to partition ``n % partitions``; a string is sent as it is."""
    ensure_topic(bootstrap, topic, partitions=partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for n, record in enumerate(records):
        value = record if isinstance(record, str) else json.dumps(record)
        producer.produce(topic, value.encode(), partition=n % partitions)
    assert producer.flush(30) == 0


def _rows(spark: Any, sql: str) -> list[Any]:
    try:
        return spark.sql(sql).collect()
    except Exception:  # the table does not exist yet
        return []


def _crash_after_commit(spark: Any, config_path: Path, table: str, rows: int) -> None:
    """Run the config's pipeline until ``table`` holds ``rows`` rows, then kill -9 it while
    it waits between that commit and its dead letters."""
    command = [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(config_path)]
    env = {**os.environ, "FRAZIL_TEST_PAUSE_BEFORE_DEAD_LETTERS": "600"}
    proc = subprocess.Popen(
        [*command, "--until-caught-up"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            found = _rows(spark, f"SELECT count(*) FROM lake.{table}")
            if found and int(found[0][0]) >= rows:
                break
            time.sleep(0.5)
        else:
            _, err = proc.communicate(timeout=5) if proc.poll() is not None else (None, b"")
            raise AssertionError(f"the run never committed: {err.decode()[-3000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def test_failures_of_a_committed_batch_are_those_its_commit_left_out_after_the_table_loosened(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    # Records without `v` fail for a table whose `v` is NOT NULL (schema frozen). The run
    # commits the others, and dies before sending them; the table is then made looser outside
    # the config. The replay must still send them: the table does not hold them.
    topic, table, dead = f"decide-{unique}", f"db.decide_{unique}", f"db.decide_dead_{unique}"
    spark.sql(f"CREATE TABLE lake.{table} (id bigint, v string NOT NULL) USING iceberg")
    records = [{"id": i, **({} if i % 4 == 0 else {"v": f"v{i}"})} for i in range(40)]
    produce_json(kafka_bootstrap, topic, records, partitions=2)
    config_path = _config(
        tmp_path / "frazil.yaml",
        lake_dir,
        kafka_bootstrap,
        {
            "name": f"decide_{unique}",
            "topics": [topic],
            "table": table,
            "schema": {"id": "long", "v": "string"},
            "schema_evolution": "freeze",
            "errors": {"tolerance": "all", "dlq_table": dead},
        },
    )
    _crash_after_commit(spark, config_path, table, 30)
    assert _rows(spark, f"SELECT count(*) FROM lake.{dead}")[0][0] == 0  # never sent
    spark.sql(f"ALTER TABLE lake.{table} ALTER COLUMN v DROP NOT NULL")

    drain(spark, config_path)

    in_table = Counter(int(r[0]) for r in spark.sql(f"SELECT id FROM lake.{table}").collect())
    dead_rows = spark.sql(f"SELECT value, reason, target_table FROM lake.{dead}").collect()
    in_dead = Counter(int(json.loads(bytes(r[0]))["id"]) for r in dead_rows)
    assert sorted(in_table) == [i for i in range(40) if i % 4]
    assert max(in_table.values()) == 1
    assert sorted(in_dead) == [i for i in range(40) if i % 4 == 0]
    assert max(in_dead.values()) == 1
    assert all("null but required" in r[1] for r in dead_rows)
    assert {r[2] for r in dead_rows} == {table}


def test_records_the_crashed_run_learned_to_read_are_not_sent_again_as_dead_letters(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    # An inferred JSON schema: the crashed run learned field `extra` from the batch, evolved
    # the table and committed it, then died before the batch's one malformed record went to
    # the dead-letter table. The replay's decoder meets `extra` again: it must learn it, not
    # send the records the table holds to the dead-letter queue.
    topic, table, dead = f"learnt-{unique}", f"db.learnt_{unique}", f"db.learnt_dead_{unique}"
    first = [{"id": i, "v": f"v{i}"} for i in range(10)]
    produce_json(kafka_bootstrap, topic, first, partitions=1)
    config_path = _config(
        tmp_path / "frazil.yaml",
        lake_dir,
        kafka_bootstrap,
        {
            "name": f"learnt_{unique}",
            "topics": [topic],
            "table": table,
            "errors": {"tolerance": "all", "dlq_table": dead},
        },
    )
    drain(spark, config_path)  # the table, with the first shape
    second = [{"id": i, "v": f"v{i}", "extra": i * 10} for i in range(10, 30)]
    produce_json(kafka_bootstrap, topic, [*second[:10], "{not json", *second[10:]], partitions=1)
    _crash_after_commit(spark, config_path, table, 30)
    assert _rows(spark, f"SELECT count(*) FROM lake.{dead}")[0][0] == 0

    drain(spark, config_path)

    rows = spark.sql(f"SELECT id, extra FROM lake.{table}").collect()
    assert Counter(int(r[0]) for r in rows) == Counter(range(30))
    assert {int(r[0]): r[1] for r in rows if r[1] is not None} == {i: i * 10 for i in range(10, 30)}
    dead_rows = spark.sql(f"SELECT value, stage FROM lake.{dead}").collect()
    assert [(bytes(r[0]), r[1]) for r in dead_rows] == [(b"{not json", "decode")]
