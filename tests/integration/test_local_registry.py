"""The local Schema Registry: ``frazil local up --with schema-registry`` starts a real one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from typer.testing import CliRunner

import frazil.cli.local_cmd  # noqa: F401  (registers `frazil local`)
from frazil.cli.app import app
from tests.conftest import free_ports

pytestmark = pytest.mark.integration


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
        client = SchemaRegistryClient({"url": url})
        schema = json.dumps(
            {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
        )
        schema_id = client.register_schema("t-value", Schema(schema, "AVRO"))
        assert json.loads(client.get_schema(schema_id).schema_str)["name"] == "R"
        assert client.get_latest_version("t-value").schema_id == schema_id

        status = runner.invoke(app, ["local", "status", *common[:6], "--registry-port",
                                     str(registry_port), "-o", "json"])  # fmt: skip
        assert json.loads(status.stdout)["schema_registry"]["running"] is True
        # A second `up` finds both running and prints the same addresses.
        again = runner.invoke(app, ["local", "up", *common, "--with", "schema-registry"])
        assert again.stdout.split() == [bootstrap, url]
    finally:
        down = runner.invoke(app, ["local", "down", *common])
    assert down.exit_code == 0, down.output
    status = runner.invoke(app, ["local", "status", *common[:6], "--registry-port",
                                 str(registry_port), "-o", "json"])  # fmt: skip
    assert json.loads(status.stdout)["schema_registry"]["running"] is False
