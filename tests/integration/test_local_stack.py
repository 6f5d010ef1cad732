"""The local production-shaped stack against itself: object store, REST catalog, Spark cluster.

Uses the session's ``stack`` fixture (tests/integration/stack.py): real s3proxy, Iceberg's
REST catalog server and a Spark standalone master with two workers, on free ports.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyarrow import fs
from pyiceberg.catalog import load_catalog
from typer.testing import CliRunner

import frazil.cli.local_cmd  # noqa: F401  (registers `frazil local`)
from frazil.cli.app import app
from tests.conftest import free_ports
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


_JOB = """
import sys
from pyspark.sql import SparkSession

spark = (
    SparkSession.builder.master(sys.argv[1])
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.driver.memory", "512m")
    .config("spark.executor.memory", "512m")
    .config("spark.ui.enabled", "false")
    .getOrCreate()
)
rdd = spark.sparkContext.parallelize(range(100), 4)
print("sum", rdd.map(lambda x: x * 2).sum())
print("python", sorted(set(rdd.map(lambda _: __import__("sys").executable).collect())))
spark.stop()
"""


def test_a_python_job_runs_on_the_cluster_with_the_drivers_interpreter(
    stack: SessionStack, tmp_path: Path
) -> None:
    # In a process of its own: this one may hold the session's local[2] SparkContext.
    script = tmp_path / "job.py"
    script.write_text(_JOB)
    done = subprocess.run(
        [sys.executable, str(script), stack.spark_master],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
        # pyspark's SparkContext ships this to the executors as their Python (default:
        # python3 from the PATH); spark.pyspark.python is only read by spark-submit.
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines["sum"] == "9900"
    assert lines["python"] == repr([sys.executable])


def test_cli_up_status_down(tmp_path: Path) -> None:
    broker, controller, s3_port, rest_port, taken = free_ports(5)
    common = ["--state-dir", str(tmp_path), "--port", str(broker),
              "--controller-port", str(controller)]  # fmt: skip
    ports = ["--s3-port", str(s3_port), "--rest-port", str(rest_port)]
    runner = CliRunner()
    try:
        up = runner.invoke(app, ["local", "up", *common, *ports, "--with", "rest-catalog"])
        assert up.exit_code == 0, up.output
        assert up.stdout.split() == [
            f"127.0.0.1:{broker}",
            f"http://127.0.0.1:{s3_port}",
            f"http://127.0.0.1:{rest_port}",
        ]
        assert "rest-catalog needs s3: starting it too" in up.stderr
        assert f"catalog: {{type: rest, uri: http://127.0.0.1:{rest_port}," in up.stderr
        assert "export AWS_ACCESS_KEY_ID=frazil AWS_SECRET_ACCESS_KEY=" in up.stderr

        status = json.loads(runner.invoke(app, ["local", "status", *common, "-o", "json"]).stdout)
        assert (status["s3"]["running"], status["s3"]["endpoint"]) == (
            True,
            f"http://127.0.0.1:{s3_port}",
        )
        assert status["rest_catalog"]["uri"] == f"http://127.0.0.1:{rest_port}"
        assert status["rest_catalog"]["s3_endpoint"] == f"http://127.0.0.1:{s3_port}"
        assert status["spark_cluster"]["running"] is False
        text = runner.invoke(app, ["local", "status", *common]).stdout
        assert f"rest:      running at http://127.0.0.1:{rest_port}" in text

        # Bad input: the Spark master's port is taken. One message: service, address, log.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
            squatter.bind(("127.0.0.1", taken))
            squatter.listen()
            spark = ["--with", "spark-cluster", "--spark-port", str(taken)]
            failed = runner.invoke(app, ["local", "up", *common, *ports, *spark])
        assert failed.exit_code == 1
        message = str(failed.exception)
        assert f"cannot start the local Spark master at spark://127.0.0.1:{taken}" in message
        assert "already in use" in message
        assert str(tmp_path / "spark" / "master" / "spark-master.log") in message
    finally:
        down = runner.invoke(app, ["local", "down", *common])
    assert down.exit_code == 0, down.output
    assert "rest-catalog stopped" in down.stderr
    assert "s3 stopped" in down.stderr
    status = json.loads(runner.invoke(app, ["local", "status", *common, "-o", "json"]).stdout)
    assert not status["s3"]["running"]
    assert not status["rest_catalog"]["running"]
