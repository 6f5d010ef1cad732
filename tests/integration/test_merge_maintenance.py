"""An upsert pipeline's MERGE next to maintenance: inline maintenance takes turns with the
MERGEs of the run it lives in, and `frazil maintain` (another process) leaves a table's data
alone for a while after the pipeline's MERGE lost to one of its commits."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from frazil import columns as c
from frazil.engine.runner import run
from frazil.generate.producer import ensure_topic
from frazil.maintenance.actions import Actions
from frazil.maintenance.passes import config_tables, measure, policy_of, run_pass
from frazil.sink import yielding
from frazil.sink.iceberg import IcebergTable
from frazil.sink.merge import merge_rows

pytestmark = pytest.mark.integration

KEYS = 100


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def frazil_log() -> Iterator[_Lines]:
    """Every INFO line of the MERGE and of maintenance, whichever thread logs it."""
    handler = _Lines()
    loggers = [logging.getLogger(n) for n in ("frazil.sink.merge", "frazil.maintenance.passes")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.INFO)
        lg.addHandler(handler)
    yield handler
    for lg, level in zip(loggers, levels, strict=True):
        lg.removeHandler(handler)
        lg.setLevel(level)


def _upsert(name: str, topic: str, table: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "topics": [topic],
        "table": table,
        "schema": {"id": "long", "seq": "long"},
        "write": {"mode": "upsert", "key": ["id"]},
        **extra,
    }


def _rows(spark: Any, table: str) -> dict[int, int]:
    return {r[0]: r[1] for r in spark.sql(f"SELECT id, seq FROM lake.{table}").collect()}


def _send(producer: Producer, topic: str, final: dict[int, int], start: int, n: int) -> int:
    for seq in range(start, start + n):
        key = (seq * 7919) % KEYS
        producer.produce(topic, json.dumps({"id": key, "seq": seq}), key=str(key))
        final[key] = seq
    producer.flush(30)
    return start + n


@pytest.mark.slow
def test_inline_maintenance_yields_to_the_merges_of_a_busy_upsert_pipeline(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, frazil_log: _Lines
) -> None:
    topic, table = f"mm-{unique}", f"db.mm_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    config = make_config(
        [_upsert(f"mm_{unique}", topic, table, trigger="500ms", max_offsets_per_trigger=300)],
        maintenance={
            "mode": "inline",
            "interval": "1s",
            "compaction": {"min_small_files": 2},
            "deletes": {"min_delete_files": 1},
            "manifests": {"min_manifests": 2},
            "expire": {"older_than": "1ms", "retain_last": 1},
        },
    )
    stop = threading.Event()
    failure: list[BaseException] = []

    def running() -> None:
        try:
            run(config, spark=spark, stop_event=stop)
        except BaseException as exc:
            failure.append(exc)

    runner = threading.Thread(target=running, daemon=True)
    runner.start()
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    final: dict[int, int] = {}
    seq = 0
    # Load: a MERGE every trigger, while passes compact and rewrite the deletes it leaves.
    for _ in range(30):
        seq = _send(producer, topic, final, seq, 100)
        time.sleep(0.5)

    def compacted() -> bool:
        return any(f"{table}: compaction:" in line for line in frazil_log.lines)

    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and not failure and runner.is_alive():
        if IcebergTable(spark, f"lake.{table}").total_records() and _rows(spark, table) == final:
            if compacted():
                break
            seq = _send(producer, topic, final, seq, 100)  # more small files to compact
        time.sleep(2)
    stop.set()
    runner.join(600)

    assert not failure, failure
    assert not runner.is_alive()
    assert _rows(spark, table) == final
    assert compacted(), frazil_log.lines[-20:]
    # Maintenance never committed under a MERGE: not one MERGE had to run again.
    assert not [line for line in frazil_log.lines if "conflicted" in line]


def test_maintain_backs_off_a_table_whose_merge_lost_to_it(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    unique: str,
    tmp_path: Path,
    frazil_log: _Lines,
) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    topic, table = f"mb-{unique}", f"db.mb_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    config = make_config(
        [_upsert(f"mb_{unique}", topic, table, max_offsets_per_trigger=60)],
        maintenance={"compaction": {"min_small_files": 2}},
    )
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    final: dict[int, int] = {}
    _send(producer, topic, final, 0, 300)
    run(config, until_caught_up=True, spark=spark)  # several MERGEs: small files
    assert _rows(spark, table) == final
    ref = next(t for t in config_tables(spark, config) if t.name == table)
    name = f"lake.{table}"

    started, go = str(tmp_path / "started"), str(tmp_path / "go")

    def gate(_: Any) -> bool:
        # In the MERGE's job, after it read the table: held until a compaction committed.
        if not os.path.exists(go):
            open(started, "w").close()
            deadline = time.monotonic() + 300
            while not os.path.exists(go) and time.monotonic() < deadline:
                time.sleep(0.05)
        return True

    gated = F.udf(gate, BooleanType())
    key = next(iter(final))
    change = spark.createDataFrame(
        [(key, 10_000, c.OP_UPSERT, 10**9, 0)],
        f"id long, seq long, {c.OP} string, {c.OFFSET} long, {c.PARTITION} int",
    ).where(gated(F.lit(1)))
    failure: list[BaseException] = []

    def merging() -> None:
        try:
            merge_rows(change, name, ["id"], None, {})
        except BaseException as exc:
            failure.append(exc)

    merge = threading.Thread(target=merging)
    merge.start()
    deadline = time.monotonic() + 600
    while not os.path.exists(started) and merge.is_alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert os.path.exists(started), failure
    # A `frazil maintain` elsewhere compacts the table under the running MERGE.
    table_ = IcebergTable(spark, name)
    done = Actions(spark, name, table_.java).compact(
        policy_of(config, ref), measure(spark, config, ref)
    )
    assert "rewritten" in done
    open(go, "w").close()
    merge.join(600)

    assert not failure, failure  # it ran again and committed
    assert any("conflicted" in line for line in frazil_log.lines)
    table_.refresh()
    noted = table_.java.properties().get(yielding.MERGE_CONFLICT_AT)
    assert yielding.backing_off(noted) is not None
    assert _rows(spark, table)[key] == 10_000

    # More small files, so that a pass plans a compaction, which it skips.
    _send(producer, topic, final, 300, 120)
    run(config, until_caught_up=True, spark=spark)
    [report] = run_pass(spark, config, [ref])
    assert "compaction" in [p.action for p in report.planned]
    [skipped] = [r for r in report.results if r.action == "compaction"]
    assert skipped.skipped is not None and skipped.detail == ""
    assert "a pipeline's MERGE into it lost to a concurrent commit" in skipped.skipped
    assert "(maintenance.merge_backoff)" in skipped.skipped
    assert any(f"{table}: compaction skipped" in line for line in frazil_log.lines)

    # Once the back-off is over, it compacts again.
    old = int(time.time() * 1000 - (yielding.BACKOFF_S + 60) * 1000)
    table_.java.updateProperties().set(yielding.MERGE_CONFLICT_AT, str(old)).commit()
    [report] = run_pass(spark, config, [ref])
    compactions = [r for r in report.results if r.action == "compaction"]
    assert compactions and compactions[0].error is None, report.results
    assert compactions[0].skipped is None
    assert _rows(spark, table) == final


def test_a_partial_compaction_drops_the_deletes_of_the_files_it_rewrote(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    from frazil.progress.rows import live_rows

    # Passes of two files each over a table of several MERGEs: Iceberg's
    # remove-dangling-deletes keeps the rewritten files' deletes (older files of their
    # partition remain), which then counted twice in the live rows (total-records less
    # total-position-deletes) and were opened by every read.
    topic, table = f"pd-{unique}", f"db.pd_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    config = make_config(
        [_upsert(f"pd_{unique}", topic, table)],
        maintenance={
            "compaction": {"min_small_files": 2, "max_files_per_pass": 2},
            "deletes": {"enabled": False},
        },
    )
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    name = f"lake.{table}"
    final: dict[int, int] = {}
    batches = [range(0, 100), range(100, 200), range(0, 200), range(50, 150), range(0, 30)]
    for seq, ids in enumerate(batches):
        for i in ids:
            producer.produce(topic, json.dumps({"id": i, "seq": seq}), key=str(i))
            final[i] = seq
        producer.flush(30)
        run(config, until_caught_up=True, spark=spark)  # a MERGE each: files and deletes
    ref = next(t for t in config_tables(spark, config) if t.name == table)
    removed = 0
    for _ in range(3):
        actions = Actions(spark, name, IcebergTable(spark, name).java)
        counts = actions._compact_counts(policy_of(config, ref), measure(spark, config, ref), 2)
        removed += counts[3]
        assert _rows(spark, table) == final
        summary = dict(IcebergTable(spark, name).java.currentSnapshot().summary())
        assert live_rows(summary) == len(final), summary
    assert removed > 0
