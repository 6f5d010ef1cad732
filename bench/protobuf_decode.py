"""Decode speed alone: 1M payments as JSON (``from_json``) vs Protobuf (frazil's JVM UDF).

No Kafka and no Iceberg: the same payments, once as JSON and once as Protobuf (plain, and in
the Schema Registry wire format), sit in a cached DataFrame; each round decodes every record
through frazil's own decoders (the ``Decoded`` value's fields and its error column, as the
batch plan places them) into Spark's ``noop`` sink. The figure is the ratio of median
records/s after a warm-up round. bench/formats.py measures the whole pipeline instead, where
reading Kafka and writing Parquet dilute the decoder's share.

Goal: Protobuf ≥ 0.8× JSON's records/s.

Usage: .venv/bin/python -m bench.protobuf_decode [--records 1000000] [--rounds 3] [--explain]

``--explain`` prints each decode's generated code first: the Protobuf UDF shows up once, as a
common subexpression every field reads (not once per field).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import WORK_DIR, write_result
from bench.formats import PROTO, _parse, proto_module
from frazil.config import parse_config
from frazil.decode.protobuf import ProtobufDecoder, spark_schema, wire_udf
from frazil.decode.protobuf_schemas import compile_proto
from frazil.decode.registry import BuildContext, Decoder, build_decoder
from frazil.decode.schema_registry import header
from frazil.engine.session import build_spark
from frazil.generate.payments import PaymentGenerator

#: The id the wire-format payload claims (no registry: the decoder is given the schema).
_SCHEMA_ID = 7


def _payload(work: Path, records: int) -> Path:
    """A Parquet file of ``records`` payments as (json, protobuf, wire) values, made once."""
    path = work / f"payments-{records}.parquet"
    if path.exists():
        return path
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    module = proto_module(work)
    generator = PaymentGenerator(1)
    prefix = header(_SCHEMA_ID) + b"\x00"
    json_values, proto_values, wire_values = [], [], []
    for _ in range(records):
        _, value = generator()
        event = _parse(value)
        message = module.Payment(
            id=event["id"], type=event["type"], document=event["document"],
            payer=event["payer"], amount=event["amount"],
        )  # fmt: skip
        message.created_at.FromDatetime(event["created_at"])
        data = message.SerializeToString()
        json_values.append(value)
        proto_values.append(data)
        wire_values.append(prefix + data)
    table = pa.table(
        {
            "json": pa.array(json_values, pa.binary()),
            "protobuf": pa.array(proto_values, pa.binary()),
            "wire": pa.array(wire_values, pa.binary()),
        }
    )
    partial = path.with_suffix(".partial")
    pq.write_table(table, partial)
    partial.rename(path)
    return path


def _decoders(spark: Any, config: Any, proto_file: Path) -> dict[str, tuple[str, Decoder]]:
    """Each measured decoder and the column it reads."""
    json_decoder = build_decoder(BuildContext(spark, config, config.pipelines[0], "value"))
    plain = build_decoder(BuildContext(spark, config, config.pipelines[1], "value"))
    compiled = compile_proto({proto_file.name: proto_file.read_text()}, proto_file.name)
    reader = spark_schema(spark, compiled, "frazil.bench.Payment")
    # The registry decoder without a registry: the writer's schema is handed over directly.
    wire = ProtobufDecoder(spark, reader, "frazil.bench.Payment")
    wire.udf = wire_udf(
        spark,
        {_SCHEMA_ID: compiled},
        reader,
        "http://bench.invalid",
        messages=("frazil.bench.Payment",),
    )
    return {"json": ("json", json_decoder), "protobuf": ("protobuf", plain), "wire": ("wire", wire)}


def _decode_all(frame: Any, column: str, decoder: Decoder, explain: bool = False) -> None:
    from pyspark.sql import functions as F

    decoded = decoder.decode(F.col(column))
    # Placed as the batch plan places them (engine/plan.py).
    fields = [
        (decoded.fields[f.name] if decoded.fields is not None else decoded.value[f.name]).alias(
            f.name
        )
        for f in decoder.schema.fields
    ]
    selected = frame.select(*fields, decoded.error.alias("error"))
    if explain:
        # Adaptive execution hides the generated code until a plan has run.
        adaptive = frame.sparkSession.conf.get("spark.sql.adaptive.enabled")
        frame.sparkSession.conf.set("spark.sql.adaptive.enabled", "false")
        selected.explain("codegen")
        frame.sparkSession.conf.set("spark.sql.adaptive.enabled", adaptive)
        return
    selected.write.format("noop").mode("overwrite").save()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per format")
    parser.add_argument("--explain", action="store_true", help="print each decode plan")
    args = parser.parse_args()
    work = WORK_DIR / "protobuf_decode"
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    payload = _payload(work, args.records)
    print(f"payload: {payload} ({time.monotonic() - t0:.1f}s)")
    proto_file = work / "bench_payment.proto"
    proto_file.write_text(PROTO)
    pipelines = [
        {
            "name": "json",
            "topics": ["json"],
            "table": "bench.json",
            "format": "json",
            "schema": {
                "id": "string",
                "type": "string",
                "created_at": "timestamp",
                "document": "string",
                "payer": "string",
                "amount": "long",
            },
        },
        {
            "name": "protobuf",
            "topics": ["protobuf"],
            "table": "bench.protobuf",
            "format": "protobuf",
            "schema_file": str(proto_file),
            "message": "frazil.bench.Payment",
        },
    ]
    config = parse_config(
        {
            "catalog": {"warehouse": str(work / "lake")},
            "kafka": {"bootstrap_servers": "127.0.0.1:9"},
            "state_dir": str(work / "state"),
            "spark": {"master": "local[2]", "driver_memory": "2g"},
            "pipelines": pipelines,
        }
    )
    spark = build_spark(config)
    try:
        frame = spark.read.parquet(str(payload)).repartition(4).cache()
        frame.count()
        decoders = _decoders(spark, config, proto_file)
        if args.explain:
            for name, (column, decoder) in decoders.items():
                print(f"--- {name}")
                _decode_all(frame, column, decoder, explain=True)
        runs: list[dict[str, Any]] = []
        for round_no in range(args.rounds + 1):
            for name, (column, decoder) in decoders.items():
                t0 = time.monotonic()
                _decode_all(frame, column, decoder)
                seconds = time.monotonic() - t0
                runs.append({"format": name, "round": round_no, "seconds": seconds})
                rate = args.records / seconds
                print(f"{name:9} round {round_no}: {seconds:6.2f}s {rate:12,.0f} records/s")
    finally:
        spark.stop()
    rates = {
        name: statistics.median(
            args.records / r["seconds"] for r in runs if r["format"] == name and r["round"] > 0
        )
        for name in ("json", "protobuf", "wire")
    }
    ratios = {
        "protobuf_vs_json": rates["protobuf"] / rates["json"],
        "wire_vs_json": rates["wire"] / rates["json"],
    }
    print(
        f"Protobuf / JSON: {ratios['protobuf_vs_json']:.2f}x, wire format / JSON: "
        f"{ratios['wire_vs_json']:.2f}x (goal >= 0.8x)"
    )
    path = write_result(
        "protobuf_decode",
        {
            "records": args.records,
            "master": "local[2]",
            "runs": runs,
            "records_per_s": rates,
            "ratios": ratios,
            "goals": {"protobuf_vs_json": 0.8},
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
