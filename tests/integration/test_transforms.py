"""The transform chain on hand-made Kafka rows, in the session's JVM: values, types, marks.

Each test decodes JSON values into user columns over the column contract
(:func:`frazil.source.raw.to_contract`), applies a chain built by
:func:`frazil.transform.chain.build_chain`, and reads the one ``select`` back. A bad value
must mark its record (stage ``transform``), never fail the job: Spark runs with ANSI on.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest

from frazil import columns as c
from frazil.config import parse_config
from frazil.config.pipeline import PipelineConfig
from frazil.errors import ConfigError, PipelineError
from frazil.sink.modes import append_mode
from frazil.source.raw import to_contract
from frazil.transform.chain import TransformChain, build_chain
from frazil.transform.metadata import add_metadata, metadata_fields

pytestmark = pytest.mark.integration

_RAW = "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp"
_AT = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


def _pipeline(schema: dict[str, str], transforms: list[Any], **extra: Any) -> PipelineConfig:
    data = {
        "name": "p",
        "topics": ["t"],
        "table": "db.t",
        "schema": schema,
        "transforms": transforms,
        **extra,
    }
    return parse_config({"pipelines": [data]}).pipelines[0]


def _value_schema(spark: Any, pipeline: PipelineConfig) -> Any:
    from pyspark.sql.types import StructType

    declared = pipeline.value.schema_
    assert declared is not None
    return StructType.fromDDL(", ".join(f"`{n}` {t}" for n, t in declared.items()))


def _chain(spark: Any, pipeline: PipelineConfig) -> TransformChain:
    from pyspark.sql.types import StructType

    source = StructType([*_value_schema(spark, pipeline).fields, *metadata_fields(pipeline)])
    return build_chain(spark, pipeline, source)


def _run(
    spark: Any, schema: dict[str, str], transforms: list[Any], values: list[Any], **extra: Any
) -> tuple[list[dict[str, Any]], TransformChain]:
    """Decode ``values`` (dicts, raw bytes or None) and apply the chain; rows by offset."""
    from pyspark.sql import functions as F

    pipeline = _pipeline(schema, transforms, **extra)
    chain = _chain(spark, pipeline)
    encoded = [v if v is None or isinstance(v, bytes) else json.dumps(v).encode() for v in values]
    raw = spark.createDataFrame([(b"k", v, "t", 3, i, _AT) for i, v in enumerate(encoded)], _RAW)
    batch = to_contract(raw.columns)
    parsed = F.from_json(batch[c.VALUE].cast("string"), _value_schema(spark, pipeline))
    for f in _value_schema(spark, pipeline).fields:
        batch[f.name] = parsed[f.name]
    batch = add_metadata(batch, pipeline)
    out = append_mode(chain.apply(batch))
    frame = raw.select(*[col.alias(name) for name, col in out.items()])
    # Timestamps as UTC text: the Python side would shift them to its local zone.
    stamps = [f.name for f in frame.schema.fields if f.dataType.typeName() == "timestamp"]
    rendered = frame.select(
        *[
            F.date_format(name, "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX").alias(name)
            if name in stamps
            else F.col(f"`{name}`")
            for name in frame.columns
        ]
    )
    rows = [r.asDict(recursive=True) for r in rendered.orderBy(c.OFFSET).collect()]
    return rows, chain


def _user(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not c.is_internal(k)}


def _error(row: dict[str, Any]) -> tuple[str, str] | None:
    error = row[c.ERROR]
    if error is None:
        return None
    assert error["stage"] == c.STAGE_TRANSFORM
    return error["reason"], error["detail"]


_NESTED = {
    "id": "string",
    "customer": "struct<name:string,address:struct<city:string,geo:struct<lat:double>>>",
    "tags": "array<struct<k:string>>",
    "attrs": "map<string,string>",
}
_CUSTOMER = {"name": "Ann", "address": {"city": "Kyoto", "geo": {"lat": 35.0}}}


def test_flatten_with_separator_and_depth_keeps_arrays_and_maps(spark: Any) -> None:
    value = {"id": "a", "customer": _CUSTOMER, "tags": [{"k": "x"}], "attrs": {"m": "n"}}
    flat = {"flatten": {"separator": "__", "max_depth": 2}}

    rows, chain = _run(spark, _NESTED, [flat], [value, {"id": "b"}])

    assert chain.schema.simpleString() == (
        "struct<id:string,customer__name:string,customer__address__city:string,"
        "customer__address__geo:struct<lat:double>,tags:array<struct<k:string>>,"
        "attrs:map<string,string>>"
    )
    assert _user(rows[0]) == {
        "id": "a",
        "customer__name": "Ann",
        "customer__address__city": "Kyoto",
        "customer__address__geo": {"lat": 35.0},
        "tags": [{"k": "x"}],
        "attrs": {"m": "n"},
    }
    assert rows[1]["customer__name"] is None and rows[1][c.ERROR] is None
    every = _chain(spark, _pipeline(_NESTED, [{"flatten": None}]))
    assert [f.name for f in every.schema.fields][:4] == [
        "id", "customer_name", "customer_address_city", "customer_address_geo_lat",
    ]  # fmt: skip


def test_rename_in_place_and_nested_fields_move_out(spark: Any) -> None:
    rename = {"rename": {"id": "payment_id", "customer.address.city": "city", "attrs": "extra"}}

    rows, chain = _run(spark, _NESTED, [rename], [{"id": "a", "customer": _CUSTOMER}])

    assert [f.name for f in chain.schema.fields] == [
        "payment_id", "customer", "tags", "extra", "city",
    ]  # fmt: skip
    assert rows[0]["payment_id"] == "a" and rows[0]["city"] == "Kyoto"
    assert rows[0]["customer"] == {"name": "Ann", "address": {"geo": {"lat": 35.0}}}
    # A struct left without fields disappears with its last field.
    _, emptied = _run(spark, _NESTED, [{"rename": {"customer.address.geo.lat": "lat"}}], [])
    assert emptied.schema["customer"].dataType.simpleString() == (
        "struct<name:string,address:struct<city:string>>"
    )


def test_drop_columns_and_nested_fields(spark: Any) -> None:
    drop = {"drop": ["tags", "customer.address.geo", "attrs"]}

    rows, chain = _run(spark, _NESTED, [drop], [{"id": "a", "customer": _CUSTOMER}])

    assert chain.schema.simpleString() == (
        "struct<id:string,customer:struct<name:string,address:struct<city:string>>>"
    )
    assert _user(rows[0]) == {"id": "a", "customer": {"name": "Ann", "address": {"city": "Kyoto"}}}


def test_cast_marks_values_that_do_not_convert(spark: Any) -> None:
    schema = {"amount": "string", "m": "struct<v:string,w:int>"}
    cast = {"cast": {"amount": "decimal(12,2)", "m.v": "double"}}
    values = [
        {"amount": "12.345", "m": {"v": "1.5", "w": 1}},
        {"amount": "abc", "m": {"v": "2"}},
        {"amount": "99999999999999", "m": {"v": "x"}},
        {"amount": None, "m": {"v": "nope"}},
        {},
    ]

    rows, chain = _run(spark, schema, [cast], values)

    assert chain.schema.simpleString() == "struct<amount:decimal(12,2),m:struct<v:double,w:int>>"
    assert (rows[0]["amount"], rows[0]["m"]) == (Decimal("12.35"), {"v": 1.5, "w": 1})
    assert rows[0][c.ERROR] is None
    assert _error(rows[1]) == ("cast: amount 'abc' is not decimal(12,2)", "abc")
    assert rows[1]["amount"] is None and rows[1]["m"]["v"] == 2.0
    assert _error(rows[2]) == (
        "cast: amount '99999999999999' is not decimal(12,2)",
        "99999999999999",
    )
    assert _error(rows[3]) == ("cast: m.v 'nope' is not double", "nope")
    assert rows[4][c.ERROR] is None
    # A bad record is never skipped by the write mode: only its error stops it.
    assert [r[c.OP] for r in rows] == [c.OP_APPEND] * 5


def test_derive_sequential_nested_references_and_ansi_failures(spark: Any) -> None:
    schema = {
        "amount": "long",
        "s": "string",
        "customer": "struct<name:string>",
        "xs": "array<int>",
        "items": "array<struct<price:double>>",
    }
    derive = {
        "derive": {
            "amount_jpy": "amount * 150",
            "label": "upper(customer.name) || '-' || amount_jpy",
            "amount": "amount + 1",
            "total": "aggregate(transform(xs, x -> x * amount), 0L, (acc, y) -> acc + y)",
            "spent": "aggregate(items, 0D, (acc, i) -> acc + i.price)",
            # The same raising subexpression in two columns: Spark would evaluate it once,
            # before both, if transforms did not keep it inside their guard.
            "n": "cast(s AS int) * 2",
            "m": "cast(s AS int) * 3",
        }
    }
    values = [
        {
            "amount": 2,
            "s": "5",
            "customer": {"name": "ann"},
            "xs": [1, 2],
            "items": [{"price": 1.5}, {"price": 2}],
        },
        {"amount": 9223372036854775807, "s": "7", "customer": {"name": "bo"}, "xs": []},
        {"amount": 1, "s": "x", "customer": None, "xs": None},
    ]

    rows, chain = _run(spark, schema, [derive], values)

    names = [f.name for f in chain.schema.fields]
    assert names == [
        "amount", "s", "customer", "xs", "items", "amount_jpy", "label", "total", "spent", "n", "m",
    ]  # fmt: skip
    assert chain.schema["amount_jpy"].dataType.simpleString() == "bigint"
    first = rows[0]
    assert (first["amount"], first["amount_jpy"], first["label"]) == (3, 300, "ANN-300")
    assert (first["total"], first["spent"], first["n"], first["m"]) == (9, 3.5, 10, 15)
    assert first[c.ERROR] is None
    # Overflow under ANSI: a null and a mark quoting the inputs, not a failed job.
    assert rows[1]["amount_jpy"] is None
    assert _error(rows[1]) == (
        "derive: amount_jpy = amount * 150 failed",
        '{"amount":9223372036854775807}',
    )
    assert rows[2]["n"] is None and rows[2]["m"] is None
    assert _error(rows[2]) == ("derive: n = cast(s AS int) * 2 failed", '{"s":"x"}')


def test_filter_skips_only_records_without_an_error(spark: Any) -> None:
    schema = {"type": "string", "amount": "string"}
    transforms = [
        {"cast": {"amount": "int"}},
        {"filter": "type <> 'test'"},
        # After the filter: a skipped record's bad value is no error (it is not written).
        {"derive": {"ratio": "10 / amount"}},
    ]
    values = [
        {"type": "sale", "amount": "5"},
        {"type": "test", "amount": "5"},
        {"type": "test", "amount": "bad"},
        {"type": None, "amount": "1"},
        {"type": "test", "amount": "0"},
        {"type": "sale", "amount": "0"},
        None,
    ]

    rows, _ = _run(spark, schema, transforms, values)

    ops = [(r[c.OP], _error(r) is not None) for r in rows]
    assert ops == [
        (c.OP_APPEND, False),
        (c.OP_SKIP, False),
        (c.OP_APPEND, True),  # marked bad by cast: never silently skipped
        (c.OP_SKIP, False),  # the condition is null: not true
        (c.OP_SKIP, False),  # 10 / 0 raises, but the record was skipped already
        (c.OP_APPEND, True),
        (c.OP_SKIP, False),  # a tombstone, skipped by the write mode
    ]
    assert _error(rows[2]) == ("cast: amount 'bad' is not int", "bad")
    assert _error(rows[5]) == ("derive: ratio = 10 / amount failed", '{"amount":0}')
    assert rows[0]["ratio"] == 2.0


def test_filter_condition_that_raises_marks_the_record(spark: Any) -> None:
    rows, _ = _run(
        spark, {"s": "string"}, [{"filter": "cast(s AS int) > 1"}], [{"s": "5"}, {"s": "x"}]
    )

    assert [r[c.OP] for r in rows] == [c.OP_APPEND, c.OP_APPEND]
    assert _error(rows[1]) == ("filter: cast(s AS int) > 1 failed", '{"s":"x"}')


def test_parse_timestamp_format_time_zones_and_as(spark: Any) -> None:
    schema = {"created_at": "string", "local": "string", "iso": "string"}
    transforms = [
        {
            "parse_timestamp": {
                "field": "created_at",
                "format": "yyyy-MM-dd HH:mm:ss",
                "timezone": "Asia/Tokyo",
            }
        },
        {"parse_timestamp": {"field": "local", "format": "dd/MM/yyyy HH:mm", "as": "local_at"}},
        {"parse_timestamp": {"field": "iso", "timezone": "America/New_York"}},
    ]
    values = [
        {"created_at": "2026-01-01 09:00:00", "local": "02/01/2026 10:30", "iso": "2026-01-01"},
        {"created_at": "2026-13-01 00:00:00", "local": "x", "iso": "2026-03-08T02:30:00"},
        {"created_at": None, "local": None, "iso": "2026-07-01T12:00:00+02:00"},
    ]

    rows, chain = _run(spark, schema, transforms, values)

    assert [f.name for f in chain.schema.fields] == ["created_at", "local", "iso", "local_at"]
    assert chain.schema["created_at"].dataType.simpleString() == "timestamp"
    assert chain.schema["local"].dataType.simpleString() == "string"
    first = rows[0]
    assert first["created_at"] == "2026-01-01T00:00:00.000000Z"  # 09:00 in Tokyo
    assert first["local_at"] == "2026-01-02T10:30:00.000000Z"  # the session's zone: UTC
    assert first["local"] == "02/01/2026 10:30"
    assert first["iso"] == "2026-01-01T05:00:00.000000Z"  # Spark's default parsing, New York
    assert _error(rows[1]) == (
        "parse_timestamp: created_at '2026-13-01 00:00:00' does not match yyyy-MM-dd HH:mm:ss",
        "2026-13-01 00:00:00",
    )
    # A wall-clock time in the spring-forward gap moves forward an hour; an offset wins.
    assert rows[1]["iso"] == "2026-03-08T07:30:00.000000Z"
    assert rows[2]["iso"] == "2026-07-01T10:00:00.000000Z"
    assert rows[2][c.ERROR] is None


def test_parse_timestamp_epochs_in_every_unit(spark: Any) -> None:
    schema = {"s": "long", "ms": "long", "us": "long", "text": "string", "n": "int", "ns": "long"}
    transforms = [
        {"parse_timestamp": {"field": "s", "unit": "seconds"}},
        {"parse_timestamp": {"field": "ms", "unit": "millis"}},
        {"parse_timestamp": {"field": "us", "unit": "micros"}},
        {"parse_timestamp": {"field": "ns", "unit": "nanos"}},
        {"parse_timestamp": {"field": "text", "unit": "millis", "as": "text_at"}},
        {"parse_timestamp": {"field": "n", "unit": "seconds"}},
    ]
    at = 1767225600  # 2026-01-01T00:00:00Z
    values = [
        {
            "s": at,
            "ms": at * 1000 + 5,
            "us": at * 1_000_000 + 7,
            "text": str(at * 1000),
            "n": 0,
            "ns": at * 10**9 + 9_999,
        },
        {
            "s": 9223372036854775807,
            "ms": -62135596800001,
            "us": 1,
            "text": "soon",
            "n": None,
            "ns": -1,
        },
    ]

    rows, chain = _run(spark, schema, transforms, values)

    assert {f.dataType.simpleString() for f in chain.schema.fields} == {"timestamp", "string"}
    assert (rows[0]["s"], rows[0]["ms"], rows[0]["us"]) == (
        "2026-01-01T00:00:00.000000Z",
        "2026-01-01T00:00:00.005000Z",
        "2026-01-01T00:00:00.000007Z",
    )
    assert rows[0]["ns"] == "2026-01-01T00:00:00.000009Z"  # floored to microseconds
    assert rows[1]["ns"] == "1969-12-31T23:59:59.999999Z"
    assert rows[0]["text_at"] == "2026-01-01T00:00:00.000000Z"
    assert rows[0]["n"] == "1970-01-01T00:00:00.000000Z"
    assert rows[0][c.ERROR] is None
    assert rows[1]["s"] is None and rows[1]["ms"] is None and rows[1]["text_at"] is None
    assert _error(rows[1]) == (
        "parse_timestamp: s '9223372036854775807' is not an epoch in seconds (years 1 to 9999)",
        "9223372036854775807",
    )


def test_parse_timestamp_reads_timestamp_ntz_as_wall_clock(spark: Any) -> None:
    transforms = [{"parse_timestamp": {"field": "at", "timezone": "Asia/Tokyo"}}]

    rows, chain = _run(spark, {"at": "timestamp_ntz"}, transforms, [{"at": "2026-01-01T09:00:00"}])

    assert chain.schema["at"].dataType.simpleString() == "timestamp"
    assert rows[0]["at"] == "2026-01-01T00:00:00.000000Z"


def test_parse_json_into_maps_arrays_and_structs(spark: Any) -> None:
    schema = {
        "a": "string",
        "b": "string",
        "c": "string",
        "d": "string",
        "meta": "struct<p:string>",
    }
    transforms = [
        {"parse_json": {"field": "a", "as": "map"}},
        {"parse_json": {"field": "b", "as": "map<string,long>"}},
        {"parse_json": {"field": "c", "as": "array<int>"}},
        {"parse_json": {"field": "d", "as": "struct", "schema": {"x": "int", "y": "string"}}},
        {"parse_json": {"field": "meta.p", "as": "struct<q:boolean>"}},
    ]
    good = {
        "a": '{"k": "v", "n": {"deep": 1}}',
        "b": '{"k": 5}',
        "c": "[1, 2]",
        "d": '{"x": 1}',
        "meta": {"p": '{"q": true}'},
    }
    values = [
        good,
        {**good, "a": "{bad"},
        {**good, "b": '{"k": "five"}'},
        {**good, "c": '{"not": "an array"}'},
        {**good, "d": '{"x": "one"}'},
        {**good, "meta": {"p": "[1]"}},
        {"a": None, "meta": None},
    ]

    rows, chain = _run(spark, schema, transforms, values)

    assert chain.schema.simpleString() == (
        "struct<a:map<string,string>,b:map<string,bigint>,c:array<int>,"
        "d:struct<x:int,y:string>,meta:struct<p:struct<q:boolean>>>"
    )
    assert _user(rows[0]) == {
        "a": {"k": "v", "n": '{"deep":1}'},
        "b": {"k": 5},
        "c": [1, 2],
        "d": {"x": 1, "y": None},
        "meta": {"p": {"q": True}},
    }
    assert rows[0][c.ERROR] is None
    reasons = [_error(r) for r in rows[1:6]]
    assert reasons == [
        ("parse_json: a '{bad' is not JSON of type map<string,string>", "{bad"),
        ('parse_json: b \'{"k": "five"}\' is not JSON of type map<string,bigint>', '{"k": "five"}'),
        (
            'parse_json: c \'{"not": "an array"}\' is not JSON of type array<int>',
            '{"not": "an array"}',
        ),
        (
            'parse_json: d \'{"x": "one"}\' is not JSON of type struct<x:int,y:string>',
            '{"x": "one"}',
        ),
        ("parse_json: meta.p '[1]' is not JSON of type struct<q:boolean>", "[1]"),
    ]
    assert rows[6][c.ERROR] is None and rows[6]["a"] is None


def test_metadata_columns_enter_the_chain(spark: Any) -> None:
    transforms = [
        {"derive": {"where": "_kafka_topic || ':' || _kafka_partition || ':' || _kafka_offset"}},
        {"rename": {"_kafka_key": "record_key"}},
        {"filter": "_kafka_offset > 0"},
    ]
    rows, chain = _run(
        spark, {"id": "string"}, transforms, [{"id": "a"}, {"id": "b"}],
        kafka_metadata=["topic", "partition", "offset", "key"],
    )  # fmt: skip

    assert [f.name for f in chain.schema.fields] == [
        "id", "_kafka_topic", "_kafka_partition", "_kafka_offset", "record_key", "where",
    ]  # fmt: skip
    assert [(r["where"], r["record_key"], r[c.OP]) for r in rows] == [
        ("t:3:0", "k", c.OP_SKIP),
        ("t:3:1", "k", c.OP_APPEND),
    ]


def test_apply_keeps_internal_columns_and_describes_each_transform(spark: Any) -> None:
    from pyspark.sql import functions as F

    pipeline = _pipeline(
        {"id": "string", "amount": "string"},
        [{"cast": {"amount": "long"}}, {"rename": {"id": "key_id"}}, {"drop": ["amount"]}],
    )
    chain = _chain(spark, pipeline)
    batch = to_contract(["key", "value", "topic", "partition", "offset", "timestamp"])
    batch.update({"id": F.lit("a"), "amount": F.lit("1")})

    out = chain.apply(batch)

    internal = [k for k in batch if c.is_internal(k)]
    assert list(out) == [*internal, "key_id"]
    assert all(out[k] is batch[k] for k in internal if k not in (c.ERROR, c.OP))
    assert [(name, text) for name, text, _ in chain.describe()] == [
        ("cast", "cast amount → long"),
        ("rename", "rename id → key_id"),
        ("drop", "drop amount"),
    ]
    assert [s.simpleString() for _, _, s in chain.describe()] == [
        "struct<id:string,amount:bigint>",
        "struct<key_id:string,amount:bigint>",
        "struct<key_id:string>",
    ]
    with pytest.raises(PipelineError, match="the transforms were built for the columns id"):
        chain.apply({**batch, "other": F.lit(1)})


@pytest.mark.parametrize(
    ("transforms", "message"),
    [
        (
            [{"cast": {"amount": "long"}}, {"rename": {"payer": "payer_name"}}],
            "pipeline 'p': transforms[1].rename: field 'payer' does not exist "
            "(fields: id, amount, meta)",
        ),
        (
            [{"derive": {"x": "amont * 2"}}],
            "pipeline 'p': transforms[0].derive: x: unknown column 'amont' in 'amont * 2' "
            "(fields: id, amount, meta)",
        ),
        (
            [{"derive": {"x": "amount +"}}],
            "pipeline 'p': transforms[0].derive: invalid Spark SQL expression 'amount +': "
            "Syntax error at or near end of input.",
        ),
        (
            [{"derive": {"x": "sum(amount)"}}],
            "pipeline 'p': transforms[0].derive: x: 'sum(amount)' uses an aggregate, window or "
            "generator function; a transform makes one record of each record",
        ),
        (
            [{"filter": "length(id)"}],
            "pipeline 'p': transforms[0].filter: condition 'length(id)' is int, not a boolean",
        ),
        (
            [{"cast": {"meta": "int"}}],
            "pipeline 'p': transforms[0].cast: cannot cast meta (struct<t:string>) to int",
        ),
        (
            [{"parse_timestamp": {"field": "amount", "format": "YYYY-ww"}}],
            "pipeline 'p': transforms[0].parse_timestamp: invalid datetime format 'YYYY-ww': "
            "Fail to recognize 'YYYY-ww' pattern in the DateTimeFormatter.",
        ),
        (
            [{"drop": ["meta.t"]}, {"parse_json": {"field": "meta"}}],
            "pipeline 'p': transforms[1].parse_json: field 'meta' does not exist "
            "(fields: id, amount)",
        ),
        (
            [{"derive": {"x": "struct(*)"}}],
            "pipeline 'p': transforms[0].derive: transforms cannot use '*' (name the columns)",
        ),
    ],
)
def test_transforms_that_do_not_fit_are_config_errors(
    spark: Any, transforms: list[Any], message: str
) -> None:
    pipeline = _pipeline(
        {"id": "string", "amount": "string", "meta": "struct<t:string>"}, transforms
    )

    with pytest.raises(ConfigError) as info:
        _chain(spark, pipeline)

    assert str(info.value) == message
    key, reason = info.value.problems[0]
    assert message == f"pipeline 'p': {key}: {reason}"


def test_kafka_to_iceberg_through_the_runner(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    from confluent_kafka import Producer

    from frazil.engine.runner import run
    from frazil.generate.producer import ensure_topic

    topic, table, name = f"tr-{unique}", f"db.tr_{unique}", f"tr_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    base = {
        "type": "sale",
        "created_at": "2026-01-01 09:00:00",
        "amount": "12.50",
        "payer": "X",
        "document": "doc",
        "customer": {"name": "Ann", "city": "Kyoto"},
        "payload": '{"k": "v"}',
    }
    for record in (
        {**base, "id": "a"},
        {**base, "id": "b", "type": "test"},
        {**base, "id": "c", "amount": "3", "created_at": "2026-01-02 08:59:59"},
    ):
        producer.produce(topic, json.dumps(record).encode(), partition=0)
    producer.flush(10)
    pipeline = {
        "name": name,
        "topics": [topic],
        "table": table,
        "schema": {
            "id": "string",
            "type": "string",
            "created_at": "string",
            "amount": "string",
            "payer": "string",
            "document": "string",
            "customer": "struct<name:string,city:string>",
            "payload": "string",
        },
        "kafka_metadata": ["offset"],
        "partition_by": ["days(created_at)"],
        "transforms": [
            {"flatten": None},
            {
                "parse_timestamp": {
                    "field": "created_at",
                    "format": "yyyy-MM-dd HH:mm:ss",
                    "timezone": "Asia/Tokyo",
                }
            },
            {"rename": {"payer": "payer_name"}},
            {"drop": ["document"]},
            {"cast": {"amount": "decimal(12,2)"}},
            {"derive": {"amount_jpy": "amount * 150"}},
            {"filter": "type <> 'test'"},
            {"parse_json": {"field": "payload", "as": "map"}},
        ],
    }
    # A tombstone (skipped by the default ``tombstones: skip``) is dropped too, and counted.
    producer.produce(topic, None, key=b"gone", partition=0)
    producer.flush(10)
    config = make_config([pipeline])

    [report] = run(config, until_caught_up=True, spark=spark)

    assert report.filtered_skipped == 2  # "b" (type test) and the tombstone
    written = spark.table(f"lake.{table}")
    assert written.schema.simpleString() == (
        "struct<id:string,type:string,created_at:timestamp,amount:decimal(12,2),"
        "payer_name:string,customer_name:string,customer_city:string,"
        "payload:map<string,string>,_kafka_offset:bigint,amount_jpy:decimal(16,2)>"
    )
    rows = (
        written.selectExpr(
            "id", "date_format(created_at, 'yyyy-MM-dd HH:mm') AS at", "amount", "amount_jpy",
            "customer_city", "payload['k'] AS k", "_kafka_offset",
        )
        .orderBy("id")
        .collect()
    )  # fmt: skip
    assert [tuple(r) for r in rows] == [
        ("a", "2026-01-01 00:00", Decimal("12.50"), Decimal("1875.00"), "Kyoto", "v", 0),
        ("c", "2026-01-01 23:59", Decimal("3.00"), Decimal("450.00"), "Kyoto", "v", 2),
    ]
