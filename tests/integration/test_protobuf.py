"""Protobuf end to end with frazil's JVM decoder: plain (a .proto file) and registry wire format.

The records are serialized by Python's protobuf from tests/integration/protos/shop.proto,
compiled with grpcio-tools' protoc; registry producers use confluent-kafka's
ProtobufSerializer against the session's real registry.
"""

from __future__ import annotations

import datetime as dt
import decimal
import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from frazil.engine.runner import run
from frazil.errors import ConfigError, DecodeError
from tests.integration.test_avro import produce_raw

pytestmark = pytest.mark.integration

PROTOS = Path(__file__).parent / "protos"


def _generated(out: Path, name: str) -> Any:
    """The Python module protoc generates for ``protos/<name>.proto``."""
    import grpc_tools

    include = Path(grpc_tools.__file__).parent / "_proto"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTOS}", f"-I{include}",
         f"--python_out={out}", str(PROTOS / f"{name}.proto")],
        check=True,
    )  # fmt: skip
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module(f"{name}_pb2")
    finally:
        sys.path.remove(str(out))


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The generated Python module of shop.proto."""
    return _generated(tmp_path_factory.mktemp("shop_pb2"), "shop")


@pytest.fixture(scope="module")
def shop_v1(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The generated Python module of shop_v1.proto (an older Order)."""
    return _generated(tmp_path_factory.mktemp("shop_v1_pb2"), "shop_v1")


def order(shop: Any, n: int) -> Any:
    """An Order that sets every field (odd n leaves the optional ones unset)."""
    from google.protobuf import any_pb2

    o = shop.Order(
        id=f"o{n}", i32=-n, i64=-(2**40) - n, u32=2**32 - 1 - n, u64=2**64 - 1 - n, s32=-n,
        s64=-(2**50), f32=4_000_000_000, f64=2**63 + n, sf32=-7, sf64=-(2**62), ratio=0.5,
        price=n / 4, paid=n % 2 == 0, blob=bytes([0, n % 256]), status=shop.PAID,
        tags=["a", "b"],
    )  # fmt: skip
    o.address.city, o.address.zip = "Kyoto", "600"
    o.lines.add(sku="s1", qty=1)
    o.lines.add(sku="s2", qty=n)
    o.counts["x"] = n
    o.by_number[7] = "seven"
    o.created_at.FromDatetime(dt.datetime(2026, 1, 2, 3, 4, 5, 123456))
    o.took.FromMicroseconds(1_500_000)
    o.attrs.update({"k": "v", "n": 2, "list": [1, True, None]})
    o.tree.name = "root"
    o.tree.children.add(name="leaf")
    o.addresses["home"].city = "Osaka"
    packed = any_pb2.Any()
    packed.Pack(shop.Line(sku="z", qty=3))
    o.extra.CopyFrom(packed)
    if n % 2 == 0:
        o.maybe_int.value = 0  # set to the default: still "present", not null
        o.maybe_text.value = "text"
        o.maybe_flag.value = True
        o.note = "note"
        o.card = "visa"
    else:
        o.voucher = n
    return o


def check_row(row: dict[str, Any], n: int) -> None:
    """The table row of :func:`order` ``n``, column by column."""
    assert (row["id"], row["i32"], row["i64"]) == (f"o{n}", -n, -(2**40) - n)
    assert row["u32"] == 2**32 - 1 - n and row["u64"] == decimal.Decimal(2**64 - 1 - n)
    assert (row["s32"], row["s64"], row["f32"]) == (-n, -(2**50), 4_000_000_000)
    assert row["f64"] == decimal.Decimal(2**63 + n) and (row["sf32"], row["sf64"]) == (-7, -(2**62))
    assert (row["ratio"], row["price"], row["paid"]) == (0.5, n / 4, n % 2 == 0)
    assert row["blob"] == bytes([0, n % 256]) and row["status"] == "PAID"
    assert row["address"] == {"city": "Kyoto", "zip": "600"}
    assert row["lines"] == [{"sku": "s1", "qty": 1}, {"sku": "s2", "qty": n}]
    assert row["tags"] == ["a", "b"] and row["counts"] == {"x": n}
    assert row["by_number"] == {"7": "seven"}
    assert row["created_at"] == dt.datetime(2026, 1, 2, 3, 4, 5, 123456)
    assert row["took"] == 1_500_000
    assert json.loads(row["attrs"]) == {"k": "v", "n": 2, "list": [1, True, None]}
    assert row["extra"]["type_url"] == "type.googleapis.com/frazil.test.Line"
    assert row["tree"]["name"] == "root" and row["tree"]["children"][0]["name"] == "leaf"
    assert row["addresses"]["home"]["city"] == "Osaka"
    if n % 2 == 0:
        assert (row["maybe_int"], row["maybe_text"], row["maybe_flag"]) == (0, "text", True)
        assert (row["note"], row["card"], row["voucher"]) == ("note", "visa", None)
    else:
        assert (row["maybe_int"], row["maybe_text"], row["maybe_flag"]) == (None, None, None)
        assert (row["note"], row["card"], row["voucher"]) == (None, None, n)


TABLE_TYPES = {
    "id": "string", "i32": "int", "i64": "bigint", "u32": "bigint", "u64": "decimal(20,0)",
    "s32": "int", "s64": "bigint", "f32": "bigint", "f64": "decimal(20,0)", "sf32": "int",
    "sf64": "bigint", "ratio": "float", "price": "double", "paid": "boolean",
    "blob": "binary", "status": "string", "address": "struct<city:string,zip:string>",
    "lines": "array<struct<sku:string,qty:int>>", "tags": "array<string>",
    "counts": "map<string,bigint>", "by_number": "map<string,string>",
    "created_at": "timestamp", "took": "bigint", "maybe_int": "int", "maybe_text": "string",
    "maybe_flag": "boolean", "attrs": "string", "extra": "struct<type_url:string,value:binary>",
    "note": "string", "card": "string", "voucher": "bigint",
    "addresses": "map<string,struct<city:string,zip:string>>",
}  # fmt: skip


def _types(spark: Any, table: str) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in spark.table(f"lake.{table}").schema}


def test_plain_protobuf_with_a_proto_file_maps_every_type(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, shop: Any
) -> None:
    topic, table = f"pb-{unique}", f"db.pb_{unique}"
    produce_raw(kafka_bootstrap, topic, [order(shop, n).SerializeToString() for n in range(20)])
    config = make_config(
        [{"name": f"pb_{unique}", "topics": [topic], "table": table, "format": "protobuf",
          "schema_file": str(PROTOS / "shop.proto"), "message": "frazil.test.Order"}]
    )  # fmt: skip

    reports = run(config, until_caught_up=True, spark=spark)

    assert reports[0].records_ingested == 20
    types = _types(spark, table)
    tree = types.pop("tree")
    assert types == TABLE_TYPES
    # A recursive message nests as structs down to a depth, then stays serialized bytes.
    assert tree.startswith("struct<name:string,children:array<struct<name:string,children:")
    assert "binary" in tree
    rows = {r["id"]: r.asDict(recursive=True) for r in spark.table(f"lake.{table}").collect()}
    assert sorted(rows) == sorted(f"o{n}" for n in range(20))
    for n in range(20):
        check_row(rows[f"o{n}"], n)


def test_a_descriptor_set_works_like_the_proto_file(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, shop: Any, tmp_path: Path
) -> None:
    from frazil.decode.protobuf import compile_proto

    sources = {"shop.proto": (PROTOS / "shop.proto").read_text()}
    desc = tmp_path / "shop.desc"
    desc.write_bytes(compile_proto(sources, "shop.proto").data)
    topic, table = f"pbd-{unique}", f"db.pbd_{unique}"
    produce_raw(kafka_bootstrap, topic, [order(shop, 2).SerializeToString()])
    config = make_config(
        [{"name": f"pbd_{unique}", "topics": [topic], "table": table, "format": "protobuf",
          "schema_file": str(desc), "message": "frazil.test.Order"}]
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    check_row(spark.table(f"lake.{table}").first().asDict(recursive=True), 2)


def test_bad_protobuf_stops_the_batch_naming_the_record(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, shop: Any
) -> None:
    topic, table = f"pbb-{unique}", f"db.pbb_{unique}"
    good = order(shop, 2).SerializeToString()
    produce_raw(kafka_bootstrap, topic, [good, good[:30], b"\xff\xff\xff"], partitions=1)
    config = make_config(
        [{"name": f"pbb_{unique}", "topics": [topic], "table": table, "format": "protobuf",
          "schema_file": str(PROTOS / "shop.proto"), "message": "frazil.test.Order"}]
    )  # fmt: skip

    with pytest.raises(DecodeError) as caught:
        run(config, until_caught_up=True, spark=spark)

    message = str(caught.value)
    assert "2 record(s) in batch 0" in message
    assert f"topic {topic} partition 0 offset 1: decode: invalid or truncated Protobuf" in message
    assert f"topic {topic} partition 0 offset 2: decode: invalid or truncated Protobuf" in message
    assert spark.table(f"lake.{table}").count() == 0


def test_an_unknown_message_name_lists_the_messages(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic = f"pbm-{unique}"
    produce_raw(kafka_bootstrap, topic, [b""])
    config = make_config(
        [{"name": f"pbm_{unique}", "topics": [topic], "table": f"db.pbm_{unique}",
          "format": "protobuf", "schema_file": str(PROTOS / "shop.proto"),
          "message": "frazil.test.Nope"}]
    )  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        run(config, until_caught_up=True, spark=spark)
    assert str(caught.value) == (
        "pipelines[0].message: no message 'frazil.test.Nope' in shop.proto (messages: "
        "frazil.test.Address, frazil.test.Line, frazil.test.Tree, frazil.test.Order)"
    )


def test_registry_wire_format_two_versions_into_one_shape(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    schema_registry_url: str,
    unique: str,
    shop: Any,
    shop_v1: Any,
) -> None:
    topic, table = f"pbr-{unique}", f"db.pbr_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    conf = {"auto.register.schemas": True, "use.deprecated.format": False}
    # The older version first: the newest (registered last) is the reader shape.
    old = ProtobufSerializer(shop_v1.Order, client, conf)
    new = ProtobufSerializer(shop.Order, client, conf)
    values = [old(shop_v1.Order(id=f"v{n}", i32=n, status="OLD"), ctx) for n in range(5)]
    values += [new(order(shop, n), ctx) for n in range(10)]
    # Order is the 4th message of shop.proto: its records carry message index [3].
    assert values[-1][5:7] == b"\x02\x06"
    produce_raw(kafka_bootstrap, topic, values)
    pipeline = {"name": f"pbr_{unique}", "topics": [topic], "table": table, "format": "protobuf"}
    config = make_config([pipeline], schema_registry={"url": schema_registry_url})
    with pytest.raises(ConfigError) as caught:
        run(config, until_caught_up=True, spark=spark)
    assert str(caught.value) == (
        "pipelines[0].message: the registry schema defines 4 top-level messages "
        "(frazil.test.Address, frazil.test.Line, frazil.test.Tree, frazil.test.Order); set "
        "message to the records' message"
    )
    pipeline["message"] = "frazil.test.Order"
    config = make_config([pipeline], schema_registry={"url": schema_registry_url})

    run(config, until_caught_up=True, spark=spark)

    rows = {r["id"]: r.asDict(recursive=True) for r in spark.table(f"lake.{table}").collect()}
    assert sorted(rows) == sorted([*(f"o{n}" for n in range(10)), *(f"v{n}" for n in range(5))])
    for n in range(10):
        check_row(rows[f"o{n}"], n)
    for n in range(5):
        row = rows[f"v{n}"]
        # Fields filled by name; what the old writer lacks is null, its string status stays.
        assert (row["i32"], row["status"], row["address"], row["lines"]) == (n, "OLD", None, None)


def test_registry_protobuf_unknown_id_and_bad_index_are_marked(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    schema_registry_url: str,
    unique: str,
    shop: Any,
) -> None:
    from frazil.decode.schema_registry import header

    topic, table = f"pbx-{unique}", f"db.pbx_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    serializer = ProtobufSerializer(shop.Order, client, {"use.deprecated.format": False})
    good = serializer(order(shop, 0), SerializationContext(topic, MessageField.VALUE))
    schema_id = int.from_bytes(good[1:5], "big")
    values = [good, header(876543) + good[5:], header(schema_id) + b"\x02\x12" + good[7:]]
    produce_raw(kafka_bootstrap, topic, values, partitions=1)
    config = make_config(
        [{"name": f"pbx_{unique}", "topics": [topic], "table": table, "format": "protobuf",
          "message": "frazil.test.Order"}],
        schema_registry={"url": schema_registry_url},
    )  # fmt: skip

    with pytest.raises(DecodeError) as caught:
        run(config, until_caught_up=True, spark=spark)

    message = str(caught.value)
    assert (
        f"offset 1: decode: unknown schema id 876543 at registry {schema_registry_url}" in message
    )
    assert f"offset 2: decode: schema id {schema_id}: message index [9] not in schema" in message


def test_protobuf_needs_protoc_sources_that_compile(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.proto"
    shutil.copy(PROTOS / "shop.proto", broken)
    broken.write_text(broken.read_text().replace("string id = 1;", "strin id = 1;"))
    topic = f"pbc-{unique}"
    produce_raw(kafka_bootstrap, topic, [b""])
    config = make_config(
        [{"name": f"pbc_{unique}", "topics": [topic], "table": f"db.pbc_{unique}",
          "format": "protobuf", "schema_file": str(broken), "message": "frazil.test.Order"}]
    )  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        run(config, until_caught_up=True, spark=spark)
    assert "pipelines[0].schema_file: protoc cannot compile" in str(caught.value)
    assert '"strin" is not defined' in str(caught.value)
