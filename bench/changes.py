"""Upsert/CDC: changes/s applied with MERGE vs plain appends of the same topic, same run.

One topic (4 partitions, keyed by id) holds N changes (default 1,000,000) over K keys
(``--keys``, default 100,000): each key's first change inserts it, later ones update it (80%)
or delete it (20%), and a change to a deleted key re-inserts it. ``--format`` says how the
changes are written; every format carries the same stream (the same seed, keys and order):

* ``op-field`` (default): JSON rows with an ``op`` field (``I``/``U``/``D``; a delete holds
  only the id), key the id as text. Both pipelines read them with a declared schema; cdc is
  ``write: {mode: cdc, key: [id], op_field: op}``.
* ``debezium-json``: Debezium envelopes from Kafka Connect's JSON converter with
  ``schemas.enable=true``: ``{"schema": <Connect envelope schema>, "payload": {"before",
  "after", "op": c|u|d, "ts_ms", "source"}}``, a delete with the row in ``before`` and
  ``after`` null (no tombstones); the key ``{"schema": ..., "payload": {"id": n}}``. Row
  fields: ``id`` and ``seq`` int64, ``name`` string, ``amount`` a Connect ``Decimal`` (bytes,
  base64 text, scale 2) and ``created`` an ``io.debezium.time.Timestamp`` (int64 ms). cdc
  is ``write: {mode: cdc, key: [id], debezium: true}``. The schema is inferred (from the
  first records) unless ``--json-schema declared``: then cdc declares the row's fields as
  Debezium sends them (frazil wraps them in the envelope and maps the semantic types from
  the embedded schema) and append declares the envelope's ``payload``.
* ``debezium-avro``: the same envelope (and key) as Debezium's Avro converter writes them,
  serialized by confluent-kafka's ``AvroSerializer`` through a Schema Registry (a local
  Apicurio the benchmark starts, as the tests do); ``format: avro``, schemas from the
  registry, cdc as for ``debezium-json``.

frazil unwraps a Debezium envelope only under ``mode: cdc`` (``debezium`` is a cdc setting):
with a Debezium format the append pipeline appends each **raw envelope** as it is decoded
(``schema`` and ``payload`` columns for inferred JSON, ``payload`` for declared JSON;
``before``, ``after``, ``source``, ``op``, ``ts_ms`` for Avro), with the same format settings
as the cdc pipeline.

Both pipelines run on local[2] with an AvailableNow trigger and the same
``max_offsets_per_trigger`` (250,000: a 5 s trigger at 50,000 changes/s):

* append: every change becomes a row (``write`` left at append);
* cdc: changes collapse per key and apply as one MERGE per batch on a merge-on-read table
  (position deletes, format 2).

Rounds alternate after a warm-up round, with fresh pipelines and tables; the figure is the
ratio of median changes/s. The cdc table is checked row for row against the stream replayed
in Python: id → (seq, name, amount) for ``op-field`` (amount a double), id → (seq, name,
amount, created) for the Debezium formats (amount a ``decimal(10,2)`` compared as
``Decimal``, created a ``timestamp`` compared as epoch ms), column types included.
Afterwards the last cdc table is compacted with Iceberg's ``rewrite_data_files`` (data files
with deletes rewritten), then ``rewrite_position_delete_files``: delete files before and
after.

``--tables N`` (Debezium formats) spreads the stream over N source tables: a topic each
(4 partitions), its own record type (``dbserver1.inventory.t<i>.Envelope``: with
``debezium-avro`` a subject and a reader each) and a column of its own (``note_t<i>``),
``records / N`` changes over ``keys / N`` keys each (table i's stream seeded apart). Both
pipelines read the topics with one ``topic_pattern`` routed by topic to a table each
(``debezium-avro``: ``subject:`` the first topic's, the others met while running); every cdc
table is checked against its own replay.

``--envelope postgres`` (Debezium formats) writes the ``source`` block of Debezium's
PostgreSQL connector (12 fields: ``version``, ``connector``, ``name``, ``ts_ms``, ``snapshot``,
``db``, ``sequence``, ``schema``, ``table``, ``txId``, ``lsn``, ``xmin``) instead of
``connector`` and ``lsn``, and with ``debezium-avro`` both pipelines decode the keys through the
registry (``key_format: avro``), as Debezium's users do.

Goal: cdc ≥ 0.5× append.

The result goes to ``bench/results/changes.json`` (``op-field``) or
``bench/results/changes-<format>[-declared].json``.

Usage: .venv/bin/python -m bench.changes [--records 1000000] [--keys 100000] [--rounds 2]
    [--per-trigger 250000] [--format op-field|debezium-json|debezium-avro]
    [--json-schema inferred|declared] [--tables 1] [--envelope minimal|postgres]
    [--spark-conf KEY=VALUE]
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.common import WORK_DIR, free_port, start_broker, write_result
from frazil.config import parse_config
from frazil.engine.runner import run
from frazil.engine.session import build_spark
from frazil.generate.producer import ensure_topic, produce_events
from frazil.local.registry import LocalRegistry

GOAL = 0.5
FORMATS = ("op-field", "debezium-json", "debezium-avro")
#: The ``op-field`` format's declared schema.
SCHEMA = {"id": "long", "op": "string", "seq": "long", "name": "string", "amount": "double"}
#: ``debezium-json --json-schema declared``: the row's fields as Debezium sends them (cdc)...
DEBEZIUM_ROW_SCHEMA = {
    "id": "long",
    "seq": "long",
    "name": "string",
    "amount": "string",
    "created": "long",
}
_ROW_STRUCT = "struct<" + ",".join(f"{k}:{v}" for k, v in DEBEZIUM_ROW_SCHEMA.items()) + ">"
#: ... and the envelope's payload (append: frazil unwraps envelopes only under cdc).
DEBEZIUM_PAYLOAD_SCHEMA = {
    "payload": f"struct<before:{_ROW_STRUCT},after:{_ROW_STRUCT},"
    "source:struct<connector:string,lsn:long>,op:string,ts_ms:long>"
}
#: ``created`` (ms) and the envelope's ``ts_ms`` of the change with sequence number ``seq``:
#: these plus ``seq``.
CREATED_MS = 1_709_288_130_000
TS_MS = 1_700_000_000_000

#: A row as the stream leaves it: (seq, name, amount in cents).
Row = tuple[int, str, int]
Factory = Callable[[], tuple[bytes | None, bytes]]


@dataclass(frozen=True)
class Change:
    """One change: ``seq`` numbers the stream's changes from 1; ``op`` is ``I``, ``U`` or
    ``D``; ``before`` is the key's row before it (None for an insert), ``after`` the row
    after it (None for a delete)."""

    key: int
    seq: int
    op: str
    before: Row | None
    after: Row | None


def changes(seed: int, keys: int) -> tuple[Callable[[], Change], dict[int, Row]]:
    """A change factory and the table it leaves (filled as changes are made)."""
    rng = random.Random(seed)
    live: dict[int, Row] = {}
    seq = 0

    def make() -> Change:
        nonlocal seq
        key = seq if seq < keys else rng.randrange(keys)
        seq += 1
        before = live.get(key)
        if before is None:
            live[key] = (seq, f"n{seq}", seq * 25)
            return Change(key, seq, "I", None, live[key])
        if rng.random() < 0.2:
            del live[key]
            return Change(key, seq, "D", before, None)
        live[key] = (seq, f"u{seq}", -seq * 25)
        return Change(key, seq, "U", before, live[key])

    return make, live


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def op_field_factory(make: Callable[[], Change]) -> Factory:
    """``op-field``: JSON with ``op`` I/U/D; a delete holds only the id; key the id as text."""

    def encode() -> tuple[bytes | None, bytes]:
        change = make()
        value: dict[str, Any] = {"id": change.key, "op": change.op}
        if change.after is not None:
            seq, name, cents = change.after
            value.update(seq=seq, name=name, amount=cents / 100)
        return str(change.key).encode(), _compact(value)

    return encode


def _decimal_bytes(unscaled: int) -> bytes:
    """A Connect Decimal's bytes: the unscaled value, big-endian two's complement."""
    return unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)


#: The row's fields as Kafka Connect's JSON converter describes them (``schemas.enable``).
_CONNECT_ROW = [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "int64", "optional": True, "field": "seq"},
    {"type": "string", "optional": True, "field": "name"},
    {
        "type": "bytes",
        "optional": True,
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        "field": "amount",
    },
    {
        "type": "int64",
        "optional": True,
        "name": "io.debezium.time.Timestamp",
        "version": 1,
        "field": "created",
    },
]
_CONNECT_ENVELOPE = {
    "type": "struct",
    "name": "dbserver1.inventory.items.Envelope",
    "optional": False,
    "fields": [
        {
            "type": "struct",
            "optional": True,
            "name": "dbserver1.inventory.items.Value",
            "fields": _CONNECT_ROW,
            "field": "before",
        },
        {
            "type": "struct",
            "optional": True,
            "name": "dbserver1.inventory.items.Value",
            "fields": _CONNECT_ROW,
            "field": "after",
        },
        {
            "type": "struct",
            "optional": False,
            "name": "io.debezium.connector.postgresql.Source",
            "fields": [
                {"type": "string", "optional": False, "field": "connector"},
                {"type": "int64", "optional": True, "field": "lsn"},
            ],
            "field": "source",
        },
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
    ],
}
_CONNECT_KEY = {
    "type": "struct",
    "name": "dbserver1.inventory.items.Key",
    "optional": False,
    "fields": [{"type": "int64", "optional": False, "field": "id"}],
}
#: Debezium's op of each change: a re-insert is a create too.
_DEBEZIUM_OPS = {"I": "c", "U": "u", "D": "d"}


#: ``--envelope postgres``: the ``source`` block of Debezium's PostgreSQL connector, as
#: (field, Connect type, optional); ``minimal`` keeps ``connector`` and ``lsn`` only.
POSTGRES_SOURCE = [
    ("version", "string", False),
    ("connector", "string", False),
    ("name", "string", False),
    ("ts_ms", "int64", False),
    ("snapshot", "string", True),
    ("db", "string", False),
    ("sequence", "string", True),
    ("schema", "string", False),
    ("table", "string", False),
    ("txId", "int64", True),
    ("lsn", "int64", True),
    ("xmin", "int64", True),
]
_AVRO_TYPES = {"string": "string", "int64": "long"}


def _own_column(schema: dict[str, Any], table: str, avro: bool) -> dict[str, Any]:
    """``schema`` (an envelope's) with a column of the source table's own in its rows,
    ``note_<table>`` (an optional string): source tables have columns of their own, so a
    pipeline over several reads their records into one merged shape."""
    copied: dict[str, Any] = json.loads(json.dumps(schema))
    for field in copied["fields"]:
        if avro and field["name"] == "before":
            row = next(t for t in field["type"] if isinstance(t, dict))
            row["fields"].append(
                {"name": f"note_{table}", "type": ["null", "string"], "default": None}
            )
        elif not avro and field.get("field") in ("before", "after"):
            field["fields"] = [
                *field["fields"],
                {"type": "string", "optional": True, "field": f"note_{table}"},
            ]
    return copied


def _full_source(schema: dict[str, Any], avro: bool) -> dict[str, Any]:
    """``schema`` (an envelope's, Connect's or Avro's) with the PostgreSQL ``source`` block."""
    copied: dict[str, Any] = json.loads(json.dumps(schema))
    for field in copied["fields"]:
        if avro and field["name"] == "source":
            field["type"]["fields"] = [
                {"name": n, "type": ["null", _AVRO_TYPES[t]], "default": None}
                if optional
                else {"name": n, "type": _AVRO_TYPES[t]}
                for n, t, optional in POSTGRES_SOURCE
            ]
        elif not avro and field.get("field") == "source":
            field["fields"] = [
                {"type": t, "optional": optional, "field": n} for n, t, optional in POSTGRES_SOURCE
            ]
    return copied


def _source(seq: int, table: str, full: bool) -> dict[str, Any]:
    """A change's ``source`` block."""
    if not full:
        return {"connector": "postgresql", "lsn": seq}
    return {
        "version": "2.7.0.Final", "connector": "postgresql", "name": "dbserver1",
        "ts_ms": TS_MS + seq, "snapshot": "false", "db": "inventory",
        "sequence": f'["{seq - 1}","{seq}"]', "schema": "public", "table": table,
        "txId": 1000 + seq, "lsn": seq, "xmin": None,
    }  # fmt: skip


def _of_table(schema: dict[str, Any], table: str) -> dict[str, Any]:
    """A schema of the ``items`` source table as the same one of ``table`` (its record names)."""
    text = json.dumps(schema).replace("dbserver1.inventory.items", f"dbserver1.inventory.{table}")
    renamed: dict[str, Any] = json.loads(text)
    return renamed


def debezium_json_factory(
    make: Callable[[], Change], table: str = "items", full_source: bool = False
) -> Factory:
    """``debezium-json``: the JSON converter's ``{schema, payload}`` envelope and key."""
    envelope, key_schema = _of_table(_CONNECT_ENVELOPE, table), _of_table(_CONNECT_KEY, table)
    if full_source:
        envelope = _full_source(envelope, avro=False)
    own = table != "items"
    if own:
        envelope = _own_column(envelope, table, avro=False)

    def row(key: int, found: Row | None) -> dict[str, Any] | None:
        if found is None:
            return None
        seq, name, cents = found
        fields = {
            "id": key,
            "seq": seq,
            "name": name,
            "amount": base64.b64encode(_decimal_bytes(cents)).decode(),
            "created": CREATED_MS + seq,
        }
        return {**fields, f"note_{table}": f"n{seq}"} if own else fields

    def encode() -> tuple[bytes | None, bytes]:
        change = make()
        seq = change.seq
        payload = {
            "before": row(change.key, change.before),
            "after": row(change.key, change.after),
            "source": _source(seq, table, full_source),
            "op": _DEBEZIUM_OPS[change.op],
            "ts_ms": TS_MS + seq,
        }
        key = {"schema": key_schema, "payload": {"id": change.key}}
        return _compact(key), _compact({"schema": envelope, "payload": payload})

    return encode


#: Debezium's Avro converter's envelope of the same table: ``connect.name`` on the semantic
#: types, and Avro's own ``decimal`` logical type on the Decimal, as the converter writes it.
DEBEZIUM_AVRO = {
    "type": "record",
    "name": "Envelope",
    "namespace": "dbserver1.inventory.items",
    "fields": [
        {
            "name": "before",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Value",
                    "fields": [
                        {"name": "id", "type": "long"},
                        {"name": "seq", "type": "long"},
                        {"name": "name", "type": "string"},
                        {
                            "name": "amount",
                            "type": {
                                "type": "bytes",
                                "scale": 2,
                                "precision": 10,
                                "connect.version": 1,
                                "connect.parameters": {
                                    "scale": "2",
                                    "connect.decimal.precision": "10",
                                },
                                "connect.name": "org.apache.kafka.connect.data.Decimal",
                                "logicalType": "decimal",
                            },
                        },
                        {
                            "name": "created",
                            "type": {
                                "type": "long",
                                "connect.version": 1,
                                "connect.name": "io.debezium.time.Timestamp",
                            },
                        },
                    ],
                    "connect.name": "dbserver1.inventory.items.Value",
                },
            ],
            "default": None,
        },
        {"name": "after", "type": ["null", "Value"], "default": None},
        {
            "name": "source",
            "type": {
                "type": "record",
                "name": "Source",
                "namespace": "io.debezium.connector.postgresql",
                "fields": [
                    {"name": "connector", "type": "string"},
                    {"name": "lsn", "type": ["null", "long"], "default": None},
                ],
                "connect.name": "io.debezium.connector.postgresql.Source",
            },
        },
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ],
    "connect.name": "dbserver1.inventory.items.Envelope",
}
DEBEZIUM_AVRO_KEY = {
    "type": "record",
    "name": "Key",
    "namespace": "dbserver1.inventory.items",
    "fields": [{"name": "id", "type": "long"}],
    "connect.name": "dbserver1.inventory.items.Key",
}


def debezium_avro_factory(
    make: Callable[[], Change],
    registry_url: str,
    topic: str,
    table: str = "items",
    full_source: bool = False,
) -> Factory:
    """``debezium-avro``: envelope and key serialized by confluent-kafka's AvroSerializer,
    which registers them under ``<topic>-value`` and ``<topic>-key``."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": registry_url})
    envelope = _of_table(DEBEZIUM_AVRO, table)
    if full_source:
        envelope = _full_source(envelope, avro=True)
    own = table != "items"
    if own:
        envelope = _own_column(envelope, table, avro=True)
    value_serializer = AvroSerializer(client, json.dumps(envelope))
    key_serializer = AvroSerializer(client, json.dumps(_of_table(DEBEZIUM_AVRO_KEY, table)))
    value_ctx = SerializationContext(topic, MessageField.VALUE)
    key_ctx = SerializationContext(topic, MessageField.KEY)

    def row(key: int, found: Row | None) -> dict[str, Any] | None:
        if found is None:
            return None
        seq, name, cents = found
        amount = Decimal(cents).scaleb(-2)
        fields = {
            "id": key,
            "seq": seq,
            "name": name,
            "amount": amount,
            "created": CREATED_MS + seq,
        }
        return {**fields, f"note_{table}": f"n{seq}"} if own else fields

    def encode() -> tuple[bytes | None, bytes]:
        change = make()
        seq = change.seq
        value = {
            "before": row(change.key, change.before),
            "after": row(change.key, change.after),
            "source": _source(seq, table, full_source),
            "op": _DEBEZIUM_OPS[change.op],
            "ts_ms": TS_MS + seq,
        }
        data = value_serializer(value, value_ctx)
        key = key_serializer({"id": change.key}, key_ctx)
        assert data is not None
        return key, data

    return encode


def expected_rows(live: dict[int, Row], fmt: str) -> dict[int, tuple[Any, ...]]:
    """The cdc table the stream leaves, as :func:`table_rows` reads it."""
    if fmt == "op-field":
        return {k: (seq, name, cents / 100) for k, (seq, name, cents) in live.items()}
    return {
        k: (seq, name, Decimal(cents).scaleb(-2), CREATED_MS + seq)
        for k, (seq, name, cents) in live.items()
    }


#: The cdc table's column types (Spark's simple strings) per format.
EXPECTED_TYPES = {
    "op-field": {"id": "bigint", "seq": "bigint", "name": "string", "amount": "double"},
    "debezium": {
        "id": "bigint",
        "seq": "bigint",
        "name": "string",
        "amount": "decimal(10,2)",
        "created": "timestamp",
    },
}


def table_rows(spark: Any, table: str, fmt: str) -> dict[int, tuple[Any, ...]]:
    """id → (seq, name, amount[, created as epoch ms]) of a cdc table."""
    columns = "id, seq, name, amount"
    if fmt != "op-field":
        columns += ", unix_millis(created)"
    return {int(r[0]): tuple(r[1:]) for r in spark.sql(f"SELECT {columns} FROM {table}").collect()}


def count_of(spark: Any, query: str) -> int:
    """The one number a ``SELECT count(*)`` answers."""
    return int(spark.sql(query).first()[0])


def type_problems(spark: Any, table: str, fmt: str) -> list[str]:
    wanted = EXPECTED_TYPES["op-field" if fmt == "op-field" else "debezium"]
    types = {f.name: f.dataType.simpleString() for f in spark.table(table).schema}
    got = {k: types.get(k) for k in wanted}
    return [] if got == wanted else [f"{table}: column types {got}, expected {wanted}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds per pipeline")
    parser.add_argument("--per-trigger", type=int, default=250_000)
    parser.add_argument(
        "--format", choices=FORMATS, default="op-field", help="how the changes are written"
    )
    parser.add_argument(
        "--json-schema",
        choices=("inferred", "declared"),
        default="inferred",
        help="debezium-json: infer the envelope's schema or declare it",
    )
    parser.add_argument(
        "--tables",
        type=int,
        default=1,
        help="Debezium formats: source tables (a topic and record type each), routed by topic",
    )
    parser.add_argument(
        "--envelope",
        choices=("minimal", "postgres"),
        default="minimal",
        help="Debezium formats: the source block (connector and lsn, or PostgreSQL's 12 "
        "fields); postgres also decodes debezium-avro's keys",
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting of the rounds (repeatable), e.g. spark.eventLog.enabled=true",
    )
    args = parser.parse_args()
    if (args.tables > 1 or args.envelope != "minimal") and args.format == "op-field":
        parser.error("--tables and --envelope apply to the Debezium formats")
    full_source = args.envelope == "postgres"
    fmt: str = args.format
    declared = fmt == "debezium-json" and args.json_schema == "declared"
    label = f"{fmt}, {args.json_schema} schema" if fmt == "debezium-json" else fmt
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"changes-{run_id}"
    broker = start_broker(f"changes-{run_id}")
    registry = LocalRegistry(work / "state", port=free_port()) if fmt == "debezium-avro" else None
    try:
        registry_url = registry.up(timeout=180) if registry is not None else None
        tables = args.tables
        prefix = f"bench-changes-{run_id}"
        topics = [prefix] if tables == 1 else [f"{prefix}.t{i}" for i in range(tables)]
        expected_by_table: list[dict[int, tuple[Any, ...]]] = []
        started = time.monotonic()
        produced_count = 0
        for i, topic in enumerate(topics):
            ensure_topic(broker.bootstrap, topic, partitions=4)
            make, live = changes(1 + i, args.keys // tables)
            source = "items" if tables == 1 else f"t{i}"
            factory: Factory
            if fmt == "debezium-json":
                factory = debezium_json_factory(make, source, full_source)
            elif fmt == "debezium-avro":
                assert registry_url is not None
                factory = debezium_avro_factory(make, registry_url, topic, source, full_source)
            else:
                factory = op_field_factory(make)
            count = args.records // tables + (1 if i < args.records % tables else 0)
            produced = produce_events(broker.bootstrap, topic, count, event_factory=factory)
            produced_count += produced.count
            expected_by_table.append(expected_rows(live, fmt))
        produce_seconds = time.monotonic() - started
        live_keys = sum(len(e) for e in expected_by_table)
        console.print(
            f"produced {produced_count:,} {fmt} changes over {args.keys:,} keys in "
            f"{tables} table(s) ({live_keys:,} live at the end) in {produce_seconds:.1f}s"
        )
        cdc_write: dict[str, Any] = {"mode": "cdc", "key": ["id"]}
        if fmt == "op-field":
            cdc_write["op_field"] = "op"
        else:
            cdc_write["debezium"] = True

        def config_for(mode: str, name: str) -> Any:
            pipeline: dict[str, Any] = {
                "name": name,
                "max_offsets_per_trigger": args.per_trigger,
                "trigger": "5s",
            }
            if tables == 1:
                pipeline.update(topics=topics, table=f"bench.{name}")
            else:
                pattern = prefix.replace("-", "\\-")
                pipeline["topic_pattern"] = f"{pattern}\\.t\\d+"
                pipeline["route"] = {
                    "topic": f"{pattern}\\.(t\\d+)",
                    "table": f"bench.{name}_{{1}}",
                }
                if fmt == "debezium-avro":
                    pipeline["subject"] = f"{topics[0]}-value"
            if fmt == "debezium-avro" and full_source:
                # As Debezium's users read its Avro keys: through the registry too.
                pipeline["key_format"] = "avro"
                pipeline["key_subject"] = f"{topics[0]}-key"
            if fmt == "op-field":
                pipeline["schema"] = dict(SCHEMA)
            elif fmt == "debezium-avro":
                pipeline["format"] = "avro"
            elif declared:
                schema = DEBEZIUM_ROW_SCHEMA if mode == "cdc" else DEBEZIUM_PAYLOAD_SCHEMA
                pipeline["schema"] = dict(schema)
            if mode == "cdc":
                pipeline["write"] = dict(cdc_write)
            data: dict[str, Any] = {
                "catalog": {"warehouse": str(work / "lake")},
                "kafka": {"bootstrap_servers": broker.bootstrap},
                "state_dir": str(work / "state"),
                "spark": {
                    "master": "local[2]",
                    "driver_memory": "4g",
                    "conf": dict(p.split("=", 1) for p in args.spark_conf),
                },
                "pipelines": [pipeline],
            }
            if registry_url is not None:
                data["schema_registry"] = {"url": registry_url}
            return parse_config(data)

        spark = build_spark(config_for("append", "warmup"))
        rows: list[dict[str, Any]] = []
        problems: list[str] = []
        last_cdc = ""
        for round_no in range(args.rounds + 1):  # round 0 warms the JVM up
            for mode in ("append", "cdc"):
                name = f"{mode}_{round_no}_{run_id}"
                t0 = time.monotonic()
                reports = run(config_for(mode, name), until_caught_up=True, spark=spark)
                seconds = time.monotonic() - t0
                report = reports[0]
                names = [f"lake.bench.{name}"]
                if tables > 1:
                    names = [f"lake.bench.{name}_t{i}" for i in range(tables)]
                count = sum(int(spark.table(t).count()) for t in names)
                if mode == "cdc":
                    last_cdc = names[0]
                    for table, expected in zip(names, expected_by_table, strict=True):
                        problems.extend(type_problems(spark, table, fmt))
                        if table_rows(spark, table, fmt) != expected:
                            problems.append(f"{table}: the table is not the replayed stream")
                elif count != args.records:
                    problems.append(f"{name}: {count:,} rows, expected {args.records:,}")
                rows.append(
                    {
                        "pipeline": mode,
                        "round": round_no,
                        "records": report.records_ingested,
                        "rows": count,
                        "batches": report.batches,
                        "snapshots": report.snapshots,
                        "data_files": report.data_files,
                        "seconds": seconds,
                        "seconds_per_batch": seconds / max(report.batches, 1),
                    }
                )
                console.print(
                    f"{mode} round {round_no}: {report.records_ingested:,} changes, "
                    f"{count:,} rows, {report.batches} batches, {seconds:.1f}s"
                )
        deletes_before = count_of(spark, f"SELECT count(*) FROM {last_cdc}.delete_files")
        data_before = count_of(spark, f"SELECT count(*) FROM {last_cdc}.data_files")
        t0 = time.monotonic()
        spark.sql(
            f"CALL lake.system.rewrite_data_files(table => '{last_cdc}', options => map("
            "'delete-file-threshold', '1', 'remove-dangling-deletes', 'true', "
            "'rewrite-all', 'true'))"
        ).collect()
        # Position deletes left pointing at files no longer live are dropped by this one.
        spark.sql(
            f"CALL lake.system.rewrite_position_delete_files(table => '{last_cdc}', "
            "options => map('rewrite-all', 'true'))"
        ).collect()
        compact_seconds = time.monotonic() - t0
        deletes_after = count_of(spark, f"SELECT count(*) FROM {last_cdc}.delete_files")
        data_after = count_of(spark, f"SELECT count(*) FROM {last_cdc}.data_files")
        if table_rows(spark, last_cdc, fmt) != expected_by_table[0]:
            problems.append("after compaction the table is not the replayed stream")
        spark.stop()
    finally:
        if registry is not None:
            registry.down()
        broker.down()

    def median(mode: str, of: Callable[[dict[str, Any]], float]) -> float:
        return float(
            statistics.median(of(r) for r in rows if r["pipeline"] == mode and r["round"] > 0)
        )

    def rate(r: dict[str, Any]) -> float:
        return float(r["records"] / r["seconds"])

    def per_batch(r: dict[str, Any]) -> float:
        return float(r["seconds_per_batch"])

    append, cdc = median("append", rate), median("cdc", rate)
    ratio = cdc / append
    summary = Table(
        title=f"changes ({label}): {args.records:,} over {args.keys:,} keys, "
        f"{args.tables} table(s), 4 partitions each, "
        f"{args.per_trigger:,}/batch, local[2]"
    )
    for column in ("pipeline", "round", "rows", "batches", "seconds", "s/batch", "changes/s"):
        summary.add_column(column, justify="right")
    for r in rows:
        summary.add_row(
            r["pipeline"], str(r["round"]) if r["round"] else "0 (warm-up)", f"{r['rows']:,}",
            str(r["batches"]), f"{r['seconds']:.1f}", f"{r['seconds_per_batch']:.2f}",
            f"{rate(r):,.0f}",
        )  # fmt: skip
    console.print(summary)
    console.print(
        f"median changes/s: append {append:,.0f}, cdc {cdc:,.0f}; median s/batch: append "
        f"{median('append', per_batch):.2f}, cdc {median('cdc', per_batch):.2f}"
    )
    console.print(
        f"cdc / append (median changes/s): [bold]{ratio:.2f}×[/] (goal ≥ {GOAL}×): "
        f"{'met' if ratio >= GOAL else '[red]not met[/]'}"
    )
    console.print(
        f"delete files: {deletes_before} before compaction, {deletes_after} after "
        f"(data files {data_before} → {data_after}, {compact_seconds:.1f}s)"
    )
    for problem in problems:
        console.print(f"[red]mismatch[/] {problem}")
    path = write_result(
        "changes"
        if fmt == "op-field"
        else f"changes-{fmt}"
        + ("-declared" if declared else "")
        + (f"-tables{args.tables}" if args.tables > 1 else "")
        + ("-postgres" if full_source else ""),
        {
            "format": fmt,
            "json_schema": None if fmt != "debezium-json" else args.json_schema,
            "cdc_write": cdc_write,
            "append_reads": "rows" if fmt == "op-field" else "raw Debezium envelopes",
            "records": args.records,
            "keys": args.keys,
            "tables": args.tables,
            "envelope": args.envelope,
            "live_keys_at_end": live_keys,
            "partitions": 4,
            "master": "local[2]",
            "max_offsets_per_trigger": args.per_trigger,
            "produce_seconds": produce_seconds,
            "runs": rows,
            "append_changes_per_s": append,
            "cdc_changes_per_s": cdc,
            "append_seconds_per_batch": median("append", per_batch),
            "cdc_seconds_per_batch": median("cdc", per_batch),
            "ratio": ratio,
            "goal_ratio": GOAL,
            "goal_met": ratio >= GOAL,
            "delete_files_before_compaction": deletes_before,
            "delete_files_after_compaction": deletes_after,
            "data_files_before_compaction": data_before,
            "data_files_after_compaction": data_after,
            "compaction_seconds": compact_seconds,
            "problems": problems,
        },
    )
    console.print(f"wrote {path}")
    if problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
