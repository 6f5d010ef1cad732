"""Protobuf schemas without Spark: protoc, schema files, registry schemas in both forms."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from frazil.decode import protobuf_schemas as pb
from frazil.decode.schema_registry import RegisteredSchema
from frazil.errors import ConfigError

ORDERS = """
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
import "common.proto";
message Order {
  message Line { string sku = 1; }
  string id = 1;
  google.protobuf.Timestamp at = 2;
  map<string, int32> counts = 3;
  shop.common.Money total = 4;
}
message Refund { string order_id = 1; }
"""
COMMON = """
syntax = "proto3";
package shop.common;
message Money { int64 units = 1; string currency = 2; }
"""


def _set(data: bytes) -> descriptor_pb2.FileDescriptorSet:
    files = descriptor_pb2.FileDescriptorSet()
    files.ParseFromString(data)
    return files


def test_protoc_compiles_sources_with_their_imports_and_well_known_types() -> None:
    compiled = pb.compile_proto({"orders.proto": ORDERS, "common.proto": COMMON}, "orders.proto")

    names = [f.name for f in _set(compiled.data).file]
    assert compiled.root == "orders.proto"
    assert sorted(names) == ["common.proto", "google/protobuf/timestamp.proto", "orders.proto"]


def test_protoc_errors_come_back_without_the_temporary_folder() -> None:
    with pytest.raises(ValueError) as caught:
        pb.compile_proto({"common.proto": COMMON.replace("int64", "int46")}, "common.proto")
    message = str(caught.value)
    assert message == 'common.proto:4:17: "int46" is not defined.'


def test_message_names_are_full_names_with_nested_ones_and_no_map_entries() -> None:
    compiled = pb.compile_proto({"orders.proto": ORDERS, "common.proto": COMMON}, "orders.proto")
    root = next(f for f in _set(compiled.data).file if f.name == "orders.proto")

    assert pb.message_names(root) == ["shop.v1.Order", "shop.v1.Order.Line", "shop.v1.Refund"]


def test_a_proto_schema_file_is_compiled_with_its_folder_on_the_import_path(
    tmp_path: Path,
) -> None:
    (tmp_path / "orders.proto").write_text(ORDERS)
    (tmp_path / "common.proto").write_text(COMMON)

    compiled = pb.load_file(tmp_path / "orders.proto", "shop.v1.Order", "k.schema_file", "k.m")

    assert compiled.root == "orders.proto"
    assert "common.proto" in [f.name for f in _set(compiled.data).file]


def test_a_descriptor_set_picks_the_file_defining_the_message(tmp_path: Path) -> None:
    data = pb.compile_proto({"orders.proto": ORDERS, "common.proto": COMMON}, "orders.proto").data
    desc = tmp_path / "orders.desc"
    desc.write_bytes(data)

    assert pb.load_file(desc, "shop.v1.Order.Line", "k", "m").root == "orders.proto"
    assert pb.load_file(desc, "shop.common.Money", "k", "m").root == "common.proto"
    with pytest.raises(ConfigError) as caught:
        pb.load_file(desc, "shop.v1.Nope", "pipelines[0].schema_file", "pipelines[0].message")
    assert str(caught.value) == (
        "pipelines[0].message: no message 'shop.v1.Nope' in orders.desc (messages: "
        "google.protobuf.Timestamp, shop.common.Money, shop.v1.Order, shop.v1.Order.Line, "
        "shop.v1.Refund)"
    )


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("x.desc", b"\xff\xff\xff", "pipelines[0].schema_file: {path} is neither a .proto file "
         "nor a descriptor set"),
        ("x.pb", b"", "pipelines[0].schema_file: {path} is neither a .proto file nor a "
         "descriptor set"),
        ("missing.proto", None, "pipelines[0].schema_file: cannot read {path}"),
    ],
)  # fmt: skip
def test_unusable_schema_files_name_the_config_key(
    tmp_path: Path, name: str, content: bytes | None, expected: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        pb.load_file(path, "a.B", "pipelines[0].schema_file", "pipelines[0].message")
    assert str(caught.value).startswith(expected.format(path=path))


def test_a_base64_descriptor_is_told_from_proto_text() -> None:
    compiled = pb.compile_proto({"common.proto": COMMON}, "common.proto")
    proto = next(f for f in _set(compiled.data).file if f.name == "common.proto")
    encoded = base64.b64encode(proto.SerializeToString()).decode()

    assert pb._serialized(encoded) == proto
    assert pb._serialized(COMMON) is None
    assert pb._serialized("not base64 at all!") is None


def test_well_known_files_come_from_the_protobuf_package() -> None:
    found = pb._well_known("google/protobuf/duration.proto")
    assert found is not None and found.name == "google/protobuf/duration.proto"
    assert [m.name for m in found.message_type] == ["Duration"]
    assert pb._well_known("google/protobuf/nope.proto") is None
    assert pb._well_known("shop/common.proto") is None


@dataclass
class _Registry:
    """What :func:`protobuf_schemas.compile_registered` asks of the registry: the references."""

    files: dict[str, str] = field(default_factory=dict)

    def referenced(self, schema: RegisteredSchema) -> dict[str, str]:
        del schema
        return self.files


def test_registry_proto_text_compiles_with_its_references() -> None:
    registry = _Registry(
        {"common.proto": COMMON, "google/protobuf/timestamp.proto": "ignored: protoc's own"}
    )
    schema = RegisteredSchema(schema_id=7, schema_type="PROTOBUF", text=ORDERS)

    compiled = pb.compile_registered(registry, schema)  # type: ignore[arg-type]

    assert compiled.root == "frazil_schema_7.proto"
    names = {f.name for f in _set(compiled.data).file}
    assert names == {"frazil_schema_7.proto", "common.proto", "google/protobuf/timestamp.proto"}


def test_registry_base64_descriptors_resolve_references_and_well_known_imports() -> None:
    compiled = pb.compile_proto({"orders.proto": ORDERS, "common.proto": COMMON}, "orders.proto")
    protos = {f.name: f for f in _set(compiled.data).file}

    def b64(name: str) -> str:
        return base64.b64encode(protos[name].SerializeToString()).decode()

    registry = _Registry({"common.proto": b64("common.proto")})
    schema = RegisteredSchema(schema_id=8, schema_type="PROTOBUF", text=b64("orders.proto"))

    result = pb.compile_registered(registry, schema)  # type: ignore[arg-type]

    assert result.root == "orders.proto"
    names = {f.name for f in _set(result.data).file}
    assert names == {"orders.proto", "common.proto", "google/protobuf/timestamp.proto"}
    with pytest.raises(ValueError, match=r"schema id 8 imports common\.proto, which is not usable"):
        pb.compile_registered(_Registry(), schema)  # type: ignore[arg-type]


def test_a_registry_schema_with_several_messages_needs_the_message_key() -> None:
    one = pb.compile_proto({"common.proto": COMMON}, "common.proto")
    several = pb.compile_proto({"orders.proto": ORDERS, "common.proto": COMMON}, "orders.proto")

    assert pb.only_message(one, "pipelines[0].message") == "shop.common.Money"
    with pytest.raises(ConfigError) as caught:
        pb.only_message(several, "pipelines[0].key_message")
    assert str(caught.value) == (
        "pipelines[0].key_message: the registry schema defines 2 top-level messages "
        "(shop.v1.Order, shop.v1.Refund); set key_message to the records' message"
    )
