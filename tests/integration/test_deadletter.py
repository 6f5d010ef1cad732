"""Dead-letter queue: failing records go to a table and a topic with their reason; the rest
of the batch is written; nothing is lost."""

from __future__ import annotations

import json
from datetime import timezone
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from pyspark.sql import functions as F

from frazil.cli.dlq_cmd import _summarise
from frazil.columns import NOT_UTF8_PREFIX
from frazil.engine import dead_capture
from frazil.engine.runner import run
from frazil.generate.producer import ensure_topic
from frazil.observe.catalog import pyiceberg_catalog
from frazil.progress import offset_rules
from tests.integration.helpers import payments_pipeline, table_ids

GOOD = {
    "id": "a",
    "type": "debit",
    "created_at": "2026-01-01T00:00:00",
    "document": "1",
    "payer": "X",
    "amount": 1,
}

#: (value, expected stage, a word the reason must hold)
BAD: list[tuple[bytes | None, str, str]] = [
    (b'{"id": "b", "amount": ', "decode", "not a JSON object"),
    (json.dumps({**GOOD, "id": "c", "amount": "lots"}).encode(), "decode", "type"),
    (b"[1, 2, 3]", "decode", "not a JSON object"),
    (b'"just a string"', "decode", "not a JSON object"),
    (b"42", "decode", "not a JSON object"),
    (b"", "decode", "empty value"),
    (b"\xff\xfe\x00garbage", "decode", "not a JSON object"),
    (None, "decode", "tombstone"),
]


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _produce(bootstrap: str, topic: str) -> tuple[dict[int, str], dict[int, bytes | None]]:
    """Good and bad records interleaved on one partition: good ids and bad values by offset."""
    producer = Producer({"bootstrap.servers": bootstrap})
    good: dict[int, str] = {}
    bad: dict[int, bytes | None] = {}
    offset = 0
    for i in range(40):
        record = {**GOOD, "id": f"g{i}"}
        producer.produce(topic, json.dumps(record).encode(), key=f"k{i}".encode(), partition=0)
        good[offset] = record["id"]
        offset += 1
        if i < len(BAD):
            value = BAD[i][0]
            producer.produce(
                topic, value, key=f"bad{i}".encode(), partition=0, headers=[("origin", b"test")]
            )
            bad[offset] = value
            offset += 1
    producer.flush(10)
    return good, bad


@pytest.mark.parametrize(
    "carried",
    [
        pytest.param(dead_capture.MAX_CARRIED_BYTES, id="carried-in-the-write"),
        pytest.param(40, id="some-read-again"),
        pytest.param(0, id="all-read-again"),
    ],
)
def test_failing_records_go_to_the_table_and_topic_and_the_rest_is_written(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    unique: str,
    carried: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The write carries failing records up to this size (key, value, headers, detail);
    # larger ones are read again from Kafka after the commit. Every way gives the same rows.
    monkeypatch.setattr(dead_capture, "MAX_CARRIED_BYTES", carried)
    topic, table, name = f"dlq-{unique}", f"db.dlq_{unique}", f"d_{unique}"
    dlq_table, dlq_topic = f"db.dead_{unique}", f"dead-{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    good, bad = _produce(kafka_bootstrap, topic)
    pipeline = payments_pipeline(
        name,
        topic,
        table,
        errors={"tolerance": "all", "dlq_table": dlq_table, "dlq_topic": dlq_topic},
    )
    config = make_config([pipeline])

    reports = run(config, until_caught_up=True, spark=spark)

    assert sorted(table_ids(spark, table)) == sorted(good.values())
    rows = spark.table(f"lake.{dlq_table}").collect()
    assert sorted(r["offset"] for r in rows) == sorted(bad)
    for r in rows:
        expected = BAD[list(bad).index(r["offset"])]
        assert r["topic"] == topic and r["partition"] == 0
        assert r["pipeline"] == name
        assert r["stage"] == expected[1]
        assert expected[2] in r["reason"], r["reason"]
        assert r["error_class"] == "DecodeError"
        assert r["failed_at"] is not None and r["timestamp"] is not None
        assert _bytes(r["value"]) == bad[r["offset"]]
        assert bytes(r["key"]) == f"bad{list(bad).index(r['offset'])}".encode()
        assert [(h["key"], bytes(h["value"])) for h in r["headers"]] == [("origin", b"test")]
    spec = spark.sql(f"select * from lake.{dlq_table}.partitions").columns
    assert "partition" in spec
    # Every string is UTF-8 (Iceberg's string type): PyIceberg, through PyArrow, reads the
    # table; the quoted bytes of a value that is not UTF-8 are in hex.
    arrow = pyiceberg_catalog(config).load_table(dlq_table).scan().to_arrow()
    offsets, texts = arrow.column("offset").to_pylist(), arrow.column("detail").to_pylist()
    details = dict(zip(offsets, texts, strict=True))
    assert sorted(details) == sorted(bad)
    not_utf8 = next(o for o, v in bad.items() if v == b"\xff\xfe\x00garbage")
    assert details[not_utf8] == f"{NOT_UTF8_PREFIX}FFFE00{b'garbage'.hex().upper()}"
    assert details[next(o for o, v in bad.items() if v == b"[1, 2, 3]")] == "[1, 2, 3]"
    assert sum(reports[0].dead_letters.values()) == len(bad)
    groups = _summarise(spark, f"lake.{dlq_table}", dlq_table, [name], 1)
    assert sum(g["records"] for g in groups) == len(bad)
    assert {g["stage"] for g in groups} == {"decode"}
    assert all(len(g["examples"]) == 1 and g["examples"][0]["topic"] == topic for g in groups)

    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"check-{unique}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([dlq_topic])
    received = []
    for _ in range(60):
        msg = consumer.poll(1.0)
        if msg is None:
            if len(received) >= len(bad):
                break
            continue
        if msg.error() is None:
            received.append(msg)
    consumer.close()
    assert len(received) == len(bad)
    by_offset = {}
    for msg in received:
        headers = dict(msg.headers())
        assert headers["origin"] == b"test"
        assert headers["frazil.errors.stage"] == b"decode"
        assert headers["frazil.errors.topic"] == topic.encode()
        assert headers["frazil.errors.pipeline"] == name.encode()
        assert headers["frazil.errors.exception.class"] == b"DecodeError"
        by_offset[int(headers["frazil.errors.offset"])] = msg
    assert sorted(by_offset) == sorted(bad)
    for offset, msg in by_offset.items():
        assert msg.value() == bad[offset]
        assert msg.key() == f"bad{list(bad).index(offset)}".encode()
    # The table's Kafka timestamp is the record's, as the topic's header names it.
    stamps = {
        int(r["offset"]): int(r["timestamp"].replace(tzinfo=timezone.utc).timestamp() * 1000)
        for r in spark.sql(
            f"SELECT offset, to_utc_timestamp(timestamp, current_timezone()) AS timestamp "
            f"FROM lake.{dlq_table}"
        ).collect()
    }
    for offset, msg in by_offset.items():
        assert stamps[offset] == int(dict(msg.headers())["frazil.errors.timestamp"])


def _dead_offsets(spark: Any, table: str) -> list[tuple[int, int]]:
    return sorted(
        (r[0], r[1]) for r in spark.sql(f"SELECT partition, offset FROM lake.{table}").collect()
    )


def test_routed_records_matching_no_table_and_undecodable_ones_go_to_the_dlq(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, name = f"dlqr-{unique}", f"dr_{unique}"
    debits, dead = f"db.debits_{unique}", f"db.deadr_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(60):
        kind = ("debit", "credit", "refund")[i % 3]
        producer.produce(
            topic, json.dumps({**GOOD, "id": f"r{i}", "type": kind}).encode(), partition=i % 2
        )
    producer.produce(topic, b"{broken", partition=0)
    producer.produce(topic, None, key=b"gone", partition=1)
    producer.flush(10)
    pipeline = payments_pipeline(
        name,
        topic,
        None,
        route={"field": "type", "tables": {"debit": debits}, "default": "dlq"},
        errors={"tolerance": "all", "dlq_table": dead},
    )
    del pipeline["table"]
    config = make_config([pipeline])

    reports = run(config, until_caught_up=True, spark=spark)

    assert sorted(table_ids(spark, debits)) == sorted(f"r{i}" for i in range(0, 60, 3))
    rows = spark.sql(
        f"SELECT id_stage, reason FROM (SELECT stage AS id_stage, reason FROM lake.{dead})"
    ).collect()
    stages = sorted(r[0] for r in rows)
    assert stages == ["decode"] * 2 + ["route"] * 40
    assert len(_dead_offsets(spark, dead)) == 42 == len(set(_dead_offsets(spark, dead)))
    reasons = " ".join(r[1] for r in rows)
    assert "matches no table (route default: dlq)" in reasons
    assert "tombstone" in reasons
    assert sum(reports[0].dead_letters.values()) == 42
    # A few dead letters from each Kafka partition: one file a commit, not a file a partition.
    added = spark.sql(
        f"SELECT summary['added-data-files'] FROM lake.{dead}.snapshots "
        "WHERE summary['added-records'] > 0"
    ).collect()
    assert added and all(r[0] == "1" for r in added), added


def _one_partition_of_numbers(
    bootstrap: str, kind: str, unique: str, count: int
) -> tuple[str, str, str, str, Any]:
    """A one-partition topic holding ``count`` ``{id: a<i>, n: i}`` records; its names."""
    topic, table, name = f"dlq{kind}-{unique}", f"db.dlq{kind}_{unique}", f"d{kind}_{unique}"
    dead = f"db.dead{kind}_{unique}"
    ensure_topic(bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, json.dumps({"id": f"a{i}", "n": i}).encode(), partition=0)
    producer.flush(10)
    return topic, table, name, dead, producer


def test_new_json_fields_evolve_the_table_rather_than_go_to_the_dlq(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name, dead, producer = _one_partition_of_numbers(kafka_bootstrap, "e", unique, 20)
    pipeline = {
        "name": name,
        "topics": [topic],
        "table": table,
        "errors": {"tolerance": "all", "dlq_table": dead},
    }
    run(make_config([pipeline]), until_caught_up=True, spark=spark)
    for i in range(20):
        producer.produce(
            topic, json.dumps({"id": f"b{i}", "n": i, "extra": "x"}).encode(), partition=0
        )
    producer.produce(topic, b"not json", partition=0)
    producer.flush(10)

    run(make_config([pipeline]), until_caught_up=True, spark=spark)

    rows = spark.sql(f"SELECT id, extra FROM lake.{table}").collect()
    assert len(rows) == 40
    assert sorted(r[0] for r in rows if r[1] == "x") == sorted(f"b{i}" for i in range(20))
    assert _dead_offsets(spark, dead) == [(0, 40)]


def test_values_the_table_cannot_take_go_to_the_dlq_and_the_rest_is_written(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name, dead, producer = _one_partition_of_numbers(kafka_bootstrap, "s", unique, 10)
    errors = {"tolerance": "all", "dlq_table": dead}
    first = {"name": name, "topics": [topic], "table": table, "errors": errors}
    run(
        make_config([{**first, "schema": {"id": "string", "n": "long"}}]),
        until_caught_up=True,
        spark=spark,
    )
    # The producer changes n to a string; the declared schema follows, the table cannot.
    for i in range(10):
        value = {"id": f"b{i}", "n": f"n{i}"} if i % 2 else {"id": f"b{i}"}
        producer.produce(topic, json.dumps(value).encode(), partition=0)
    producer.flush(10)

    run(
        make_config([{**first, "schema": {"id": "string", "n": "string"}}]),
        until_caught_up=True,
        spark=spark,
    )

    ids = sorted(table_ids(spark, table))
    assert ids == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(0, 10, 2)])
    rows = spark.sql(f"SELECT offset, stage, reason, error_class FROM lake.{dead}").collect()
    assert sorted(r[0] for r in rows) == [10 + i for i in range(1, 10, 2)]
    assert {r[1] for r in rows} == {"schema"} and {r[3] for r in rows} == {"SchemaError"}
    assert all("field n is string in the records but bigint in table" in r[2] for r in rows), rows[
        0
    ][2]
    # The detail quotes the field the table cannot take, by its name.
    details = spark.sql(f"SELECT offset, detail FROM lake.{dead} ORDER BY offset").collect()
    assert [(r[0], r[1]) for r in details] == [(10 + i, f'{{"n":"n{i}"}}') for i in range(1, 10, 2)]


def test_a_routed_batch_sends_every_tables_dead_letters_and_its_own(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    # Dead letters from three writes of one batch: records failing before routing, and two
    # tables' records they cannot take. Each must reach the dead-letter table.
    topic, name, dead = f"dlqm-{unique}", f"dm_{unique}", f"db.deadm_{unique}"
    template = f"db.m{unique}_{{value}}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(6):
        value = {"id": f"a{i}", "kind": "ab"[i % 2], "n": i}
        producer.produce(topic, json.dumps(value).encode(), partition=0)
    producer.flush(10)
    pipeline = {
        "name": name,
        "topics": [topic],
        "route": {"field": "kind", "table": template},
        "errors": {"tolerance": "all", "dlq_table": dead},
    }
    schema = {"id": "string", "kind": "string", "n": "long"}
    run(make_config([{**pipeline, "schema": schema}]), until_caught_up=True, spark=spark)
    for i in range(6):
        value = {"id": f"b{i}", "kind": "ab"[i % 2], "n": f"text{i}"}
        producer.produce(topic, json.dumps(value).encode(), partition=0)
    producer.produce(topic, b"{broken", partition=0)
    producer.flush(10)

    changed = {**schema, "n": "string"}
    run(make_config([{**pipeline, "schema": changed}]), until_caught_up=True, spark=spark)

    rows = spark.sql(f"SELECT offset, stage FROM lake.{dead} ORDER BY offset").collect()
    assert [(r[0], r[1]) for r in rows] == [(6 + i, "schema") for i in range(6)] + [(12, "decode")]
    for kind in "ab":
        ids = sorted(table_ids(spark, template.format(value=kind)))
        assert ids == sorted(f"a{i}" for i in range(6) if "ab"[i % 2] == kind)


def test_records_a_filter_drops_are_counted_not_dead_lettered(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name, dead, producer = _one_partition_of_numbers(
        kafka_bootstrap, "filt", unique, 10
    )
    producer.produce(topic, b'{"id": "broken", "n": ', partition=0)
    producer.flush(10)
    pipeline = {
        "name": name,
        "topics": [topic],
        "table": table,
        "schema": {"id": "string", "n": "long"},
        "transforms": [{"filter": "n >= 3"}],
        "errors": {"tolerance": "all", "dlq_table": dead},
    }

    [report] = run(make_config([pipeline]), until_caught_up=True, spark=spark)

    assert sorted(table_ids(spark, table)) == sorted(f"a{i}" for i in range(3, 10))
    assert report.filtered_skipped == 3
    assert _dead_offsets(spark, dead) == [(0, 10)]


@pytest.mark.parametrize("dead_letters", [True, False], ids=["dead-letters", "none"])
def test_a_sorted_tables_counts_and_dead_letters_are_each_once(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, dead_letters: bool
) -> None:
    """A sorted table's write runs Spark's range distribution, whose sampling job reads every
    row before the write's own stage: rows written, records filtered and dead letters are
    still counted (and sent) once."""
    topic, table, name, dead, producer = _one_partition_of_numbers(
        kafka_bootstrap, "sort", unique, 30
    )
    if dead_letters:
        for _ in range(4):
            producer.produce(topic, b'{"id": "broken", "n": ', partition=0)
    producer.flush(10)
    pipeline: dict[str, Any] = {
        "name": name,
        "topics": [topic],
        "table": table,
        "schema": {"id": "string", "n": "long"},
        "sort_by": ["n desc"],
        "table_properties": {"write.distribution-mode": "range"},
        "transforms": [{"filter": "n >= 5"}],
    }
    if dead_letters:
        pipeline["errors"] = {"tolerance": "all", "dlq_table": dead}

    [report] = run(make_config([pipeline]), until_caught_up=True, spark=spark)

    assert sorted(table_ids(spark, table)) == sorted(f"a{i}" for i in range(5, 30))
    assert report.rows_written == {table: 25}
    assert report.filtered_skipped == 5
    if dead_letters:
        assert _dead_offsets(spark, dead) == [(0, 30 + i) for i in range(4)]
        assert report.dead_lettered == 4


def _failing_rows(spark: Any, topic: str, start: int, count: int = 3) -> Any:
    """A batch's failing records at offsets ``start``… of partition 0, as the dead-letter
    queue gets them (raw columns, position, error)."""
    from frazil import columns as c

    return spark.sql(
        f"SELECT CAST(NULL AS BINARY) AS `{c.KEY}`, CAST(concat('bad', id) AS BINARY) AS "
        f"`{c.VALUE}`, '{topic}' AS `{c.TOPIC}`, 0 AS `{c.PARTITION}`, id AS `{c.OFFSET}`, "
        f"0L AS `{c.TIMESTAMP_MS}`, named_struct('stage', 'decode', 'reason', 'no', "
        f"'detail', 'bad') AS `{c.DEAD_ERROR}` FROM range({start}, {start + count})"
    )


@pytest.mark.parametrize("observed", [True, False], ids=["observed", "counted"])
def test_a_batch_sent_again_counts_only_the_dead_letters_it_added(
    spark: Any, make_config: Any, unique: str, observed: bool
) -> None:
    # A batch replayed after a crash, or sent by a second run of the pipeline, finds its dead
    # letters in the table already: the run that sends it again reports none of them.
    from frazil import columns as c
    from frazil.sink.dead_letters.queue import DeadLetters

    topic, name, dlq_table = f"again-{unique}", f"a_{unique}", f"db.again_{unique}"
    config = make_config(
        [payments_pipeline(name, topic, f"db.t_{unique}",
                           errors={"tolerance": "all", "dlq_table": dlq_table})]
    )  # fmt: skip
    bad = _failing_rows(spark, topic, 0)
    seen = [(topic, 0, o, "decode", "no") for o in range(3)] if observed else None
    basis = offset_rules.Basis({topic: {0: 3}}, batch_id=0, query_id="q")

    first = DeadLetters.open(spark, config, config.pipelines[0])
    assert first is not None
    first.write(bad, F.col(c.DEAD_ERROR), basis=basis, seen=seen)
    assert dict(first.counts) == {("decode", "no"): 3}
    again = DeadLetters.open(spark, config, config.pipelines[0])
    assert again is not None
    again.write(bad, F.col(c.DEAD_ERROR), basis=basis, seen=seen)
    assert dict(again.counts) == {} and again.total == 0
    assert spark.table(f"lake.{dlq_table}").count() == 3


def test_a_dead_letter_larger_than_its_topic_takes_is_cut_not_a_wedge(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    # The dead-letter topic takes records up to 100 kB; the bad record is 300 kB. Sending it
    # whole would fail the batch at every replay: it goes cut, with its full length in a
    # header, and whole to the dead-letter table.
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, table, name = f"big-{unique}", f"db.big_{unique}", f"big_{unique}"
    dlq_table, dlq_topic = f"db.bigdead_{unique}", f"bigdead-{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    created = admin.create_topics(
        [NewTopic(dlq_topic, 1, 1, config={"max.message.bytes": "100000"})]
    )
    created[dlq_topic].result(30)
    huge = b'{"id": "' + b"x" * 300_000  # not JSON: never closed
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "message.max.bytes": 1_000_000})
    producer.produce(topic, json.dumps({**GOOD, "id": "ok"}).encode(), partition=0)
    producer.produce(topic, huge, key=b"big", partition=0)
    producer.flush(10)
    pipeline = payments_pipeline(
        name, topic, table,
        errors={"tolerance": "all", "dlq_table": dlq_table, "dlq_topic": dlq_topic},
    )  # fmt: skip

    run(make_config([pipeline]), until_caught_up=True, spark=spark)

    assert table_ids(spark, table) == ["ok"]
    [row] = spark.table(f"lake.{dlq_table}").collect()
    assert bytes(row["value"]) == huge
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"check-{unique}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([dlq_topic])
    received = None
    for _ in range(30):
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            received = msg
            break
    consumer.close()
    assert received is not None
    headers = dict(received.headers())
    assert headers["frazil.errors.value.truncated"] == b"300008"
    value = received.value()
    assert value is not None and 0 < len(value) < 100_000 and huge.startswith(value)
    assert received.key() == b"big"


@pytest.mark.parametrize("observed", [True, False], ids=["observed", "counted"])
def test_a_later_batchs_dead_letters_sent_first_by_another_run_hide_nothing(
    spark: Any, make_config: Any, unique: str, observed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run A sends batch [0, 3)'s dead letters; run B's batch [3, 6) commits its own in
    # between. A's commit is refused (B's marker came in), planned again: B's marker claims
    # offsets up to 6, but the table does not hold A's records. They must still go in.
    from frazil import columns as c
    from frazil.sink.dead_letters import queue as dead_letter_queue
    from frazil.sink.dead_letters.queue import DeadLetters

    topic, name, dlq_table = f"race-{unique}", f"r_{unique}", f"db.race_{unique}"
    config = make_config(
        [payments_pipeline(name, topic, f"db.t_{unique}",
                           errors={"tolerance": "all", "dlq_table": dlq_table})]
    )  # fmt: skip

    def bad(start: int) -> Any:
        return _failing_rows(spark, topic, start)

    def seen(start: int) -> list[tuple[str, int, int, str, str]] | None:
        return (
            [(topic, 0, o, "decode", "no") for o in range(start, start + 3)] if observed else None
        )

    run_a = DeadLetters.open(spark, config, config.pipelines[0])
    run_b = DeadLetters.open(spark, config, config.pipelines[0])
    assert run_a is not None and run_b is not None
    real_append = dead_letter_queue.append_rows
    cut_in = []

    def append_after_b(rows: Any, table: str, summary: dict[str, str]) -> None:
        if not cut_in:
            cut_in.append(True)
            run_b.write(bad(3), F.col(c.DEAD_ERROR),
                        basis=offset_rules.Basis({topic: {0: 6}}, batch_id=7, query_id="b"),
                        seen=seen(3))  # fmt: skip
        real_append(rows, table, summary)

    monkeypatch.setattr(dead_letter_queue, "append_rows", append_after_b)
    run_a.write(bad(0), F.col(c.DEAD_ERROR),
                basis=offset_rules.Basis({topic: {0: 3}}, batch_id=3, query_id="a"),
                seen=seen(0))  # fmt: skip

    offsets = sorted(r[0] for r in spark.sql(f"SELECT offset FROM lake.{dlq_table}").collect())
    assert offsets == list(range(6))
    assert run_a.total == 3 and run_b.total == 3
    # Sending A's batch again adds nothing.
    monkeypatch.setattr(dead_letter_queue, "append_rows", real_append)
    again = DeadLetters.open(spark, config, config.pipelines[0])
    assert again is not None
    again.write(bad(0), F.col(c.DEAD_ERROR),
                basis=offset_rules.Basis({topic: {0: 3}}, batch_id=3, query_id="a"),
                seen=seen(0))  # fmt: skip
    assert again.total == 0 and spark.table(f"lake.{dlq_table}").count() == 6


@pytest.mark.parametrize("mode", ["append", "upsert"])
def test_a_routed_table_whose_records_all_fail_is_not_made(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, mode: str
) -> None:
    """A topic route whose one topic holds only records that fail: they go to the dead-letter
    queue and no table is made for them (it would get the other records' columns); the
    table is made once a record of it can be written, with that record's columns."""
    good, bad = f"rt{unique}.good", f"rt{unique}.bad"
    for topic in (good, bad):
        ensure_topic(kafka_bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(3):
        producer.produce(good, json.dumps({"id": i, "name": f"n{i}"}).encode(), partition=0)
        producer.produce(bad, b'{"id": ' + str(i).encode(), partition=0)
    producer.flush(10)
    template, dead = f"db.rt{unique}_{{1}}", f"db.rtdead_{unique}"
    write = {"mode": "upsert", "key": ["id"]} if mode == "upsert" else {}
    pipeline = {
        "name": f"rt_{unique}",
        "topic_pattern": f"rt{unique}\\..*",
        "route": {"topic": f"rt{unique}\\.(\\w+)", "table": template},
        "errors": {"tolerance": "all", "dlq_table": dead},
        **({"write": write} if write else {}),
    }
    config = make_config([pipeline])
    run(config, until_caught_up=True, spark=spark)

    assert sorted(table_ids(spark, template.replace("{1}", "good"))) == [0, 1, 2]
    letters = spark.sql(f"SELECT topic, offset FROM lake.{dead} ORDER BY offset").collect()
    assert [(r[0], r[1]) for r in letters] == [(bad, 0), (bad, 1), (bad, 2)]
    made = template.replace("{1}", "bad")
    assert not spark.catalog.tableExists(f"lake.{made}")

    producer.produce(bad, json.dumps({"id": 9, "size": 2.5}).encode(), partition=0)
    producer.flush(10)
    run(config, until_caught_up=True, spark=spark)
    frame = spark.table(f"lake.{made}")
    assert [f.name for f in frame.schema] == ["id", "size"]
    assert [tuple(r) for r in frame.collect()] == [(9, 2.5)]


def test_an_aliased_field_the_table_cannot_take_goes_to_the_dlq_not_null(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A source field feeding a column of another name (``aliases``) whose type the column
    cannot take: its records are dead letters quoting it, not rows with the column null."""
    topic, table, name, dead, producer = _one_partition_of_numbers(kafka_bootstrap, "al", unique, 3)
    first = {"name": name, "topics": [topic], "table": table}
    first["errors"] = {"tolerance": "all", "dlq_table": dead}
    schema = {"id": "string", "n": "long"}
    run(make_config([{**first, "schema": schema}]), until_caught_up=True, spark=spark)
    for i in range(4):
        value = {"id": f"b{i}", "count": f"x{i}"} if i % 2 else {"id": f"b{i}", "count": i}
        producer.produce(topic, json.dumps(value).encode(), partition=0)
    producer.flush(10)

    renamed = {**first, "schema": {"id": "string", "count": "string"}, "aliases": {"count": "n"}}
    run(make_config([renamed]), until_caught_up=True, spark=spark)

    rows = spark.sql(f"SELECT id, n FROM lake.{table} ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [(f"a{i}", i) for i in range(3)]
    letters = spark.sql(f"SELECT offset, reason, detail FROM lake.{dead} ORDER BY offset").collect()
    assert [r[0] for r in letters] == [3, 4, 5, 6]
    assert "field n is string in the records but bigint in table" in letters[0][1], letters[0][1]
    assert [r[2] for r in letters] == [
        '{"count":"0"}',
        '{"count":"x1"}',
        '{"count":"2"}',
        '{"count":"x3"}',
    ]


def test_a_known_tables_marker_covers_a_batch_whose_records_all_failed(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """One upsert table with a dead-letter queue (the cached way): a batch whose every record
    fails still leaves the table's marker past it, so the next start does not read it again,
    and the table is not written."""
    from frazil.progress import table_markers
    from frazil.sink.iceberg import IcebergTable

    topic, table, name, dead, producer = _one_partition_of_numbers(kafka_bootstrap, "km", unique, 3)
    pipeline = {
        "name": name,
        "topics": [topic],
        "table": table,
        "schema": {"id": "string", "n": "long"},
        "write": {"mode": "upsert", "key": ["id"]},
        "errors": {"tolerance": "all", "dlq_table": dead},
    }
    run(make_config([pipeline]), until_caught_up=True, spark=spark)
    for i in range(3):
        producer.produce(topic, json.dumps({"id": f"b{i}", "n": "text"}).encode(), partition=0)
    producer.flush(10)

    run(make_config([pipeline]), until_caught_up=True, spark=spark)

    marker = table_markers.find_marker(IcebergTable(spark, f"lake.{table}"), name).marker
    assert marker is not None and marker.offsets == {topic: {0: 6}}, marker
    assert sorted(table_ids(spark, table)) == ["a0", "a1", "a2"]
    offsets = spark.sql(f"SELECT offset FROM lake.{dead} ORDER BY offset").collect()
    assert [r[0] for r in offsets] == [3, 4, 5]
