"""`frazil dlq replay` next to real operations: snapshot expiry of the tables it writes, a live
run appending dead letters while it deletes, and a second replay of the same pipeline at once.
Each record is replayed exactly once whatever happens around it."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from frazil.engine import replay as replay_module
from frazil.engine import replay_rows
from frazil.engine.replay import replay
from frazil.engine.runner import run
from frazil.errors import PipelineError
from tests.integration.helpers import table_ids
from tests.integration.test_dlq_replay import _dead, _setup

pytestmark = pytest.mark.integration

#: Every snapshot older than this goes, but the newest one (and those tags or branches keep).
_EXPIRE_ALL = "TIMESTAMP '2100-01-01 00:00:00'"


def _expire(spark: Any, table: str) -> None:
    spark.sql(
        f"CALL lake.system.expire_snapshots(table => '{table}', older_than => {_EXPIRE_ALL}, "
        "retain_last => 1)"
    ).collect()


def _exactly_once(spark: Any, table: str, expected: list[str]) -> None:
    counts = Counter(table_ids(spark, table))
    assert sorted(counts) == sorted(expected)
    assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1]


def test_an_interrupted_replay_survives_snapshot_expiry_of_both_tables(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config, table, dead = _setup(make_config, spark, kafka_bootstrap, unique)
    pipeline = config.pipelines[0]

    def crash(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("killed between the writes and the delete")

    monkeypatch.setattr(replay_rows, "delete", crash)
    with pytest.raises(RuntimeError):
        replay(spark, config, pipeline)
    monkeypatch.undo()
    # The run goes on, so the replay's append is no longer the table's newest snapshot; then
    # maintenance expires every snapshot it can in both tables.
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    topic = pipeline.topics[0]
    for i in range(4):
        producer.produce(topic, json.dumps({"id": f"b{i}", "n": str(i)}).encode(), partition=i % 2)
    producer.flush(10)
    run(config, until_caught_up=True, spark=spark)
    _expire(spark, table)
    _expire(spark, dead)

    report = replay(spark, config, pipeline)

    assert report.resumed
    expected = [f"a{i}" for i in range(20)] + [f"s{i}" for i in range(6)]
    expected += [f"b{i}" for i in range(4)]
    _exactly_once(spark, table, expected)
    assert _dead(spark, dead) == [("decode", "-"), ("transform", "x")]

    # A finished replay, expired again, and replayed again: still each record once.
    _expire(spark, table)
    _expire(spark, dead)
    again = replay(spark, config, pipeline)
    assert (again.replayed, again.written, again.failed_again, again.resumed) == (2, 0, 2, False)
    _exactly_once(spark, table, expected)
    assert _dead(spark, dead) == [("decode", "-"), ("transform", "x")]
    properties = spark.sql(f"SHOW TBLPROPERTIES lake.{dead}").collect()
    assert not [r[0] for r in properties if r[0].startswith("frazil.replay")]
    refs = spark.sql(f"SELECT name FROM lake.{dead}.refs").collect()
    assert [r[0] for r in refs] == ["main"]


def test_a_delete_next_to_a_dead_letter_append_goes_through(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    caplog.set_level(logging.INFO, logger="frazil.engine.replay")
    config, table, dead = _setup(make_config, spark, kafka_bootstrap, unique)
    pipeline = config.pipelines[0]
    started, go = str(tmp_path / "started"), str(tmp_path / "go")

    def gate(_: Any) -> bool:
        # Runs in a Spark task of the delete's MERGE, after the MERGE read the table: the
        # first time it holds the MERGE there until the test appended a dead letter.
        if not os.path.exists(go):
            open(started, "w").close()
            deadline = time.monotonic() + 300
            while not os.path.exists(go) and time.monotonic() < deadline:
                time.sleep(0.05)
        return True

    gated = F.udf(gate, BooleanType())
    delete = replay_rows.delete

    def held(spark_: Any, name: str, source: Any, pipeline_name: str) -> None:
        delete(spark_, name, source.where(gated(F.lit(1))), pipeline_name)

    monkeypatch.setattr(replay_rows, "delete", held)
    outcome: list[Any] = []

    def replaying() -> None:
        try:
            outcome.append(replay(spark, config, pipeline))
        except Exception as exc:
            outcome.append(exc)

    worker = threading.Thread(target=replaying)
    worker.start()
    deadline = time.monotonic() + 600
    while not os.path.exists(started) and worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert os.path.exists(started), outcome
    # A live run's dead letter, committed while the delete's MERGE is under way.
    late = (
        spark.table(f"lake.{dead}")
        .where(F.get_json_object(F.col("value").cast("string"), "$.id") == "x")
        .where(F.col("stage") == "decode")  # the one read, not the one sent back
        .limit(1)
        .withColumn("value", F.lit(b'{"id": "late", "n": "bad"}'))
        .withColumn("offset", F.col("offset") + 1000)
        .withColumn("failed_at", F.current_timestamp())
    )
    late.writeTo(f"lake.{dead}").append()
    open(go, "w").close()
    worker.join(900)

    assert len(outcome) == 1 and not isinstance(outcome[0], Exception), outcome
    # Dead-letter tables delete with snapshot isolation: an append meanwhile (a live run's
    # dead letters, every batch) never holds the rows matched, and is no conflict.
    assert "lost to a concurrent commit" not in caplog.text
    report = outcome[0]
    assert (report.replayed, report.written, report.failed_again) == (8, 6, 2)
    _exactly_once(spark, table, [f"a{i}" for i in range(20)] + [f"s{i}" for i in range(6)])
    # The late dead letter stays for the next replay; the replayed ones are gone.
    assert _dead(spark, dead) == [("decode", "-"), ("decode", "late"), ("transform", "x")]


def test_two_replays_at_once_replay_each_record_once(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config, table, dead = _setup(make_config, spark, kafka_bootstrap, unique)
    pipeline = config.pipelines[0]
    # Both replays reach their writes before either writes (when both are let through).
    meet = threading.Barrier(2, timeout=300)
    write = replay_module._run

    def together(*args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(threading.BrokenBarrierError):
            meet.wait()
        return write(*args, **kwargs)

    monkeypatch.setattr(replay_module, "_run", together)
    outcomes: list[Any] = []

    def replaying() -> None:
        try:
            outcomes.append(replay(spark, config, pipeline))
        except Exception as exc:
            outcomes.append(exc)
            meet.abort()  # the other one need not wait for this one

    workers = [threading.Thread(target=replaying) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(900)

    reports = [o for o in outcomes if not isinstance(o, Exception)]
    refused = [o for o in outcomes if isinstance(o, Exception)]
    assert len(outcomes) == 2 and len(reports) == 1, outcomes
    assert isinstance(refused[0], PipelineError), refused
    assert "another `frazil dlq replay`" in str(refused[0])
    assert (reports[0].replayed, reports[0].written, reports[0].failed_again) == (8, 6, 2)
    _exactly_once(spark, table, [f"a{i}" for i in range(20)] + [f"s{i}" for i in range(6)])
    assert _dead(spark, dead) == [("decode", "-"), ("transform", "x")]

    # The claim went with the replay: the next one runs.
    again = replay(spark, config, pipeline)
    assert (again.replayed, again.failed_again) == (2, 2)


def test_a_paused_replay_that_resumes_after_a_takeover_cannot_append_again(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The replay pauses right before its append (a stopped process, a long GC); another
    # replay takes the claim over meanwhile and makes that very commit. When the first
    # resumes, the table refuses its append (its fence marker is stale) and it goes on.
    from frazil.engine.replay_state import fence_marker
    from frazil.sink.iceberg import IcebergTable

    config, table, dead = _setup(make_config, spark, kafka_bootstrap, unique)
    pipeline = config.pipelines[0]
    real_append = replay_module.append_rows
    took_over: list[str] = []

    def append_after_a_takeover(
        rows: Any, name: str, summary: dict[str, str], options: Any = None
    ) -> None:
        if table.split(".")[-1] in name and "dead" not in name and not took_over:
            took_over.append(name)
            # The other replay, planned on the same table state, commits the step first.
            theirs = fence_marker(IcebergTable(spark, name), pipeline.name)
            key = replay_module.REPLAY + pipeline.name
            real_append(rows, name, {key: summary[key], **theirs.to_summary()}, options)
        real_append(rows, name, summary, options)

    monkeypatch.setattr(replay_module, "append_rows", append_after_a_takeover)
    report = replay(spark, config, pipeline)

    assert took_over and (report.replayed, report.written, report.failed_again) == (8, 6, 2)
    counts = Counter(table_ids(spark, table))
    assert len(counts) == 26 and max(counts.values()) == 1
    assert _dead(spark, dead) == [("decode", "-"), ("transform", "x")]
