"""Exactly-once by offsets, case by case, on a real broker and real Iceberg tables.

Each test breaks the checkpoint/table agreement in one way a user can (a replayed batch, a
re-planned range, an old checkpoint restored, a table rolled back, a table without this
pipeline's marker, a deleted topic) and checks the table record by record.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from frazil.engine.runner import run
from frazil.errors import PipelineError
from frazil.generate.producer import ensure_topic
from frazil.progress.events import CommitEvent
from frazil.progress.offset_rules import CAUGHT_UP_SLACK_MS
from tests.integration.helpers import (
    end_offsets,
    frazil_snapshots,
    last_planned_at_ms,
    payments_pipeline,
    produce_payments,
    table_ids,
)

pytestmark = pytest.mark.integration


def _exactly(spark: Any, table: str, expected: list[str]) -> None:
    ids = table_ids(spark, table)
    duplicated = [i for i, n in Counter(ids).items() if n > 1]
    assert not duplicated, f"{len(duplicated)} duplicated ids, e.g. {duplicated[:3]}"
    assert sorted(ids) == sorted(expected)


def _drop_batch_logs(checkpoint: Path, *, offsets: bool) -> int:
    """Remove the newest batch's commit (and offset) log entry, as a crash at that point would."""
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    logs = ["commits", "offsets"] if offsets else ["commits"]
    for log in logs:
        (checkpoint / log / str(last)).unlink()
        for crc in (checkpoint / log).glob(f".{last}.crc"):
            crc.unlink()
    return last


def test_replanned_batch_with_a_larger_range_writes_only_what_is_new(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"replan-{unique}", f"db.replan_{unique}", f"rp_{unique}"
    first = produce_payments(kafka_bootstrap, topic, 1200, seed=21)
    small = make_config([payments_pipeline(name, topic, table, max_offsets_per_trigger=500)])
    run(small, until_caught_up=True, spark=spark)
    # The last batch was committed to the table, but Spark's logs forget it was even planned:
    # Spark plans that batch id again, now with a different (larger) range.
    _drop_batch_logs(Path(small.checkpoint_for(small.pipelines[0])), offsets=True)
    second = produce_payments(kafka_bootstrap, topic, 800, seed=22)
    large = make_config([payments_pipeline(name, topic, table)])

    reports = run(large, until_caught_up=True, spark=spark)

    assert reports[0].records_ingested == 800
    _exactly(spark, table, first + second)


def test_old_checkpoint_restored_from_a_backup_adds_nothing_twice(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, table, name = f"oldck-{unique}", f"db.oldck_{unique}", f"ok_{unique}"
    config = make_config([payments_pipeline(name, topic, table, max_offsets_per_trigger=400)])
    checkpoint = Path(config.checkpoint_for(config.pipelines[0]))
    first = produce_payments(kafka_bootstrap, topic, 900, seed=23)
    run(config, until_caught_up=True, spark=spark)
    shutil.copytree(checkpoint, tmp_path / "backup")
    second = produce_payments(kafka_bootstrap, topic, 700, seed=24)
    run(config, until_caught_up=True, spark=spark)
    shutil.rmtree(checkpoint)
    shutil.copytree(tmp_path / "backup", checkpoint)
    third = produce_payments(kafka_bootstrap, topic, 300, seed=25)

    reports = run(config, until_caught_up=True, spark=spark)

    # The restored checkpoint re-reads the second lot; the offset filter drops all of it.
    assert reports[0].records_ingested == 300
    _exactly(spark, table, first + second + third)


def test_rolled_back_table_wins_over_a_checkpoint_ahead_of_it(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"rollb-{unique}", f"db.rollb_{unique}", f"rb_{unique}"
    ids = produce_payments(kafka_bootstrap, topic, 1000, seed=26)
    config = make_config([payments_pipeline(name, topic, table, max_offsets_per_trigger=300)])
    run(config, until_caught_up=True, spark=spark)
    snapshots = spark.sql(
        f"SELECT snapshot_id FROM lake.{table}.snapshots ORDER BY committed_at"
    ).collect()
    assert len(snapshots) >= 3
    keep = snapshots[0]["snapshot_id"]
    spark.sql(f"CALL lake.system.rollback_to_snapshot('{table}', {keep})")
    in_first = len(table_ids(spark, table))
    assert 0 < in_first < 1000

    reports = run(config, until_caught_up=True, spark=spark)

    assert "ahead of the table" in reports[0].start
    assert reports[0].records_ingested == 1000 - in_first
    _exactly(spark, table, ids)


def test_filled_table_without_a_marker_refuses_until_offsets_are_reset(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"reset-{unique}", f"db.reset_{unique}"
    first = produce_payments(kafka_bootstrap, topic, 500, seed=27)
    run(
        make_config([payments_pipeline(f"a_{unique}", topic, table)]),
        until_caught_up=True,
        spark=spark,
    )
    other = make_config([payments_pipeline(f"b_{unique}", topic, table)])

    with pytest.raises(PipelineError, match=r"holds 500 rows but no progress marker"):
        run(other, until_caught_up=True, spark=spark)

    # Reset to latest: nothing to write, yet the reset is recorded in the table…
    reports = run(other, until_caught_up=True, spark=spark, reset_offsets="latest")
    assert reports[0].records_ingested == 0
    reset = [s for s in frazil_snapshots(spark, table) if s.get("frazil.reset")]
    assert [s["frazil.pipeline"] for s in reset] == [f"b_{unique}"]
    assert json.loads(reset[0]["frazil.offsets"]) == {
        topic: {str(p): o for p, o in end_offsets(kafka_bootstrap, topic).items()}
    }
    # …so a plain run, even after the checkpoint is lost, goes on from there.
    shutil.rmtree(other.checkpoint_for(other.pipelines[0]), ignore_errors=True)
    second = produce_payments(kafka_bootstrap, topic, 200, seed=28)
    reports = run(other, until_caught_up=True, spark=spark)
    assert reports[0].records_ingested == 200
    _exactly(spark, table, first + second)

    # A JSON reset rewinds partition 0 to its start: its records are written again, by design.
    third = run(
        other, until_caught_up=True, spark=spark, reset_offsets=f'{{"{topic}": {{"0": -2}}}}'
    )
    zero = spark.sql(f"SELECT count(*) FROM lake.{table} WHERE id IN ('{first[0]}')").first()[0]
    assert third[0].records_ingested > 0 and zero >= 1


def test_marker_covers_idle_partitions_and_valid_through_waits_for_a_lagging_one(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"lag-{unique}", f"db.lag_{unique}", f"l_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=3)
    # Idempotent, so that a retried produce request cannot reorder partition 1's records:
    # the assertions below read a timestamp from an offset.
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    now = int(time.time() * 1000)
    old = now - 3_600_000

    def payment(i: int) -> bytes:
        return json.dumps(
            {
                "id": f"{unique}-{i}",
                "type": "debit",
                "created_at": "2026-01-01T00:00:00",
                "document": "1",
                "payer": "x",
                "amount": i,
            }
        ).encode()

    # Partition 0: one fresh record. Partition 1: 1000 records an hour old. Partition 2: idle.
    producer.produce(topic, payment(0), partition=0, timestamp=now)
    for i in range(1, 1001):
        producer.produce(topic, payment(i), partition=1, timestamp=old + i)
    producer.flush(10)
    commits: list[CommitEvent] = []
    config = make_config([payments_pipeline(name, topic, table, max_offsets_per_trigger=100)])

    run(config, until_caught_up=True, spark=spark, on_commit=commits.append)

    first_marker = frazil_snapshots(spark, table)[0]
    # Spark read partition 0 to its end and only part of partition 1 in the first batch: every
    # record up to the mark is in, so the mark is partition 1's newest committed timestamp.
    offsets = json.loads(first_marker["frazil.offsets"])
    assert set(offsets[topic]) == {"0", "1", "2"} and offsets[topic]["2"] == 0
    committed_p1 = offsets[topic]["1"]
    assert 0 < committed_p1 < 1000
    # A commit records what the commits before it observed (its own timestamps are known once
    # it is written), and the commit events report what the table records: the first marker
    # knows nothing of partition 1 yet, the second one holds the mark at its newest record.
    assert commits[0].valid_through_ms is None
    assert commits[1].valid_through_ms == old + committed_p1
    # Once caught up, the minimum over partitions again: partition 1's newest record is an hour
    # old and partition 2 has none, but both were read to their end when the last batch was
    # planned, so they hold the mark back by the slack only, not for ever.
    planned_at = last_planned_at_ms(config)
    assert commits[-1].valid_through_ms == planned_at - CAUGHT_UP_SLACK_MS
    assert len(table_ids(spark, table)) == 1001


def test_deleted_topic_under_a_pattern_keeps_its_offsets_and_breaks_nothing(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A rotated topic deleted for good: the run restarts once from the table (Spark's source
    stops when a partition disappears), the marker keeps the old topic's offsets (only
    --reset-offsets removes them), and the next runs start without restarting."""
    day1, day2 = f"del{unique}.20240101", f"del{unique}.20240102"
    ids1 = produce_payments(kafka_bootstrap, day1, 200, seed=29, partitions=2)
    ids2 = produce_payments(kafka_bootstrap, day2, 100, seed=30, partitions=2)
    pipeline = payments_pipeline(f"d_{unique}", "unused", f"db.del_{unique}")
    del pipeline["topics"]
    pipeline["topic_pattern"] = f"del{unique}\\.\\d{{8}}"
    config = make_config([pipeline])
    run(config, until_caught_up=True, spark=spark)
    end1 = end_offsets(kafka_bootstrap, day1, partitions=2)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.delete_topics([day1])[day1].result(30)
    deadline = time.monotonic() + 30
    while day1 in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    more = produce_payments(kafka_bootstrap, day2, 150, seed=31, partitions=2)

    reports = run(config, until_caught_up=True, spark=spark)

    assert reports[0].records_ingested == 150
    offsets = json.loads(frazil_snapshots(spark, f"db.del_{unique}")[-1]["frazil.offsets"])
    assert offsets[day1] == {"0": end1[0], "1": end1[1]}
    _exactly(spark, f"db.del_{unique}", ids1 + ids2 + more)

    # Started again, the pipeline does not fail, nor restart forever, for the topic gone.
    later = produce_payments(kafka_bootstrap, day2, 50, seed=32, partitions=2)
    again = run(config, until_caught_up=True, spark=spark)
    assert again[0].records_ingested == 50
    _exactly(spark, f"db.del_{unique}", ids1 + ids2 + more + later)
    reset = run(config, until_caught_up=True, spark=spark, reset_offsets="latest")
    assert reset[0].records_ingested == 0
    offsets = json.loads(frazil_snapshots(spark, f"db.del_{unique}")[-1]["frazil.offsets"])
    assert set(offsets) == {day2}, "--reset-offsets keeps only the topics Kafka has"


def test_a_commit_of_another_run_in_between_is_detected(spark: Any, unique: str) -> None:
    """Two runs writing one pipeline's table at the same moment stop instead of going on."""
    from frazil.errors import CommitError
    from frazil.progress import markers, table_markers
    from frazil.sink.iceberg import IcebergTable, IcebergTables

    name = f"lake.db.race_{unique}"
    spark.sql(f"CREATE TABLE {name} (id string) USING iceberg")
    table = IcebergTable(spark, name)
    pipeline = f"race_{unique}"
    base = table_markers.find_marker(table, pipeline)
    theirs = markers.Marker(pipeline=pipeline, offsets={"t": {0: 10}})
    ours = markers.Marker(pipeline=pipeline, offsets={"t": {0: 10}})
    table.commit_summary_only(theirs.to_summary())
    table.commit_summary_only(ours.to_summary())

    with pytest.raises(CommitError, match=r"got a commit of the same pipeline from another run"):
        table_markers.check_no_interleaving(table, base, ours)

    # Without another commit in between, the check passes.
    later = table_markers.find_marker(table, pipeline)
    assert later.marker is not None and later.marker.commit_id == ours.commit_id
    mine = markers.Marker(pipeline=pipeline, offsets={"t": {0: 12}})
    table.commit_summary_only(mine.to_summary())
    table_markers.check_no_interleaving(table, later, mine)

    # Another run's commit above ours came after it (a run that took over as ours
    # committed): not an interleaving, in the rules' walk and in the JVM's for many tables.
    base = table_markers.find_marker(table, pipeline)
    ours = markers.Marker(pipeline=pipeline, offsets={"t": {0: 14}})
    table.commit_summary_only(ours.to_summary())
    table.commit_summary_only(
        markers.Marker(pipeline=pipeline, offsets={"t": {0: 16}}).to_summary()
    )
    table_markers.check_no_interleaving(table, base, ours)
    together = IcebergTables(spark, [table])
    assert table_markers.check_no_interleavings(together, [table], [base], [ours]) == [None]
    # The same two commits the other way round are one.
    base = table_markers.find_marker(table, pipeline)
    table.commit_summary_only(
        markers.Marker(pipeline=pipeline, offsets={"t": {0: 18}}).to_summary()
    )
    ours = markers.Marker(pipeline=pipeline, offsets={"t": {0: 20}})
    table.commit_summary_only(ours.to_summary())
    with pytest.raises(CommitError, match=r"from another run"):
        table_markers.check_no_interleaving(table, base, ours)
    [error] = table_markers.check_no_interleavings(together, [table], [base], [ours])
    assert error is not None and "from another run" in str(error)
