"""Exactly-once under kill -9: a `frazil run` subprocess is killed again and again mid-stream.

While 50k records are produced on 4 partitions, the pipeline process is SIGKILLed at random
moments (during JVM start-up, mid-batch, between batches) and restarted: sometimes the Python
driver alone, sometimes the driver and its Spark JVM together; once its Spark checkpoint is
deleted as well. Then it is stopped with SIGTERM (must exit 0) and drained until caught up
(in the session's Spark: one JVM start less). The table must hold every produced id exactly
once.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from frazil.generate.payments import generate_payments
from frazil.generate.producer import ensure_topic, produce_events
from tests.integration.helpers import drain, end_offsets, payments_pipeline, table_ids

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECORDS = 50_000
PARTITIONS = 4
#: Events/s: production lasts ~40 s, long enough for several kill cycles; each restart still
#: meets a backlog of more than a batch. (CI time: it was 100k at 2,500/s, and the drain
#: caught up on what the restarts left, 4,000 records a batch.)
RATE = 1_250


class FrazilProcess:
    """A `frazil run` subprocess whose stderr is watched for commit lines."""

    def __init__(self, config_path: Path, *extra: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(config_path), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            text=True,
            start_new_session=True,  # its own process group: killpg reaches the JVM too
        )
        self.commits = 0
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            # A batch line: "N records → table" (one table) or "N rows → K tables" (routed).
            if " batch " in line and ("records" in line or "rows" in line):
                self.commits += 1

    def wait_commits(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if self.commits >= count:
                return True
            time.sleep(0.1)
        return self.commits >= count

    def kill9(self, *, with_jvm: bool) -> None:
        """SIGKILL the driver alone (its JVM lingers a moment), or driver and JVM at once."""
        if with_jvm:
            os.killpg(self.proc.pid, signal.SIGKILL)
        else:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def output(self) -> str:
        self._reader.join(5)
        return "".join(self.lines[-60:])


def _wait_jvm_gone(state_dir: Path, pipeline: str, timeout: float = 60) -> None:
    record = json.loads((state_dir / "runs" / f"{pipeline}.json").read_text())
    pid = int(record["jvm_pid"])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise AssertionError(f"JVM {pid} of the killed run did not exit")


def test_kill_minus_9_repeatedly_keeps_every_record_exactly_once(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, table, name = f"kill-{unique}", f"db.kill_{unique}", f"k_{unique}"
    state_dir = tmp_path / "state"
    config_path = tmp_path / "frazil.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "catalog": {"warehouse": str(lake_dir / "warehouse")},
                "kafka": {"bootstrap_servers": kafka_bootstrap},
                "state_dir": str(state_dir),
                "spark": {"driver_memory": "1g"},
                # Every start with a backlog begins with a short first query of 1,000
                # records (an early first commit), handed over to the 4,000-record one: kills
                # land in both and in between.
                "pipelines": [
                    payments_pipeline(
                        name,
                        topic,
                        table,
                        max_offsets_per_trigger=4000,
                        first_batch_max_offsets=1000,
                    )
                ],
            }
        )
    )
    ensure_topic(kafka_bootstrap, topic, partitions=PARTITIONS)
    producer = threading.Thread(
        target=produce_events,
        args=(kafka_bootstrap, topic, RECORDS),
        kwargs={"rate": RATE, "progress": False, "seed": 42},
        daemon=True,
    )
    producer.start()
    rng = random.Random(7)
    kills = 0
    checkpoint_deleted = False
    # Kill cycles while the producer runs (and at least four of them).
    while producer.is_alive() or kills < 4:
        run = FrazilProcess(config_path)
        if kills == 1:
            time.sleep(rng.uniform(3, 8))  # during JVM start-up or the first batch
        else:
            assert run.wait_commits(1, timeout=120), run.output()
            time.sleep(rng.uniform(0, 2.5))  # mid-batch or between batches
        # Alternate: the driver alone, then the whole process group (as a container kill does).
        run.kill9(with_jvm=kills % 2 == 1)
        kills += 1
        if kills == 2:
            _wait_jvm_gone(state_dir, name)
            shutil.rmtree(state_dir / "checkpoints" / name, ignore_errors=True)
            checkpoint_deleted = True
    producer.join()
    assert checkpoint_deleted and kills >= 4

    # A graceful stop: SIGTERM finishes the batch in flight and exits 0.
    run = FrazilProcess(config_path)
    assert run.wait_commits(1, timeout=120), run.output()
    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(120) == 0, run.output()

    # The drain: one more restart, in the session's Spark (no JVM start of its own).
    drain(spark, config_path)

    produced = [json.loads(v)["id"] for _, v in generate_payments(RECORDS, seed=42)]
    in_table = table_ids(spark, table)
    duplicates = [i for i, n in Counter(in_table).items() if n > 1]
    missing = set(produced) - set(in_table)
    assert not duplicates, f"{len(duplicates)} duplicated ids, e.g. {duplicates[:3]}"
    assert not missing, f"{len(missing)} missing ids, e.g. {sorted(missing)[:3]}"
    assert len(in_table) == RECORDS
    summary = spark.sql(
        f"SELECT summary FROM lake.{table}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()["summary"]
    ends = end_offsets(kafka_bootstrap, topic, PARTITIONS)
    assert json.loads(summary["frazil.offsets"]) == {topic: {str(p): o for p, o in ends.items()}}
