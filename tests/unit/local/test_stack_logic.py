"""Pure logic of the local stack: service names, server settings, addresses (no servers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer

from frazil.cli.local_app import Service
from frazil.cli.local_up_cmd import _services, _worker_ports
from frazil.local import object_store, rest_catalog, spark_cluster, stack
from frazil.local.spark_cluster import LocalSparkCluster, _worker_states


def test_services_are_split_on_commas_checked_and_ordered() -> None:
    assert stack.resolve_services(["spark-cluster", "s3, rest-catalog", ""]) == (
        ["s3", "rest-catalog", "spark-cluster"],
        [],
    )
    assert stack.resolve_services(["spark-cluster,spark-cluster"]) == (["spark-cluster"], [])
    with pytest.raises(ValueError, match="unknown service 'hdfs'"):
        stack.resolve_services(["s3,hdfs"])


def test_rest_catalog_brings_the_object_store() -> None:
    assert stack.resolve_services(["rest-catalog"]) == (["s3", "rest-catalog"], ["s3"])


def test_cli_with_accepts_repeats_and_commas() -> None:
    assert _services(["s3,rest-catalog", "schema-registry", "s3"]) == [
        Service.s3,
        Service.rest_catalog,
        Service.schema_registry,
    ]
    assert _services(None) == []
    with pytest.raises(typer.BadParameter, match="unknown service 'minio'"):
        _services(["minio"])
    assert _worker_ports("8091, 8092") == (8091, 8092)
    for bad in ("", "a,b", "0", "70000"):
        with pytest.raises(typer.BadParameter):
            _worker_ports(bad)


def iceberg_env_to_property(name: str) -> str:
    """Iceberg's RCKUtils.environmentCatalogConfig mapping, as read with javap."""
    return name.replace("CATALOG_", "", 1).replace("__", "-").replace("_", ".").lower()


def test_catalog_properties_reach_the_server_through_its_environment() -> None:
    env = rest_catalog.catalog_environment(8181, Path("/s/catalog.db"), "http://127.0.0.1:9000")
    assert env["CATALOG_S3_PATH__STYLE__ACCESS"] == "true"
    props = {iceberg_env_to_property(k): v for k, v in env.items()}
    assert props == rest_catalog.catalog_properties(
        8181, Path("/s/catalog.db"), "http://127.0.0.1:9000"
    )
    assert props["uri"] == "jdbc:sqlite:/s/catalog.db"
    assert props["warehouse"] == "s3://frazil/warehouse"
    assert props["io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert (props["rest.host"], props["rest.port"]) == ("127.0.0.1", "8181")
    assert props["s3.access-key-id"] == object_store.ACCESS_KEY
    with pytest.raises(ValueError):
        rest_catalog.property_to_env("jdbc.some_key")


def test_s3proxy_properties() -> None:
    text = object_store.properties_text(9000, Path("/state/s3/data"))
    lines = dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
    )
    assert lines == {
        "s3proxy.endpoint": "http://127.0.0.1:9000",
        "s3proxy.authorization": "aws-v2-or-v4",
        "s3proxy.identity": "frazil",
        "s3proxy.credential": "frazil-local-secret",
        "jclouds.provider": "filesystem",
        "jclouds.filesystem.basedir": "/state/s3/data",
    }


def test_addresses_give_config_keys_credentials_and_pyiceberg_properties() -> None:
    found = stack.StackAddresses(
        s3_endpoint="http://127.0.0.1:9000",
        rest_uri="http://127.0.0.1:8181",
        spark_master="spark://127.0.0.1:7077",
    )
    assert found.addresses() == [
        "http://127.0.0.1:9000",
        "http://127.0.0.1:8181",
        "spark://127.0.0.1:7077",
    ]
    assert found.config() == {
        "spark": {"master": "spark://127.0.0.1:7077"},
        "catalog": {
            "type": "rest",
            "uri": "http://127.0.0.1:8181",
            "warehouse": "s3://frazil/warehouse",
        },
        "storage": {"endpoint": "http://127.0.0.1:9000", "path_style": True, "region": "us-east-1"},
    }
    assert found.aws_environment() == {
        "AWS_ACCESS_KEY_ID": "frazil",
        "AWS_SECRET_ACCESS_KEY": "frazil-local-secret",
        "AWS_REGION": "us-east-1",
    }
    props = found.pyiceberg_properties()
    assert props["s3.endpoint"] == "http://127.0.0.1:9000"
    assert props["s3.path-style-access"] == "true"
    only_spark = stack.StackAddresses(spark_master="spark://127.0.0.1:7077")
    assert only_spark.config() == {"spark": {"master": "spark://127.0.0.1:7077"}}


def test_default_ports_are_the_documented_ones() -> None:
    ports = stack.StackPorts()
    assert (ports.s3, ports.rest_catalog) == (9000, 8181)
    assert (ports.spark_master, ports.spark_master_ui, ports.spark_worker_uis) == (
        7077,
        8090,
        (8091, 8092),
    )
    cluster = LocalSparkCluster(Path("/tmp/x"))
    assert cluster.master_url == "spark://127.0.0.1:7077"
    assert (spark_cluster.WORKER_CORES, spark_cluster.WORKER_MEMORY) == (1, "2g")
    with pytest.raises(ValueError, match="must differ"):
        LocalSparkCluster(Path("/tmp/x"), master_port=1, master_ui_port=1)
    with pytest.raises(ValueError, match="at least one worker"):
        LocalSparkCluster(Path("/tmp/x"), worker_ui_ports=())


def test_worker_states_from_the_masters_json() -> None:
    master = {
        "workers": [
            {"webuiaddress": "http://127.0.0.1:8091", "state": "DEAD"},
            {"webuiaddress": "http://127.0.0.1:8091", "state": "ALIVE"},
            {"webuiaddress": "http://127.0.0.1:8092", "state": "ALIVE"},
            {"webuiaddress": "http://127.0.0.1:8093", "state": "DEAD"},
        ]
    }
    answer = (200, json.dumps(master).encode())
    assert _worker_states(answer) == {8091: "ALIVE", 8092: "ALIVE", 8093: "DEAD"}
    assert _worker_states(None) == {}
    assert _worker_states((500, b"")) == {}
    assert _worker_states((200, b"<html>")) == {}
