"""Conservation: every produced record ends in the table or the dead-letter table, exactly
once, across kill -9 restarts during ingest (some between a commit and its dead letters)."""

from __future__ import annotations

import json
import os
import random
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
from tests.integration.helpers import drain, end_offsets

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Enough for seven batches of 6,000: kills land in several of them.
GOOD_RECORDS = 40_000
PARTITIONS = 4
_GOOD = {
    "type": "debit",
    "created_at": "2026-01-01T00:00:00",
    "document": "1",
    "payer": "X",
    "amount": 12,
}


def _good(i: int) -> bytes:
    return json.dumps({**_GOOD, "id": f"g{i}", "amount": i % 1000}).encode()


#: Kinds of bad records: name → value (every one must end in the dead-letter table).
BAD_KINDS: dict[str, bytes | None] = {
    "malformed": b'{"id": ',
    "truncated": _good(1)[:30],
    "wrong type": json.dumps({**_GOOD, "id": "w", "amount": "lots"}).encode(),
    "non-utf8": b"\xff\xfe\xfd\xfc",
    "empty": b"",
    "null value": None,
    "array": b"[1, 2, 3]",
    "string": b'"a string"',
    "number": b"42",
    "json null": b"null",
    "near max size": b'{"id": "' + b"x" * 900_000,
    "deep nesting": b'{"id": "d", "deep": ' + b"[" * 5000,
    "bad magic byte": b"\x07\x00\x00\x00\x01garbage",
    "unknown schema id": b"\x00\x00\x00\x30\x39\x02\xffgarbage",
    "truncated avro": b"\x00\x00\x00\x00\x01\x06abc",
    "garbage protobuf": b"\x0a\xff\xff\xff\xff\x0f",
    "unparsable date": json.dumps({**_GOOD, "id": "t", "created_at": "yesterday-ish"}).encode(),
    "numeric overflow": (
        b'{"id": "o", "type": "debit", "amount": 99999999999999999999999, "payer": "X"}'
    ),
    "transform overflow": json.dumps({**_GOOD, "id": "v", "amount": 9223372036854775807}).encode(),
    "whitespace": b"   ",
    "bad escape": b'{"id": "\\q"}',
    "unclosed string": b'{"id": "never ends',
}


def _produce(bootstrap: str, topic: str) -> dict[tuple[int, int], str]:
    """Produce good and bad records mixed; return what each position holds."""
    ensure_topic(bootstrap, topic, partitions=PARTITIONS)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "message.max.bytes": 2_000_000}
    )
    rng = random.Random(11)
    bad = [(name, value) for name, value in BAD_KINDS.items() for _ in range(4)]
    plan: list[tuple[int, str, bytes | None]] = []
    for i in range(GOOD_RECORDS):
        plan.append((i % PARTITIONS, f"good:g{i}", _good(i)))
    for name, value in bad:
        plan.insert(rng.randrange(len(plan)), (rng.randrange(PARTITIONS), f"bad:{name}", value))
    what: dict[tuple[int, int], str] = {}
    failures: list[str] = []

    def delivered(label: str) -> Any:
        def record(err: Any, msg: Any) -> None:
            if err is not None:
                failures.append(str(err))
            else:
                what[(msg.partition(), msg.offset())] = label

        return record

    for partition, label, value in plan:
        while True:
            try:
                producer.produce(
                    topic,
                    value,
                    key=label.encode(),
                    partition=partition,
                    on_delivery=delivered(label),
                )
                break
            except BufferError:
                producer.poll(0.2)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failures, failures[:3]
    return what


def _rows(spark: Any, sql: str) -> list[Any]:
    try:
        return spark.sql(sql).collect()
    except Exception:  # the table does not exist yet
        return []


def test_table_plus_dead_letters_equal_what_was_produced_across_kills(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, name = f"conserve-{unique}", f"cons_{unique}"
    table, dead = f"db.cons_{unique}", f"db.consdead_{unique}"
    produced = _produce(kafka_bootstrap, topic)
    assert sum(end_offsets(kafka_bootstrap, topic, PARTITIONS).values()) == len(produced)
    config_path = tmp_path / "frazil.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "catalog": {"warehouse": str(lake_dir / "warehouse")},
                "kafka": {"bootstrap_servers": kafka_bootstrap},
                "state_dir": str(tmp_path / "state"),
                "spark": {"driver_memory": "1g"},
                "pipelines": [
                    {
                        "name": name,
                        "topics": [topic],
                        "table": table,
                        "schema": {
                            "id": "string",
                            "type": "string",
                            "created_at": "timestamp",
                            "document": "string",
                            "payer": "string",
                            "amount": "long",
                        },
                        "kafka_metadata": ["partition", "offset"],
                        "transforms": [{"derive": {"amount_x": "amount * 2"}}],
                        "max_offsets_per_trigger": 6_000,
                        "trigger": "1s",
                        "errors": {"tolerance": "all", "dlq_table": dead},
                    }
                ],
            }
        )
    )
    command = [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(config_path)]
    # A pause between each table commit and its dead letters makes kills land there too.
    env = {**os.environ, "FRAZIL_TEST_PAUSE_BEFORE_DEAD_LETTERS": "1.5"}
    seen = 0
    for kill in range(3):
        proc = subprocess.Popen(
            [*command, "--until-caught-up"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    break
                rows = _rows(spark, f"SELECT count(*) FROM lake.{table}")
                count = int(rows[0][0]) if rows else 0
                if count > seen:
                    seen = count
                    # Into the pause after the commit, or into the next batch.
                    time.sleep(0.7 + kill * 0.9)
                    break
                time.sleep(0.3)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    drain(spark, config_path)  # the last restart, in the session's Spark

    in_table = Counter(
        (int(r[0]), int(r[1]))
        for r in _rows(spark, f"SELECT _kafka_partition, _kafka_offset FROM lake.{table}")
    )
    dead_rows = _rows(spark, f"SELECT partition, offset, stage, reason FROM lake.{dead}")
    in_dead = Counter((int(r[0]), int(r[1])) for r in dead_rows)
    assert max(in_table.values()) == 1, "duplicates in the table"
    assert max(in_dead.values()) == 1, "duplicates in the dead-letter table"
    assert not set(in_table) & set(in_dead), "a record in both"
    assert set(in_table) | set(in_dead) == set(produced), "records lost or invented"
    assert all(produced[p].startswith("good:") for p in in_table)
    assert all(produced[p].startswith("bad:") for p in in_dead)
    assert len(in_table) == GOOD_RECORDS
    assert all(r[2] and r[3] for r in dead_rows), "a dead letter without stage or reason"
    stages = Counter(r[2] for r in dead_rows)
    assert stages["transform"] == 4 and stages["decode"] == len(in_dead) - 4
