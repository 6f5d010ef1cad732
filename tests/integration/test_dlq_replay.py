"""`frazil dlq replay`: dead letters re-ingested after a fix, exactly once, also when the
replay itself is interrupted."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Producer

from frazil.engine import replay_rows
from frazil.engine.replay import replay
from frazil.engine.runner import run
from frazil.errors import PipelineError
from frazil.generate.producer import ensure_topic
from frazil.progress import fence
from tests.integration.helpers import table_ids


def _setup(make_config: Any, spark: Any, kafka_bootstrap: str, unique: str) -> tuple[Any, str, str]:
    topic, table, name = f"rp-{unique}", f"db.rp_{unique}", f"rp_{unique}"
    dead = f"db.rpdead_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(20):
        producer.produce(topic, json.dumps({"id": f"a{i}", "n": i}).encode(), partition=i % 2)
    # Sent as strings: dead letters until the pipeline casts them.
    for i in range(6):
        producer.produce(topic, json.dumps({"id": f"s{i}", "n": str(i)}).encode(), partition=i % 2)
    producer.produce(topic, json.dumps({"id": "x", "n": "not a number"}).encode(), partition=0)
    producer.produce(topic, b"{broken", partition=1)
    producer.flush(10)
    pipeline = {
        "name": name,
        "topics": [topic],
        "table": table,
        "schema": {"id": "string", "n": "long"},
        "errors": {"tolerance": "all", "dlq_table": dead},
    }
    run(make_config([pipeline]), until_caught_up=True, spark=spark)
    assert sorted(table_ids(spark, table)) == sorted(f"a{i}" for i in range(20))
    assert spark.table(f"lake.{dead}").count() == 8
    fixed = make_config(
        [
            {
                **pipeline,
                "schema": {"id": "string", "n": "string"},
                "transforms": [{"cast": {"n": "long"}}],
            }
        ]
    )
    return fixed, table, dead


def _dead(spark: Any, dead: str) -> list[tuple[str, str]]:
    rows = spark.sql(
        f"SELECT stage, get_json_object(cast(value AS string), '$.id') FROM lake.{dead}"
    )
    return sorted((r[0], r[1] or "-") for r in rows.collect())


def test_replay_writes_what_succeeds_now_and_sends_back_what_fails_again(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    config, table, dead = _setup(make_config, spark, kafka_bootstrap, unique)
    pipeline = config.pipelines[0]

    report = replay(spark, config, pipeline)

    assert (report.replayed, report.written, report.failed_again) == (8, 6, 2)
    expected = sorted([f"a{i}" for i in range(20)] + [f"s{i}" for i in range(6)])
    assert sorted(table_ids(spark, table)) == expected
    assert _dead(spark, dead) == [("decode", "-"), ("transform", "x")]

    again = replay(spark, config, pipeline, stage="transform")
    assert (again.replayed, again.written, again.failed_again) == (1, 0, 1)
    assert sorted(table_ids(spark, table)) == expected
    assert _dead(spark, dead) == [("decode", "-"), ("transform", "x")]


def test_an_interrupted_replay_is_finished_not_repeated(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, table, dead = _setup(make_config, spark, kafka_bootstrap, unique)
    pipeline = config.pipelines[0]

    def crash(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("killed between the writes and the delete")

    monkeypatch.setattr(replay_rows, "delete", crash)
    with pytest.raises(RuntimeError):
        replay(spark, config, pipeline)
    monkeypatch.undo()
    # The table has the replayed records already; the dead letters are still there.
    assert len(table_ids(spark, table)) == 26

    report = replay(spark, config, pipeline)

    assert report.resumed
    counts = Counter(table_ids(spark, table))
    assert len(counts) == 26 and max(counts.values()) == 1
    assert _dead(spark, dead) == [("decode", "-"), ("transform", "x")]


def test_a_routed_pipeline_replays_into_its_tables_and_a_new_one(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, name, dead = f"rr-{unique}", f"rr_{unique}", f"db.rrdead_{unique}"
    debit, credit = f"db.rr_debit_{unique}", f"db.rr_credit_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})

    def send(kind: str, i: int) -> None:
        value = {"id": f"{kind}{i}", "type": kind, "n": i}
        producer.produce(topic, json.dumps(value).encode(), partition=i % 2)

    for i in range(10):
        send("debit", i)
        if i < 6:
            send("credit", i)
        if i < 2:
            send("other", i)
    producer.flush(10)
    pipeline: dict[str, Any] = {
        "name": name,
        "topics": [topic],
        "schema": {"id": "string", "type": "string", "n": "long"},
        "route": {"field": "type", "tables": {"debit": debit}, "default": "fail"},
        "errors": {"tolerance": "all", "dlq_table": dead},
    }
    run(make_config([pipeline]), until_caught_up=True, spark=spark)
    assert sorted(table_ids(spark, debit)) == sorted(f"debit{i}" for i in range(10))
    assert [s for s, _ in _dead(spark, dead)] == ["route"] * 8

    # The fix: credits get a table of their own (created by the replay); "other" still fails.
    pipeline["route"] = {
        "field": "type",
        "tables": {"debit": debit, "credit": credit},
        "default": "fail",
    }
    config = make_config([pipeline])
    failed_at = f"SELECT topic, partition, offset, unix_micros(failed_at) FROM lake.{dead}"
    first = {tuple(r[:3]): r[3] for r in spark.sql(failed_at).collect()}
    # Next to a live run, a replay that would create a table is refused: the new table's
    # marker would lag the run's, and a restart would write records into it twice.
    refused = pytest.raises(PipelineError, match="stop the pipeline first")
    with fence.hold(config.state_dir, [name]), refused:
        replay(spark, config, config.pipelines[0])
    assert sorted(table_ids(spark, debit)) == sorted(f"debit{i}" for i in range(10))
    report = replay(spark, config, config.pipelines[0])

    assert (report.replayed, report.written, report.failed_again) == (8, 6, 2)
    # What fails again keeps when it first failed (`dlq show`'s "first failed"), a microsecond
    # later so that the replay's delete tells it from the row it replaces.
    again = {tuple(r[:3]): r[3] for r in spark.sql(failed_at).collect()}
    assert len(again) == 2 and all(again[k] == first[k] + 1 for k in again)
    assert sorted(table_ids(spark, credit)) == sorted(f"credit{i}" for i in range(6))
    assert sorted(table_ids(spark, debit)) == sorted(f"debit{i}" for i in range(10))
    assert _dead(spark, dead) == [("route", "other0"), ("route", "other1")]

    # The next run takes the new table as one of the pipeline's and goes on from its marker.
    send("credit", 99)
    producer.flush(10)
    run(config, until_caught_up=True, spark=spark)
    assert sorted(table_ids(spark, credit)) == sorted(
        [f"credit{i}" for i in range(6)] + ["credit99"]
    )
    assert len(table_ids(spark, debit)) == 10


def test_a_fanned_out_record_is_replayed_only_into_the_tables_it_failed_for(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    # Debits go to two tables; the second takes no new column (freeze). Records with a new
    # field go into the first and fail for the second only: a replay after the fix writes
    # them to the second, never again to the first, and a second replay adds nothing.
    from frazil.observe.catalog import pyiceberg_catalog

    topic, name, dead = f"rf-{unique}", f"rf_{unique}", f"db.rfdead_{unique}"
    every, debits = f"db.rf_all_{unique}", f"db.rf_debits_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(10):
        value = {"id": f"d{i}", "type": "debit", "n": i}
        producer.produce(topic, json.dumps(value).encode(), partition=i % 2)
    producer.flush(10)
    pipeline: dict[str, Any] = {
        "name": name,
        "topics": [topic],
        "route": {"field": "type", "tables": {"debit": [every, debits]}, "default": "fail"},
        "tables": {debits: {"schema_evolution": "freeze"}},
        "errors": {"tolerance": "all", "dlq_table": dead},
    }
    run(make_config([pipeline]), until_caught_up=True, spark=spark)
    for i in range(10, 15):
        value = {"id": f"d{i}", "type": "debit", "n": i, "extra": "new"}
        producer.produce(topic, json.dumps(value).encode(), partition=i % 2)
    producer.flush(10)
    run(make_config([pipeline]), until_caught_up=True, spark=spark)
    assert len(table_ids(spark, every)) == 15 and len(table_ids(spark, debits)) == 10
    rows = spark.sql(f"SELECT stage, target_table FROM lake.{dead}").collect()
    assert sorted((r[0], r[1]) for r in rows) == [("schema", debits)] * 5

    del pipeline["tables"]
    fixed = make_config([pipeline])
    report = replay(spark, fixed, fixed.pipelines[0])
    assert (report.replayed, report.written, report.failed_again) == (5, 5, 0)
    all_ids = sorted(f"d{i}" for i in range(15))
    assert sorted(table_ids(spark, every)) == all_ids
    assert sorted(table_ids(spark, debits)) == all_ids
    again = replay(spark, fixed, fixed.pipelines[0])
    assert (again.replayed, again.written) == (0, 0)
    assert sorted(table_ids(spark, every)) == all_ids
    assert sorted(table_ids(spark, debits)) == all_ids
    # Every table the replay writes is read by PyIceberg too.
    catalog = pyiceberg_catalog(fixed)
    for table in (every, debits, dead):
        catalog.load_table(table).scan().to_arrow()
