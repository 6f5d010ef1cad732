"""The ``storage:`` section, the credentials from the environment, and the settings both S3
clients (Iceberg's S3FileIO, Hadoop's S3A) get from them."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest

from frazil.config import parse_config
from frazil.config import secrets as secrets_module
from frazil.config.storage import credentials, is_s3, refused_credentials, remember_credentials
from frazil.config.storage_clients import (
    S3_FILE_IO,
    catalog_properties,
    executor_env,
    hadoop_conf,
    pyiceberg_properties,
)
from frazil.engine.reachable import _storage_reason, check_services, services
from frazil.engine.session import DIRECT_CHECKPOINTS, spark_conf
from frazil.errors import ConfigError, ServiceError

SECRET = "wJalrXUtnFEMI-not-a-real-secret"


@pytest.fixture(autouse=True)
def _no_aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)


def _pipeline() -> dict[str, object]:
    return {"name": "payments", "topics": ["payments"], "table": "db.payments"}


def _stack(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "spark": {"master": "spark://127.0.0.1:7077"},
        "catalog": {
            "type": "rest",
            "uri": "http://127.0.0.1:8181",
            "warehouse": "s3://frazil/warehouse",
        },
        "storage": {"endpoint": "http://127.0.0.1:9000", "path_style": True, "region": "eu-west-1"},
        "state_dir": "s3a://frazil/state",
        "pipelines": [_pipeline()],
    }
    data.update(overrides)
    return data


def _problems(data: object) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return info.value.problems


def test_the_stack_config_validates() -> None:
    config = parse_config(_stack())
    assert config.storage is not None
    assert config.storage.endpoint == "http://127.0.0.1:9000"
    assert config.storage.path_style is True
    assert config.storage.region == "eu-west-1"
    assert config.s3_locations() == ["s3://frazil/warehouse", "s3a://frazil/state"]
    assert config.checkpoint_for(config.pipelines[0]) == "s3a://frazil/state/checkpoints/payments"


def test_no_storage_section_by_default() -> None:
    config = parse_config({"pipelines": [_pipeline()]})
    assert config.storage is None
    assert config.s3_locations() == []


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (
            "endpoint",
            "127.0.0.1:9000",
            "'127.0.0.1:9000' is not an object store address: write http://host:port or "
            "https://host (no path), e.g. http://127.0.0.1:9000",
        ),
        (
            "endpoint",
            "http://127.0.0.1:9000/frazil",
            "'http://127.0.0.1:9000/frazil' is not an object store address: write "
            "http://host:port or https://host (no path), e.g. http://127.0.0.1:9000",
        ),
        ("path_style", "sometimes", "Input should be a valid boolean, unable to interpret input"),
        ("region", "", "String should have at least 1 character"),
    ],
)
def test_storage_values_are_checked(key: str, value: object, reason: str) -> None:
    data = _stack()
    data["storage"] = {**data["storage"], key: value}
    assert _problems(data) == [(f"storage.{key}", reason)]


def test_a_misspelt_storage_key_gets_a_suggestion() -> None:
    data = _stack(storage={"endpont": "http://127.0.0.1:9000", "path-style": True})
    assert _problems(data) == [
        ("storage.endpont", "unknown key (did you mean 'endpoint'?)"),
        ("storage.path-style", "unknown key (did you mean 'path_style'?)"),
    ]


@pytest.mark.parametrize(
    "key", ["access_key_id", "secret_access_key", "secret_key", "session_token", "access-key"]
)
def test_credentials_in_the_file_are_refused_without_showing_them(key: str) -> None:
    data = _stack(storage={"endpoint": "http://127.0.0.1:9000", key: SECRET})
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert info.value.problems == [
        (
            f"storage.{key}",
            f"credentials are never read from the config file: remove storage.{key} and set "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary "
            "ones) in the environment",
        )
    ]
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    ("present", "missing"),
    [
        ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
        ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"),
    ],
)
def test_half_a_pair_of_credentials_is_a_problem(
    monkeypatch: pytest.MonkeyPatch, present: str, missing: str
) -> None:
    monkeypatch.setenv(present, SECRET)
    with pytest.raises(ConfigError) as info:
        parse_config(_stack())
    assert info.value.problems == [
        (
            "storage",
            f"the environment's credentials: {present} is set but {missing} is not: set both, "
            "or neither",
        )
    ]
    assert SECRET not in str(info.value)


def test_half_a_pair_does_not_matter_when_nothing_is_on_s3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA")
    parse_config({"pipelines": [_pipeline()]})


@pytest.mark.parametrize(
    "catalog",
    [
        {"type": "rest", "uri": "http://127.0.0.1:8181", "warehouse": "s3://frazil/warehouse"},
        {"type": "rest", "uri": "http://127.0.0.1:8181", "warehouse": "s3a://frazil/warehouse"},
        {"type": "jdbc", "uri": "jdbc:postgresql://db/iceberg", "warehouse": "s3://b/lake"},
    ],
)
def test_warehouses_on_s3_that_work(catalog: dict[str, str]) -> None:
    config = parse_config(_stack(catalog=catalog))
    assert catalog_properties(config)["io-impl"] == S3_FILE_IO


def test_the_embedded_catalog_on_s3_is_still_refused() -> None:
    problems = _problems(_stack(catalog={"warehouse": "s3://frazil/warehouse"}))
    assert [key for key, _ in problems] == ["catalog.uri"]


def test_credentials_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert credentials() is None
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    found = credentials()
    assert found is not None
    assert (found.access_key_id, found.secret_access_key, found.session_token) == (
        "AKIAEXAMPLE",
        SECRET,
        None,
    )
    assert SECRET not in repr(found)


def test_remembered_credentials_are_masked_in_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets_module, "_KNOWN", set())
    remember_credentials({"AWS_ACCESS_KEY_ID": "frazil", "AWS_SECRET_ACCESS_KEY": SECRET})
    assert secrets_module.scrub(f"signed with {SECRET} for frazil") == "signed with *** for frazil"


def test_s3_locations() -> None:
    assert is_s3("s3://b/x") and is_s3("s3a://b/x") and is_s3("S3N://b/x")
    assert not is_s3("file:///x") and not is_s3("/x/s3://") and not is_s3("hdfs://n/x")


def test_catalog_properties_for_s3fileio() -> None:
    config = parse_config(_stack())
    assert catalog_properties(config) == {
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.path-style-access": "true",
        "client.region": "eu-west-1",
    }


def test_region_from_the_environment_then_a_default_for_a_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = parse_config(_stack(storage={"endpoint": "http://127.0.0.1:9000"}))
    assert catalog_properties(config)["client.region"] == "us-east-1"
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    assert catalog_properties(config)["client.region"] == "ap-south-1"
    assert "s3.path-style-access" not in catalog_properties(config)


def test_aws_s3_itself_leaves_endpoint_and_region_to_the_sdk() -> None:
    config = parse_config(_stack(storage=None))
    assert catalog_properties(config) == {"io-impl": S3_FILE_IO}
    conf = hadoop_conf(config)
    assert "spark.hadoop.fs.s3a.endpoint" not in conf
    assert "spark.hadoop.fs.s3a.endpoint.region" not in conf
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"


def test_s3a_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse_config(_stack())
    conf = hadoop_conf(config)
    assert conf == {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3n.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
    }
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    assert hadoop_conf(config)["spark.hadoop.fs.s3a.aws.credentials.provider"] == (
        "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
    )
    assert SECRET not in str(hadoop_conf(config))


def test_nothing_for_a_config_off_s3() -> None:
    config = parse_config({"pipelines": [_pipeline()]})
    assert catalog_properties(config) == {}
    assert hadoop_conf(config) == {}
    assert pyiceberg_properties(config) == {}


def test_executors_of_a_cluster_get_the_credentials_through_their_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    config = parse_config(_stack())
    assert executor_env(config, master_is_local=False) == {
        "spark.executorEnv.AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
        "spark.executorEnv.AWS_SECRET_ACCESS_KEY": SECRET,
    }
    assert executor_env(config, master_is_local=True) == {}


def test_spark_conf_on_the_stack(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("FRAZIL_CDS", "0")
    config = parse_config(_stack())
    jars = [tmp_path / "a.jar", tmp_path / "frazil-jvm.jar"]
    conf = spark_conf(config, jars)
    assert conf["spark.master"] == "spark://127.0.0.1:7077"
    # The stack's workers run on this machine: every jar, frazil's own too, goes on the
    # executors' classpath where the driver has them (nothing shipped through spark.jars).
    assert conf["spark.executor.extraClassPath"] == f"{jars[0]}:{jars[1]}"
    assert conf["spark.driver.extraClassPath"] == f"{jars[0]}:{jars[1]}"
    assert "spark.jars" not in conf
    assert conf["spark.sql.catalog.lake.io-impl"] == S3_FILE_IO
    assert conf["spark.sql.catalog.lake.s3.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.sql.catalog.lake.uri"] == "http://127.0.0.1:8181"
    assert conf["spark.sql.catalog.lake.warehouse"] == "s3://frazil/warehouse"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"


def test_the_users_catalog_properties_win(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("FRAZIL_CDS", "0")
    catalog = {
        "type": "rest",
        "uri": "http://127.0.0.1:8181",
        "warehouse": "s3://frazil/warehouse",
        "properties": {"s3.endpoint": "http://other:9000"},
    }
    conf = spark_conf(parse_config(_stack(catalog=catalog)), [])
    assert conf["spark.sql.catalog.lake.s3.endpoint"] == "http://other:9000"


def test_checkpoints_on_s3_are_written_in_place_unless_the_user_says_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("FRAZIL_CDS", "0")
    key = "spark.sql.streaming.checkpointFileManagerClass"
    assert spark_conf(parse_config(_stack()), [])[key] == DIRECT_CHECKPOINTS
    # One pipeline's own checkpoint on S3 is enough; none on S3, Spark's own manager.
    local = _stack(state_dir=str(tmp_path / "state"))
    assert key not in spark_conf(parse_config(local), [])
    local["pipelines"] = [{**_pipeline(), "checkpoint": "s3://frazil/cp/payments"}]
    assert spark_conf(parse_config(local), [])[key] == DIRECT_CHECKPOINTS
    # In local mode, local checkpoints too: written through frazil's local file system,
    # without Spark's FileContext and its processes.
    embedded = {**local, "spark": {"master": "local[2]"}}
    embedded["pipelines"] = [_pipeline()]
    assert spark_conf(parse_config(embedded), [])[key] == DIRECT_CHECKPOINTS
    mine = _stack(spark={"master": "local[2]", "conf": {key: "my.Manager"}})
    assert spark_conf(parse_config(mine), [])[key] == "my.Manager"


def test_pyiceberg_gets_the_store_and_the_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    assert pyiceberg_properties(parse_config(_stack())) == {
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.force-virtual-addressing": "false",
        "s3.region": "eu-west-1",
        "s3.access-key-id": "AKIAEXAMPLE",
        "s3.secret-access-key": SECRET,
    }


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_services_a_config_names() -> None:
    found = services(parse_config(_stack()))
    assert [(s.what, s.address, s.key, s.endpoints) for s in found] == [
        ("object store", "http://127.0.0.1:9000", "storage.endpoint", (("127.0.0.1", 9000),)),
        ("REST catalog", "http://127.0.0.1:8181", "catalog.uri", (("127.0.0.1", 8181),)),
        ("Spark master", "spark://127.0.0.1:7077", "spark.master", (("127.0.0.1", 7077),)),
    ]
    assert services(parse_config({"pipelines": [_pipeline()]})) == []


@pytest.mark.parametrize(
    ("what", "key", "hint"),
    [
        ("object store", "storage", "s3"),
        ("REST catalog", "catalog", "rest-catalog"),
        ("Spark master", "spark", "spark-cluster"),
    ],
)
def test_a_service_that_does_not_answer_is_named(what: str, key: str, hint: str) -> None:
    # Every service answers (a listening socket) but the one under test.
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        up = listening.getsockname()[1]
        down = _closed_port()
        port = {k: down if k == key else up for k in ("storage", "catalog", "spark")}
        data = _stack(
            spark={"master": f"spark://127.0.0.1:{port['spark']}"},
            catalog={
                "type": "rest",
                "uri": f"http://127.0.0.1:{port['catalog']}/api",
                "warehouse": "s3://frazil/warehouse",
            },
            storage={"endpoint": f"http://127.0.0.1:{port['storage']}", "path_style": True},
        )
        config = parse_config(data)
        with pytest.raises(ServiceError) as info:
            check_services(config, timeout=2)
    address = {
        "storage": f"http://127.0.0.1:{down}",
        "catalog": f"http://127.0.0.1:{down}/api",
        "spark": f"spark://127.0.0.1:{down}",
    }[key]
    config_key = {"storage": "storage.endpoint", "catalog": "catalog.uri", "spark": "spark.master"}
    assert str(info.value) == (
        f"the {what} at {address} ({config_key[key]}) cannot be reached: connection refused; "
        f"is it running? (`frazil local up --with {hint}` starts one on this machine)"
    )


def test_a_master_with_one_of_two_hosts_answering_is_enough() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        up = listening.getsockname()[1]
        master = f"spark://127.0.0.1:{_closed_port()},127.0.0.1:{up}"
        config = parse_config({"spark": {"master": master}, "pipelines": [_pipeline()]})
        check_services(config, timeout=2)


class _JavaError(Exception):
    """Stands in for py4j's error: its text is what the reason is read from."""


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "java.nio.file.AccessDeniedException: s3a://frazil/state: getFileStatus on "
            "s3a://frazil/state: software.amazon.awssdk.services.s3.model.S3Exception: "
            "(Service: S3, Status Code: 403, Request ID: null):403 Forbidden",
            "the object store at http://127.0.0.1:9000 refused the credentials for "
            "s3a://frazil/state (access denied): check AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY in the environment",
        ),
        (
            "S3Exception: The request signature we calculated does not match "
            "(Service: S3, Status Code: 403) SignatureDoesNotMatch",
            "the object store at http://127.0.0.1:9000 refused the credentials for "
            "s3a://frazil/state (SignatureDoesNotMatch): check AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY in the environment",
        ),
        (
            "org.apache.hadoop.fs.s3a.UnknownStoreException: s3a://frazil/state: Bucket does "
            "not exist",
            "the object store at http://127.0.0.1:9000 has no bucket 'frazil' "
            "(for s3a://frazil/state)",
        ),
        (
            "org.apache.hadoop.fs.s3a.auth.NoAuthWithAWSException: No AWS Credentials provided",
            "no credentials for the object store at http://127.0.0.1:9000 "
            "(s3a://frazil/state): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the "
            "environment",
        ),
    ],
)
def test_what_the_store_answered(text: str, reason: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "frazil")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    assert _storage_reason(_JavaError(text), "s3a://frazil/state", "http://127.0.0.1:9000") == (
        reason
    )


#: PyArrow's error for a HEAD the store refused (``frazil status`` and ``frazil ui``).
PYARROW_REFUSED = (
    "When getting information for key 'warehouse/db/p/metadata/00001.metadata.json' in bucket "
    "'frazil': AWS Error ACCESS_DENIED during HeadObject operation: No response body."
)


def test_pyarrows_refusal_names_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "frazil")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    found = refused_credentials(PYARROW_REFUSED, "s3://frazil/x", "http://s3:9000")
    assert found == (
        "the object store at http://s3:9000 refused the credentials for s3://frazil/x "
        "(access denied): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"
    )
    assert refused_credentials("AWS Error NETWORK_CONNECTION", "s3://f/x", "a") is None


def test_a_refusal_without_the_variables_says_whose_credentials_they_were() -> None:
    found = refused_credentials(PYARROW_REFUSED, "s3://frazil/x", "AWS S3")
    assert found == (
        "the object store at AWS S3 refused the credentials for s3://frazil/x (access denied): "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set, so the AWS SDK's default "
        "chain or the catalog's vended credentials were used"
    )


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ({"token": SECRET}, "refused the credentials (UnauthorizedError: NotAuthorizedException: "
         "bad token): check catalog.properties.token"),
        ({"credential": "id:" + SECRET, "token": SECRET}, "refused the credentials "
         "(UnauthorizedError: NotAuthorizedException: bad token): check "
         "catalog.properties.credential and catalog.properties.token"),
        ({}, "asks for credentials (UnauthorizedError: NotAuthorizedException: bad token): it "
         "needs some: set catalog.properties.credential (an OAuth2 client id:secret) or "
         "catalog.properties.token"),
    ],
)  # fmt: skip
def test_a_rest_catalog_that_refuses_is_named_with_the_keys(
    properties: dict[str, str], expected: str
) -> None:
    from pyiceberg.exceptions import UnauthorizedError

    from frazil.config.catalog_clients import refused_catalog

    config = parse_config(_stack(catalog={
        "type": "rest", "uri": "https://rest:8181", "warehouse": "s3://frazil/warehouse",
        "properties": properties,
    }))  # fmt: skip
    found = refused_catalog(config, UnauthorizedError("NotAuthorizedException: bad token"))
    assert found == f"the REST catalog at https://rest:8181 (catalog.uri) {expected}"
    assert SECRET not in found


def test_the_cluster_example_validates() -> None:
    from pathlib import Path

    from frazil.config import load_config

    example = Path(__file__).parents[2] / "examples" / "cluster.yaml"
    config = load_config(example)
    assert config.spark.master == "spark://127.0.0.1:7077"
    assert config.catalog.type == "rest"
    assert config.storage is not None and config.storage.path_style
    assert config.state_dir == "s3a://frazil/state"
    assert config.s3_locations() == ["s3://frazil/warehouse", "s3a://frazil/state"]


@pytest.mark.parametrize(
    ("environ", "whence"),
    [
        (
            {"AWS_ACCESS_KEY_ID": "frazil", "AWS_SECRET_ACCESS_KEY": SECRET},
            "credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
        ),
        ({}, "no credentials in the environment: the AWS SDK's default chain (~/.aws, a role)"),
    ],
)
def test_validate_says_where_s3_goes_and_whence_the_credentials(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], whence: str
) -> None:
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).parents[2] / "examples" / "cluster.yaml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "frazil"), "validate", "-c", str(example)],
        capture_output=True,
        text=True,
        env={**env, **environ, "COLUMNS": "200"},
        check=True,
    )
    assert result.stdout.splitlines()[-1] == (
        f"  storage: http://127.0.0.1:9000 (path-style), region us-east-1; {whence}"
    )
    assert SECRET not in result.stdout
