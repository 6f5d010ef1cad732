"""The local production-shaped stack against itself: object store, REST catalog, Spark cluster.

Uses the session's ``stack`` fixture (tests/integration/stack.py): real s3proxy, Iceberg's
REST catalog server and a Spark standalone master with two workers, on free ports.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pyarrow as pa
import pytest
from pyarrow import fs
from pyiceberg.catalog import load_catalog

from tests.integration.stack import SessionStack

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def s3(stack: SessionStack, secret: str | None = None) -> Any:
    return fs.S3FileSystem(
        access_key=stack.access_key,
        secret_key=secret if secret is not None else stack.secret_key,
        endpoint_override=stack.s3_endpoint,
        scheme="http",
        region=stack.region,
        force_virtual_addressing=False,
    )


def get_json(url: str) -> Any:
    with _DIRECT.open(url, timeout=10) as response:
        assert response.status == 200
        return json.loads(response.read())


def test_object_store_takes_its_credentials_and_refuses_others(
    stack: SessionStack, unique: str
) -> None:
    store = s3(stack)
    key = f"{stack.bucket}/tests/{unique}/hello.txt"
    with store.open_output_stream(key) as out:
        out.write(b"hello, object store")
    with store.open_input_stream(key) as data:
        assert data.read() == b"hello, object store"
    wrong = s3(stack, secret="not-the-secret")
    # HEAD answers have no body, so no SignatureDoesNotMatch code: a bare 403.
    with pytest.raises(OSError, match=r"ACCESS_DENIED|SIGNATURE_DOES_NOT_MATCH"):
        wrong.get_file_info(key)


def test_rest_catalog_serves_its_config(stack: SessionStack) -> None:
    config = get_json(f"{stack.rest_uri}/v1/config")
    assert set(config) >= {"defaults", "overrides"}
    assert "POST /v1/{prefix}/transactions/commit" in config["endpoints"]


def create_table(stack: SessionStack, name: str) -> Any:
    catalog = load_catalog("stack", **stack.pyiceberg_properties())
    namespace = name.split(".")[0]
    catalog.create_namespace_if_not_exists(namespace)
    table = catalog.create_table(name, schema=pa.schema([("id", pa.int64()), ("v", pa.string())]))
    table.append(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    return table


def test_table_created_through_rest_catalog_lives_in_the_object_store(
    stack: SessionStack, unique: str
) -> None:
    table = create_table(stack, f"stack_{unique}.events")
    location = table.metadata_location
    assert location.startswith(f"{stack.warehouse}/stack_{unique}/events/metadata/")
    # The metadata file is an object of the store, read here with the store's credentials.
    with s3(stack).open_input_stream(location.removeprefix("s3://")) as data:
        metadata = json.loads(data.read())
    assert metadata["current-snapshot-id"] == table.metadata.current_snapshot_id
    reread = load_catalog("again", **stack.pyiceberg_properties()).load_table(
        f"stack_{unique}.events"
    )
    assert sorted(reread.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "b"},
        {"id": 3, "v": "c"},
    ]


def test_spark_master_has_two_alive_one_core_workers(stack: SessionStack) -> None:
    master = get_json(f"{stack.spark_master_ui}/json/")
    assert master["url"] == stack.spark_master
    alive = [w for w in master["workers"] if w["state"] == "ALIVE"]
    assert len(alive) == 2
    assert [(w["cores"], w["memory"]) for w in alive] == [(1, 2048), (1, 2048)]


def test_data_survives_down_and_up(stack: SessionStack, unique: str) -> None:
    stack.require("s3", "rest-catalog", "spark-cluster")
    key = f"{stack.bucket}/tests/{unique}/kept.txt"
    with s3(stack).open_output_stream(key) as out:
        out.write(b"kept")
    create_table(stack, f"kept_{unique}.events")

    stack.restart()

    with s3(stack).open_input_stream(key) as data:
        assert data.read() == b"kept"
    table = load_catalog("after", **stack.pyiceberg_properties()).load_table(
        f"kept_{unique}.events"
    )
    assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == [1, 2, 3]
    master = get_json(f"{stack.spark_master_ui}/json/")
    assert len([w for w in master["workers"] if w["state"] == "ALIVE"]) == 2
