"""CDC exactly once under kill -9: the table equals the change stream replayed in Python.

A generated stream of 25k changes on 2.5k keys over 4 partitions (about ten changes a key, in
batches of 2,000: a dozen batches across the kills) — inserts, repeated updates,
deletes, and re-inserts after a delete — is ingested by `frazil run` subprocesses that are
SIGKILLed mid-stream (once with the Spark checkpoint deleted too, so the run must recover from
the table's markers). Replaying a MERGE is not harmless on its own (an old batch's insert
replayed after a later delete brings a row back); the offset filter must stop it. Afterwards
the table must equal, row for row, the final state computed by applying the stream in order.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from frazil.generate.producer import ensure_topic
from frazil.procs import is_running
from frazil.progress.fence import RunRecord
from tests.integration.helpers import drain

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEYS = 2_500
CHANGES = 25_000
PARTITIONS = 4


def change_stream(seed: int) -> list[dict[str, Any]]:
    """Inserts, repeated updates, deletes and re-inserts, each valid for its key's state."""
    rng = random.Random(seed)
    live: dict[int, int] = {}
    stream: list[dict[str, Any]] = []
    for seq in range(CHANGES):
        key = rng.randrange(KEYS) if seq >= KEYS else seq  # every key at least once
        if key not in live:
            stream.append({"id": key, "op": "I", "seq": seq, "name": f"n{seq}", "amount": seq})
            live[key] = seq
        elif rng.random() < 0.2:
            stream.append({"id": key, "op": "D"})  # only the key
            del live[key]
        else:
            stream.append({"id": key, "op": "U", "seq": seq, "name": f"u{seq}", "amount": -seq})
            live[key] = seq
    return stream


def final_state(stream: list[dict[str, Any]]) -> dict[int, tuple[Any, ...]]:
    """The table a correct ingestion leaves: the stream applied in order, in plain Python."""
    table: dict[int, tuple[Any, ...]] = {}
    for change in stream:
        if change["op"] == "D":
            table.pop(change["id"], None)
        else:
            table[change["id"]] = (change["seq"], change["name"], change["amount"])
    return table


def _run(command: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: killpg reaches the JVM too
    )


def _let_go(state_dir: Path, pipeline: str, driver_pid: int) -> None:
    """Wait for a killed run's JVM to exit, which lets go of the checkpoint."""
    record = RunRecord.read(state_dir / "runs" / f"{pipeline}.json")
    if record is None or record.driver_pid != driver_pid or record.jvm_start_time is None:
        time.sleep(2)  # killed before its JVM was recorded: the record is an earlier run's
        return
    deadline = time.monotonic() + 60
    while is_running(record.jvm_pid, record.jvm_start_time):
        assert time.monotonic() < deadline, f"JVM {record.jvm_pid} of the killed run did not exit"
        time.sleep(0.2)


def test_cdc_stream_with_kill_minus_9_equals_the_python_replay(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, table, name = f"cdck-{unique}", f"db.cdck_{unique}", f"ck_{unique}"
    stream = change_stream(seed=11)
    assert len({c["id"] for c in stream}) >= KEYS
    ensure_topic(kafka_bootstrap, topic, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    positions: list[tuple[int, int]] = [(-1, -1)] * len(stream)

    def delivered(i: int) -> Any:
        def callback(err: Any, msg: Any) -> None:
            assert err is None, err
            positions[i] = (msg.partition(), msg.offset())

        return callback

    for i, change in enumerate(stream):
        # Keyed: a key's changes stay in order in one partition.
        key = str(change["id"]).encode()
        producer.produce(topic, json.dumps(change).encode(), key=key, on_delivery=delivered(i))
        producer.poll(0)
    producer.flush(30)
    assert all(p >= 0 for p, _ in positions)

    state_dir = tmp_path / "state"
    config_path = tmp_path / "frazil.yaml"

    def write_config(max_offsets: int) -> None:
        config_path.write_text(
            yaml.safe_dump(
                {
                    "catalog": {"warehouse": str(lake_dir / "warehouse")},
                    "kafka": {"bootstrap_servers": kafka_bootstrap},
                    "state_dir": str(state_dir),
                    "spark": {"driver_memory": "1g"},
                    "pipelines": [
                        {
                            "name": name,
                            "topics": [topic],
                            "table": table,
                            "schema": {
                                "id": "long",
                                "op": "string",
                                "seq": "long",
                                "name": "string",
                                "amount": "long",
                            },
                            "write": {"mode": "cdc", "key": ["id"], "op_field": "op"},
                            "max_offsets_per_trigger": max_offsets,
                            "trigger": "1s",
                        }
                    ],
                }
            )
        )

    write_config(2_000)
    command = [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(config_path)]
    rng = random.Random(5)
    commits = killed = 0
    for kill in range(4):
        proc = _run([*command, "--until-caught-up"])
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and proc.poll() is None:
                count = _snapshots(spark, table)
                if count > commits:
                    commits = count
                    time.sleep(rng.uniform(0.2, 2.5))  # mid-batch or between batches
                    break
                time.sleep(0.3)
        finally:
            was_running = proc.poll() is None
            if was_running:
                os.killpg(proc.pid, signal.SIGKILL)
                killed += 1
            proc.wait(30)
        if was_running:
            _let_go(state_dir, name, proc.pid)
        checkpoint = state_dir / "checkpoints" / name
        if kill == 0 and checkpoint.exists():
            shutil.copytree(checkpoint, tmp_path / "old-checkpoint")
        elif kill == 1:
            # Lose the checkpoint: the next run starts from the table's markers.
            shutil.rmtree(checkpoint, ignore_errors=True)
        elif kill == 2:
            # An old checkpoint, behind the table, and a new rate limit: its batches are
            # replayed and re-planned across what the table holds, which only the offset
            # filter keeps from applying old changes over newer rows.
            shutil.rmtree(checkpoint, ignore_errors=True)
            shutil.copytree(tmp_path / "old-checkpoint", checkpoint)
            write_config(1_500)
    assert killed >= 3, "the runs finished before they could be killed"
    drain(spark, config_path)  # the last restart, in the session's Spark

    rows = spark.sql(f"SELECT id, seq, name, amount FROM lake.{table}").collect()
    got = {int(r[0]): (r[1], r[2], r[3]) for r in rows}
    assert len(rows) == len(got), "a key twice in the table"
    expected = final_state(stream)
    missing = sorted(set(expected) - set(got))[:5]
    extra = sorted(set(got) - set(expected))[:5]
    wrong = [k for k in expected if k in got and got[k] != expected[k]][:5]
    assert not (missing or extra or wrong), f"missing {missing} extra {extra} wrong {wrong}"
    snapshots = spark.sql(f"SELECT snapshot_id, summary FROM lake.{table}.snapshots").collect()
    summaries = [dict(r[1]) for r in snapshots]
    assert all(s.get("added-equality-delete-files", "0") == "0" for s in summaries)
    # Every commit on the way, too: the table as of each marker is the stream replayed up to
    # that marker's offsets (a replayed old batch would have taken rows back in time).
    checked = 0
    for row, summary in zip(snapshots, summaries, strict=True):
        marker = summary.get("frazil.offsets")
        if not marker:
            continue
        ends = {int(p): int(o) for p, o in json.loads(marker)[topic].items()}
        prefix = [c for c, (p, o) in zip(stream, positions, strict=True) if o < ends.get(p, 0)]
        at = spark.sql(
            f"SELECT id, seq, name, amount FROM lake.{table} VERSION AS OF {row[0]}"
        ).collect()
        state = {int(r[0]): (r[1], r[2], r[3]) for r in at}
        assert state == final_state(prefix), f"snapshot {row[0]} is not the stream up to {ends}"
        checked += 1
    assert checked >= 5


def _snapshots(spark: Any, table: str) -> int:
    try:
        return int(spark.sql(f"SELECT count(*) FROM lake.{table}.snapshots").collect()[0][0])
    except Exception:  # the table does not exist yet
        return 0
