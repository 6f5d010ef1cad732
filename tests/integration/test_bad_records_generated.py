"""Generated records (hypothesis) of every format, good and bad mixed: random bytes,
truncations, wrong types, huge values, deep nesting, empty and null values, random headers.
Whatever is produced ends exactly once in the table or the dead-letter table: every surely
good record in the table with its values, every surely bad one in the dead-letter table with
a reason, and the ambiguous ones (random bytes may happen to decode) in one of the two.

Records are told apart by their Kafka key (the table keeps it in a column) and offset (the
dead-letter table keeps it).
"""

from __future__ import annotations

import io
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frazil.engine.runner import run
from frazil.generate.producer import ensure_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROTOS = Path(__file__).parent / "protos"

#: One generated topic per format in the suite; more for a longer search, e.g. 25.
EXAMPLES = int(os.environ.get("FRAZIL_HYPOTHESIS_RECORD_EXAMPLES", "1"))

AVRO_SCHEMA = {
    "type": "record",
    "name": "Row",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "ok", "type": "boolean"},
    ],
}

#: What a generated record is: surely good (its values), surely bad, or either.
GOOD, BAD, EITHER = "good", "bad", "either"


def _avro(value: dict[str, Any]) -> bytes:
    from fastavro import parse_schema, schemaless_writer

    out = io.BytesIO()
    schemaless_writer(out, parse_schema(AVRO_SCHEMA), value)
    return out.getvalue()


def _protobuf(value: dict[str, Any]) -> bytes:
    from tests.integration.registry_helpers import protobuf_classes

    line = protobuf_classes([PROTOS / "shop.proto"])["frazil.test.Line"]
    return bytes(line(sku=value["name"], qty=value["id"] % 2**31).SerializeToString())


_ROW = st.fixed_dictionaries(
    {
        "name": st.text(max_size=20),
        "amount": st.floats(allow_nan=False, allow_infinity=False, width=32),
        "ok": st.booleans(),
    }
)


def _wire(schema_id: int, payload: bytes) -> bytes:
    """The Schema Registry wire format: magic byte 0, the id (4 bytes, big-endian), payload."""
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def _encode(fmt: str, row: dict[str, Any], schema_id: int) -> bytes:
    if fmt == "json":
        return json.dumps(row).encode()
    if fmt == "avro":
        return _avro(row)
    if fmt == "avro-registry":
        return _wire(schema_id, _avro(row))
    return _protobuf(row)


@st.composite
def records(
    draw: st.DrawFn, fmt: str, schema_id: int = 0
) -> list[tuple[str, bytes | None, dict[str, Any] | None]]:
    """A list of (kind, value, expected row) for ``fmt`` (``schema_id``: the registered id)."""
    made: list[tuple[str, bytes | None, dict[str, Any] | None]] = []
    kinds = ["good", "good", "good", "bytes", "cut", "empty", "null", "wrong", "huge", "deep"]
    if fmt == "avro-registry":
        kinds += ["unknown id", "magic"]
    for i in range(draw(st.integers(min_value=20, max_value=120))):
        row = {"id": i, **draw(_ROW)}
        good = _encode(fmt, row, schema_id)
        kind = draw(st.sampled_from(kinds))
        if kind == "good":
            made.append((GOOD, good, row))
        elif kind == "bytes":
            made.append((EITHER, draw(st.binary(max_size=64)), None))
        elif kind == "cut":
            cut = draw(st.integers(min_value=0, max_value=len(good) - 1))
            # A cut JSON object or Avro record always lacks something; a cut Protobuf
            # message may end on a field boundary and be a valid shorter message.
            made.append((BAD if fmt != "protobuf" else EITHER, good[:cut], None))
        elif kind == "empty":
            # An empty Protobuf message is valid (every field at its default).
            made.append((BAD if fmt != "protobuf" else EITHER, b"", None))
        elif kind == "null":
            made.append((BAD, None, None))
        elif kind == "wrong" and fmt == "json":
            field = draw(st.sampled_from(["id", "amount", "ok"]))
            made.append((BAD, json.dumps({**row, field: "not a value"}).encode(), None))
        elif kind == "huge" and fmt == "json":
            made.append((BAD, json.dumps({**row, "id": 10**30}).encode(), None))
        elif kind == "unknown id":
            unknown = draw(st.integers(min_value=schema_id + 10_000, max_value=2**31 - 1))
            made.append((BAD, _wire(unknown, good[5:]), None))
        elif kind == "magic":
            made.append((BAD, bytes([draw(st.integers(1, 255))]) + good[1:], None))
        elif kind == "deep" and fmt == "json":
            depth = draw(st.integers(min_value=100, max_value=3000))
            value = b'{"id": 1, "x": ' + b"[" * depth + b"]" * depth + b"}"
            made.append((EITHER, value, None))
        else:
            made.append((GOOD, good, row))
    return made


_HEADERS = st.lists(st.tuples(st.text(min_size=1, max_size=8), st.binary(max_size=16)), max_size=3)


def _pipeline(fmt: str, name: str, topic: str, table: str, dead: str, tmp: Path) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": name,
        "topics": [topic],
        "table": table,
        "format": fmt,
        "key_format": "string",
        "errors": {"tolerance": "all", "dlq_table": dead},
    }
    if fmt == "json":
        base["schema"] = {"id": "long", "name": "string", "amount": "double", "ok": "boolean"}
    elif fmt == "avro-registry":
        base["format"] = "avro"
    elif fmt == "avro":
        schema = tmp / f"{name}.avsc"
        schema.write_text(json.dumps(AVRO_SCHEMA))
        base["schema_file"] = str(schema)
    else:
        base["schema_file"] = str(PROTOS / "shop.proto")
        base["message"] = "frazil.test.Line"
    return base


@pytest.mark.parametrize("fmt", ["json", "avro", "avro-registry", "protobuf"])
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(data=st.data())
def test_every_generated_record_ends_in_the_table_or_the_dead_letters_once(
    fmt: str,
    data: st.DataObject,
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    schema_registry_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from confluent_kafka import Producer

    from tests.integration.registry_helpers import register_schema

    u = uuid.uuid4().hex[:8]
    topic, table, dead, name = f"gen-{u}", f"db.gen_{u}", f"db.gen_dead_{u}", f"gen_{u}"
    schema_id = 0
    registry: dict[str, Any] = {}
    if fmt == "avro-registry":
        found = register_schema(schema_registry_url, f"{topic}-value", json.dumps(AVRO_SCHEMA))
        schema_id = found.schema_id
        registry = {"schema_registry": {"url": schema_registry_url}}
    made = data.draw(records(fmt, schema_id), label="records")
    headers = [data.draw(_HEADERS, label=f"headers {i}") for i in range(len(made))]
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i, (_, value, _) in enumerate(made):
        producer.produce(topic, value=value, key=f"r{i}".encode(), headers=headers[i])
    assert producer.flush(30) == 0
    tmp = tmp_path_factory.mktemp("gen")

    config = make_config([_pipeline(fmt, name, topic, table, dead, tmp)], **registry)
    run(config, until_caught_up=True, spark=spark)

    in_table: dict[int, dict[str, Any]] = {}
    if spark.catalog.tableExists(f"lake.{table}"):
        for r in spark.table(f"lake.{table}").collect():
            i = int(r["key"][1:])
            assert i not in in_table, f"record {i} twice in the table"
            in_table[i] = r.asDict()
    dead_rows = spark.sql(f"SELECT offset, reason FROM lake.{dead}").collect()
    in_dead = [int(r["offset"]) for r in dead_rows]
    assert len(in_dead) == len(set(in_dead)), "a record twice in the dead-letter table"
    assert all(r["reason"] for r in dead_rows)
    assert not set(in_table) & set(in_dead)
    assert set(in_table) | set(in_dead) == set(range(len(made)))  # nothing lost
    for i, (kind, _, row) in enumerate(made):
        if kind == BAD:
            assert i in in_dead, (i, made[i], in_table.get(i))
        elif kind == GOOD:
            assert i in in_table, (i, made[i])
            assert row is not None
            got = in_table[i]
            if fmt == "protobuf":
                assert (got["sku"], got["qty"]) == (row["name"], row["id"] % 2**31)
            else:
                assert got["id"] == row["id"] and got["name"] == row["name"]
                assert got["ok"] == row["ok"] and got["amount"] == pytest.approx(row["amount"])
