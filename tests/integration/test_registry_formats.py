"""Schema Registry wire format end to end: a real registry (Apicurio), broker and Iceberg.

Producers use confluent-kafka's own serializers (AvroSerializer, JSONSerializer), which
register the schemas under the TopicNameStrategy subjects as Confluent's clients do.
"""

from __future__ import annotations

import decimal
import json
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from frazil.decode.schema_registry import RegistryUnavailableError, header
from frazil.engine.runner import run
from frazil.errors import ConfigError, DecodeError
from frazil.generate.producer import ensure_topic
from tests.integration.test_avro import (
    ALL_TYPES,
    ALL_TYPES_TABLE,
    all_types_record,
    avro_bytes,
    check_all_types_row,
)

pytestmark = pytest.mark.integration


def _order_schema(extra: list[dict[str, Any]]) -> str:
    return json.dumps(
        {
            "type": "record",
            "name": "Order",
            "namespace": "shop",
            "fields": [
                {"name": "id", "type": "string"},
                {"name": "amount", "type": "long"},
                *extra,
            ],
        }
    )


V1 = _order_schema([])
V2 = _order_schema([{"name": "currency", "type": "string", "default": "JPY"}])
V3 = _order_schema(
    [
        {"name": "currency", "type": "string", "default": "JPY"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ]
)
KEY = json.dumps(
    {"type": "record", "name": "OrderKey", "namespace": "shop",
     "fields": [{"name": "shop", "type": "string"}, {"name": "seq", "type": "int"}]}
)  # fmt: skip


def _produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes | None, bytes | None]],
    partitions: int = 2,
) -> None:
    ensure_topic(bootstrap, topic, partitions=partitions)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n, (key, value) in enumerate(records):
        producer.produce(topic, key=key, value=value, partition=n % partitions)
    assert producer.flush(30) == 0


def _avro(client: SchemaRegistryClient, schema: str, topic: str, field: str = "value") -> Any:
    serializer = AvroSerializer(client, schema, conf={"auto.register.schemas": True})
    part = MessageField.VALUE if field == "value" else MessageField.KEY
    return lambda record: serializer(record, SerializationContext(topic, part))


def test_three_avro_versions_decode_into_the_newest_shape_with_record_keys(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    topic, table = f"orders-{unique}", f"db.orders_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    writers = [_avro(client, v, topic) for v in (V1, V2, V3)]
    key = _avro(client, KEY, topic, "key")
    records = []
    for n in range(300):
        version = n % 3
        value: dict[str, Any] = {"id": f"o{n}", "amount": n}
        if version >= 1:
            value["currency"] = "EUR"
        if version == 2:
            value["note"] = f"n{n}"
        records.append((key({"shop": "kyoto", "seq": n}), writers[version](value)))
    records.append((key({"shop": "kyoto", "seq": 300}), None))  # a tombstone: skipped
    _produce(kafka_bootstrap, topic, records)
    ids = {client.get_latest_version(f"{topic}-value").version}
    assert ids == {3}
    config = make_config(
        [{"name": f"o_{unique}", "topics": [topic], "table": table, "format": "avro",
          "key_format": "avro", "kafka_metadata": ["offset"]}],
        schema_registry={"url": schema_registry_url},
    )  # fmt: skip

    reports = run(config, until_caught_up=True, spark=spark)

    assert reports[0].records_ingested == 300
    rows = {r["id"]: r.asDict(recursive=True) for r in spark.table(f"lake.{table}").collect()}
    assert len(rows) == 300
    for n in range(300):
        row = rows[f"o{n}"]
        version = n % 3
        assert row["amount"] == n
        # v1 records get the reader's default; v3's optional field is null for older writers.
        assert row["currency"] == ("JPY" if version == 0 else "EUR")
        assert row["note"] == (f"n{n}" if version == 2 else None)
        assert row["key"] == {"shop": "kyoto", "seq": n}
    columns = [f.name for f in spark.table(f"lake.{table}").schema]
    assert columns == ["id", "amount", "currency", "note", "key", "_kafka_offset"]


def test_avro_registry_maps_every_type(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    topic, table = f"types-{unique}", f"db.types_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    write = _avro(client, json.dumps(ALL_TYPES), topic)
    _produce(kafka_bootstrap, topic, [(None, write(all_types_record(n))) for n in range(20)])
    config = make_config(
        [{"name": f"t_{unique}", "topics": [topic], "table": table, "format": "avro"}],
        schema_registry={"url": schema_registry_url},
    )

    run(config, until_caught_up=True, spark=spark)

    types = {f.name: f.dataType.simpleString() for f in spark.table(f"lake.{table}").schema}
    assert types == ALL_TYPES_TABLE
    rows = {r["id"]: r.asDict() for r in spark.table(f"lake.{table}").collect()}
    for n in range(20):
        check_all_types_row(rows[f"r{n}"], n)


def test_an_id_first_met_in_a_batch_is_fetched_and_the_batch_replanned(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    # The older shape lives under another subject (RecordNameStrategy-style producers): the
    # pipeline's subject does not list it, so its id is unknown until a batch holds it.
    topic, table = f"learn-{unique}", f"db.learn_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    reader_id = client.register_schema(f"{topic}-value", Schema(V2, "AVRO"))
    other_id = client.register_schema(f"other-{unique}", Schema(V1, "AVRO"))
    assert other_id != reader_id
    values = [
        header(reader_id) + avro_bytes(json.loads(V2), {"id": "a", "amount": 1, "currency": "EUR"}),
        header(other_id) + avro_bytes(json.loads(V1), {"id": "b", "amount": 2}),
    ]
    _produce(kafka_bootstrap, topic, [(None, v) for v in values], partitions=1)
    config = make_config(
        [{"name": f"l_{unique}", "topics": [topic], "table": table, "format": "avro"}],
        schema_registry={"url": schema_registry_url},
    )

    reports = run(config, until_caught_up=True, spark=spark)

    assert reports[0].records_ingested == 2
    rows = sorted(
        (r["id"], r["amount"], r["currency"]) for r in spark.table(f"lake.{table}").collect()
    )
    assert rows == [("a", 1, "EUR"), ("b", 2, "JPY")]


def test_unknown_ids_and_bad_magic_bytes_stop_the_batch_with_their_reason(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    topic, table = f"bad-{unique}", f"db.bad_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    good = _avro(client, V1, topic)({"id": "a", "amount": 1})
    values = [
        good,
        header(987654) + good[5:],
        b'{"id": "json, not avro"}',
        good[:6],  # the header and one byte of the record
    ]
    _produce(kafka_bootstrap, topic, [(None, v) for v in values], partitions=1)
    config = make_config(
        [{"name": f"b_{unique}", "topics": [topic], "table": table, "format": "avro"}],
        schema_registry={"url": schema_registry_url},
    )

    with pytest.raises(DecodeError) as caught:
        run(config, until_caught_up=True, spark=spark)

    message = str(caught.value)
    assert "3 record(s) in batch 0" in message
    assert (
        f"topic {topic} partition 0 offset 1: decode: unknown schema id 987654 at registry "
        f"{schema_registry_url}"
    ) in message
    assert "offset 2: decode: bad magic byte 0x7B (not Schema Registry wire format)" in message
    assert "offset 3: decode: payload does not decode with writer schema id" in message
    assert spark.table(f"lake.{table}").count() == 0


def test_json_schema_from_the_registry_and_wire_format(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    topic, table = f"js-{unique}", f"db.js_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Event",
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "count": {"type": "integer"},
            "at": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "attrs": {"type": "object", "additionalProperties": {"type": "number"}},
            "who": {"type": "object", "properties": {"name": {"type": ["null", "string"]}}},
        },
    }
    serializer = JSONSerializer(json.dumps(schema), client, conf={"auto.register.schemas": True})
    ctx = SerializationContext(topic, MessageField.VALUE)
    records = [
        serializer(
            {"id": f"e{n}", "count": n, "at": "2026-01-02T03:04:05Z", "tags": ["a", "b"],
             "attrs": {"x": 1.5}, "who": {"name": "Ann"}},
            ctx,
        )
        for n in range(10)
    ]  # fmt: skip
    assert records[0][:1] == b"\x00"
    _produce(kafka_bootstrap, topic, [(None, v) for v in records])
    config = make_config(
        [{"name": f"j_{unique}", "topics": [topic], "table": table, "subject": f"{topic}-value"}],
        schema_registry={"url": schema_registry_url},
    )

    run(config, until_caught_up=True, spark=spark)

    types = {f.name: f.dataType.simpleString() for f in spark.table(f"lake.{table}").schema}
    assert types == {
        "id": "string", "count": "bigint", "at": "timestamp", "tags": "array<string>",
        "attrs": "map<string,double>", "who": "struct<name:string>",
    }  # fmt: skip
    row = spark.table(f"lake.{table}").where("id = 'e3'").first().asDict(recursive=True)
    assert row["count"] == 3 and row["tags"] == ["a", "b"] and row["attrs"] == {"x": 1.5}
    assert row["who"] == {"name": "Ann"} and row["at"].isoformat() == "2026-01-02T03:04:05"


def test_unreachable_registry_stops_before_anything_is_written(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    from tests.conftest import free_ports

    topic, table = f"down-{unique}", f"db.down_{unique}"
    _produce(kafka_bootstrap, topic, [(None, b"\x00\x00\x00\x00\x01x")], partitions=1)
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    config = make_config(
        [{"name": f"d_{unique}", "topics": [topic], "table": table, "format": "avro"}],
        schema_registry={"url": url, "retries": 2, "timeout": "2s"},
    )

    with pytest.raises(RegistryUnavailableError) as caught:
        run(config, until_caught_up=True, spark=spark)

    assert str(caught.value).startswith(
        f"schema registry at {url} did not answer the request for subject '{topic}-value' "
        "after 3 attempt(s)"
    )
    assert not spark.catalog.tableExists(f"lake.{table}")


def test_unknown_ids_bad_magic_bytes_and_truncated_avro_go_to_the_dlq(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    # An unknown id first makes the decoder look it up (it might be new); when the registry
    # does not have it either, its records go to the dead-letter queue with the others.
    topic, table, dead = f"dlqa-{unique}", f"db.dlqa_{unique}", f"db.dlqadead_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    encode = _avro(client, V1, topic)
    good = [encode({"id": f"g{n}", "amount": n}) for n in range(5)]
    values = [*good, header(987654) + good[0][5:], b'{"id": "json, not avro"}', good[0][:6], b""]
    _produce(kafka_bootstrap, topic, [(None, v) for v in values], partitions=1)
    config = make_config(
        [
            {
                "name": f"da_{unique}",
                "topics": [topic],
                "table": table,
                "format": "avro",
                "errors": {"tolerance": "all", "dlq_table": dead},
            }
        ],
        schema_registry={"url": schema_registry_url},
    )

    run(config, until_caught_up=True, spark=spark)

    assert sorted(r["id"] for r in spark.table(f"lake.{table}").collect()) == [
        f"g{n}" for n in range(5)
    ]
    rows = spark.sql(f"SELECT offset, stage, reason FROM lake.{dead} ORDER BY offset").collect()
    assert [r["offset"] for r in rows] == [5, 6, 7, 8]
    assert {r["stage"] for r in rows} == {"decode"}
    assert rows[0]["reason"] == f"unknown schema id 987654 at registry {schema_registry_url}"
    assert "bad magic byte" in rows[1]["reason"]
    assert "does not decode" in rows[2]["reason"] or "truncated" in rows[2]["reason"]
    assert rows[3]["reason"] == "empty value"


def _times_schema(unit: str, precision: int, scale: int, extra: list[Any]) -> str:
    stamp = {"type": "long", "logicalType": f"timestamp-{unit}"}
    amount = {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
    return json.dumps(
        {
            "type": "record",
            "name": "Reading",
            "namespace": "plant",
            "fields": [
                {"name": "id", "type": "string"},
                {"name": "at", "type": stamp},
                {"name": "seen", "type": ["null", stamp], "default": None},
                {"name": "marks", "type": {"type": "array", "items": stamp}},
                {"name": "by_probe", "type": {"type": "map", "values": stamp}},
                {
                    "name": "probe",
                    "type": {
                        "type": "record",
                        "name": "Probe",
                        "fields": [{"name": "calibrated", "type": stamp}],
                    },
                },
                {"name": "amount", "type": amount},
                *extra,
            ],
        }
    )


def _times_record(n: int) -> dict[str, Any]:
    import datetime as dt
    import decimal

    at = dt.datetime(2026, 1, 2, 3, 4, 5, 123000, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=n)
    return {
        "id": f"r{n}",
        "at": at,
        "seen": at if n % 2 else None,
        "marks": [at, at + dt.timedelta(milliseconds=1)],
        "by_probe": {"p": at},
        "probe": {"calibrated": at},
        "amount": decimal.Decimal(f"{n}.25"),
    }


def test_older_writers_with_other_time_units_and_narrower_decimals_keep_their_values(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    # Avro's resolution matches primitive types and ignores logical ones: a timestamp-millis
    # long read by a timestamp-micros reader is a thousand times too small, and a decimal's
    # unscaled bytes take the reader's scale. Each older writer must keep its values.
    topic, table = f"units-{unique}", f"db.units_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    v1 = _avro(client, _times_schema("millis", 9, 2, []), topic)
    note = [{"name": "note", "type": ["null", "string"], "default": None}]
    v2 = _avro(client, _times_schema("micros", 12, 2, note), topic)
    records = [(None, (v1 if n % 2 == 0 else v2)(_times_record(n))) for n in range(40)]
    _produce(kafka_bootstrap, topic, records)
    config = make_config(
        [{"name": f"u_{unique}", "topics": [topic], "table": table, "format": "avro"}],
        schema_registry={"url": schema_registry_url},
    )

    reports = run(config, until_caught_up=True, spark=spark)

    assert reports[0].records_ingested == 40
    rows = {r["id"]: r.asDict(recursive=True) for r in spark.table(f"lake.{table}").collect()}
    assert len(rows) == 40
    for n in range(40):
        expected = _times_record(n)
        row = rows[f"r{n}"]
        at = expected["at"]
        got = {
            "at": row["at"],
            "seen": row["seen"],
            "marks": row["marks"],
            "by_probe": row["by_probe"],
            "probe": row["probe"]["calibrated"],
            "amount": row["amount"],
        }
        assert {k: _utc(v) for k, v in got.items()} == {
            "at": at,
            "seen": expected["seen"],
            "marks": expected["marks"],
            "by_probe": {"p": at},
            "probe": at,
            "amount": expected["amount"],
        }, n


def _utc(value: Any) -> Any:
    """Spark's naive local datetimes as aware UTC ones, inside lists and maps too."""
    import datetime as dt

    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc)
    if isinstance(value, list):
        return [_utc(v) for v in value]
    if isinstance(value, dict):
        return {k: _utc(v) for k, v in value.items()}
    return value


def test_an_older_writer_whose_values_would_be_misread_goes_to_the_dlq_with_the_field(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    # A decimal whose scale changed and a date that became a timestamp cannot be read into
    # the newer shape exactly: their records are dead letters naming the field, not values
    # a thousand or ten times off.
    topic, table, dead = f"scale-{unique}", f"db.scale_{unique}", f"db.scaledead_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})

    def schema(scale: int, day: dict[str, Any]) -> str:
        amount = {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": scale}
        return json.dumps(
            {"type": "record", "name": "Pay", "fields": [
                {"name": "id", "type": "string"}, {"name": "amount", "type": amount},
                {"name": "day", "type": day}]}
        )  # fmt: skip

    import datetime as dt
    import decimal

    v1 = _avro(client, schema(2, {"type": "int", "logicalType": "date"}), topic)
    v2 = _avro(client, schema(3, {"type": "long", "logicalType": "timestamp-millis"}), topic)
    day = dt.datetime(2026, 3, 4, tzinfo=dt.timezone.utc)
    records = [
        (None, v1({"id": "a", "amount": decimal.Decimal("12.34"), "day": day.date()})),
        (None, v2({"id": "b", "amount": decimal.Decimal("12.345"), "day": day})),
    ]
    _produce(kafka_bootstrap, topic, records, partitions=1)
    config = make_config(
        [{"name": f"s_{unique}", "topics": [topic], "table": table, "format": "avro",
          "errors": {"tolerance": "all", "dlq_table": dead}}],
        schema_registry={"url": schema_registry_url},
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    rows = [r.asDict() for r in spark.table(f"lake.{table}").collect()]
    assert [(r["id"], r["amount"]) for r in rows] == [("b", decimal.Decimal("12.345"))]
    dead_rows = spark.sql(f"SELECT offset, reason FROM lake.{dead}").collect()
    assert [r["offset"] for r in dead_rows] == [0]
    reason = dead_rows[0]["reason"]
    assert reason.startswith("written with schema id "), reason
    assert "field 'amount' is decimal(9,2) where the reader schema" in reason, reason
    assert "has decimal(9,3)" in reason, reason


def test_a_newer_writer_that_widens_types_and_drops_a_field_evolves_mid_run(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    # v2 adds no field the reader lacks: it widens n (int to long) and f (float to double),
    # adds an enum symbol and drops `legacy`. Met in a later batch (another subject), it
    # becomes the reader; v1's records, before and after it, keep `legacy`.
    topic, table = f"widen-{unique}", f"db.widen_{unique}"

    def schema(n: str, f: str, symbols: list[str], legacy: bool) -> dict[str, Any]:
        fields: list[dict[str, Any]] = [
            {"name": "id", "type": "string"},
            {"name": "n", "type": n},
            {"name": "f", "type": f},
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": symbols}},
        ]
        if legacy:
            fields.append({"name": "legacy", "type": "string", "default": ""})
        return {"type": "record", "name": "W", "fields": fields}

    v1 = schema("int", "float", ["A", "B"], legacy=True)
    v2 = schema("long", "double", ["A", "B", "C"], legacy=False)
    client = SchemaRegistryClient({"url": schema_registry_url})
    v1_id = client.register_schema(f"{topic}-value", Schema(json.dumps(v1), "AVRO"))
    v2_id = client.register_schema(f"other-{unique}", Schema(json.dumps(v2), "AVRO"))
    old = [
        header(v1_id)
        + avro_bytes(v1, {"id": f"a{n}", "n": n, "f": 0.5, "kind": "B", "legacy": f"L{n}"})
        for n in range(5)
    ]
    new = [
        header(v2_id) + avro_bytes(v2, {"id": f"b{n}", "n": 2**40 + n, "f": 0.1, "kind": "C"})
        for n in range(3)
    ]
    late = [
        header(v1_id)
        + avro_bytes(v1, {"id": f"c{n}", "n": n, "f": 1.5, "kind": "A", "legacy": f"M{n}"})
        for n in range(2)
    ]
    _produce(kafka_bootstrap, topic, [(None, v) for v in old + new + late], partitions=1)
    config = make_config(
        [{"name": f"w_{unique}", "topics": [topic], "table": table, "format": "avro",
          "max_offsets_per_trigger": 5}],
        schema_registry={"url": schema_registry_url},
    )  # fmt: skip

    [report] = run(config, until_caught_up=True, spark=spark)

    assert report.records_ingested == 10
    assert sorted(c.split(": ", 1)[1] for c in report.schema_changes) == [
        "widen f float to double",
        "widen n int to bigint",
    ]
    rows = sorted(
        (r["id"], r["n"], r["f"], r["kind"], r["legacy"])
        for r in spark.table(f"lake.{table}").collect()
    )
    assert rows == [
        *[(f"a{n}", n, 0.5, "B", f"L{n}") for n in range(5)],
        *[(f"b{n}", 2**40 + n, 0.1, "C", None) for n in range(3)],
        *[(f"c{n}", n, 1.5, "A", f"M{n}") for n in range(2)],
    ]


def test_records_of_another_record_types_schema_are_dead_letters_not_new_columns(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    # A producer writing another subject's schema into the topic (another record type, a
    # newer id): under evolve it must not become the reader (the table gaining its columns,
    # the topic's own fields nulled as "dropped"); its records are dead letters naming it.
    topic, table, dead = f"alien-{unique}", f"db.alien_{unique}", f"db.aliendead_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    own = {**json.loads(V1), "doc": f"own {unique}"}
    alien = {
        "type": "record", "name": "Shipment", "namespace": "logistics", "doc": unique,
        "fields": [{"name": "id", "type": "string"}, {"name": "carrier", "type": "string"},
                   {"name": "weight", "type": "double"}],
    }  # fmt: skip
    own_id = client.register_schema(f"{topic}-value", Schema(json.dumps(own), "AVRO"))
    alien_id = client.register_schema(f"ship-{unique}-value", Schema(json.dumps(alien), "AVRO"))
    assert alien_id > own_id
    records = [header(own_id) + avro_bytes(own, {"id": f"o{n}", "amount": n}) for n in range(3)]
    records += [
        header(alien_id) + avro_bytes(alien, {"id": f"s{n}", "carrier": "ups", "weight": 1.5})
        for n in range(2)
    ]
    records += [header(own_id) + avro_bytes(own, {"id": "o3", "amount": 3})]
    _produce(kafka_bootstrap, topic, [(None, v) for v in records], partitions=1)
    config = make_config(
        [{"name": f"a_{unique}", "topics": [topic], "table": table, "format": "avro",
          "errors": {"tolerance": "all", "dlq_table": dead}}],
        schema_registry={"url": schema_registry_url},
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    assert [f.name for f in spark.table(f"lake.{table}").schema] == ["id", "amount"]
    rows = sorted(tuple(r) for r in spark.table(f"lake.{table}").collect())
    assert rows == [(f"o{n}", n) for n in range(4)]
    query = f"SELECT offset, reason, detail FROM lake.{dead} ORDER BY offset"
    dead_rows = spark.sql(query).collect()
    assert [r["offset"] for r in dead_rows] == [3, 4]
    # The detail is the record as its own schema reads it: what was sent, not its bytes.
    assert json.loads(dead_rows[1]["detail"]) == {"id": "s1", "carrier": "ups", "weight": 1.5}
    assert dead_rows[0]["reason"] == (
        f"written with schema id {alien_id}, a record 'logistics.Shipment' where the reader "
        f"schema (id {own_id}) is 'shop.Order': another record type's schema, which Avro does "
        "not resolve against the reader's"
    )


def test_dead_letters_of_an_id_registered_later_under_another_subject_replay(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    from frazil.engine.replay import replay

    # Records name an id the registry does not have yet: dead letters. Once the id exists
    # (here under another subject), a replay fetches it, as a run's batch does.
    topic, table, dead = f"later-{unique}", f"db.later_{unique}", f"db.laterdead_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    v1_id = client.register_schema(f"{topic}-value", Schema(V1, "AVRO"))
    # Schemas of their own (the registry gives known content its old id), the second one the
    # next id the registry hands out.
    probe_schema = {**json.loads(V1), "doc": f"probe {unique}"}
    probe = client.register_schema(f"probe-{unique}", Schema(json.dumps(probe_schema), "AVRO"))
    later, later_schema = probe + 1, {**json.loads(V2), "doc": f"later {unique}"}
    good = header(v1_id) + avro_bytes(json.loads(V1), {"id": "a", "amount": 1})
    early = header(later) + avro_bytes(later_schema, {"id": "b", "amount": 2, "currency": "EUR"})
    _produce(kafka_bootstrap, topic, [(None, good), (None, early)], partitions=1)
    config = make_config(
        [{"name": f"lt_{unique}", "topics": [topic], "table": table, "format": "avro",
          "errors": {"tolerance": "all", "dlq_table": dead}}],
        schema_registry={"url": schema_registry_url},
    )  # fmt: skip
    run(config, until_caught_up=True, spark=spark)
    reasons = [r["reason"] for r in spark.sql(f"SELECT reason FROM lake.{dead}").collect()]
    assert reasons == [f"unknown schema id {later} at registry {schema_registry_url}"]
    assert (
        client.register_schema(f"other-{unique}", Schema(json.dumps(later_schema), "AVRO")) == later
    )

    report = replay(spark, config, config.pipelines[0])

    assert (report.replayed, report.written, report.failed_again) == (1, 1, 0)
    rows = sorted((r["id"], r["amount"]) for r in spark.table(f"lake.{table}").collect())
    assert rows == [("a", 1), ("b", 2)]


def test_a_version_that_cannot_read_the_older_ones_never_becomes_the_reader(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    # A version changing a field's type as Avro does not resolve (long to string), which a
    # registry without compatibility checks lets through: made the reader, every older
    # producer's records stopped decoding ("truncated or corrupt"). Its records are the dead
    # letters, with Avro's reason; the older writers' go on, at the start and while running.
    topic, table, dead = f"unres-{unique}", f"db.unres_{unique}", f"db.unresdead_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    v1 = {**json.loads(V1), "doc": f"v1 {unique}"}
    fields = [{"name": "id", "type": "string"}, {"name": "amount", "type": "string"}]
    bad = {**v1, "doc": f"bad {unique}", "fields": fields}
    v1_id = client.register_schema(f"{topic}-value", Schema(json.dumps(v1), "AVRO"))
    # First met by its id only (another subject's): the reader is chosen while running.
    bad_id = client.register_schema(f"elsewhere-{unique}-value", Schema(json.dumps(bad), "AVRO"))

    def good(n: int) -> bytes:
        return header(v1_id) + avro_bytes(v1, {"id": f"g{n}", "amount": n})

    def wrong(n: int) -> bytes:
        return header(bad_id) + avro_bytes(bad, {"id": f"b{n}", "amount": f"x{n}"})

    records = [good(0), good(1), wrong(0), good(2), wrong(1), good(3)]
    _produce(kafka_bootstrap, topic, [(None, v) for v in records], partitions=1)
    config = make_config(
        [{"name": f"u_{unique}", "topics": [topic], "table": table, "format": "avro",
          "errors": {"tolerance": "all", "dlq_table": dead}}],
        schema_registry={"url": schema_registry_url},
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    rows = sorted(tuple(r) for r in spark.table(f"lake.{table}").collect())
    assert rows == [(f"g{n}", n) for n in range(4)]
    dead_rows = spark.sql(f"SELECT offset, reason FROM lake.{dead} ORDER BY offset").collect()
    assert [r["offset"] for r in dead_rows] == [2, 4]
    reason = dead_rows[0]["reason"]
    assert reason.startswith(
        f"written with schema id {bad_id}, which Avro's schema resolution does not read as the "
        f"reader schema (id {v1_id}): "
    )
    assert "/fields/1/type" in reason, reason

    # The version in the topic's subject, its newest: at the start too, not the reader.
    assert client.register_schema(f"{topic}-value", Schema(json.dumps(bad), "AVRO")) == bad_id
    _produce(kafka_bootstrap, topic, [(None, good(4)), (None, wrong(2))], partitions=1)
    run(config, until_caught_up=True, spark=spark)
    rows = sorted(tuple(r) for r in spark.table(f"lake.{table}").collect())
    assert rows == [(f"g{n}", n) for n in range(5)]
    assert [f.dataType.simpleString() for f in spark.table(f"lake.{table}").schema] == [
        "string",
        "bigint",
    ]
    assert spark.sql(f"SELECT count(*) FROM lake.{dead}").first()[0] == 3


def test_a_version_adding_a_field_without_a_default_becomes_the_reader_of_all(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    # A producer adds a field without a default (a registry without compatibility checks
    # lets it through): as Avro reads it, that version cannot read the older records. The
    # reader is the version with the field nullable (null default), as the table adds it:
    # every record lands, older ones null there, at the start and while running.
    topic, table = f"nodef-{unique}", f"db.nodef_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    v1 = {**json.loads(V1), "doc": f"v1 {unique}"}
    v2 = {
        **v1,
        "doc": f"v2 {unique}",
        "fields": [*v1["fields"], {"name": "currency", "type": "string"}],
    }
    v1_id = client.register_schema(f"{topic}-value", Schema(json.dumps(v1), "AVRO"))
    v2_id = client.register_schema(f"later-{unique}-value", Schema(json.dumps(v2), "AVRO"))

    def old(n: int) -> bytes:
        return header(v1_id) + avro_bytes(v1, {"id": f"a{n}", "amount": n})

    def new(n: int) -> bytes:
        return header(v2_id) + avro_bytes(v2, {"id": f"b{n}", "amount": n, "currency": "EUR"})

    _produce(kafka_bootstrap, topic, [(None, v) for v in [old(0), new(0), old(1), new(1)]], 1)
    config = make_config(
        [{"name": f"n_{unique}", "topics": [topic], "table": table, "format": "avro"}],
        schema_registry={"url": schema_registry_url},
    )  # fmt: skip

    [report] = run(config, until_caught_up=True, spark=spark)

    assert report.records_ingested == 4
    rows = sorted(tuple(r) for r in spark.table(f"lake.{table}").collect())
    assert rows == [("a0", 0, None), ("a1", 1, None), ("b0", 0, "EUR"), ("b1", 1, "EUR")]

    # Newest in the topic's subject at the start: the reader too, older records read on.
    assert client.register_schema(f"{topic}-value", Schema(json.dumps(v2), "AVRO")) == v2_id
    _produce(kafka_bootstrap, topic, [(None, old(2)), (None, new(2))], partitions=1)
    run(config, until_caught_up=True, spark=spark)
    rows = sorted(tuple(r) for r in spark.table(f"lake.{table}").collect())
    assert rows[-2:] == [("b1", 1, "EUR"), ("b2", 2, "EUR")]
    assert ("a2", 2, None) in rows and len(rows) == 6


def test_topics_of_different_avro_record_types_into_one_table_are_refused_at_start(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    # Each topic's subject holds its own record type: routed by topic, each is read by its
    # own (test_changes.py); into one table, refused up front with what to do.
    client = SchemaRegistryClient({"url": schema_registry_url})
    topics = [f"two_{unique}.customers", f"two_{unique}.orders"]
    for topic, field in zip(topics, ("email", "qty"), strict=True):
        record = {"type": "record", "name": "Envelope", "namespace": topic,
                  "fields": [{"name": field, "type": "string"}]}  # fmt: skip
        client.register_schema(f"{topic}-value", Schema(json.dumps(record), "AVRO"))
        ensure_topic(kafka_bootstrap, topic, partitions=1)
    config = make_config(
        [{"name": f"t_{unique}", "topics": topics, "format": "avro", "table": f"db.two_{unique}"}],
        schema_registry={"url": schema_registry_url},
    )

    with pytest.raises(ConfigError) as caught:
        run(config, until_caught_up=True, spark=spark)

    assert str(caught.value).startswith(
        f"pipelines[0].subject: topics '{topics[0]}' and '{topics[1]}' hold different Avro "
        f"record types (subject '{topics[0]}-value': '{topics[0]}.Envelope', "
        f"'{topics[1]}-value': '{topics[1]}.Envelope'), and one table holds one record type: "
        "route the topics to tables of their own"
    )


def test_a_version_spark_cannot_read_is_marked_and_never_the_reader(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    # A decimal of 40 digits is valid Avro and no Spark type: spark-avro's refusal named
    # neither the field nor the pipeline, and stopped the run.
    topic, table, dead = f"wide-{unique}", f"db.wide_{unique}", f"db.widedead_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    v1 = {**json.loads(V1), "doc": f"v1 {unique}"}
    wide_type = {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}
    wide = {
        **v1,
        "doc": f"wide {unique}",
        "fields": [*v1["fields"], {"name": "big", "type": ["null", wide_type], "default": None}],
    }
    v1_id = client.register_schema(f"{topic}-value", Schema(json.dumps(v1), "AVRO"))
    wide_id = client.register_schema(f"far-{unique}-value", Schema(json.dumps(wide), "AVRO"))

    def good(n: int) -> bytes:
        return header(v1_id) + avro_bytes(v1, {"id": f"g{n}", "amount": n})

    def too_wide(n: int) -> bytes:
        record = {"id": f"w{n}", "amount": n, "big": decimal.Decimal("1" * 38 + ".25")}
        return header(wide_id) + avro_bytes(wide, record)

    _produce(kafka_bootstrap, topic, [(None, v) for v in (good(0), too_wide(0), good(1))], 1)
    config = make_config(
        [{"name": f"w_{unique}", "topics": [topic], "table": table, "format": "avro",
          "errors": {"tolerance": "all", "dlq_table": dead}}],
        schema_registry={"url": schema_registry_url},
    )  # fmt: skip
    reason = (
        f"written with schema id {wide_id}, which Spark cannot read: field 'big' is "
        "decimal(40,2): Spark's decimals hold at most 38 digits"
    )

    run(config, until_caught_up=True, spark=spark)  # met while running

    assert sorted(tuple(r) for r in spark.table(f"lake.{table}").collect()) == [
        ("g0", 0), ("g1", 1)
    ]  # fmt: skip
    dead_rows = spark.sql(f"SELECT offset, reason FROM lake.{dead}").collect()
    assert [(r["offset"], r["reason"]) for r in dead_rows] == [(1, reason)]

    # The newest version of the topic's subject at the start: still not the reader.
    assert client.register_schema(f"{topic}-value", Schema(json.dumps(wide), "AVRO")) == wide_id
    _produce(kafka_bootstrap, topic, [(None, too_wide(1)), (None, good(2))], 1)
    run(config, until_caught_up=True, spark=spark)
    assert len(spark.table(f"lake.{table}").collect()) == 3
    assert [f.name for f in spark.table(f"lake.{table}").schema] == ["id", "amount"]
    dead_rows = spark.sql(f"SELECT offset, reason FROM lake.{dead} ORDER BY offset").collect()
    assert [(r["offset"], r["reason"]) for r in dead_rows] == [(1, reason), (3, reason)]


def test_a_subject_of_a_recursive_record_stops_the_pipeline_naming_the_field(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    node = {
        "type": "record",
        "name": "Node",
        "namespace": "shop",
        "fields": [
            {"name": "v", "type": "long"},
            {"name": "next", "type": ["null", "Node"], "default": None},
        ],
    }
    topic = f"tree-{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    client = SchemaRegistryClient({"url": schema_registry_url})
    client.register_schema(f"{topic}-value", Schema(json.dumps(node), "AVRO"))
    config = make_config(
        [{"name": f"r_{unique}", "topics": [topic], "table": f"db.tree_{unique}",
          "format": "avro"}],
        schema_registry={"url": schema_registry_url},
    )  # fmt: skip

    # The message was "IncompatibleSchemaException:" and nothing else.
    with pytest.raises(ConfigError) as caught:
        run(config, until_caught_up=True, spark=spark)

    assert str(caught.value) == (
        f"pipelines[0].format: subject '{topic}-value' version 1: Spark cannot read this Avro "
        "schema: field 'next' holds record 'shop.Node' again, inside itself: Spark does not read "
        "recursive Avro types"
    )
