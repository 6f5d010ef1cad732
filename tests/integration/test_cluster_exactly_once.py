"""Exactly once on a Spark cluster, object storage and a REST catalog, through lost processes.

The one heavy test of the production-shaped stack. `frazil run` drives the stack's
standalone cluster (two workers of one core each), its tables behind the REST catalog on the
object store (S3FileIO), its checkpoint on ``s3a://``, while small records are produced on 2
partitions, from before the first kill until the restarted driver has committed twice (at most
200k; CI time: no fixed volume left to catch up on one core):

1. one worker is lost mid-stream: its Worker JVM and its executor are SIGKILLed — the
   executor's tasks rerun on the other one and the query goes on;
2. that worker stays lost ("lost for good"): the driver is SIGKILLed with its JVM
   (its process group) mid-stream and started again, and runs on the remaining worker;
3. once every record is in the table (its marker reaches the topic's end), SIGTERM stops the
   run, which exits 0.

The table is then read back through PyIceberg's REST catalog from the object store: every
produced id exactly once, no loss. The killed worker is started again afterwards, so the
session's stack has its two workers for the tests after this one.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyiceberg.catalog import load_catalog

from frazil.generate.payments import generate_payments
from frazil.generate.producer import ensure_topic, produce_events
from frazil.local import stack as local_stack
from frazil.local.host import http_get
from frazil.procs import processes
from tests.integration.helpers import end_offsets, payments_pipeline
from tests.integration.stack import SessionStack
from tests.integration.test_kill9 import FrazilProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIRST = 20_000  # produced before the run starts: the first batches have records
REST = 180_000  # at most this many produced while it runs, through the kills
CHUNK = 5_000  # produced at a time (a seed each), until the restarted run committed twice
PARTITIONS = 2
RATE = 2_500  # events/s

WORKER_CLASS = b"org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = b"org.apache.spark.executor.CoarseGrainedExecutorBackend"


def executors_of(worker_pid: int) -> list[int]:
    """The executor JVMs a worker launched (its children running Spark's executor backend)."""
    return [
        pid
        for pid, (parent, cmdline) in processes().items()
        if parent == worker_pid and EXECUTOR_CLASS in cmdline
    ]


def kill_worker(worker_pid: int) -> list[int]:
    """SIGKILL a worker JVM and its executors at once, as a lost machine would vanish."""
    executors = executors_of(worker_pid)
    for pid in [worker_pid, *executors]:
        os.kill(pid, signal.SIGKILL)
    return executors


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def worker_pids(stack: SessionStack) -> list[int]:
    """The running worker JVMs of the stack's cluster."""
    workers = local_stack.status(stack.state_dir).spark_cluster.workers
    return [int(w["pid"]) for w in workers if w["pid"] is not None]


def master_view(stack: SessionStack) -> tuple[int, list[int]]:
    """How many workers the master counts ALIVE, and the cores of each running application."""
    answer = http_get(f"{stack.spark_master_ui}/json/", 10)
    assert answer is not None and answer[0] == 200
    data = json.loads(answer[1])
    alive = sum(1 for w in data["workers"] if w["state"] == "ALIVE")
    return alive, [int(a["cores"]) for a in data["activeapps"]]


def test_worker_and_driver_lost_mid_stream_keep_every_record_exactly_once(
    stack: SessionStack,
    kafka_bootstrap: str,
    unique: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic, table, name = f"cluster-{unique}", f"db.cluster_{unique}", f"c_{unique}"
    config_path = tmp_path / "frazil.yaml"
    config = {
        **stack.config("s3", "rest-catalog", "spark-cluster"),
        "kafka": {"bootstrap_servers": kafka_bootstrap},
        # Checkpoints on S3A; the run records stay on this host (a hash of the URI).
        "state_dir": f"s3a://{stack.bucket}/state-{unique}",
        "pipelines": [payments_pipeline(name, topic, table, max_offsets_per_trigger=10_000)],
    }
    config["spark"] = {**config["spark"], "driver_memory": "1g"}
    config_path.write_text(yaml.safe_dump(config))
    for key, value in stack.aws_environment().items():
        monkeypatch.setenv(key, value)  # the runs' credentials, from the environment
    catalog = load_catalog("stack", **stack.pyiceberg_properties())
    assert len(worker_pids(stack)) == 2

    ensure_topic(kafka_bootstrap, topic, partitions=PARTITIONS)
    produce_events(kafka_bootstrap, topic, FIRST, progress=False, seed=1)
    run = FrazilProcess(config_path)
    enough = threading.Event()
    seeds: list[int] = []

    def produce() -> None:
        # Chunk by chunk, each of its own seed, until told to stop (or REST are out).
        while not enough.is_set() and len(seeds) * CHUNK < REST:
            seed = 2 + len(seeds)
            produce_events(kafka_bootstrap, topic, CHUNK, rate=RATE, progress=False, seed=seed)
            seeds.append(seed)

    producer = threading.Thread(target=produce, daemon=True)
    lost = None
    try:
        assert run.wait_commits(1, timeout=300), run.output()
        producer.start()

        # 1. A worker lost mid-batch: its tasks rerun on the other executor.
        assert run.wait_commits(run.commits + 2, timeout=120), run.output()
        lost = worker_pids(stack)[0]
        assert executors_of(lost), "the worker ran no executor of the run"
        kill_worker(lost)
        after_loss = run.commits
        assert run.wait_commits(after_loss + 3, timeout=300), run.output()
        assert run.proc.poll() is None, run.output()

        # 2. The driver lost too (with its JVM), started again on the one worker left.
        os.killpg(run.proc.pid, signal.SIGKILL)
        run.proc.wait(30)
        run = FrazilProcess(config_path)
        assert run.wait_commits(2, timeout=300), run.output()
        # Lost for good: the new application runs on the one worker left, with its one core.
        assert master_view(stack) == (1, [1])

        # 3. Production stops (it went on through both kills); every record in the table:
        # the marker reaches the topic's end; SIGTERM stops.
        enough.set()
        producer.join()
        ends = {topic: {str(p): o for p, o in end_offsets(kafka_bootstrap, topic, 2).items()}}
        wait_for(lambda: _marker(catalog, table) == ends, timeout=600, what="the table to catch up")
        run.proc.send_signal(signal.SIGTERM)
        assert run.proc.wait(120) == 0, run.output()
    finally:
        enough.set()
        if run.proc.poll() is None:
            os.killpg(run.proc.pid, signal.SIGKILL)
        if lost is not None:
            # The worker comes back for the tests after this one (up starts what is missing).
            local_stack.up(stack.state_dir, [local_stack.SPARK_CLUSTER], stack.ports)

    produced = [json.loads(v)["id"] for _, v in generate_payments(FIRST, seed=1)]
    for seed in seeds:
        produced += [json.loads(v)["id"] for _, v in generate_payments(CHUNK, seed=seed)]
    ids = catalog.load_table(table).scan(selected_fields=("id",)).to_arrow()["id"].to_pylist()
    duplicates = [i for i, n in Counter(ids).items() if n > 1]
    missing = set(produced) - set(ids)
    assert not duplicates, f"{len(duplicates)} duplicated ids, e.g. {duplicates[:3]}"
    assert not missing, f"{len(missing)} missing ids, e.g. {sorted(missing)[:3]}"
    assert len(ids) == len(produced) == FIRST + CHUNK * len(seeds)
    assert len(seeds) >= 2, "production did not go on through the kills"


def _marker(catalog: Any, table: str) -> dict[str, Any] | None:
    snapshot = catalog.load_table(table).current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return None
    offsets = snapshot.summary.get("frazil.offsets")
    return json.loads(offsets) if offsets else None
