"""Routing end to end: one topic into many tables, many topics into one, tables made on sight."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Producer

from frazil.engine.runner import run
from frazil.errors import ConfigError, PipelineError
from frazil.generate.producer import ensure_topic

pytestmark = pytest.mark.integration


def produce_json(
    bootstrap: str, topic: str, records: list[dict[str, Any]], partitions: int = 2
) -> None:
    """Produce JSON records, record ``n`` to partition ``n % partitions``."""
    ensure_topic(bootstrap, topic, partitions=partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for n, record in enumerate(records):
        producer.produce(topic, json.dumps(record).encode(), partition=n % partitions)
    assert producer.flush(30) == 0


def rows(spark: Any, table: str, columns: str = "id") -> list[Any]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT {columns} FROM lake.{table}").collect())


def columns(spark: Any, table: str) -> list[str]:
    return [f.name for f in spark.table(f"lake.{table}").schema.fields]


def test_static_route_with_lists_regexes_and_skip(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, u = f"route-{unique}", unique
    kinds = ["debit", "credit", "refund_full", "refund_part", "chargeback", "DEBIT"]
    records = [{"id": n, "type": kinds[n % len(kinds)], "amount": n * 10} for n in range(60)]
    produce_json(kafka_bootstrap, topic, records)
    config = make_config(
        [
            {
                "name": f"r_{u}",
                "topics": [topic],
                "schema": {"id": "long", "type": "string", "amount": "long"},
                "route": {
                    "field": "type",
                    "tables": {
                        "debit": f"db.debits_{u}",
                        "credit": [f"db.credits_{u}", f"db.all_credit_{u}"],
                        "/refund_.*/": f"db.refunds_{u}",
                    },
                    "default": "skip",
                },
                "tables": {f"db.refunds_{u}": {"partition_by": ["bucket(4, id)"]}},
            }
        ]
    )

    [report] = run(config, until_caught_up=True, spark=spark)

    def ids(kind: str) -> list[tuple[int]]:
        return sorted((r["id"],) for r in records if r["type"] == kind)

    assert rows(spark, f"db.debits_{u}") == ids("debit")  # exact match: "DEBIT" is not "debit"
    assert rows(spark, f"db.credits_{u}") == ids("credit")
    assert rows(spark, f"db.all_credit_{u}") == ids("credit")
    assert rows(spark, f"db.refunds_{u}") == sorted(ids("refund_full") + ids("refund_part"))
    assert report.unmatched_skipped == len(ids("chargeback")) + len(ids("DEBIT"))
    # Rows, not records: the 10 credits are a row in each of their two tables.
    assert report.records_ingested == 10 + 2 * 10 + 20
    assert report.rows_written == report.tables
    assert report.tables == {
        f"db.all_credit_{u}": 10,
        f"db.credits_{u}": 10,
        f"db.debits_{u}": 10,
        f"db.refunds_{u}": 20,
    }
    # Per-table overrides: only the refunds table is partitioned.
    spec = spark.sql(f"SELECT * FROM lake.db.refunds_{u}.partitions").columns
    assert "partition" in spec
    # Each table's marker records the whole batch's offsets.
    for table in (f"debits_{u}", f"refunds_{u}", f"credits_{u}"):
        summary = spark.sql(
            f"SELECT summary FROM lake.db.{table}.snapshots ORDER BY committed_at DESC LIMIT 1"
        ).first()[0]
        assert json.loads(summary["frazil.offsets"]) == {topic: {"0": 30, "1": 30}}

    # A second run over nothing new writes nothing twice.
    [again] = run(config, until_caught_up=True, spark=spark)
    assert again.records_ingested == 0
    assert rows(spark, f"db.credits_{u}") == ids("credit")


def test_unmatched_records_fail_by_default(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic = f"route-fail-{unique}"
    produce_json(kafka_bootstrap, topic, [{"id": 1, "type": "a"}, {"id": 2, "type": "zzz"}])
    config = make_config(
        [
            {
                "name": f"f_{unique}",
                "topics": [topic],
                "schema": {"id": "long", "type": "string"},
                "route": {"field": "type", "tables": {"a": f"db.fa_{unique}"}},
            }
        ]
    )
    with pytest.raises(PipelineError) as info:
        run(config, until_caught_up=True, spark=spark)
    text = str(info.value)
    assert f"topic {topic} partition 1 offset 0: route: field type: value matches no table" in text
    assert "'zzz'" in text


def test_dynamic_route_creates_tables_with_their_own_columns(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, u = f"dyn-{unique}", unique
    records = [
        {"id": 1, "event": "Order.Created", "order": {"sku": "a", "qty": 2}},
        {"id": 2, "event": "order-paid", "paid": 12.5},
        {"id": 3, "event": "Order.Created", "order": {"sku": "b", "qty": 1}},
        {"id": 4, "event": "user signup!", "user": "ann"},
        {"id": 5, "event": None, "user": "nobody"},
    ]
    produce_json(kafka_bootstrap, topic, records)
    config = make_config(
        [
            {
                "name": f"d_{u}",
                "topics": [topic],
                "route": {
                    "field": "event",
                    "table": f"dyn_{u}.ev_{{value}}",
                    "default": f"dyn_{u}.unrouted",
                },
            }
        ]
    )

    [report] = run(config, until_caught_up=True, spark=spark)

    tables = sorted(r[1] for r in spark.sql(f"SHOW TABLES IN lake.dyn_{u}").collect())
    assert tables == ["ev_order_created", "ev_order_paid", "ev_user_signup_", "unrouted"]
    assert rows(spark, f"dyn_{u}.ev_order_created", "id, order.sku") == [(1, "a"), (3, "b")]
    # Each table has the columns its records hold values in, in the records' order.
    assert columns(spark, f"dyn_{u}.ev_order_created") == ["id", "event", "order"]
    assert columns(spark, f"dyn_{u}.ev_order_paid") == ["id", "event", "paid"]
    assert rows(spark, f"dyn_{u}.unrouted", "id, user") == [(5, "nobody")]
    assert report.records_ingested == 5

    # New event types later get their tables; an existing table gains a new column.
    produce_json(
        kafka_bootstrap,
        topic,
        [{"id": 6, "event": "order-paid", "paid": 1.0, "currency": "EUR"}, {"id": 7, "event": "x"}],
    )
    run(config, until_caught_up=True, spark=spark)
    assert rows(spark, f"dyn_{u}.ev_order_paid", "id, currency") == [(2, None), (6, "EUR")]
    assert rows(spark, f"dyn_{u}.ev_x") == [(7,)]


def test_rotated_topics_into_one_table_picked_up_while_running(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    u = unique
    produce_json(kafka_bootstrap, f"rot_{u}.20240101", [{"id": n} for n in range(5)])
    produce_json(kafka_bootstrap, f"rot_{u}.other", [{"id": 100}])
    config = make_config(
        [
            {
                "name": f"t_{u}",
                "topic_pattern": f"rot_{u}\\..*",
                "schema": {"id": "long"},
                "kafka_metadata": ["topic"],
                "route": {
                    "topic": f"rot_{u}\\.(\\d{{8}})",
                    "table": f"db.rot_{u}",
                    "default": "skip",
                },
                "trigger": "500ms",
            }
        ]
    )
    # Spark's pattern subscription finds new topics when it plans a batch.
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            run(config, spark=spark, stop_event=stop)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    try:
        _wait_for(lambda: _count(spark, f"db.rot_{u}") == 5, 120)
        produce_json(kafka_bootstrap, f"rot_{u}.20240102", [{"id": n} for n in range(10, 13)])
        _wait_for(lambda: _count(spark, f"db.rot_{u}") == 8, 120)
    finally:
        stop.set()
        thread.join(120)
    assert not errors
    assert rows(spark, f"db.rot_{u}", "id, _kafka_topic") == [
        *[(n, f"rot_{u}.20240101") for n in range(5)],
        *[(n, f"rot_{u}.20240102") for n in range(10, 13)],
    ]


def _count(spark: Any, table: str) -> int:
    try:
        return int(spark.sql(f"SELECT count(*) FROM lake.{table}").first()[0])
    except Exception:  # not created yet
        return -1


def _wait_for(condition: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError("condition not met in time")


def test_plan_names_a_topic_routes_tables_from_the_topics(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A route whose template takes the topic's name: ``plan`` names the table of each topic
    the pipeline reads now (Kafka's, for a topic pattern) and of each ``tables:`` entry, and
    says which exist."""
    from frazil.engine.explain import explain

    prefix = f"plt_{unique}"
    for name in ("Customers", "orders"):
        produce_json(kafka_bootstrap, f"{prefix}.inv.{name}", [{"id": 1}])
    spark.sql(f"CREATE TABLE lake.db.{prefix}_orders (id bigint) USING iceberg")
    config = make_config(
        [
            {
                "name": prefix,
                "topic_pattern": f"{prefix}\\.inv\\..*",
                "schema": {"id": "long"},
                "route": {"topic": f"{prefix}\\.inv\\.(\\w+)", "table": f"db.{prefix}_{{1}}"},
                "tables": {f"db.{prefix}_later": {"partition_by": []}},
            }
        ]
    )
    [explained] = explain(spark, config, [])
    assert explained.tables == (
        (f"db.{prefix}_customers", False),  # names as the run makes them: lower case
        (f"db.{prefix}_orders", True),
        (f"db.{prefix}_later", False),
    )
    assert explained.table_state() == "1 of 3 tables exist, others as the records name them"


def test_plan_describes_a_route(spark: Any, make_config: Any, unique: str) -> None:
    from frazil.engine.explain import explain

    config = make_config(
        [
            {
                "name": f"pl_{unique}",
                "topics": [f"plan-{unique}"],
                "schema": {"id": "long", "kind": "string"},
                "route": {"field": "kind", "table": "db.k_{value}", "default": "skip"},
            }
        ]
    )
    [explained] = explain(spark, config, [])
    assert explained.table == "db.k_{value} by kind"
    assert not explained.table_exists
    assert explained.table_state() == "tables as the records name them"
    assert ("route", "table db.k_{value} named by field kind; else skip") in explained.steps
    # A route naming its tables: which of them exist, one by one.
    spark.sql(f"CREATE TABLE lake.db.k_a_{unique} (id bigint, kind string) USING iceberg")
    static = make_config(
        [
            {
                **config.pipelines[0].model_dump(by_alias=True, exclude_none=True),
                "route": {
                    "field": "kind",
                    "tables": {"a": f"db.k_a_{unique}", "b": f"db.k_b_{unique}"},
                },
            }
        ]
    )
    [explained] = explain(spark, static, [])
    assert explained.tables == ((f"db.k_a_{unique}", True), (f"db.k_b_{unique}", False))
    assert not explained.table_exists and explained.table_state() == "1 of 2 tables exist"
    spark.sql(f"CREATE TABLE lake.db.k_b_{unique} (id bigint, kind string) USING iceberg")
    [explained] = explain(spark, static, [])
    assert explained.table_exists and explained.table_state() == "all 2 tables exist"
    assert explained.to_json()["tables"] == {f"db.k_a_{unique}": True, f"db.k_b_{unique}": True}
    # A route's tables have no one table's columns to show.
    assert explained.existing_schema is None
    with pytest.raises(ConfigError, match=r"route\.field: column 'nope' is not in the records"):
        explain(
            spark,
            make_config(
                [
                    {
                        **config.pipelines[0].model_dump(by_alias=True, exclude_none=True),
                        "route": {"field": "nope", "table": "db.k_{value}"},
                    }
                ]
            ),
            [],
        )


def test_records_a_routed_filter_drops_are_counted_once(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, u = f"routef-{unique}", unique
    records = [{"id": n, "type": ["debit", "credit"][n % 2], "amount": n} for n in range(20)]
    produce_json(kafka_bootstrap, topic, records)
    config = make_config(
        [
            {
                "name": f"rf_{u}",
                "topics": [topic],
                "schema": {"id": "long", "type": "string", "amount": "long"},
                "transforms": [{"filter": "amount >= 6"}],
                "route": {
                    "field": "type",
                    # A credit goes to two tables: filtered, it still counts once.
                    "tables": {"debit": f"db.fdebits_{u}", "credit": [f"db.fa_{u}", f"db.fb_{u}"]},
                },
            }
        ]
    )

    [report] = run(config, until_caught_up=True, spark=spark)

    assert report.filtered_skipped == 6
    assert rows(spark, f"db.fdebits_{u}") == [(n,) for n in range(6, 20, 2)]
    assert rows(spark, f"db.fa_{u}") == rows(spark, f"db.fb_{u}") == [(n,) for n in range(7, 20, 2)]


def test_values_sanitized_in_spark_as_in_python(spark: Any) -> None:
    from pyspark.sql import functions as F

    from frazil.route.rules import sanitize, sanitize_text

    # Every character of the Basic Multilingual Plane but surrogates, one per value and in
    # runs with ASCII around them, those whose lower case is ASCII (İ, the Kelvin sign), null.
    chars = [chr(cp) for cp in range(0x10000) if not 0xD800 <= cp <= 0xDFFF]
    values = [
        *chars,
        *("A" + "".join(chars[i : i + 50]) + "z" for i in range(0, len(chars), 50)),
        "İstanbul",
        "\u212aelvin",
        "ΣΑΣ Final",
        "x\U0001f600Y",
        "",
        "Order-Created  v2",
        None,
    ]
    # Beyond the BMP: every 61st code point (each lowers to itself or to a letter beyond ASCII).
    values += [chr(cp) + "Q" for cp in range(0x10000, 0x110000, 61)]
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i int, v string")
    expected = [None if v is None else sanitize_text(v) for v in values]
    # Generated code (the batch's stage) and Spark's interpreted evaluation alike.
    for whole_stage, factory in (("true", "CODEGEN_ONLY"), ("false", "NO_CODEGEN")):
        spark.conf.set("spark.sql.codegen.wholeStage", whole_stage)
        spark.conf.set("spark.sql.codegen.factoryMode", factory)
        try:
            selected = frame.select("i", sanitize(F.col("v")).alias("s")).collect()
        finally:
            spark.conf.unset("spark.sql.codegen.wholeStage")
            spark.conf.unset("spark.sql.codegen.factoryMode")
        got = {r["i"]: r["s"] for r in selected}
        wrong = [(v, got[i], expected[i]) for i, v in enumerate(values) if got[i] != expected[i]]
        assert not wrong, (factory, wrong[:5])


def test_invalid_utf8_values_sanitized_as_decoded(spark: Any) -> None:
    """Bytes that are not UTF-8 (a binary value cast to text) become part of a run, as
    Java decodes them: each malformed sequence one replacement character."""
    from pyspark.sql import functions as F

    from frazil.route.rules import sanitize

    values = [b"\xc3A-b", b"ok\xff\xfeZ", b"\xe2\x84", b"plain_1"]
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i int, v binary")
    got = dict(frame.select("i", sanitize(F.col("v")).alias("s")).collect())
    assert [got[i] for i in range(len(values))] == ["_a_b", "ok_z", "_", "plain_1"]


def test_a_routes_append_tables_then_written_by_key_are_warned_of_at_start(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, caplog: Any
) -> None:
    """Tables a route created for appends keep copy-on-write when the pipeline turns to
    upsert: the start says so for each, and the changes are merged right all the same."""
    import logging

    topic, u = f"rkey-{unique}", unique
    first = [{"id": n, "type": ["a", "b"][n % 2], "amount": n} for n in range(20)]
    produce_json(kafka_bootstrap, topic, first)

    def pipeline(write: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": f"rk_{u}",
            "topics": [topic],
            "schema": {"id": "long", "type": "string", "amount": "long"},
            "route": {"field": "type", "tables": {"a": f"db.rka_{u}", "b": f"db.rkb_{u}"}},
            "write": write,
        }

    run(make_config([pipeline({"mode": "append"})]), until_caught_up=True, spark=spark)
    # The same ids again, with new amounts: merged by key, not appended twice.
    produce_json(kafka_bootstrap, topic, [{**r, "amount": r["amount"] + 100} for r in first])
    upsert = make_config([pipeline({"mode": "upsert", "key": ["id"]})])
    with caplog.at_level(logging.WARNING, logger="frazil.sink.table"):
        run(upsert, until_caught_up=True, spark=spark)

    warned = sorted(
        r.getMessage().split(":")[0] for r in caplog.records if "written by key" in r.getMessage()
    )
    assert warned == [f"table db.rka_{u}", f"table db.rkb_{u}"]
    assert rows(spark, f"db.rka_{u}", "id, amount") == [(n, n + 100) for n in range(0, 20, 2)]
    assert rows(spark, f"db.rkb_{u}", "id, amount") == [(n, n + 100) for n in range(1, 20, 2)]
