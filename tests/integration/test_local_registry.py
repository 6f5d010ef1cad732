"""The local Schema Registry (Apicurio) and what Confluent's clients get from it.

``frazil local up --with schema-registry`` and the ``schema_registry_url`` fixture start a
real Apicurio Registry; producers here use confluent-kafka's own serializers
(tests/integration/registry_helpers.py). Several tests pin down where Apicurio's Confluent
API differs from Confluent's registry, so a change of either side shows here first:

* a schema comes back in the form it was registered: ProtobufSerializer registers base64
  ``FileDescriptorProto`` bytes, and ``?format=serialized`` is ignored (a ``.proto`` text
  stays text, which confluent-kafka's ProtobufDeserializer cannot read);
* the default compatibility level is ``NONE`` (Confluent: ``BACKWARD``).
"""

from __future__ import annotations

import base64
import binascii
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError
from google.protobuf import descriptor_pb2
from typer.testing import CliRunner

import frazil.cli.local_cmd  # noqa: F401  (registers `frazil local`)
from frazil.cli.app import app
from frazil.errors import ServiceError
from frazil.local.registry import LocalRegistry
from tests.conftest import free_ports
from tests.integration.registry_helpers import (
    consume,
    produce_avro,
    produce_json_schema,
    produce_protobuf,
    protobuf_classes,
    register_schema,
    registry_client,
)

pytestmark = pytest.mark.integration


def _record(name: str, *fields: dict[str, Any]) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "regtest", "fields": fields})


ORDER_V1 = _record("Order", {"name": "id", "type": "string"})
ORDER_V2 = _record(
    "Order", {"name": "id", "type": "string"}, {"name": "qty", "type": "int", "default": 1}
)
ORDER_KEY = _record("OrderKey", {"name": "shop", "type": "string"})

EVENT_PROTO = """syntax = "proto3";
package regtest.{package};
import "google/protobuf/timestamp.proto";
message Event {{
  string id = 1;
  google.protobuf.Timestamp at = 2;
}}
"""
MONEY_PROTO = """syntax = "proto3";
package regtest.{package};
message Money {{ int64 units = 1; string currency = 2; }}
"""
PAYMENT_PROTO = """syntax = "proto3";
package regtest.{package};
import "money.proto";
import "google/protobuf/timestamp.proto";
message Payment {{ string id = 1; Money amount = 2; google.protobuf.Timestamp at = 3; }}
"""


def http_json(url: str) -> Any:
    """GET ``url`` straight from the registry (no client, no cache)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def file_descriptor(schema_str: str) -> Any:
    """The ``FileDescriptorProto`` a base64 schema string holds."""
    return descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(schema_str, validate=True)
    )


def test_local_up_with_schema_registry_prints_both_addresses(tmp_path: Path) -> None:
    port, controller, registry_port = free_ports(3)
    common = ["--state-dir", str(tmp_path), "--port", str(port), "--controller-port",
              str(controller), "--registry-port", str(registry_port)]  # fmt: skip
    runner = CliRunner()
    try:
        up = runner.invoke(app, ["local", "up", *common, "--with", "schema-registry"])
        assert up.exit_code == 0, up.output
        bootstrap, url = up.stdout.split()
        assert bootstrap == f"127.0.0.1:{port}"
        assert url == f"http://127.0.0.1:{registry_port}/apis/ccompat/v7"

        # The Confluent API answers: register, then read back by id and by subject.
        client = registry_client(url)
        schema = json.dumps(
            {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
        )
        schema_id = client.register_schema("t-value", Schema(schema, "AVRO"))
        assert json.loads(client.get_schema(schema_id).schema_str)["name"] == "R"
        assert client.get_latest_version("t-value").schema_id == schema_id

        status = runner.invoke(app, ["local", "status", *common, "-o", "json"])
        registry = json.loads(status.stdout)["schema_registry"]
        assert (registry["running"], registry["url"]) == (True, url)
        text = runner.invoke(app, ["local", "status", *common])
        assert f"registry:  running at {url}" in text.stdout
        # A second `up` finds both running and prints the same addresses.
        again = runner.invoke(app, ["local", "up", *common, "--with", "schema-registry"])
        assert again.stdout.split() == [bootstrap, url]
        # Without --with, only the bootstrap address.
        plain = runner.invoke(app, ["local", "up", *common])
        assert plain.stdout.split() == [bootstrap]
    finally:
        down = runner.invoke(app, ["local", "down", *common])
    assert down.exit_code == 0, down.output
    status = runner.invoke(app, ["local", "status", *common, "-o", "json"])
    assert json.loads(status.stdout)["schema_registry"]["running"] is False
    assert "registry:  stopped" in runner.invoke(app, ["local", "status", *common]).stdout


def test_schemas_and_ids_survive_a_restart(tmp_path: Path) -> None:
    # The broker keeps its topics across restarts, so the registry must keep the ids their
    # records name: a fresh in-memory registry would give id 1 to another schema.
    (port,) = free_ports(1)
    registry = LocalRegistry(tmp_path, port=port)
    url = registry.up(timeout=120)
    try:
        first = register_schema(url, "keep-value", ORDER_V1)
        registry.down()
        assert registry.status().running is False
        assert registry.up(timeout=120) == url
        client = registry_client(url)
        assert json.loads(client.get_schema(first.schema_id).schema_str) == json.loads(ORDER_V1)
        second = register_schema(url, "keep-value", ORDER_V2)
        assert (second.schema_id, second.version) != (first.schema_id, first.version)
        assert client.get_versions("keep-value") == [1, 2]
        assert registry.status().data_bytes > 0
    finally:
        registry.down()


def test_a_registry_that_cannot_start_says_why(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    registry = LocalRegistry(tmp_path, port=port, heap="lots")
    with pytest.raises(ServiceError) as caught:
        registry.up(timeout=60)
    message = str(caught.value)
    assert "exited with exit code 1 while starting" in message
    assert str(registry.log_file) in message and "Invalid maximum heap size" in message
    assert registry.status().running is False


def test_avro_serializer_two_versions_of_one_subject(
    kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    topic = f"reg-avro-{unique}"
    keys = {"key": lambda r: {"shop": r["id"][:1]}, "key_schema_str": ORDER_KEY}
    v1 = produce_avro(kafka_bootstrap, schema_registry_url, topic, ORDER_V1,
                      [{"id": f"a{n}"} for n in range(3)], **keys)  # fmt: skip
    v2 = produce_avro(kafka_bootstrap, schema_registry_url, topic, ORDER_V2,
                      [{"id": f"b{n}", "qty": n} for n in range(3)], **keys)  # fmt: skip

    assert v1.value_schema_id is not None and v2.value_schema_id is not None
    assert v1.value_schema_id != v2.value_schema_id
    # Keys under their own subject, one id for both runs.
    assert v1.key_schema_id is not None and v1.key_schema_id == v2.key_schema_id
    assert v1.key_schema_id not in (v1.value_schema_id, v2.value_schema_id)
    client = registry_client(schema_registry_url)
    assert client.get_versions(f"{topic}-value") == [1, 2]
    assert client.get_version(f"{topic}-value", 1).schema_id == v1.value_schema_id
    assert client.get_latest_version(f"{topic}-value").schema_id == v2.value_schema_id
    assert client.get_latest_version(f"{topic}-key").schema_id == v1.key_schema_id

    # GET /schemas/ids/{id}: the schema text (Apicurio names the type even for AVRO, which
    # Confluent's registry leaves out).
    raw = http_json(f"{schema_registry_url}/schemas/ids/{v1.value_schema_id}")
    assert json.loads(raw["schema"]) == json.loads(ORDER_V1)
    assert raw.get("schemaType", "AVRO") == "AVRO" and raw.get("references", []) == []
    text = registry_client(schema_registry_url).get_schema(v2.value_schema_id).schema_str
    assert json.loads(text) == json.loads(ORDER_V2)
    versions = http_json(f"{schema_registry_url}/schemas/ids/{v2.value_schema_id}/versions")
    assert versions == [{"subject": f"{topic}-value", "version": 2}]

    # The records carry their ids and decode with Confluent's deserializer.
    messages = consume(kafka_bootstrap, topic, 6)
    ctx = SerializationContext(topic, MessageField.VALUE)
    deserialize = AvroDeserializer(registry_client(schema_registry_url))
    assert [deserialize(m.value(), ctx) for m in messages] == [
        *({"id": f"a{n}"} for n in range(3)),
        *({"id": f"b{n}", "qty": n} for n in range(3)),
    ]
    key_ctx = SerializationContext(topic, MessageField.KEY)
    assert deserialize(messages[0].key(), key_ctx) == {"shop": "a"}

    # The same schema again, even formatted differently, is the same version (the registry
    # compares canonical forms, as Confluent's does): no new id.
    again = produce_avro(kafka_bootstrap, schema_registry_url, topic, ORDER_V1, [{"id": "c"}])
    assert again.value_schema_id == v1.value_schema_id
    pretty = json.dumps(json.loads(ORDER_V1), indent=4)
    assert register_schema(schema_registry_url, f"{topic}-value", pretty).schema_id == (
        v1.value_schema_id
    )
    assert client.get_versions(f"{topic}-value") == [1, 2]

    # An unknown id: Confluent's error code, which frazil's decoder reports.
    with pytest.raises(SchemaRegistryError) as caught:
        registry_client(schema_registry_url).get_schema(987654)
    assert (caught.value.http_status_code, caught.value.error_code) == (404, 40403)


def test_compatibility_defaults_to_none_and_can_be_set_per_subject(
    schema_registry_url: str, unique: str
) -> None:
    subject = f"reg-compat-{unique}-value"
    client = registry_client(schema_registry_url)
    register_schema(schema_registry_url, subject, ORDER_V1)
    assert client.get_compatibility() == "NONE"  # Confluent's default is BACKWARD
    renamed = _record("Order", {"name": "code", "type": "int"})
    assert register_schema(schema_registry_url, subject, renamed).version == 2

    client.set_compatibility(subject, "BACKWARD")
    incompatible = _record("Order", {"name": "code", "type": "string"})
    assert client.test_compatibility(subject, Schema(incompatible, "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as caught:
        client.register_schema(subject, Schema(incompatible, "AVRO"))
    assert caught.value.http_status_code == 409


def test_avro_references(kafka_bootstrap: str, schema_registry_url: str, unique: str) -> None:
    topic = f"reg-avroref-{unique}"
    money = _record(f"Money{unique}", {"name": "units", "type": "long"})
    money_name = f"regtest.Money{unique}"
    money_version = register_schema(schema_registry_url, money_name, money)
    payment = _record("Payment", {"name": "amount", "type": money_name})
    reference = SchemaReference(money_name, money_name, money_version.version)
    registered = register_schema(
        schema_registry_url, f"{topic}-value", payment, references=[reference]
    )

    fetched = registry_client(schema_registry_url).get_schema(registered.schema_id)
    assert fetched.references == [reference]
    referenced_by = f"{schema_registry_url}/subjects/{money_name}/versions/1/referencedby"
    assert http_json(referenced_by) == [registered.schema_id]
    # confluent-kafka's AvroSerializer parses its schema up front: a schema that uses a
    # named type of another subject must come as a Schema with its references (a plain
    # string fails with fastavro's UnknownType), or be the subject's latest version.
    with_refs = Schema(payment, "AVRO", [reference])
    by_schema = produce_avro(kafka_bootstrap, schema_registry_url, topic, with_refs,
                             [{"amount": {"units": 5}}])  # fmt: skip
    latest = {"auto.register.schemas": False, "use.latest.version": True}
    by_latest = produce_avro(kafka_bootstrap, schema_registry_url, topic, None,
                             [{"amount": {"units": 6}}], serializer_conf=latest)  # fmt: skip
    assert by_schema.value_schema_id == by_latest.value_schema_id == registered.schema_id
    assert registry_client(schema_registry_url).get_versions(f"{topic}-value") == [1]
    ctx = SerializationContext(topic, MessageField.VALUE)
    deserialize = AvroDeserializer(registry_client(schema_registry_url))
    assert deserialize(by_latest.values[0], ctx) == {"amount": {"units": 6}}


def test_json_schema_serializer(
    kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    topic = f"reg-json-{unique}"
    schema = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Order",
            "type": "object",
            "properties": {"id": {"type": "string"}, "qty": {"type": "integer"}},
            "required": ["id"],
        }
    )
    records = [{"id": "a", "qty": 1}, {"id": "b"}]
    produced = produce_json_schema(kafka_bootstrap, schema_registry_url, topic, schema, records,
                                   key=lambda r: r["id"])  # fmt: skip

    fetched = registry_client(schema_registry_url).get_schema(produced.value_schema_id or 0)
    assert fetched.schema_type == "JSON" and json.loads(fetched.schema_str) == json.loads(schema)
    messages = consume(kafka_bootstrap, topic, 2)
    assert [m.key() for m in messages] == [b"a", b"b"]
    # Wire format: magic byte, id, then the JSON document itself.
    assert [json.loads(m.value()[5:]) for m in messages] == records
    ctx = SerializationContext(topic, MessageField.VALUE)
    deserialize = JSONDeserializer(
        None, schema_registry_client=registry_client(schema_registry_url)
    )
    assert [deserialize(m.value(), ctx) for m in messages] == records
    # The serializer validates against the schema before sending.
    with pytest.raises(SerializationError, match="'id' is a required property"):
        produce_json_schema(kafka_bootstrap, schema_registry_url, topic, schema, [{"qty": 2}])


def test_protobuf_serializer_with_a_well_known_import(
    tmp_path: Path, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    topic = f"reg-pb-{unique}"
    proto = tmp_path / "event.proto"
    proto.write_text(EVENT_PROTO.format(package=f"p{unique}"))
    event_class = protobuf_classes([proto])[f"regtest.p{unique}.Event"]
    events = [event_class(id=f"e{n}") for n in range(3)]
    for n, event in enumerate(events):
        event.at.seconds = 1_700_000_000 + n

    produced = produce_protobuf(kafka_bootstrap, schema_registry_url, topic, events)

    schema_id = produced.value_schema_id
    assert schema_id is not None
    # One message in the file: message indexes [0], written as the single byte 0.
    assert produced.values[0][5] == 0
    fetched = registry_client(schema_registry_url).get_schema(schema_id)
    # What the serializer registered, kept as is: the file's FileDescriptorProto in base64
    # (Confluent's registry would answer with .proto text), and no reference for the
    # well-known import (the serializer skips google/protobuf/*.proto).
    assert fetched.schema_type == "PROTOBUF" and fetched.references == []
    descriptor = file_descriptor(fetched.schema_str)
    assert (descriptor.name, list(descriptor.dependency)) == (
        "event.proto",
        ["google/protobuf/timestamp.proto"],
    )
    assert descriptor.message_type[0].name == "Event"
    # ?format=serialized is accepted and ignored: the same string either way.
    serialized = registry_client(schema_registry_url).get_schema(schema_id, fmt="serialized")
    assert serialized.schema_str == fetched.schema_str and serialized.references == []
    raw = f"{schema_registry_url}/schemas/ids/{schema_id}"
    assert http_json(raw + "?format=serialized") == http_json(raw)
    # So Confluent's deserializer (which asks for the serialized form) reads them back.
    ctx = SerializationContext(topic, MessageField.VALUE)
    deserialize = ProtobufDeserializer(
        event_class, {"use.deprecated.format": False}, registry_client(schema_registry_url)
    )
    decoded = [deserialize(m.value(), ctx) for m in consume(kafka_bootstrap, topic, 3)]
    assert [(e.id, e.at.seconds) for e in decoded] == [
        (f"e{n}", 1_700_000_000 + n) for n in range(3)
    ]


def test_protobuf_serializer_registers_imports_as_references(
    tmp_path: Path, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    topic = f"reg-pbref-{unique}"
    # The file name is the reference subject: unique, as the registry lives for the session.
    folder = tmp_path / "protos"
    folder.mkdir()
    (folder / "money.proto").write_text(MONEY_PROTO.format(package=f"p{unique}"))
    payment_file = folder / "payment.proto"
    payment_file.write_text(PAYMENT_PROTO.format(package=f"p{unique}"))
    payment_class = protobuf_classes([payment_file])[f"regtest.p{unique}.Payment"]
    payment = payment_class(id="p1")
    payment.amount.units = 42

    produced = produce_protobuf(kafka_bootstrap, schema_registry_url, topic, [payment])

    client = registry_client(schema_registry_url)
    fetched = client.get_schema(produced.value_schema_id or 0)
    # Only the user import is a reference; the well-known one is left to the reader.
    assert fetched.references == [SchemaReference("money.proto", "money.proto", 1)]
    assert list(file_descriptor(fetched.schema_str).dependency) == [
        "money.proto",
        "google/protobuf/timestamp.proto",
    ]
    money = client.get_version("money.proto", 1)
    assert file_descriptor(money.schema.schema_str).message_type[0].name == "Money"
    ctx = SerializationContext(topic, MessageField.VALUE)
    deserialize = ProtobufDeserializer(
        payment_class, {"use.deprecated.format": False}, registry_client(schema_registry_url)
    )
    assert deserialize(produced.values[0], ctx).amount.units == 42


def test_protobuf_text_schemas_stay_text_even_when_serialized_is_asked(
    tmp_path: Path, schema_registry_url: str, unique: str
) -> None:
    # What a Java producer or a person registers: .proto text. Confluent's registry converts
    # it for ?format=serialized; Apicurio returns the text, which confluent-kafka's
    # ProtobufDeserializer then fails to read as base64. (frazil's decoder reads both forms.)
    subject = f"reg-pbtext-{unique}-value"
    text = EVENT_PROTO.format(package=f"t{unique}")
    registered = register_schema(schema_registry_url, subject, text, "PROTOBUF")
    serialized = registry_client(schema_registry_url).get_schema(
        registered.schema_id, fmt="serialized"
    )
    assert serialized.schema_str == text

    proto = tmp_path / "event.proto"
    proto.write_text(text)
    event_class = protobuf_classes([proto])[f"regtest.t{unique}.Event"]
    record = b"\x00" + registered.schema_id.to_bytes(4, "big") + b"\x00" + b"\x0a\x01x"
    deserialize = ProtobufDeserializer(
        event_class, {"use.deprecated.format": False}, registry_client(schema_registry_url)
    )
    # base64-decoding text fails on padding or yields bytes that are no FileDescriptorProto,
    # depending on the text.
    with pytest.raises((binascii.Error, SerializationError)):
        deserialize(record, SerializationContext("t", MessageField.VALUE))


def test_avro_serializer_and_the_associations_lookup(schema_registry_url: str, unique: str) -> None:
    # confluent-kafka 2.13+ serializers first ask GET /associations/... for the topic's
    # subject; Apicurio has no such endpoint and answers 404, which the client treats as
    # "no association" and falls back to TopicNameStrategy.
    topic = f"reg-assoc-{unique}"
    assoc = f"{schema_registry_url}/associations/resources/-/{topic}?resourceType=topic"
    with pytest.raises(urllib.error.HTTPError) as caught:
        http_json(assoc)
    assert caught.value.code == 404
    serializer = AvroSerializer(registry_client(schema_registry_url), ORDER_V1)
    data = serializer({"id": "x"}, SerializationContext(topic, MessageField.VALUE))
    assert data is not None
    latest = registry_client(schema_registry_url).get_latest_version(f"{topic}-value")
    assert latest.schema_id == int.from_bytes(data[1:5], "big")
