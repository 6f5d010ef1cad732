"""Formats: the 1M payments as JSON, Avro and Protobuf (Schema Registry wire format), same run.

Four topics hold the same payments (4 partitions each): JSON; Avro written with one schema;
Protobuf; and Avro written with three schema versions of one subject in turn (v2 adds an
optional ``channel``, v3 an optional ``region``; every version carries the same payment, so
the two Avro topics differ only in how many writer schemas they mix — a topic mid-way through
two schema upgrades). The one-version Avro topic is written with v3, the reader shape of both.
frazil reads each with an AvailableNow trigger on local[2] into an
Iceberg table of the same layout (``days(created_at)``), in alternating rounds after a warm-up
round; the figures are ratios of median events/s in this run.

The JSON topic is read twice per round: by Spark's ``from_json`` (``json``, the default
until now) and by frazil's own JVM decoder (``json_frazil``, ``json_decoder: frazil``).

Goals: Avro and Protobuf ≥ 0.8× JSON; three versions ≤ 10% slower than one; frazil's JSON
decoder ≥ 1.5× ``from_json``'s events/s and ≥ 0.9× Avro's.

Usage: .venv/bin/python -m bench.formats [--records 1000000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import io
import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
from rich.console import Console
from rich.table import Table

from bench.common import WORK_DIR, free_port, payments_config, start_broker, write_result
from frazil.config import parse_config
from frazil.decode.schema_registry import header
from frazil.engine.runner import run
from frazil.engine.session import build_spark
from frazil.generate.payments import PaymentGenerator
from frazil.generate.producer import ensure_topic, produce_events
from frazil.local.registry import LocalRegistry

_FIELDS = ["id", "type", "created_at", "document", "payer", "amount"]
#: Optional fields the second and third schema versions add (written as null).
_ADDED = ["channel", "region"]


def avro_schema(fields: list[str]) -> dict[str, Any]:
    """The payment as an Avro record with ``fields`` (the optional ones default to null)."""
    types: dict[str, Any] = {
        "id": "string",
        "type": "string",
        "created_at": {"type": "long", "logicalType": "timestamp-millis"},
        "document": "string",
        "payer": "string",
        "amount": "long",
    }
    return {
        "type": "record",
        "name": "Payment",
        "namespace": "frazil.bench",
        "fields": [
            {"name": f, "type": types[f]}
            if f in types
            else {"name": f, "type": ["null", "string"], "default": None}
            for f in fields
        ],
    }


PROTO = """syntax = "proto3";
package frazil.bench;
import "google/protobuf/timestamp.proto";
message Payment {
  string id = 1;
  string type = 2;
  google.protobuf.Timestamp created_at = 3;
  string document = 4;
  string payer = 5;
  int64 amount = 6;
}
"""


def proto_module(work: Path) -> Any:
    """The generated Python module of :data:`PROTO` (compiled with grpc_tools' protoc)."""
    out = work / "proto"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_payment.proto").write_text(PROTO)
    import grpc_tools

    include = Path(grpc_tools.__file__).parent / "_proto"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{out}", f"-I{include}",
         f"--python_out={out}", str(out / "bench_payment.proto")],
        check=True,
    )  # fmt: skip
    sys.path.insert(0, str(out))
    return importlib.import_module("bench_payment_pb2")


def _parse(value: bytes) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(value)
    event["created_at"] = dt.datetime.fromisoformat(event["created_at"].replace("Z", "+00:00"))
    return event


def avro_factory(seed: int, writers: list[tuple[int, dict[str, Any]]]) -> Callable[[], Any]:
    """Payments in Avro wire format, cycling through the ``(schema id, schema)`` writers."""
    generator = PaymentGenerator(seed)
    parsed = [
        (header(i), fastavro.parse_schema(s), [f["name"] for f in s["fields"]]) for i, s in writers
    ]
    count = 0

    def make() -> tuple[bytes, bytes]:
        nonlocal count
        key, value = generator()
        head, schema, names = parsed[count % len(parsed)]
        count += 1
        event = _parse(value)
        out = io.BytesIO()
        out.write(head)
        fastavro.schemaless_writer(out, schema, {n: event.get(n) for n in names})
        return key, out.getvalue()

    return make


def protobuf_factory(seed: int, schema_id: int, module: Any) -> Callable[[], Any]:
    """Payments in Protobuf wire format (message index [0] is the single byte 0)."""
    generator = PaymentGenerator(seed)
    prefix = header(schema_id) + b"\x00"

    def make() -> tuple[bytes, bytes]:
        key, value = generator()
        event = _parse(value)
        message = module.Payment(
            id=event["id"], type=event["type"], document=event["document"],
            payer=event["payer"], amount=event["amount"],
        )  # fmt: skip
        message.created_at.FromDatetime(event["created_at"])
        return key, prefix + message.SerializeToString()

    return make


def register(registry_url: str, subject: str, text: str, kind: str) -> int:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": registry_url})
    return int(client.register_schema(subject, Schema(text, kind)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds per format")
    args = parser.parse_args()
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"formats-{run_id}"
    broker = start_broker(f"formats-{run_id}")
    registry = LocalRegistry(work / "state", port=free_port())
    try:
        registry_url = registry.up(timeout=180)
        topics = {f: f"bench-{f}-{run_id}" for f in ("json", "avro", "protobuf", "avro3")}
        for topic in topics.values():
            ensure_topic(broker.bootstrap, topic, partitions=4)
        full = avro_schema([*_FIELDS, *_ADDED])
        avro_id = register(registry_url, f"{topics['avro']}-value", json.dumps(full), "AVRO")
        versions = [_FIELDS, [*_FIELDS, _ADDED[0]], [*_FIELDS, *_ADDED]]
        mixed = [
            (
                register(
                    registry_url, f"{topics['avro3']}-value", json.dumps(avro_schema(v)), "AVRO"
                ),
                avro_schema(v),
            )
            for v in versions
        ]
        proto_id = register(registry_url, f"{topics['protobuf']}-value", PROTO, "PROTOBUF")
        module = proto_module(work)
        factories: dict[str, Callable[[], Any] | None] = {
            "json": None,
            "avro": avro_factory(1, [(avro_id, full)]),
            "protobuf": protobuf_factory(1, proto_id, module),
            "avro3": avro_factory(1, mixed),
        }
        produced: dict[str, float] = {}
        for name, topic in topics.items():
            t0 = time.monotonic()
            produce_events(
                broker.bootstrap, topic, args.records, seed=1, event_factory=factories[name]
            )
            produced[name] = time.monotonic() - t0
            console.print(f"produced {args.records:,} {name} events in {produced[name]:.1f}s")

        def config_for(fmt: str, name: str) -> Any:
            topic = topics["json" if fmt == "json_frazil" else fmt]
            decoded = "json" if fmt == "json_frazil" else fmt.rstrip("3")
            data = payments_config(work, broker.bootstrap, topic, name, format=decoded)
            if decoded == "json":
                data["pipelines"][0]["json_decoder"] = "frazil" if fmt == "json_frazil" else "spark"
            else:  # the schema comes from the registry
                del data["pipelines"][0]["schema"]
            data["schema_registry"] = {"url": registry_url}
            data["spark"] = {"master": "local[2]", "driver_memory": "4g"}
            return parse_config(data)

        spark = build_spark(config_for("json", "warmup"))
        rows: list[dict[str, Any]] = []
        measured = [*topics, "json_frazil"]
        for round_no in range(args.rounds + 1):
            for fmt in measured:
                name = f"{fmt}_{round_no}"
                t0 = time.monotonic()
                reports = run(config_for(fmt, name), until_caught_up=True, spark=spark)
                seconds = time.monotonic() - t0
                count = reports[0].table_rows
                rows.append(
                    {"format": fmt, "round": round_no, "records": count, "seconds": seconds}
                )
                console.print(f"{fmt} round {round_no}: {count:,} in {seconds:.1f}s")
        spark.stop()
    finally:
        registry.down()
        broker.down()

    def median_rate(fmt: str) -> float:
        return statistics.median(
            r["records"] / r["seconds"] for r in rows if r["format"] == fmt and r["round"] > 0
        )

    rates = {fmt: median_rate(fmt) for fmt in [*topics, "json_frazil"]}
    table = Table(title=f"formats, {args.records:,} payments, 4 partitions, local[2]")
    for column in ("format", "round", "records", "seconds", "events/s"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r["format"], str(r["round"]) if r["round"] else "0 (warm-up)", f"{r['records']:,}",
            f"{r['seconds']:.1f}", f"{r['records'] / r['seconds']:,.0f}",
        )  # fmt: skip
    console.print(table)
    ratios = {
        "avro_vs_json": rates["avro"] / rates["json"],
        "protobuf_vs_json": rates["protobuf"] / rates["json"],
        "avro_three_versions_vs_one": rates["avro3"] / rates["avro"],
        "json_frazil_vs_json": rates["json_frazil"] / rates["json"],
        "json_frazil_vs_avro": rates["json_frazil"] / rates["avro"],
    }
    console.print(
        f"Avro / JSON: [bold]{ratios['avro_vs_json']:.2f}×[/] (goal ≥ 0.8×); "
        f"Protobuf / JSON: [bold]{ratios['protobuf_vs_json']:.2f}×[/] (goal ≥ 0.8×); "
        f"Avro 3 versions / 1 version: [bold]{ratios['avro_three_versions_vs_one']:.2f}×[/] "
        "(goal ≥ 0.9×)"
    )
    console.print(
        f"frazil's JSON decoder / from_json: [bold]{ratios['json_frazil_vs_json']:.2f}×[/] "
        f"(goal ≥ 1.5×); / Avro: [bold]{ratios['json_frazil_vs_avro']:.2f}×[/] (goal ≥ 0.9×)"
    )
    path = write_result(
        "formats",
        {
            "records": args.records,
            "partitions": 4,
            "master": "local[2]",
            "produce_seconds": produced,
            "runs": rows,
            "events_per_s": rates,
            "ratios": ratios,
            "goals": {
                "avro_vs_json": 0.8,
                "protobuf_vs_json": 0.8,
                "avro_three_versions_vs_one": 0.9,
                "json_frazil_vs_json": 1.5,
                "json_frazil_vs_avro": 0.9,
            },
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
