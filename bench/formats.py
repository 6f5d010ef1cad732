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

It is read twice more into unpartitioned tables (a variant column has no ``created_at`` to
partition by): whole into one variant column (``json_variant``, ``variant: payment``: Spark's
``try_parse_json`` and frazil's depth check) and by frazil's typed decoder into the same layout
(``json_flat``), the variant mode's like-for-like baseline; and with all but the last three
fields declared, those three in a variant column of the rest (``json_rest``, ``schema`` with
``variant: rest``).

Goals: Avro and Protobuf ≥ 0.8× JSON; three versions ≤ 10% slower than one; frazil's JSON
decoder ≥ 1.5× ``from_json``'s events/s and ≥ 0.9× Avro's.

Usage: .venv/bin/python -m bench.formats [--records 1000000] [--rounds 2]
    [--only json_flat,json_variant]  (some formats only; the registry only when one needs it)
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


#: Every format measured, in the order of a round; each reads the topic of :func:`topic_of`.
FORMATS = (
    "json", "avro", "protobuf", "avro3", "json_frazil", "json_flat", "json_variant", "json_rest"
)  # fmt: skip
#: The formats that read the JSON topic.
_JSON_READS = ("json", "json_frazil", "json_flat", "json_variant", "json_rest")
#: Payment fields ``json_rest`` leaves undeclared (they land in its variant column).
_REST_FIELDS = 3


def topic_of(fmt: str) -> str:
    """The topic (by format) a measured format reads: the JSON ones read one topic."""
    return "json" if fmt in _JSON_READS else fmt


def _registry_factories(
    work: Path, registry_url: str, topics: dict[str, str]
) -> dict[str, Callable[[], Any] | None]:
    """The Avro and Protobuf topics' payments, their schemas registered."""
    full = avro_schema([*_FIELDS, *_ADDED])
    factories: dict[str, Callable[[], Any] | None] = {}
    if "avro" in topics:
        avro_id = register(registry_url, f"{topics['avro']}-value", json.dumps(full), "AVRO")
        factories["avro"] = avro_factory(1, [(avro_id, full)])
    if "avro3" in topics:
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
        factories["avro3"] = avro_factory(1, mixed)
    if "protobuf" in topics:
        proto_id = register(registry_url, f"{topics['protobuf']}-value", PROTO, "PROTOBUF")
        factories["protobuf"] = protobuf_factory(1, proto_id, proto_module(work))
    return factories


#: The ratios of events/s reported, by name: (numerator format, denominator format).
RATIOS: dict[str, tuple[str, str]] = {
    "avro_vs_json": ("avro", "json"),
    "protobuf_vs_json": ("protobuf", "json"),
    "avro_three_versions_vs_one": ("avro3", "avro"),
    "json_frazil_vs_json": ("json_frazil", "json"),
    "json_frazil_vs_avro": ("json_frazil", "avro"),
    "json_variant_vs_json_flat": ("json_variant", "json_flat"),
    "json_variant_vs_json_frazil": ("json_variant", "json_frazil"),
    "json_rest_vs_json_flat": ("json_rest", "json_flat"),
}
#: The ratios' goals.
GOALS: dict[str, float] = {
    "avro_vs_json": 0.8,
    "protobuf_vs_json": 0.8,
    "avro_three_versions_vs_one": 0.9,
    "json_frazil_vs_json": 1.5,
    "json_frazil_vs_avro": 0.9,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds per format")
    parser.add_argument(
        "--only", default=",".join(FORMATS), help=f"formats to measure, of {', '.join(FORMATS)}"
    )
    args = parser.parse_args()
    measured = [f for f in FORMATS if f in args.only.split(",")]
    unknown = set(args.only.split(",")) - set(FORMATS)
    if unknown or not measured:
        parser.error(f"--only takes formats of {', '.join(FORMATS)}")
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"formats-{run_id}"
    broker = start_broker(f"formats-{run_id}")
    registry = LocalRegistry(work / "state", port=free_port())
    needs_registry = any(topic_of(f) != "json" for f in measured)
    try:
        registry_url = registry.up(timeout=180) if needs_registry else ""
        topics = {
            f: f"bench-{f}-{run_id}"
            for f in ("json", "avro", "protobuf", "avro3")
            if f in {topic_of(m) for m in measured}
        }
        for topic in topics.values():
            ensure_topic(broker.bootstrap, topic, partitions=4)
        factories: dict[str, Callable[[], Any] | None] = {"json": None}
        if needs_registry:
            factories.update(_registry_factories(work, registry_url, topics))
        produced: dict[str, float] = {}
        for name, topic in topics.items():
            t0 = time.monotonic()
            produce_events(
                broker.bootstrap, topic, args.records, seed=1, event_factory=factories[name]
            )
            produced[name] = time.monotonic() - t0
            console.print(f"produced {args.records:,} {name} events in {produced[name]:.1f}s")

        def config_for(fmt: str, name: str) -> Any:
            topic = topics[topic_of(fmt)]
            decoded = "json" if fmt in _JSON_READS else fmt.rstrip("3")
            data = payments_config(work, broker.bootstrap, topic, name, format=decoded)
            pipeline = data["pipelines"][0]
            if decoded == "json":
                pipeline["json_decoder"] = "spark" if fmt == "json" else "frazil"
            else:  # the schema comes from the registry
                del pipeline["schema"]
            if fmt in ("json_flat", "json_variant", "json_rest"):
                del pipeline["partition_by"]
            if fmt == "json_variant":
                del pipeline["schema"]
                pipeline["variant"] = "payment"
            if fmt == "json_rest":
                declared = list(pipeline["schema"].items())[:-_REST_FIELDS]
                pipeline["schema"] = dict(declared)
                pipeline["variant"] = "rest"
            if registry_url:
                data["schema_registry"] = {"url": registry_url}
            data["spark"] = {"master": "local[2]", "driver_memory": "4g"}
            return parse_config(data)

        spark = build_spark(config_for(measured[0], "warmup"))
        rows: list[dict[str, Any]] = []
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

    rates = {fmt: median_rate(fmt) for fmt in measured}
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
        name: rates[a] / rates[b] for name, (a, b) in RATIOS.items() if a in rates and b in rates
    }
    for name, ratio in ratios.items():
        goal = GOALS.get(name)
        console.print(
            f"{RATIOS[name][0]} / {RATIOS[name][1]}: [bold]{ratio:.2f}×[/]"
            + (f" (goal ≥ {goal}×)" if goal is not None else "")
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
            "goals": {name: goal for name, goal in GOALS.items() if name in ratios},
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
