"""Schema evolution while running: new fields, promotions, renames, drops, incompatible types."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from frazil.decode.schema_registry import header
from frazil.engine.runner import run
from frazil.errors import DecodeError, PipelineError
from frazil.progress.events import Event, SchemaEvolved
from frazil.sink.evolution import EVOLUTION_PROPERTY
from tests.integration.test_avro import avro_bytes, produce_raw
from tests.integration.test_routing import produce_json

pytestmark = pytest.mark.integration


def _schema(spark: Any, table: str) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in spark.table(f"lake.{table}").schema]


def _evolutions(spark: Any, table: str) -> list[dict[str, Any]]:
    props = spark.sql(f"SHOW TBLPROPERTIES lake.{table}").collect()
    return [
        json.loads(r["value"])
        for r in sorted(
            props,
            key=lambda r: (
                int(r["key"].rsplit(".", 1)[1]) if r["key"].startswith(EVOLUTION_PROPERTY) else 0
            ),
        )
        if r["key"].startswith(EVOLUTION_PROPERTY)
    ]


def test_inferred_json_learns_new_fields_in_the_batch_that_brings_them(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"evo-{unique}", f"db.evo_{unique}"
    old = [
        {"id": n, "info": {"a": n}, "items": [{"x": n}], "created": "2026-01-01T00:00:00Z"}
        for n in range(1000)
    ]
    new = [
        {
            "id": 1000 + n,
            "info": {"a": n, "b": f"b{n}"},  # nested field in a struct
            "items": [{"x": n, "y": True}],  # new field in list elements
            "extra": {"deep": n},  # new top-level struct
            "created": "2026-01-02T00:00:00Z",
        }
        for n in range(10)
    ]
    # One partition: the schema is inferred from the first 1000 records (old shape only).
    produce_json(kafka_bootstrap, topic, old + new, partitions=1)
    events: list[Event] = []
    config = make_config(
        [{"name": f"e_{unique}", "topics": [topic], "table": table, "max_offsets_per_trigger": 500}]
    )

    [report] = run(config, until_caught_up=True, spark=spark, on_event=events.append)

    assert report.records_ingested == 1010
    # In the records' order (Spark's inference sorts by name), new fields where they are met.
    assert _schema(spark, table) == [
        ("id", "bigint"),
        ("info", "struct<a:bigint,b:string>"),
        ("items", "array<struct<x:bigint,y:boolean>>"),
        ("created", "timestamp"),
        ("extra", "struct<deep:bigint>"),
    ]
    got = spark.sql(
        f"SELECT id, info.b, items[0].y, extra.deep FROM lake.{table} WHERE id >= 999 ORDER BY id"
    ).collect()
    assert [tuple(r) for r in got[:3]] == [
        (999, None, None, None),
        (1000, "b0", True, 0),
        (1001, "b1", True, 1),
    ]
    # Applied in the batch that needed it (the third), recorded with the table.
    evolved = [e for e in events if isinstance(e, SchemaEvolved)]
    assert [e.batch_id for e in evolved] == [2]
    [record] = _evolutions(spark, table)
    assert record["pipeline"] == f"e_{unique}" and record["batch"] == 2
    assert sorted(record["changes"]) == [
        "add column extra struct<deep:bigint>",
        "add field info.b string",
        "add field items.element.y boolean",
    ]
    assert sorted(report.schema_changes) == sorted(f"{table}: {c}" for c in record["changes"])


_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "int"},
        {
            "name": "attrs",
            "type": {
                "type": "map",
                "values": {
                    "type": "record",
                    "name": "Attr",
                    "fields": [{"name": "p", "type": "long"}],
                },
            },
        },
    ],
}
_V2 = {
    **_V1,
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "long"},  # int -> long: a promotion
        {
            "name": "attrs",
            "type": {
                "type": "map",
                "values": {
                    "type": "record",
                    "name": "Attr",
                    "fields": [
                        {"name": "p", "type": "long"},
                        {"name": "q", "type": ["null", "string"], "default": None},
                    ],
                },
            },
        },
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def test_a_newer_avro_version_met_mid_run_evolves_the_table(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    # The subject holds v1 when the run starts; v2 lives under another subject (as a
    # RecordNameStrategy producer would write it), so it is met only in a later batch.
    topic, table = f"evo-avro-{unique}", f"db.evo_avro_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    v1 = client.register_schema(f"{topic}-value", Schema(json.dumps(_V1), "AVRO"))
    v2 = client.register_schema(f"other-{unique}", Schema(json.dumps(_V2), "AVRO"))
    values = [
        header(v1) + avro_bytes(_V1, {"id": f"a{n}", "amount": n, "attrs": {"k": {"p": n}}})
        for n in range(3)
    ] + [
        header(v2)
        + avro_bytes(
            _V2,
            {"id": "b", "amount": 2**40, "attrs": {"k": {"p": 7, "q": "qq"}}, "note": "hi"},
        )
    ]
    produce_raw(kafka_bootstrap, topic, values, partitions=1)
    config = make_config(
        [
            {
                "name": f"a_{unique}",
                "topics": [topic],
                "table": table,
                "format": "avro",
                "max_offsets_per_trigger": 3,
            }
        ],
        schema_registry={"url": schema_registry_url},
    )

    [report] = run(config, until_caught_up=True, spark=spark)

    assert report.records_ingested == 4
    assert _schema(spark, table) == [
        ("id", "string"),
        ("amount", "bigint"),
        ("attrs", "map<string,struct<p:bigint,q:string>>"),
        ("note", "string"),
    ]
    rows = spark.sql(
        f"SELECT id, amount, attrs['k'].p, attrs['k'].q, note FROM lake.{table} ORDER BY id"
    ).collect()
    assert [tuple(r) for r in rows] == [
        ("a0", 0, 0, None, None),
        ("a1", 1, 1, None, None),
        ("a2", 2, 2, None, None),
        ("b", 2**40, 7, "qq", "hi"),
    ]
    [record] = _evolutions(spark, table)
    assert sorted(record["changes"]) == [
        "add column note string",
        "add field attrs.value.q string",
        "widen amount int to bigint",
    ]


def test_an_incompatible_type_fails_its_records_naming_field_and_types(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"evo-bad-{unique}", f"db.evo_bad_{unique}"
    produce_json(kafka_bootstrap, topic, [{"id": 1, "amount": 5}], partitions=1)
    pipeline = {"name": f"b_{unique}", "topics": [topic], "table": table}
    run(
        make_config([{**pipeline, "schema": {"id": "long", "amount": "long"}}]),
        until_caught_up=True,
        spark=spark,
    )
    produce_json(kafka_bootstrap, topic, [{"id": 2, "amount": "five"}, {"id": 3}], partitions=1)

    # The producer now sends text: the declared schema follows, the table cannot.
    changed = make_config([{**pipeline, "schema": {"id": "long", "amount": "string"}}])
    with pytest.raises(PipelineError) as info:
        run(changed, until_caught_up=True, spark=spark)

    text = str(info.value)
    assert "1 record(s) in batch" in text
    assert (
        f"topic {topic} partition 0 offset 1: schema: field amount is string in the records but "
        f"bigint in table db.evo_bad_{unique}: Iceberg cannot change a bigint column to string"
    ) in text
    # Nothing changed in the table: same schema, same rows.
    assert _schema(spark, table) == [("id", "bigint"), ("amount", "bigint")]
    assert [tuple(r) for r in spark.table(f"lake.{table}").collect()] == [(1, 5)]


def test_freeze_refuses_new_fields_and_a_declared_schema_ignores_them_under_evolve(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic = f"evo-freeze-{unique}"
    produce_json(kafka_bootstrap, topic, [{"id": 1}, {"id": 2, "new": "x"}], partitions=1)
    declared = {
        "name": f"d_{unique}",
        "topics": [topic],
        "table": f"db.fz_d_{unique}",
        "schema": {"id": "long"},
    }

    [report] = run(make_config([declared]), until_caught_up=True, spark=spark)
    assert report.records_ingested == 2
    assert _schema(spark, f"db.fz_d_{unique}") == [("id", "bigint")]

    for pipeline in (
        {
            **declared,
            "name": f"f_{unique}",
            "table": f"db.fz_f_{unique}",
            "schema_evolution": "freeze",
        },
        {
            "name": f"i_{unique}",
            "topics": [topic],
            "table": f"db.fz_i_{unique}",
            "schema_evolution": "freeze",
            "starting_offsets": "earliest",
        },
    ):
        config = make_config([pipeline])
        if "schema" not in pipeline:
            # Inferred under freeze: the table's schema (here: made from the first record
            # only) is the contract.
            from pyspark.sql.types import LongType, StructField, StructType

            spark.createDataFrame([], StructType([StructField("id", LongType())])).writeTo(
                f"lake.db.fz_i_{unique}"
            ).create()
        with pytest.raises(PipelineError) as info:
            run(config, until_caught_up=True, spark=spark)
        assert (
            f"topic {topic} partition 0 offset 1: decode: fields not in the table's schema "
            "(schema_evolution: freeze)"
        ) in str(info.value)


def test_a_routed_upsert_under_freeze_names_the_record_a_table_refuses(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A routed upsert without a dead-letter queue (the cached way): a record with a field
    its table's frozen schema lacks stops the batch with a message naming it, read from the
    batch's rows before they are let go."""
    a, b = f"evo-rfz-{unique}-a", f"evo-rfz-{unique}-b"
    produce_json(kafka_bootstrap, a, [{"id": 1, "v": 1}], partitions=1)
    produce_json(kafka_bootstrap, b, [{"id": 1, "v": 2, "extra": "x"}], partitions=1)
    tables = f"db.rfz_{unique}_{{1}}"
    from pyspark.sql.types import LongType, StructField, StructType

    frozen = StructType([StructField("id", LongType()), StructField("v", LongType())])
    spark.createDataFrame([], frozen).writeTo(f"lake.{tables.replace('{1}', 'b')}").create()
    pipeline = {
        "name": f"rfz_{unique}", "topics": [a, b], "schema_evolution": "freeze",
        "route": {"topic": f"evo-rfz-{unique}-(\\w+)", "table": tables},
        "write": {"mode": "upsert", "key": ["id"]},
    }  # fmt: skip
    with pytest.raises(PipelineError) as info:
        run(make_config([pipeline]), until_caught_up=True, spark=spark)
    assert f"topic {b} partition 0 offset 0" in str(info.value)
    assert "schema_evolution: freeze" in str(info.value)
    assert spark.table(f"lake.{tables.replace('{1}', 'b')}").count() == 0


def test_a_column_renamed_or_dropped_while_running_keeps_its_data_by_field_id(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"evo-rename-{unique}", f"db.evo_rename_{unique}"
    schema = {"id": "long", "amount": "long", "note": "string"}
    produce_json(kafka_bootstrap, topic, [{"id": n, "amount": n, "note": "a"} for n in range(3)])
    config = make_config(
        [
            {
                "name": f"r_{unique}",
                "topics": [topic],
                "table": table,
                "schema": schema,
                "trigger": "500ms",
            }
        ]
    )
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            run(config, spark=spark, stop_event=stop)
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    try:
        _wait_for(lambda: _count(spark, table) == 3)
        spark.sql(f"ALTER TABLE lake.{table} RENAME COLUMN amount TO amount_usd")
        spark.sql(f"ALTER TABLE lake.{table} DROP COLUMN note")
        produce_json(
            kafka_bootstrap,
            topic,
            [{"id": 10 + n, "amount": 100 + n, "note": "b"} for n in range(3)],
        )
        _wait_for(lambda: _count(spark, table) == 6)
    finally:
        stop.set()
        thread.join(120)
    assert not errors, errors
    assert _schema(spark, table) == [("id", "bigint"), ("amount_usd", "bigint")]
    rows = sorted(tuple(r) for r in spark.table(f"lake.{table}").collect())
    assert rows == [(0, 0), (1, 1), (2, 2), (10, 100), (11, 101), (12, 102)]


@pytest.mark.parametrize("routed", [False, True], ids=["table", "routed"])
def test_a_nested_field_renamed_or_dropped_while_running_keeps_its_data_by_field_id(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    unique: str,
    routed: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The same as at the top level, in a struct, in a list's element and in a map's value;
    # routed, the batch goes the one job's way (the table takes its columns as they are).
    topic, table = f"evo-nrename-{unique}", f"db.evo_nrename_{unique}"
    inner = "struct<a:long,b:string,c:string>"
    schema = {
        "id": "long",
        "payload": inner,
        "items": f"array<{inner}>",
        "attrs": f"map<string,{inner}>",
    }

    def record(n: int, note: str) -> dict[str, Any]:
        value = {"a": n, "b": f"b{n}", "c": note}
        return {"id": n, "payload": value, "items": [value], "attrs": {"k": value}}

    produce_json(kafka_bootstrap, topic, [record(n, "x") for n in range(3)])
    config = make_config(
        [
            {
                "name": f"nr_{unique}",
                "topics": [topic],
                **({"route": {"topic": topic, "table": table}} if routed else {"table": table}),
                "schema": schema,
                "trigger": "500ms",
            }
        ]
    )
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            run(config, spark=spark, stop_event=stop)
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    try:
        _wait_for(lambda: _count(spark, table) == 3)
        for path in ("payload", "items.element", "attrs.value"):
            spark.sql(f"ALTER TABLE lake.{table} RENAME COLUMN {path}.a TO alpha")
            spark.sql(f"ALTER TABLE lake.{table} DROP COLUMN {path}.c")
        caplog.clear()
        caplog.set_level(logging.DEBUG, logger="frazil.engine.batch")
        produce_json(kafka_bootstrap, topic, [record(10 + n, "y") for n in range(3)])
        _wait_for(lambda: _count(spark, table) == 6)
    finally:
        stop.set()
        thread.join(120)
    assert not errors, errors
    if routed:
        # The table takes the batch's columns as they are: no batch goes the general way.
        ways = [r.getMessage() for r in caplog.records if r.name == "frazil.engine.batch"]
        assert any("in one job" in m for m in ways), ways
        assert not any("goes the general way" in m for m in ways), ways
    # Nothing was added back: frazil changed no schema.
    assert _evolutions(spark, table) == []
    kept = "struct<alpha:bigint,b:string>"
    assert _schema(spark, table) == [
        ("id", "bigint"),
        ("payload", kept),
        ("items", f"array<{kept}>"),
        ("attrs", f"map<string,{kept}>"),
    ]
    got = spark.sql(f"SELECT to_json(struct(*)) FROM lake.{table} ORDER BY id").collect()
    assert [json.loads(r[0]) for r in got] == [
        {
            "id": n,
            "payload": {"alpha": n, "b": f"b{n}"},
            "items": [{"alpha": n, "b": f"b{n}"}],
            "attrs": {"k": {"alpha": n, "b": f"b{n}"}},
        }
        for n in (0, 1, 2, 10, 11, 12)
    ]


def _count(spark: Any, table: str) -> int:
    return int(spark.sql(f"SELECT count(*) FROM lake.{table}").first()[0])


def _wait_for(condition: Any, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception:  # the table may not exist yet
            pass
        time.sleep(0.5)
    raise AssertionError("condition not met in time")


def test_decimal_and_float_promotions_and_identifier_fields(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"evo-wide-{unique}", f"db.evo_wide_{unique}"
    produce_json(kafka_bootstrap, topic, [{"id": 1, "price": "1.25", "ratio": 0.5}], partitions=1)
    pipeline = {
        "name": f"w_{unique}",
        "topics": [topic],
        "table": table,
        "identifier_fields": ["id"],
    }
    narrow = {"id": "long", "price": "decimal(6,2)", "ratio": "float"}
    run(make_config([{**pipeline, "schema": narrow}]), until_caught_up=True, spark=spark)
    produce_json(
        kafka_bootstrap, topic, [{"id": 2, "price": "123456789.5", "ratio": 1e300}], partitions=1
    )

    wide = {"id": "long", "price": "decimal(12,2)", "ratio": "double"}
    [report] = run(make_config([{**pipeline, "schema": wide}]), until_caught_up=True, spark=spark)

    assert sorted(c.split(": ", 1)[1] for c in report.schema_changes) == [
        "widen price decimal(6,2) to decimal(12,2)",
        "widen ratio float to double",
    ]
    assert _schema(spark, table) == [
        ("id", "bigint"),
        ("price", "decimal(12,2)"),
        ("ratio", "double"),
    ]
    rows = sorted(tuple(r) for r in spark.table(f"lake.{table}").collect())
    assert [(r[0], str(r[1]), r[2]) for r in rows] == [(1, "1.25", 0.5), (2, "123456789.50", 1e300)]
    # The identifier field is required: a record without it fails, naming it.
    produce_json(kafka_bootstrap, topic, [{"id": None, "price": "1", "ratio": 1.0}], partitions=1)
    with pytest.raises(PipelineError) as info:
        run(make_config([{**pipeline, "schema": wide}]), until_caught_up=True, spark=spark)
    assert (
        f"offset 2: schema: field id is null but required in table {table} (an identifier field)"
        in str(info.value)
    )
    # The detail shows what the record does hold (as the table would get it).
    assert """'{"price":1.00,"ratio":1.0}'""" in str(info.value)


def test_a_not_null_column_is_made_optional_under_evolve(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"evo-req-{unique}", f"db.evo_req_{unique}"
    spark.sql(f"CREATE TABLE lake.{table} (id bigint NOT NULL, v string) USING iceberg")
    produce_json(kafka_bootstrap, topic, [{"id": 1, "v": "a"}, {"v": "b"}], partitions=1)
    pipeline = {"name": f"q_{unique}", "topics": [topic], "table": table}
    config = make_config([{**pipeline, "schema": {"id": "long", "v": "string"}}])

    [report] = run(config, until_caught_up=True, spark=spark)

    assert [c.split(": ", 1)[1] for c in report.schema_changes] == ["make id optional"]
    assert [f.nullable for f in spark.table(f"lake.{table}").schema] == [True, True]
    rows = spark.sql(f"SELECT id, v FROM lake.{table} ORDER BY v").collect()
    assert [tuple(r) for r in rows] == [(1, "a"), (None, "b")]


def test_aliases_feed_one_column_from_several_source_fields(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    # Producers moving from `amt` to `amount`: both land in the table's `amount`.
    topic, table = f"evo-alias-{unique}", f"db.evo_alias_{unique}"
    produce_json(
        kafka_bootstrap, topic, [{"id": 1, "amt": 5}, {"id": 2, "amount": 7}], partitions=1
    )
    pipeline = {
        "name": f"al_{unique}",
        "topics": [topic],
        "table": table,
        "schema": {"id": "long", "amount": "long", "amt": "long"},
        "aliases": {"amt": "amount"},
    }

    run(make_config([pipeline]), until_caught_up=True, spark=spark)

    assert _schema(spark, table) == [("id", "bigint"), ("amount", "bigint")]
    rows = sorted(tuple(r) for r in spark.table(f"lake.{table}").collect())
    assert rows == [(1, 5), (2, 7)]


def test_a_sampled_record_holding_a_key_twice_infers_one_column_of_its_last_value(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"twice-{unique}", f"db.twice_{unique}"
    values: list[bytes | None] = [
        json.dumps({"id": n, "kind": "abc"[n % 3], "m": {"x": n}}).encode() for n in range(20)
    ]
    # Both at the top and nested: Spark's inference gave each field twice, and the pipeline
    # refused to start ("column 'kind' comes twice").
    values[5] = b'{"id": 5, "kind": 7, "kind": "c", "m": {"x": 0, "x": 5}}'
    produce_raw(kafka_bootstrap, topic, values, partitions=1)
    config = make_config([{"name": f"t_{unique}", "topics": [topic], "table": table}])

    [report] = run(config, until_caught_up=True, spark=spark)

    assert report.records_ingested == 20
    assert _schema(spark, table) == [
        ("id", "bigint"), ("kind", "string"), ("m", "struct<x:bigint>")
    ]  # fmt: skip
    got = spark.sql(f"SELECT id, kind, m.x FROM lake.{table} ORDER BY id").collect()
    assert [tuple(r) for r in got] == [(n, "abc"[n % 3], n) for n in range(20)]


def test_inferred_keys_holding_a_dot_or_a_backtick_are_columns_of_their_own(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"dots-{unique}", f"db.dots_{unique}"
    values: list[bytes | None] = [
        json.dumps({"id": n, "a.b": f"x{n}", "c`d": n * 10}).encode() for n in range(5)
    ]
    values.append(json.dumps({"id": 5}).encode())
    produce_raw(kafka_bootstrap, topic, values, partitions=1)
    config = make_config([{"name": f"t_{unique}", "topics": [topic], "table": table}])

    # Each run failed at its write: `a.b` was read as field b of a column a.
    [report] = run(config, until_caught_up=True, spark=spark)

    assert report.records_ingested == 6
    assert _schema(spark, table) == [("id", "bigint"), ("a.b", "string"), ("c`d", "bigint")]
    got = spark.sql(f"SELECT id, `a.b`, `c``d` FROM lake.{table} ORDER BY id").collect()
    assert [tuple(r) for r in got] == [(n, f"x{n}", n * 10) for n in range(5)] + [(5, None, None)]


def test_a_json_field_named_like_frazils_own_columns_stops_the_run_before_it_writes(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"reserved-{unique}", f"db.reserved_{unique}"
    produce_raw(
        kafka_bootstrap, topic, [json.dumps({"id": n}).encode() for n in range(5)], partitions=1
    )
    config = make_config([{"name": f"t_{unique}", "topics": [topic], "table": table}])
    run(config, until_caught_up=True, spark=spark)
    # Learned mid-run, the field and frazil's operation column were one batch entry: the
    # "skip" record was dropped as filtered and the others' values were lost.
    later = [{"id": 5, "__frazil_op": "skip"}, {"id": 6, "__frazil_op": "x"}]
    produce_raw(kafka_bootstrap, topic, [json.dumps(v).encode() for v in later], partitions=1)

    for _ in range(2):  # and again on restart: the records wait in Kafka
        with pytest.raises(DecodeError, match="the value's field '__frazil_op' takes a name"):
            run(config, until_caught_up=True, spark=spark)

    got = spark.sql(f"SELECT id FROM lake.{table} ORDER BY id").collect()
    assert [r.id for r in got] == list(range(5))
    assert _schema(spark, table) == [("id", "bigint")]


def test_inferred_nested_keys_differing_only_in_case_stop_the_run_before_a_table_is_made(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"cases-{unique}", f"db.cases_{unique}"
    values = [json.dumps({"id": n, "m": {"x": n, "X": -n}}).encode() for n in range(3)]
    produce_raw(kafka_bootstrap, topic, values, partitions=1)
    config = make_config([{"name": f"t_{unique}", "topics": [topic], "table": table}])

    # The table was made with m.x and m.X, and no Spark query could read it.
    with pytest.raises(DecodeError, match=r"the value's field 'm' holds fields '[xX]' and '[xX]'"):
        run(config, until_caught_up=True, spark=spark)

    assert not spark.catalog.tableExists(f"lake.{table}")


@pytest.mark.parametrize(
    ("values", "why"),
    [
        (
            [b"{}", b" {} ", None],
            "the 2 sampled JSON objects hold no field to make a column of (empty, {}, or "
            "malformed)",
        ),
        (
            [b'[{"id": 1}]', b'[{"id": 2}, {"id": 3}]', b'"text"'],
            "none of the 3 sampled records is a JSON object (2 arrays, 1 other (a string, a "
            "number, null or malformed)), and a JSON object's fields are what become columns",
        ),
    ],
)
def test_inference_from_records_that_are_no_objects_with_fields_says_so(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, values: Any, why: str
) -> None:
    topic = f"noobj-{unique}"
    produce_raw(kafka_bootstrap, topic, values, partitions=1)
    config = make_config([{"name": f"t_{unique}", "topics": [topic], "table": f"db.no_{unique}"}])

    # Arrays' elements were inferred as the records (every record then a dead letter); {}
    # was called "not JSON objects".
    with pytest.raises(PipelineError) as caught:
        run(config, until_caught_up=True, spark=spark)

    assert str(caught.value) == (
        f"pipeline 't_{unique}': cannot infer a schema: {why}; declare pipelines[].schema, or "
        "land each value whole with variant: <column>"
    )


def test_inference_reads_the_objects_among_arrays(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, dead = f"mixobj-{unique}", f"db.mixobj_{unique}", f"db.mixdead_{unique}"
    values: list[bytes | None] = [b'[{"x": 1}]', b'{"id": 1}', b'[{"x": 2}]', b'{"id": 2}']
    produce_raw(kafka_bootstrap, topic, values, partitions=1)
    config = make_config(
        [{"name": f"t_{unique}", "topics": [topic], "table": table,
          "errors": {"tolerance": "all", "dlq_table": dead}}]
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    assert _schema(spark, table) == [("id", "bigint")]
    assert sorted(r.id for r in spark.table(f"lake.{table}").collect()) == [1, 2]
    assert sorted(r.offset for r in spark.table(f"lake.{dead}").collect()) == [0, 2]
