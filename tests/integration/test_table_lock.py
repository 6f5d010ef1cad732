"""The table is the lock: a commit planned on a stale marker is refused by the catalog, two runs
of one pipeline never both commit a batch, and a table rolled back while a run goes on gets its
records back exactly once."""

from __future__ import annotations

import json
import os
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
from confluent_kafka import Producer

from frazil.engine.runner import run
from frazil.errors import StaleMarker
from frazil.generate.producer import ensure_topic
from frazil.progress import markers, offset_rules, table_markers
from frazil.progress.events import CommitEvent
from frazil.sink.iceberg import IcebergTable, append_rows, iceberg_catalog
from frazil.sink.merge import merge_rows
from tests.integration.helpers import drain, payments_pipeline, table_ids

pytestmark = pytest.mark.integration


def _marker(pipeline: str, previous: markers.Marker | None, end: int) -> markers.Marker:
    return offset_rules.next_marker(
        previous, pipeline, offset_rules.Basis({"t": {0: end}}, batch_id=end)
    )


def test_the_catalog_refuses_a_commit_planned_on_a_stale_marker(spark: Any, unique: str) -> None:
    """Every write path checks the marker in the commit itself: Spark's append, MERGE and a
    marker-only commit; commits without a marker of the pipeline in between are no conflict."""
    table, name = f"db.stale_{unique}", f"s_{unique}"
    spark.sql(f"CREATE TABLE lake.{table} (id bigint, v string) USING iceberg")
    handle = IcebergTable(spark, f"lake.{table}")
    rows = spark.createDataFrame([(1, "a"), (2, "b")], "id bigint, v string")

    first = _marker(name, None, 10)
    append_rows(rows, f"lake.{table}", first.to_summary())
    # Another run planned on the empty table: refused, nothing added.
    with pytest.raises(StaleMarker, match=rf"batch 20 of pipeline {name} was planned after"):
        append_rows(rows, f"lake.{table}", _marker(name, None, 20).to_summary())
    assert sorted(table_ids(spark, table)) == [1, 2]
    # Commits carrying no marker of the pipeline (another writer, maintenance) are passed over.
    spark.sql(f"INSERT INTO lake.{table} VALUES (3, 'other writer')")
    handle.commit_summary_only(_marker(f"other_{unique}", None, 5).to_summary())
    second = _marker(name, first, 20)
    append_rows(rows.limit(1), f"lake.{table}", second.to_summary())
    assert sorted(table_ids(spark, table)) == [1, 1, 2, 3]
    # Planned after the first marker, but the second came in between: refused, all ways.
    late = _marker(name, first, 30)
    with pytest.raises(StaleMarker, match=second.commit_id):
        append_rows(rows, f"lake.{table}", late.to_summary())
    with pytest.raises(StaleMarker):
        handle.commit_summary_only(late.to_summary())
    changes = spark.createDataFrame(
        [(9, "x", "U", 1, 0)],
        "id bigint, v string, __frazil_op string, __frazil_offset bigint, __frazil_partition int",
    )
    with pytest.raises(StaleMarker):
        merge_rows(changes, f"lake.{table}", ["id"], None, late.to_summary())
    assert sorted(table_ids(spark, table)) == [1, 1, 2, 3]
    state = table_markers.find_marker(handle, name)
    assert state.marker is not None and state.marker.commit_id == second.commit_id
    # A rollback takes the table's marker back: a batch planned after the newer one is refused.
    first_snapshot = next(
        s.snapshot_id for s in handle.ancestry() if s.get(markers.COMMIT_ID) == first.commit_id
    )
    spark.sql(f"CALL lake.system.rollback_to_snapshot('{table}', {first_snapshot})")
    with pytest.raises(StaleMarker, match=first.commit_id):
        append_rows(rows, f"lake.{table}", _marker(name, second, 40).to_summary())
    merge_rows(changes, f"lake.{table}", ["id"], None, _marker(name, first, 40).to_summary())
    assert sorted(table_ids(spark, table)) == [1, 2, 9]


def _produce(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> list[str]:
    return _produce_ids(bootstrap, topic, list(range(start, start + count)), partitions)


def _exactly(found: list[str], produced: list[str]) -> None:
    duplicates = [i for i, n in Counter(found).items() if n > 1]
    missing = set(produced) - set(found)
    assert not duplicates, f"{len(duplicates)} duplicated ids, e.g. {duplicates[:3]}"
    assert not missing, f"{len(missing)} missing ids, e.g. {sorted(missing)[:3]}"
    assert len(found) == len(produced)


class _Background:
    """``frazil run`` of ``config`` on a thread of its own, until :meth:`stop`."""

    def __init__(self, spark: Any, config: Any) -> None:
        self.commits: list[CommitEvent] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        # Spark looks a catalog up in the calling thread's conf: load it here first, as
        # `frazil run` does in its main thread.
        iceberg_catalog(spark, "lake")

        def target() -> None:
            try:
                run(config, spark=spark, stop_event=self._stop, on_commit=self.commits.append)
            except BaseException as exc:
                self.errors.append(exc)

        self._thread = threading.Thread(target=target, daemon=True)
        self._thread.start()

    def wait_for(self, table: str, count: int) -> None:
        """Until the run made ``count`` commits to ``table``."""
        deadline = time.monotonic() + 120
        while sum(1 for c in self.commits if c.table == table) < count:
            assert not self.errors, [str(e)[:600] for e in self.errors]
            assert time.monotonic() < deadline, f"no commits to {table}"
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the run gracefully; it must have ended without an error."""
        self._stop.set()
        self._thread.join(180)
        assert not self.errors, self.errors


@pytest.mark.parametrize("routed", [False, True], ids=["one-table", "routed"])
def test_a_table_rolled_back_while_running_gets_its_records_back_once(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, routed: bool
) -> None:
    topic, name = f"rb-{unique}", f"rb_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    if routed:
        pipeline = payments_pipeline(name, topic, "unused", trigger="500ms")
        del pipeline["table"]
        pipeline["route"] = {"field": "type", "table": f"db.rb_{unique}_{{value}}"}
        tables = [f"db.rb_{unique}_debit", f"db.rb_{unique}_credit"]
    else:
        pipeline = payments_pipeline(name, topic, f"db.rb_{unique}", trigger="500ms")
        tables = [f"db.rb_{unique}"]
    config = make_config([pipeline])
    produced = _produce(kafka_bootstrap, topic, 0, 1000, 2)
    background = _Background(spark, config)
    rolled = tables[0]

    def wait_for(count: int) -> None:
        background.wait_for(rolled, count)

    wait_for(1)
    first = IcebergTable(spark, f"lake.{rolled}")
    keep = first.current_snapshot_id()
    for part in range(1, 4):
        produced += _produce(kafka_bootstrap, topic, part * 1000, 1000, 2)
        wait_for(1 + part)
    assert keep is not None
    # Rolled back while the run goes on: the records after that point must come back.
    spark.sql(f"CALL lake.system.rollback_to_snapshot('{rolled}', {keep})")
    produced += _produce(kafka_bootstrap, topic, 4000, 1000, 2)
    time.sleep(3)
    produced += _produce(kafka_bootstrap, topic, 5000, 1000, 2)
    time.sleep(3)
    background.stop()
    run(config, until_caught_up=True, spark=spark)
    _exactly([i for t in tables for i in table_ids(spark, t)], produced)


def test_a_routed_table_rolled_back_while_idle_gets_its_records_back_after_a_stop(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A routed table that gets no records is rolled back, then the run stops: the stop's
    final marker (the last batch's offsets, for tables the last batches left idle) must not
    cover the records the rollback took away."""
    topic, name = f"ri-{unique}", f"ri_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    pipeline = payments_pipeline(name, topic, "unused", trigger="500ms")
    del pipeline["table"]
    pipeline["route"] = {"field": "type", "table": f"db.ri_{unique}_{{value}}"}
    debit, credit = f"db.ri_{unique}_debit", f"db.ri_{unique}_credit"
    config = make_config([pipeline])
    background = _Background(spark, config)
    commits = background.commits
    produced = _produce(kafka_bootstrap, topic, 0, 200, 2)
    background.wait_for(credit, 1)
    keep = IcebergTable(spark, f"lake.{credit}").current_snapshot_id()
    produced += _produce(kafka_bootstrap, topic, 200, 200, 2)
    background.wait_for(credit, 2)
    # Then debit records only: the credit table is idle.
    debits = list(range(401, 801, 2))
    produced += _produce_ids(kafka_bootstrap, topic, debits, 2)
    deadline = time.monotonic() + 60
    while not any(c.table == debit and _covers(c.offsets, len(produced)) for c in commits):
        assert time.monotonic() < deadline, "the debit records were not all committed"
        time.sleep(0.2)
    assert keep is not None
    spark.sql(f"CALL lake.system.rollback_to_snapshot('{credit}', {keep})")
    background.stop()

    run(config, until_caught_up=True, spark=spark)
    _exactly([i for t in (debit, credit) for i in table_ids(spark, t)], produced)


def _produce_ids(bootstrap: str, topic: str, numbers: list[int], partitions: int) -> list[str]:
    """Records ``r<i>`` for each of ``numbers`` (odd ones are debits), on ``i % partitions``."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in numbers:
        record = {
            "id": f"r{i}",
            "type": "debit" if i % 2 else "credit",
            "created_at": "2026-01-01T00:00:00",
            "document": str(i),
            "payer": "p",
            "amount": i,
        }
        producer.produce(topic, json.dumps(record).encode(), partition=i % partitions)
        if i % 500 == 0:
            producer.poll(0)
    producer.flush(30)
    return [f"r{i}" for i in numbers]


def _covers(offsets: dict[str, dict[int, int]], total: int) -> bool:
    """Whether committed offsets reach ``total`` records over all partitions."""
    return sum(o for parts in offsets.values() for o in parts.values()) >= total


def _frazil(config_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(config_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        text=True,
        start_new_session=True,
    )


@pytest.mark.slow
def test_two_runs_side_by_side_write_each_record_once(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """Two `frazil run` processes of one pipeline with state folders of their own (two hosts,
    a rolling update) on one table while records arrive: each record lands once."""
    topic, table, name = f"two-{unique}", f"db.two_{unique}", f"two_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=3)
    paths = []
    for side in ("a", "b"):
        path = tmp_path / f"{side}.yaml"
        path.write_text(
            yaml.safe_dump(
                {
                    "catalog": {"warehouse": str(lake_dir / "warehouse")},
                    "kafka": {"bootstrap_servers": kafka_bootstrap},
                    "state_dir": str(tmp_path / f"state-{side}"),
                    "spark": {"driver_memory": "1g"},
                    "pipelines": [
                        payments_pipeline(
                            name, topic, table, trigger="500ms", max_offsets_per_trigger=600
                        )
                    ],
                }
            )
        )
        paths.append(path)
    produced = _produce(kafka_bootstrap, topic, 0, 2000, 3)
    runs = [_frazil(p) for p in paths]
    outputs: list[list[str]] = [[], []]

    def read(i: int) -> None:
        stream = runs[i].stdout
        assert stream is not None
        outputs[i].extend(stream)

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(2)]
    for r in readers:
        r.start()

    def busy(i: int) -> bool:
        """Whether run ``i`` wrote batches or met the other run."""
        text = "".join(outputs[i])
        return text.count(" records → ") >= 2 or "another run" in text

    # Records keep arriving until both runs are writing (JVM start-up takes a while), then
    # a little longer.
    deadline = time.monotonic() + 300
    part, extra = 2, 8
    while extra > 0 and time.monotonic() < deadline:
        produced += _produce(kafka_bootstrap, topic, part * 1000, 1000, 3)
        part += 1
        if all(busy(i) or runs[i].poll() is not None for i in range(2)):
            extra -= 1
        time.sleep(1)
    for p in runs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    codes = [p.wait(180) for p in runs]
    for r in readers:
        r.join(10)
    text = ["".join(o) for o in outputs]
    # Each run stopped cleanly or named the other; never both went on writing the same batch.
    for code, out in zip(codes, text, strict=True):
        assert code == 0 or "Another run of this pipeline" in out, out[-3000:]
    assert any("another run" in out for out in text), text[0][-2000:] + text[1][-2000:]
    drain(spark, paths[0])  # the rest, in the session's Spark (no JVM start of its own)
    _exactly(table_ids(spark, table), produced)


def test_a_routed_table_rolled_back_while_stopped_gets_its_records_back_once(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A routed restart decides against the lowest of its tables' markers: a checkpoint ahead
    of one rolled-back table is set aside, and that table's records come back."""
    topic, name = f"rs-{unique}", f"rs_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    pipeline = payments_pipeline(name, topic, "unused", max_offsets_per_trigger=400)
    del pipeline["table"]
    pipeline["route"] = {"field": "type", "table": f"db.rs_{unique}_{{value}}"}
    tables = [f"db.rs_{unique}_debit", f"db.rs_{unique}_credit"]
    config = make_config([pipeline])
    produced = _produce(kafka_bootstrap, topic, 0, 2000, 2)
    run(config, until_caught_up=True, spark=spark)
    rolled = IcebergTable(spark, f"lake.{tables[0]}")
    back = [s.snapshot_id for s in rolled.ancestry()][3]
    spark.sql(f"CALL lake.system.rollback_to_snapshot('{tables[0]}', {back})")
    assert len(table_ids(spark, tables[0])) < 1000
    produced += _produce(kafka_bootstrap, topic, 2000, 400, 2)

    reports = run(config, until_caught_up=True, spark=spark)

    assert "ahead of the table" in reports[0].start
    _exactly([i for t in tables for i in table_ids(spark, t)], produced)
