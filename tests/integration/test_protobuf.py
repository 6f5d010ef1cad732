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
from collections.abc import Sequence
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
    from frazil.decode.protobuf_schemas import compile_proto

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
    assert f"topic {topic} partition 0 offset 1: decode: truncated message at byte 30" in message
    assert f"topic {topic} partition 0 offset 2: decode: truncated message at byte 3" in message
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


def test_registry_protobuf_unknown_id_bad_index_and_another_message_are_marked(
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
    # An Address in a topic of Orders (the same registered file, another message index).
    other = ProtobufSerializer(shop.Address, client, {"use.deprecated.format": False})(
        shop.Address(city="x"), SerializationContext(topic, MessageField.VALUE)
    )
    values = [good, header(876543) + good[5:], header(schema_id) + b"\x02\x12" + good[7:], other]
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
    # Another message type: marked, not read by field name into an Order's shape.
    assert (
        f"offset 3: decode: schema id {int.from_bytes(other[1:5], 'big')}: a message "
        "'frazil.test.Address' where the reader reads 'frazil.test.Order': another message type"
    ) in message


def test_routed_topics_of_different_messages_each_read_as_their_own(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    schema_registry_url: str,
    unique: str,
    tmp_path: Path,
) -> None:
    """One routed pipeline over topics of different messages (each its own subject): each
    record is read as its own message, each table gets its message's fields."""
    clicks_pb = _module(tmp_path, f"clicks_{unique}", (
        'syntax = "proto3";\npackage web;\n'
        "message Click { string user = 1; int64 at = 2; string page = 3; }\n"
    ))  # fmt: skip
    sales_pb = _module(tmp_path, f"sales_{unique}", (
        'syntax = "proto3";\npackage shop;\n'
        "message Sale { string user = 1; string sku = 2; int64 cents = 3; }\n"
    ))  # fmt: skip
    clicks, sales = f"pbt-{unique}.clicks", f"pbt-{unique}.sales"
    client = SchemaRegistryClient({"url": schema_registry_url})
    conf = {"use.deprecated.format": False}
    click = ProtobufSerializer(clicks_pb.Click, client, conf)
    sale = ProtobufSerializer(sales_pb.Sale, client, conf)
    at_clicks = SerializationContext(clicks, MessageField.VALUE)
    at_sales = SerializationContext(sales, MessageField.VALUE)
    produce_raw(kafka_bootstrap, clicks, [
        click(clicks_pb.Click(user=f"u{n}", at=n, page=f"/p{n}"), at_clicks) for n in range(3)
    ])  # fmt: skip
    produce_raw(kafka_bootstrap, sales, [
        sale(sales_pb.Sale(user=f"u{n}", sku=f"s{n}", cents=100 * n), at_sales) for n in range(4)
    ])  # fmt: skip
    tables = f"db.pbt_{unique}_{{1}}"
    config = make_config(
        [{"name": f"pbt_{unique}", "topics": [clicks, sales], "format": "protobuf",
          "route": {"topic": f"pbt-{unique}\\.(\\w+)", "table": tables}}],
        schema_registry={"url": schema_registry_url},
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    def table(name: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        frame = spark.table(f"lake.{tables.replace('{1}', name)}")
        return [f.name for f in frame.schema], sorted(tuple(r) for r in frame.collect())

    assert table("clicks") == (
        ["user", "at", "page"],
        [(f"u{n}", n, f"/p{n}") for n in range(3)],
    )
    assert table("sales") == (
        ["user", "sku", "cents"],
        [(f"u{n}", f"s{n}", 100 * n) for n in range(4)],
    )


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


# ---------------------------------------------------------------------------------------------
# The decoder itself on DataFrames (no broker, no table): every row of the type mapping,
# protobuf's parsing rules, schema versions and every bad input, one record at a time.

TYPES_PROTO = """
syntax = "proto3";
package frazil.types;

import "google/protobuf/any.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

enum Color { COLOR_UNSPECIFIED = 0; RED = 1; GREEN = 2; }
message Inner { string name = 1; int32 n = 2; }
message Node { string label = 1; Node next = 2; }

message All {
  int32 i32 = 1; sint32 si32 = 2; sfixed32 sf32 = 3;
  int64 i64 = 4; sint64 si64 = 5; sfixed64 sf64 = 6;
  uint32 u32 = 7; fixed32 f32 = 8; uint64 u64 = 9; fixed64 f64 = 10;
  float fl = 11; double db = 12; bool b = 13; string s = 14; bytes by = 15;
  Color color = 16;
  Inner inner = 17;
  repeated Inner inners = 18;
  repeated int32 nums = 19;
  repeated string names = 20;
  map<string, int32> by_name = 21;
  map<int64, Inner> by_id = 22;
  map<bool, string> by_flag = 23;
  map<uint64, string> by_u64 = 24;
  oneof choice { string text = 25; Inner obj = 26; }
  optional int32 maybe = 27;
  google.protobuf.Timestamp ts = 28;
  google.protobuf.Duration dur = 29;
  google.protobuf.Int32Value w_i32 = 30;
  google.protobuf.Int64Value w_i64 = 31;
  google.protobuf.UInt32Value w_u32 = 32;
  google.protobuf.UInt64Value w_u64 = 33;
  google.protobuf.FloatValue w_f = 34;
  google.protobuf.DoubleValue w_d = 35;
  google.protobuf.BoolValue w_b = 36;
  google.protobuf.StringValue w_s = 37;
  google.protobuf.BytesValue w_by = 38;
  google.protobuf.Struct st = 39;
  google.protobuf.Value val = 40;
  google.protobuf.ListValue lst = 41;
  google.protobuf.Any any = 42;
  Node node = 43;
  repeated google.protobuf.Timestamp stamps = 44;
}
"""

#: The reader shape of frazil.types.All: one row per line of the type mapping.
ALL_SCHEMA = (
    "struct<i32:int,si32:int,sf32:int,i64:bigint,si64:bigint,sf64:bigint,u32:bigint,"
    "f32:bigint,u64:decimal(20,0),f64:decimal(20,0),fl:float,db:double,b:boolean,s:string,"
    "by:binary,color:string,inner:struct<name:string,n:int>,"
    "inners:array<struct<name:string,n:int>>,nums:array<int>,names:array<string>,"
    "by_name:map<string,int>,by_id:map<string,struct<name:string,n:int>>,"
    "by_flag:map<string,string>,by_u64:map<string,string>,text:string,"
    "obj:struct<name:string,n:int>,maybe:int,ts:timestamp,dur:bigint,w_i32:int,w_i64:bigint,"
    "w_u32:bigint,w_u64:decimal(20,0),w_f:float,w_d:double,w_b:boolean,w_s:string,"
    "w_by:binary,st:string,val:string,lst:string,any:struct<type_url:string,value:binary>,"
    "node:struct<label:string,next:"
)

LEGACY_PROTO = """
syntax = "proto2";
package frazil.legacy;

enum Size { SMALL = 1; LARGE = 2; }
message Legacy {
  optional int32 n = 1;
  optional Size size = 2;
  optional string id = 3;
  optional group Extra = 4 { optional string note = 5; }
  repeated int32 unpacked = 6;
  optional int32 with_default = 7 [default = 42];
}
"""

#: Two versions of one record: v1 as an old producer wrote it, v2 (the reader shape) later.
VERSION_1 = """
syntax = "proto3";
package frazil.ver1;
message Rec { int32 count = 1; float ratio = 2; int32 code = 3; string gone = 4; Sub sub = 5;
              bytes blob = 7; }
message Sub { string a = 1; }
"""
VERSION_2 = """
syntax = "proto3";
package frazil.ver2;
message Rec {
  message Note { string added = 1; }
  int64 count = 1; double ratio = 2; string code = 3; Sub sub = 5; string added = 6;
  int64 blob = 7;
}
message Sub { string a = 1; string b = 2; }
"""


def _module(work: Path, name: str, text: str) -> Any:
    """Python's generated module of one ``.proto`` source (grpc_tools' protoc)."""
    import grpc_tools

    folder = work / name
    folder.mkdir()
    (folder / f"{name}.proto").write_text(text)
    include = Path(grpc_tools.__file__).parent / "_proto"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{folder}", f"-I{include}",
         f"--python_out={folder}", str(folder / f"{name}.proto")],
        check=True,
    )  # fmt: skip
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(f"{name}_pb2")
    finally:
        sys.path.remove(str(folder))


@pytest.fixture(scope="module")
def pb(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The generated modules of this file's sources, by name."""
    work = tmp_path_factory.mktemp("pb_modules")
    sources = {
        "frazil_types": TYPES_PROTO,
        "frazil_legacy": LEGACY_PROTO,
        "frazil_ver1": VERSION_1,
        "frazil_ver2": VERSION_2,
    }
    return {name: _module(work, name, text) for name, text in sources.items()}


def _plain(spark: Any, source: str, message: str) -> Any:
    from frazil.decode.protobuf import ProtobufDecoder, plain_udf, spark_schema
    from frazil.decode.protobuf_schemas import compile_proto

    compiled = compile_proto({"test.proto": source}, "test.proto")
    reader = spark_schema(spark, compiled, message)
    return ProtobufDecoder(spark, reader, message, udf=plain_udf(spark, compiled, message, reader))


def _decode(spark: Any, decoder: Any, values: Sequence[bytes | None]) -> list[tuple[Any, Any]]:
    """Each value's decoded struct (a dict) and error (a dict), in order."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i int, value binary")
    decoded = decoder.decode(F.col("value"))
    rows = frame.select("i", decoded.value.alias("v"), decoded.error.alias("e")).collect()
    return [
        (
            None if r["v"] is None else r["v"].asDict(recursive=True),
            None if r["e"] is None else r["e"].asDict(),
        )
        for r in sorted(rows, key=lambda r: r["i"])
    ]


def _all_set(t: Any) -> Any:
    """A frazil.types.All with every field set."""
    from google.protobuf import any_pb2

    m = t.All(
        i32=-1, si32=-2, sf32=-3, i64=-(2**40), si64=-(2**41), sf64=-(2**42), u32=2**32 - 1,
        f32=2**31, u64=2**64 - 1, f64=2**63, fl=1.5, db=2.25, b=True, s="héllo",
        by=b"\x00\xff", color=t.GREEN, nums=[1, -2, 3], names=["a", "b"], maybe=0,
    )  # fmt: skip
    m.inner.name, m.inner.n = "in", 7
    m.inners.add(name="x", n=1)
    m.by_name["k"] = 1
    m.by_id[-5].name = "neg"
    m.by_flag[True] = "yes"
    m.by_u64[2**64 - 1] = "max"
    m.obj.name = "o"
    m.ts.FromDatetime(dt.datetime(2026, 3, 4, 5, 6, 7, 890123))
    m.dur.FromMicroseconds(-1_500_000)
    m.w_i32.value = 0  # set to the default: present, not null
    m.w_i64.value = -1
    m.w_u32.value = 2**32 - 1
    m.w_u64.value = 2**64 - 1
    m.w_f.value = 0.5
    m.w_d.value = 0.25
    m.w_b.value = False
    m.w_s.value = ""
    m.w_by.value = b"\x01"
    m.st.update({"a": 1, "b": [True, None, "x"], "c": {"d": 1.5}})
    m.val.string_value = "v"
    m.lst.extend([1, "two"])
    packed = any_pb2.Any()
    packed.Pack(t.Inner(name="packed"))
    m.any.CopyFrom(packed)
    node = m.node
    for depth in range(12):
        node.label = f"n{depth}"
        if depth < 11:
            node = node.next
    m.stamps.add().FromDatetime(dt.datetime(2026, 1, 1))
    m.stamps.add().FromDatetime(dt.datetime(1969, 12, 31, 23, 59, 59, 500000))
    return m


def test_every_type_of_the_mapping_decodes(spark: Any, pb: Any) -> None:
    t = pb["frazil_types"]
    decoder = _plain(spark, TYPES_PROTO, "frazil.types.All")
    assert decoder.schema.simpleString().startswith(ALL_SCHEMA)

    ((v, error),) = _decode(spark, decoder, [_all_set(t).SerializeToString()])

    assert error is None
    assert (v["i32"], v["si32"], v["sf32"]) == (-1, -2, -3)
    assert (v["i64"], v["si64"], v["sf64"]) == (-(2**40), -(2**41), -(2**42))
    assert (v["u32"], v["f32"]) == (2**32 - 1, 2**31)
    assert (v["u64"], v["f64"]) == (decimal.Decimal(2**64 - 1), decimal.Decimal(2**63))
    assert (v["fl"], v["db"], v["b"], v["s"], bytes(v["by"])) == (
        1.5, 2.25, True, "héllo", b"\x00\xff"
    )  # fmt: skip
    assert v["color"] == "GREEN"
    assert v["inner"] == {"name": "in", "n": 7}
    assert v["inners"] == [{"name": "x", "n": 1}]
    assert (v["nums"], v["names"]) == ([1, -2, 3], ["a", "b"])
    assert v["by_name"] == {"k": 1} and v["by_id"] == {"-5": {"name": "neg", "n": 0}}
    assert v["by_flag"] == {"true": "yes"} and v["by_u64"] == {str(2**64 - 1): "max"}
    assert (v["text"], v["obj"], v["maybe"]) == (None, {"name": "o", "n": 0}, 0)
    assert v["ts"] == dt.datetime(2026, 3, 4, 5, 6, 7, 890123)
    assert v["dur"] == -1_500_000
    assert (v["w_i32"], v["w_i64"], v["w_u32"], v["w_u64"]) == (
        0, -1, 2**32 - 1, decimal.Decimal(2**64 - 1)
    )  # fmt: skip
    assert (v["w_f"], v["w_d"], v["w_b"], v["w_s"], bytes(v["w_by"])) == (
        0.5, 0.25, False, "", b"\x01"
    )  # fmt: skip
    assert json.loads(v["st"]) == {"a": 1, "b": [True, None, "x"], "c": {"d": 1.5}}
    assert (json.loads(v["val"]), json.loads(v["lst"])) == ("v", [1, "two"])
    assert v["any"]["type_url"] == "type.googleapis.com/frazil.types.Inner"
    assert t.Inner.FromString(bytes(v["any"]["value"])).name == "packed"
    # Recursive: structs down to ten levels of messages, then the serialized sub-message.
    node = v["node"]
    for depth in range(9):
        assert node["label"] == f"n{depth}"
        node = node["next"]
    assert node["label"] == "n9"
    deeper = t.Node.FromString(bytes(node["next"]))
    assert (deeper.label, deeper.next.label) == ("n10", "n11")
    assert v["stamps"] == [
        dt.datetime(2026, 1, 1), dt.datetime(1969, 12, 31, 23, 59, 59, 500000)
    ]  # fmt: skip


def test_unset_fields_read_as_protobuf_reads_them(spark: Any, pb: Any) -> None:
    decoder = _plain(spark, TYPES_PROTO, "frazil.types.All")

    (empty, error), (null, null_error) = _decode(spark, decoder, [b"", None])

    assert (error, null, null_error) == (None, None, None)
    # proto3 scalars without presence: their default; repeated and maps: empty.
    assert {k: empty[k] for k in ("i32", "si32", "sf32", "i64", "si64", "sf64")} == dict.fromkeys(
        ("i32", "si32", "sf32", "i64", "si64", "sf64"), 0
    )
    assert (empty["u32"], empty["f32"], empty["u64"], empty["f64"]) == (0, 0, 0, 0)
    assert (empty["fl"], empty["db"], empty["b"], empty["s"], bytes(empty["by"])) == (
        0.0, 0.0, False, "", b""
    )  # fmt: skip
    assert empty["color"] == "COLOR_UNSPECIFIED"
    assert (empty["inners"], empty["nums"], empty["names"], empty["stamps"]) == ([], [], [], [])
    assert (empty["by_name"], empty["by_id"], empty["by_flag"], empty["by_u64"]) == ({}, {}, {}, {})
    # Fields with presence (messages, wrappers, oneof members, optional): null.
    with_presence = [
        "inner", "text", "obj", "maybe", "ts", "dur", "w_i32", "w_i64", "w_u32", "w_u64",
        "w_f", "w_d", "w_b", "w_s", "w_by", "st", "val", "lst", "any", "node",
    ]  # fmt: skip
    assert {k: empty[k] for k in with_presence} == dict.fromkeys(with_presence)


def test_protobuf_parsing_rules_hold(spark: Any, pb: Any) -> None:
    t = pb["frazil_types"]
    decoder = _plain(spark, TYPES_PROTO, "frazil.types.All")

    def ser(**fields: Any) -> bytes:
        return bytes(t.All(**fields).SerializeToString())

    unpacked_4 = b"\x98\x01\x04"  # field 19 (nums) as one unpacked varint
    unknown_field = b"\xb8\x3e\x01"  # field 999, varint 1: not in the schema
    i32_as_bytes = b"\x0a\x01x"  # field 1 with the wrong wire type: an unknown field
    enum_7 = b"\x80\x01\x07"  # field 16 (color) = 7: not a Color value
    values = [
        ser(i32=1) + ser(i32=2),
        ser(inner=t.Inner(name="a")) + ser(inner=t.Inner(n=5)),
        ser(nums=[1, 2]) + ser(nums=[3]) + unpacked_4,
        ser(text="t") + ser(obj=t.Inner(name="o")),
        ser(obj=t.Inner(name="o")) + ser(text="t"),
        ser(i32=3) + unknown_field + i32_as_bytes,
        enum_7,
    ]

    decoded = [v for v, _ in _decode(spark, decoder, values)]

    assert decoded[0]["i32"] == 2  # the last value wins
    assert decoded[1]["inner"] == {"name": "a", "n": 5}  # a message met twice is merged
    assert decoded[2]["nums"] == [1, 2, 3, 4]  # packed and unpacked values append
    assert (decoded[3]["text"], decoded[3]["obj"]) == (None, {"name": "o", "n": 0})
    assert (decoded[4]["text"], decoded[4]["obj"]) == ("t", None)  # one oneof member
    assert decoded[5]["i32"] == 3
    assert decoded[6]["color"] == "7"  # an open enum keeps a number it does not know


def test_proto2_presence_groups_and_closed_enums(spark: Any, pb: Any) -> None:
    legacy = pb["frazil_legacy"]
    decoder = _plain(spark, LEGACY_PROTO, "frazil.legacy.Legacy")
    assert decoder.schema.simpleString() == (
        "struct<n:int,size:string,id:string,extra:struct<note:string>,unpacked:array<int>,"
        "with_default:int>"
    )
    full = legacy.Legacy(n=0, size=legacy.LARGE, id="a", unpacked=[1, 2])
    full.extra.note = "hi"
    size_99 = b"\x10\x63"  # a number Size does not define: proto2 enums are closed

    (v1, _), (v2, _), (v3, _) = _decode(
        spark,
        decoder,
        [full.SerializeToString(), legacy.Legacy(id="b").SerializeToString(), size_99],
    )

    assert v1 == {"n": 0, "size": "LARGE", "id": "a", "extra": {"note": "hi"},
                  "unpacked": [1, 2], "with_default": None}  # fmt: skip
    # proto2 fields have presence: unset is null (a declared default is not applied).
    assert v2 == {"n": None, "size": None, "id": "b", "extra": None, "unpacked": [],
                  "with_default": None}  # fmt: skip
    assert v3["size"] is None  # dropped, as protobuf-java does


def _versions(spark: Any) -> tuple[Any, str]:
    """A wire-format decoder knowing ids 1 (VERSION_1) and 2 (VERSION_2, the reader)."""
    from frazil.decode.protobuf import ProtobufDecoder, spark_schema, wire_udf
    from frazil.decode.protobuf_schemas import compile_proto

    v1 = compile_proto({"ver.proto": VERSION_1}, "ver.proto")
    v2 = compile_proto({"ver.proto": VERSION_2}, "ver.proto")
    reader = spark_schema(spark, v2, "frazil.ver2.Rec")
    url = "http://registry.invalid/apis/ccompat/v7"
    decoder = ProtobufDecoder(spark, reader, "frazil.ver2.Rec")
    # Two packages (both versions' modules load into one Python process): one message.
    decoder.udf = wire_udf(
        spark, {2: v2, 1: v1}, reader, url, messages=("frazil.ver2.Rec", "frazil.ver1.Rec")
    )
    return decoder, url


def test_two_writer_versions_decode_into_one_reader_shape(spark: Any, pb: Any) -> None:
    from frazil.decode.schema_registry import header

    ver1, ver2 = pb["frazil_ver1"], pb["frazil_ver2"]
    decoder, _ = _versions(spark)
    old = ver1.Rec(count=5, ratio=0.5, code=7, gone="x", sub=ver1.Sub(a="a1"), blob=b"\x01")
    new = ver2.Rec(count=2**40, ratio=0.25, code="c", sub=ver2.Sub(a="a2", b="b2"), added="y")
    note = ver2.Rec.Note(added="from a nested message")

    (o, o_error), (n, n_error), (m, m_error) = _decode(
        spark,
        decoder,
        [
            header(1) + b"\x00" + old.SerializeToString(),
            header(2) + b"\x00" + new.SerializeToString(),
            header(2) + b"\x04\x00\x00" + note.SerializeToString(),  # indexes [0, 0]
        ],
    )

    assert n_error is None
    # Indexes [0, 0] pick the nested Note: another message than the reader's, marked (never
    # read by field name into a Rec).
    assert m is None
    assert m_error["reason"] == (
        "schema id 2: a message 'frazil.ver2.Rec.Note' where the reader reads 'frazil.ver2.Rec', "
        "'frazil.ver1.Rec': another message type"
    )
    # What cannot convert (bytes into bigint) marks the record, never a null in its place.
    assert o is None
    assert o_error["reason"] == (
        "schema id 1: field 'blob' is binary in this record's schema where the reader's is bigint"
    )
    without_blob = ver1.Rec(count=5, ratio=0.5, code=7, gone="x", sub=ver1.Sub(a="a1"))
    [(o, o_error)] = _decode(
        spark, decoder, [header(1) + b"\x00" + without_blob.SerializeToString()]
    )
    assert o_error is None
    # By name: int widens to bigint, float to double, int becomes text for a string; what the
    # writer lacks is null (no default: it is not the writer's field); an unset field whose
    # default the reader cannot hold is null; the writer's extra field is ignored.
    assert o == {"count": 5, "ratio": 0.5, "code": "7", "sub": {"a": "a1", "b": None},
                 "added": None, "blob": None}  # fmt: skip
    assert n == {"count": 2**40, "ratio": 0.25, "code": "c", "sub": {"a": "a2", "b": "b2"},
                 "added": "y", "blob": 0}  # fmt: skip


def test_a_newer_writers_values_an_older_reader_cannot_hold_mark_their_records(
    spark: Any, pb: Any
) -> None:
    from frazil.decode.protobuf import ProtobufDecoder, spark_schema, wire_udf
    from frazil.decode.protobuf_schemas import compile_proto
    from frazil.decode.schema_registry import header

    # The reader is VERSION_1's (count int, sub a message); id 2 writes count as int64 and
    # id 3 writes sub as a string.
    v1 = compile_proto({"ver.proto": VERSION_1}, "ver.proto")
    v2 = compile_proto({"ver.proto": VERSION_2}, "ver.proto")
    v3 = compile_proto(
        {"ver.proto": VERSION_1.replace("Sub sub = 5;", "string sub = 5;")}, "ver.proto"
    )
    reader = spark_schema(spark, v1, "frazil.ver1.Rec")
    decoder = ProtobufDecoder(spark, reader, "frazil.ver1.Rec")
    decoder.udf = wire_udf(
        spark, {1: v1, 2: v2, 3: v3}, reader, "http://registry.invalid",
        messages=("frazil.ver1.Rec", "frazil.ver2.Rec"),
    )  # fmt: skip
    ver2 = pb["frazil_ver2"]
    fits = ver2.Rec(count=7)
    too_big = ver2.Rec(count=2**40)
    text_sub = bytes([0x2A, 0x01]) + b"x"  # field 5 (sub), length-delimited: "x"

    out = _decode(
        spark,
        decoder,
        [
            header(2) + b"\x00" + fits.SerializeToString(),
            header(2) + b"\x00" + too_big.SerializeToString(),
            header(3) + b"\x00" + text_sub,
        ],
    )

    assert out[0][0]["count"] == 7 and out[0][1] is None
    assert out[1] == (
        None,
        {
            "stage": "decode",
            "reason": "schema id 2: field 'count' holds 1099511627776, which the reader's int"
            " cannot hold"
            " (written as bigint)",
            "detail": out[1][1]["detail"],
        },
    )
    assert out[2][0] is None
    assert out[2][1]["reason"] == (
        "schema id 3: field 'sub' is string in this record's schema where the reader's is"
        " struct<a:string>"
    )


def test_every_bad_wire_format_value_is_marked_with_its_reason(spark: Any, pb: Any) -> None:
    from frazil.decode.schema_registry import header

    decoder, url = _versions(spark)
    good = pb["frazil_ver2"].Rec(count=1, code="a long enough code to cut").SerializeToString()
    cases = {
        "empty": (b"", "empty value (not Schema Registry wire format)"),
        "json": (b'{"a": 1}', "bad magic byte 0x7B (not Schema Registry wire format)"),
        "short": (b"\x00\x00\x01", "value of 3 byte(s) is too short for the wire format"),
        "unknown": (header(99) + b"\x00" + good, f"unknown schema id 99 at registry {url}"),
        "index": (header(2) + b"\x02\x12" + good, "schema id 2: message index [9] not in schema"),
        "nested": (
            header(2) + b"\x04\x00\x06" + good,
            "schema id 2: message index [0, 3] not in schema",
        ),
        "no index": (header(2), "schema id 2: truncated message at byte 5"),
        # Where the field that runs past the end starts (code's text, after its length).
        "truncated": (header(2) + b"\x00" + good[:10], "schema id 2: truncated message at byte 10"),
        "bad tag": (
            header(2) + b"\x00\x00",
            "schema id 2: invalid Protobuf at byte 7: Protocol message contained an invalid tag"
            " (zero)",
        ),
        "wire type": (
            header(2) + b"\x00\x0f",
            "schema id 2: invalid Protobuf at byte 7: Protocol message tag had invalid wire type",
        ),
    }

    results = _decode(spark, decoder, [value for value, _ in cases.values()] + [None])

    for (name, (value, reason)), (data, error) in zip(cases.items(), results, strict=False):
        assert data is None, name
        assert error == {"stage": "decode", "reason": reason, "detail": value[:32].hex().upper()}
    assert results[-1] == (None, None)  # a null value (a tombstone) is not an error


def test_bad_plain_values_are_marked_with_where_they_fail(spark: Any, pb: Any) -> None:
    t = pb["frazil_types"]
    decoder = _plain(spark, TYPES_PROTO, "frazil.types.All")
    good = _all_set(t).SerializeToString()
    values = [good[:17], b"\x72\x01\xff", b"\x08\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80"]

    reasons = [e["reason"] for _, e in _decode(spark, decoder, values)]

    assert reasons == [
        "truncated message at byte 14",  # sf32's 4 bytes start at 14; the value ends at 17
        "invalid Protobuf at byte 2: Protocol message had invalid UTF-8",  # the text starts at 2
        "invalid Protobuf at byte 11: CodedInputStream encountered a malformed varint",
    ]


def test_record_keys_decode_as_protobuf(
    spark: Any, make_config: Any, pb: Any, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    from frazil.decode.registry import BuildContext, build_decoder

    source = tmp_path / "types.proto"
    source.write_text(TYPES_PROTO)
    config = make_config(
        [{"name": "keys", "topics": ["keys"], "table": "db.keys", "format": "string",
          "key_format": "protobuf", "key_schema_file": str(source),
          "key_message": "frazil.types.Inner"}]
    )  # fmt: skip
    decoder = build_decoder(BuildContext(spark, config, config.pipelines[0], "key"))
    key = pb["frazil_types"].Inner(name="k", n=3).SerializeToString()

    decoded = decoder.decode(F.col("key"))
    row = spark.createDataFrame([(key,)], "key binary").select(decoded.value.alias("k")).first()

    assert decoder.schema.simpleString() == "struct<name:string,n:int>"
    assert row is not None and row["k"].asDict() == {"name": "k", "n": 3}


def test_a_descriptor_set_without_the_message_names_the_message_key(
    spark: Any, make_config: Any, tmp_path: Path
) -> None:
    from frazil.decode.protobuf_schemas import compile_proto
    from frazil.decode.registry import BuildContext, build_decoder

    desc = tmp_path / "types.desc"
    desc.write_bytes(compile_proto({"types.proto": TYPES_PROTO}, "types.proto").data)
    config = make_config(
        [{"name": "desc", "topics": ["desc"], "table": "db.desc", "format": "protobuf",
          "schema_file": str(desc), "message": "frazil.types.Nope"}]
    )  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        build_decoder(BuildContext(spark, config, config.pipelines[0], "value"))
    message = str(caught.value)
    assert message.startswith("pipelines[0].message: no message 'frazil.types.Nope' in types.desc")
    assert "frazil.types.All" in message and "google.protobuf.Timestamp" in message


def _two_versions(tmp_path: Path, message: str, first: str, second: str) -> tuple[Any, Any]:
    """The generated classes of ``message`` in two versions of one ``.proto`` file."""
    from tests.integration.registry_helpers import protobuf_classes

    classes = []
    for version, text in (("v1", first), ("v2", second)):
        (tmp_path / version).mkdir()
        (tmp_path / version / "order.proto").write_text(text)
        classes.append(protobuf_classes([tmp_path / version / "order.proto"])[message])
    return classes[0], classes[1]


def test_a_newer_protobuf_writer_met_mid_run_evolves_the_reader_and_table(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    schema_registry_url: str,
    unique: str,
    tmp_path: Path,
) -> None:
    # The subject holds v1 at start; v2 (new top-level and nested fields) lives under another
    # subject, so it is first met in a later batch (at most 5 records per batch).
    # v2 also widens n (int32 to int64) with values an int cannot hold: the column widens.
    body = 'syntax = "proto3";\npackage frazil.evo;\nmessage Item {{ string sku = 1;{item} }}\n'
    body += "message Order {{ string id = 1; {n} n = 2; Item item = 3;{order} }}\n"
    v1, v2 = _two_versions(
        tmp_path,
        "frazil.evo.Order",
        body.format(item="", order="", n="int32"),
        body.format(item=" int64 qty = 2;", order=" string note = 4;", n="int64"),
    )
    topic, table = f"pbe-{unique}", f"db.pbe_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    conf = {"auto.register.schemas": True, "use.deprecated.format": False}
    old = ProtobufSerializer(v1, client, conf)
    other = {**conf, "subject.name.strategy": lambda *_: f"other-pbe-{unique}"}
    new = ProtobufSerializer(v2, client, other)
    values = [old(v1(id=f"a{n}", n=n, item={"sku": "s"}), ctx) for n in range(5)]
    values += [
        new(v2(id=f"b{n}", n=2**40 + n, item={"sku": "t", "qty": n}, note="hi"), ctx)
        for n in range(3)
    ]
    produce_raw(kafka_bootstrap, topic, values, partitions=1)
    pipeline = {
        "name": f"pbe_{unique}",
        "topics": [topic],
        "table": table,
        "format": "protobuf",
        "message": "frazil.evo.Order",
        "max_offsets_per_trigger": 5,
    }
    config = make_config([pipeline], schema_registry={"url": schema_registry_url})

    [report] = run(config, until_caught_up=True, spark=spark)

    assert report.records_ingested == 8
    assert sorted(c.split(": ", 1)[1] for c in report.schema_changes) == [
        "add column note string",
        "add field item.qty bigint",
        "widen n int to bigint",
    ]
    rows = sorted(
        tuple(r)
        for r in spark.sql(f"SELECT id, n, item.sku, item.qty, note FROM lake.{table}").collect()
    )
    assert rows == [
        *[(f"a{n}", n, "s", None, None) for n in range(5)],
        *[(f"b{n}", 2**40 + n, "t", n, "hi") for n in range(3)],
    ]


def test_fields_the_newest_protobuf_version_dropped_keep_older_writers_values(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    schema_registry_url: str,
    unique: str,
    tmp_path: Path,
) -> None:
    # v2 drops a top-level and a nested field; both versions are in the subject when the run
    # starts, as Avro's reader keeps an older version's fields.
    body = 'syntax = "proto3";\npackage frazil.drop;\nmessage Item {{ string sku = 1;{item} }}\n'
    body += "message Order {{ string id = 1; Item item = 3;{order} }}\n"
    v1, v2 = _two_versions(
        tmp_path,
        "frazil.drop.Order",
        body.format(item=" int64 qty = 2;", order=" string legacy = 4;"),
        body.format(item="", order=""),
    )
    topic, table = f"pbd-{unique}", f"db.pbd_{unique}"
    client = SchemaRegistryClient({"url": schema_registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    conf = {"auto.register.schemas": True, "use.deprecated.format": False}
    old, new = ProtobufSerializer(v1, client, conf), ProtobufSerializer(v2, client, conf)
    values = [
        old(v1(id=f"a{n}", item={"sku": "s", "qty": n}, legacy=f"l{n}"), ctx) for n in range(3)
    ]
    values += [new(v2(id=f"b{n}", item={"sku": "t"}), ctx) for n in range(2)]
    produce_raw(kafka_bootstrap, topic, values, partitions=1)
    pipeline = {
        "name": f"pbd_{unique}",
        "topics": [topic],
        "table": table,
        "format": "protobuf",
        "message": "frazil.drop.Order",
    }
    config = make_config([pipeline], schema_registry={"url": schema_registry_url})

    # The reader was the newest version's shape: legacy and item.qty were lost.
    [report] = run(config, until_caught_up=True, spark=spark)

    assert report.records_ingested == 5
    query = f"SELECT id, item.sku, item.qty, legacy FROM lake.{table}"
    rows = sorted(tuple(r) for r in spark.sql(query).collect())
    assert rows == [
        *[(f"a{n}", "s", n, f"l{n}") for n in range(3)],
        *[(f"b{n}", "t", None, None) for n in range(2)],
    ]


TEXT_THEN_BYTES = """
syntax = "proto3";
package frazil.{pkg};
message Rec {{ {s} s = 1; repeated {s} rs = 2; {m} m = 3; }}
message Sub {{ string a = 1; }}
"""


def test_bytes_written_where_the_reader_has_text_are_their_utf8_text(spark: Any) -> None:
    """string and bytes are one wire type: a version that changed one into the other sent
    the text's bytes. They land as that text; bytes that are not UTF-8, and a message where
    the reader has text, mark their records (never an object's name in their place)."""
    from frazil.decode.protobuf import ProtobufDecoder, spark_schema, wire_udf
    from frazil.decode.protobuf_schemas import compile_proto
    from frazil.decode.schema_registry import header

    text = compile_proto(
        {"t.proto": TEXT_THEN_BYTES.format(pkg="text", s="string", m="string")}, "t.proto"
    )
    data = compile_proto(
        {"t.proto": TEXT_THEN_BYTES.format(pkg="data", s="bytes", m="Sub")}, "t.proto"
    )
    reader = spark_schema(spark, text, "frazil.text.Rec")
    decoder = ProtobufDecoder(spark, reader, "frazil.text.Rec")
    decoder.udf = wire_udf(
        spark, {1: text, 2: data}, reader, "http://registry.invalid",
        messages=("frazil.text.Rec", "frazil.data.Rec"),
    )  # fmt: skip

    def message(s: bytes, rs: list[bytes], m: bytes = b"") -> bytes:
        out = b"\x0a" + bytes([len(s)]) + s
        for r in rs:
            out += b"\x12" + bytes([len(r)]) + r
        return out + (b"\x1a" + bytes([len(m)]) + m if m else b"")

    out = _decode(
        spark,
        decoder,
        [
            header(2) + b"\x00" + message("héllo".encode(), [b"x", "€".encode()]),
            header(2) + b"\x00" + message(b"\xff\xfe", []),
            header(2) + b"\x00" + message(b"ok", [b"\xc3"]),
            header(2) + b"\x00" + message(b"ok", [], m=b"\x0a\x01z"),  # Sub{a: "z"}
        ],
    )

    assert out[0] == ({"s": "héllo", "rs": ["x", "€"], "m": None}, None)
    assert [o[0] for o in out[1:]] == [None, None, None]
    assert [o[1]["reason"] for o in out[1:]] == [
        "schema id 2: field 's' holds bytes that are not UTF-8 text, where the reader's is"
        " string (written as binary)",
        "schema id 2: field 'rs' holds bytes that are not UTF-8 text, where the reader's is"
        " string (written as binary)",
        "schema id 2: field 'm' is frazil.data.Sub in this record's schema, which the reader's"
        " type for it cannot hold",
    ]


def test_timestamps_and_durations_past_a_columns_range_mark_their_records(spark: Any) -> None:
    """A Timestamp or Duration whose microseconds a long cannot hold is marked, neither
    wrapped round nor left to fail the batch."""
    decoder = _plain(
        spark,
        'syntax = "proto3";\nimport "google/protobuf/timestamp.proto";\n'
        'import "google/protobuf/duration.proto";\npackage frazil.range;\n'
        "message Rec { google.protobuf.Timestamp ts = 1; google.protobuf.Duration dur = 2; }\n",
        "frazil.range.Rec",
    )

    def entry_of(field: int, inner: bytes) -> bytes:
        return bytes([field << 3 | 2, len(inner)]) + inner

    def seconds(field: int, value: int) -> bytes:
        return entry_of(field, b"\x08" + _varint(value))

    out = _decode(
        spark,
        decoder,
        [
            seconds(1, 10**13),
            seconds(1, -(10**13)),
            seconds(2, 2**62),
            seconds(2, 10**13 + 1),
            seconds(1, 253_402_300_799) + seconds(2, 9_000_000_000_000),
            # Nanos past a second carry into the seconds: 9,223,372,036,853 s is in range,
            # two seconds more are not.
            entry_of(1, b"\x08" + _varint(9_223_372_036_853) + b"\x10" + _varint(2_000_000_000)),
        ],
    )

    assert [o[0] for o in out[:4]] == [None] * 4
    assert [o[1]["reason"] for o in out[:4]] == [
        "field 'ts' holds a Timestamp of 10000000000000 seconds, past what a timestamp column"
        " holds (microseconds since 1970 in a long)",
        "field 'ts' holds a Timestamp of -10000000000000 seconds, past what a timestamp column"
        " holds (microseconds since 1970 in a long)",
        f"field 'dur' holds a Duration of {2**62} seconds, past what its bigint column of"
        " microseconds holds",
        f"field 'dur' holds a Duration of {10**13 + 1} seconds, past what its bigint column of"
        " microseconds holds",
    ]
    assert out[5] == (
        None,
        {
            "stage": "decode",
            "reason": "field 'ts' holds a Timestamp of 9223372036855 seconds, past what a"
            " timestamp column holds (microseconds since 1970 in a long)",
            "detail": out[5][1]["detail"],
        },
    )
    value, error = out[4]
    assert error is None
    assert value["dur"] == 9_000_000_000_000 * 10**6
    assert value["ts"] == dt.datetime(9999, 12, 31, 23, 59, 59)


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        out += bytes([low | (0x80 if n else 0)])
        if not n:
            return out


def test_fields_of_messages_without_fields_have_no_column(spark: Any) -> None:
    """Parquet cannot store a group without fields: google.protobuf.Empty (and a message
    holding only such), alone, repeated or as a map's value, get no column; the record's
    other fields read as ever."""
    source = (
        'syntax = "proto3";\nimport "google/protobuf/empty.proto";\npackage frazil.empty;\n'
        "message Nothing { google.protobuf.Empty e = 1; }\n"
        "message Rec { string id = 1; google.protobuf.Empty e = 2;"
        " repeated google.protobuf.Empty es = 3; map<string, Nothing> m = 4; Nothing n = 5;"
        " oneof kind { google.protobuf.Empty none = 6; string text = 7; } }\n"
    )
    from frazil.decode.protobuf import spark_schema
    from frazil.decode.protobuf_schemas import compile_proto

    compiled = compile_proto({"test.proto": source}, "test.proto")
    assert spark_schema(spark, compiled, "frazil.empty.Rec").simpleString() == (
        "struct<id:string,text:string>"
    )
    decoder = _plain(spark, source, "frazil.empty.Rec")
    empty = b"\x00"
    record = (
        b"\x0a\x02r1" + b"\x12" + empty + b"\x1a" + empty + b"\x1a" + empty
        + b"\x22\x05\x0a\x01k\x12\x00" + b"\x2a\x02\x0a\x00" + b"\x32" + empty
    )  # fmt: skip

    # r3: the oneof's text, then its Empty member, which replaces the text as protobuf reads it.
    later = b"\x0a\x02r3\x3a\x01t" + b"\x32" + empty
    out = _decode(spark, decoder, [record, b"\x0a\x02r2\x3a\x01t", later])

    assert out == [
        ({"id": "r1", "text": None}, None),
        ({"id": "r2", "text": "t"}, None),
        ({"id": "r3", "text": None}, None),
    ]


def test_map_entries_read_as_protobuf_java_reads_them(spark: Any) -> None:
    """A closed (proto2) enum's unknown number as a map's value: protobuf-java keeps the
    whole entry as an unknown field, so the map has no such key (none is made up with the
    enum's first value). An entry without its value: a message value is the empty message
    (its defaults), as protobuf reads it."""
    closed = _plain(
        spark,
        'syntax = "proto2";\npackage frazil.mapenum;\nenum Level { LOW = 0; HIGH = 1; }\n'
        "message Rec { map<string, Level> levels = 1; }\n",
        "frazil.mapenum.Rec",
    )
    open_ = _plain(
        spark,
        'syntax = "proto3";\npackage frazil.mapmsg;\nmessage Sub { string a = 1; int32 n = 2; }\n'
        "message Rec { map<string, Sub> subs = 1; map<string, int32> ns = 2; }\n",
        "frazil.mapmsg.Rec",
    )

    def entry(field: int, body: bytes) -> bytes:
        return bytes([field << 3 | 2, len(body)]) + body

    high, unknown = b"\x0a\x01h\x10\x01", b"\x0a\x01u\x10\x63"  # u: 99, not a Level
    [(levels, error)] = _decode(spark, closed, [entry(1, high) + entry(1, unknown)])
    assert error is None
    assert levels == {"levels": {"h": "HIGH"}}

    no_value = b"\x0a\x01k"
    [(subs, error)] = _decode(spark, open_, [entry(1, no_value) + entry(2, no_value)])
    assert error is None
    assert subs == {"subs": {"k": {"a": "", "n": 0}}, "ns": {"k": 0}}

    # Well-known types as values: their own empty messages (the epoch, 0, the wrapped
    # scalar's default, an empty Struct), not null.
    known = _plain(
        spark,
        'syntax = "proto3";\npackage frazil.mapwkt;\n'
        'import "google/protobuf/timestamp.proto";\nimport "google/protobuf/duration.proto";\n'
        'import "google/protobuf/wrappers.proto";\nimport "google/protobuf/struct.proto";\n'
        "message Rec { map<string, google.protobuf.Timestamp> at = 1;"
        " map<string, google.protobuf.Duration> took = 2;"
        " map<string, google.protobuf.Int32Value> n = 3;"
        " map<string, google.protobuf.Struct> doc = 4; }\n",
        "frazil.mapwkt.Rec",
    )
    values = b"".join(entry(f, no_value) for f in (1, 2, 3, 4))
    [(wkt, error)] = _decode(spark, known, [values])
    assert error is None
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    assert wkt["at"]["k"].astimezone(dt.timezone.utc) == epoch
    assert (wkt["took"], wkt["n"], wkt["doc"]) == ({"k": 0}, {"k": 0}, {"k": "{}"})


def test_text_written_where_the_reader_has_bytes_and_map_values_it_cannot_hold(
    spark: Any,
) -> None:
    """The other way round, text a writer sent where the reader has bytes is its UTF-8
    bytes; map values of a message where the reader's map holds text mark their record, as a
    field's would (never a null in their place)."""
    from frazil.decode.protobuf import ProtobufDecoder, spark_schema, wire_udf
    from frazil.decode.protobuf_schemas import compile_proto
    from frazil.decode.schema_registry import header

    body = 'syntax = "proto3";\npackage frazil.{p};\nmessage Sub {{ string a = 1; }}\n'
    body += "message Rec {{ {s} s = 1; map<string, {v}> m = 2; }}\n"
    data = compile_proto({"r.proto": body.format(p="rdata", s="bytes", v="string")}, "r.proto")
    text = compile_proto({"r.proto": body.format(p="rtext", s="string", v="Sub")}, "r.proto")
    reader = spark_schema(spark, data, "frazil.rdata.Rec")
    decoder = ProtobufDecoder(spark, reader, "frazil.rdata.Rec")
    decoder.udf = wire_udf(
        spark, {1: data, 2: text}, reader, "http://registry.invalid",
        messages=("frazil.rdata.Rec", "frazil.rtext.Rec"),
    )  # fmt: skip
    s = "héllo".encode()
    entry = b"\x0a\x01k\x12\x03\x0a\x01z"  # key "k", value Sub{a: "z"}

    out = _decode(
        spark,
        decoder,
        [
            header(2) + b"\x02\x02" + b"\x0a" + bytes([len(s)]) + s,  # indexes [1]: Rec
            header(2) + b"\x02\x02" + b"\x12" + bytes([len(entry)]) + entry,
        ],
    )

    assert out[0] == ({"s": s, "m": {}}, None)
    assert out[1][0] is None
    assert out[1][1]["reason"] == (
        "schema id 2: field 'm' holds map values of frazil.rtext.Sub, which the reader's type"
        " for them cannot hold"
    )


RECURSIVE_PROTO = """
syntax = "proto3";
package frazil.rec;
message Tree { string label = 1; Tree left = 2; Tree right = 3; }
message Expr { oneof kind { int64 value = 1; BinOp op = 2; } }
message BinOp { string symbol = 1; Expr lhs = 2; Expr rhs = 3; Expr extra = 4; }
message Rec { string id = 1; Tree tree = 2; Expr expr = 3; }
"""


def _fields(kind: Any) -> int:
    """Fields of a Spark type at every depth."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(kind, StructType):
        return sum(1 + _fields(f.dataType) for f in kind.fields)
    if isinstance(kind, ArrayType):
        return _fields(kind.elementType)
    if isinstance(kind, MapType):
        return _fields(kind.valueType)
    return 0


def test_recursive_types_that_branch_nest_within_a_bounded_shape(
    spark: Any, tmp_path: Path
) -> None:
    """A type that refers to itself through two or three fields (a tree, an expression)
    doubled or tripled its columns with each of ten levels: thousands of columns and minutes
    of planning. It nests as far as the shape stays within a thousand fields; each value
    deeper down is its sub-message's bytes, and nothing of it is lost."""
    from pyspark.sql.types import BinaryType, StructType

    from frazil.decode.protobuf import spark_schema
    from frazil.decode.protobuf_schemas import compile_proto

    t = _module(tmp_path, "frazil_rec", RECURSIVE_PROTO)
    compiled = compile_proto({"test.proto": RECURSIVE_PROTO}, "test.proto")
    shape = spark_schema(spark, compiled, "frazil.rec.Rec")
    assert _fields(shape) <= 1000
    tree, levels = shape["tree"].dataType, 0
    while isinstance(tree, StructType):
        levels, tree = levels + 1, tree["left"].dataType
    assert levels >= 3 and tree == BinaryType()

    def grown(depth: int, name: str) -> Any:
        node = t.Tree(label=name)
        if depth:
            node.left.CopyFrom(grown(depth - 1, name + "l"))
            node.right.CopyFrom(grown(depth - 1, name + "r"))
        return node

    expr = t.Expr(value=7)
    for i in range(12):
        expr = t.Expr(op=t.BinOp(symbol=f"s{i}", lhs=expr, rhs=t.Expr(value=i)))
    record = t.Rec(id="r", tree=grown(levels + 2, "n"), expr=expr)
    [(row, error)] = _decode(
        spark, _plain(spark, RECURSIVE_PROTO, "frazil.rec.Rec"), [record.SerializeToString()]
    )
    assert error is None

    def same(value: Any, message: Any) -> None:
        if isinstance(value, (bytes, bytearray)):
            assert type(message).FromString(bytes(value)) == message
            return
        assert value is not None
        for field, kept in value.items():
            if message.DESCRIPTOR.fields_by_name[field].has_presence and not message.HasField(
                field
            ):
                assert kept is None
            elif field in ("left", "right", "lhs", "rhs", "extra", "op"):
                same(kept, getattr(message, field))
            else:
                assert kept == getattr(message, field)

    same(row["tree"], record.tree)
    same(row["expr"], record.expr)
