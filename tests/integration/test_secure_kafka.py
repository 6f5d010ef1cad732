"""Kafka listeners that need credentials: SASL_PLAINTEXT on the session broker, and the
SASL_SSL (SCRAM-SHA-512) and mTLS listeners of a broker started with ``frazil local up
--secure`` (its own state dir, for this module).

Resuming from the table must work with whatever security settings Spark's own source accepts
(frazil asks Kafka through the JVM's client); frazil's librdkafka clients (topic check, lag,
consumer groups, the dead-letter topic, status) connect with the same settings, translated;
and no password or private key appears anywhere: not in Spark's UI (Environment and SQL
pages), not in `frazil local up`, `validate`, `plan`, `status` (text and JSON), the status
page's /api/status, logs (text and JSON) or errors (a wrong password says authentication
failed, where and as whom).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from typer.testing import CliRunner

from frazil.config import load_config
from frazil.config.secrets import remember, scrub
from frazil.engine.runner import run
from frazil.generate.producer import ensure_topic
from frazil.local.secure import (
    ENV_KEY_PASSWORD,
    ENV_PASSWORD,
    ENV_USER,
    SecureListeners,
    client_properties,
)
from frazil.observe.groups import read_group_offsets
from frazil.observe.status import read_status
from frazil.source.clients import admin_config
from tests.integration.conftest import SPARK_SECRET
from tests.integration.helpers import end_offsets, payments_pipeline, produce_payments, table_ids
from tests.integration.test_broker_failover import _free_base

pytestmark = pytest.mark.integration


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return str(response.read().decode("utf-8", "replace"))


def test_resumes_from_the_table_over_sasl_and_keeps_the_password_out_of_spark_ui(
    spark: Any,
    make_config: Any,
    kafka_bootstrap: str,
    kafka_sasl_bootstrap: str,
    kafka_sasl_properties: dict[str, str],
    unique: str,
) -> None:
    topic, table, name = f"sasl-{unique}", f"db.sasl_{unique}", f"sa_{unique}"
    first = produce_payments(kafka_bootstrap, topic, 600, seed=41)
    config = make_config(
        [payments_pipeline(name, topic, table, max_offsets_per_trigger=250)],
        kafka={"bootstrap_servers": kafka_sasl_bootstrap, "properties": kafka_sasl_properties},
    )
    run(config, until_caught_up=True, spark=spark)
    shutil.rmtree(config.checkpoint_for(config.pipelines[0]))
    second = produce_payments(kafka_bootstrap, topic, 400, seed=42)

    reports = run(config, until_caught_up=True, spark=spark)

    assert reports[0].resumed_from_table
    assert reports[0].records_ingested == 400
    ids = table_ids(spark, table)
    assert Counter(ids).most_common(1)[0][1] == 1
    assert sorted(ids) == sorted(first + second)

    password = "frazil-secret-pw"
    assert password in kafka_sasl_properties["sasl.jaas.config"]
    ui = spark.sparkContext.uiWebUrl
    assert ui, "the Spark UI is needed to check it"
    app_id = spark.sparkContext.applicationId
    api = f"{ui}/api/v1/applications/{app_id}"
    pages = {
        "environment (API)": _get(f"{api}/environment"),
        "environment page": _get(f"{ui}/environment/"),
        "SQL (API, plans)": _get(f"{api}/sql?details=true&planDescription=true&length=100000"),
    }
    executions = json.loads(pages["SQL (API, plans)"])
    assert any("kafka" in json.dumps(e).lower() for e in executions), "no Kafka plan to check"
    for execution in executions[-20:]:
        pages[f"SQL execution {execution['id']}"] = _get(
            f"{ui}/SQL/execution/?id={execution['id']}"
        )
    leaked = [page for page, text in pages.items() if password in text]
    assert not leaked, f"the SASL password shows on {leaked}"
    # The session was built with a secret catalog property (integration/conftest.py): the
    # Environment page lists its key, masked.
    environment = pages["environment (API)"]
    assert "spark.sql.catalog.lake.s3.secret-access-key" in environment
    assert SPARK_SECRET not in environment and SPARK_SECRET not in pages["environment page"]

    # frazil's own errors and logs mask it as well.
    remember(config)
    assert password not in scrub(f"failed with {kafka_sasl_properties['sasl.jaas.config']}")


# -- `frazil local up --secure`: SASL_SSL (SCRAM-SHA-512) and mTLS ---------------------------


#: The tests on the secured broker share one broker start (~15 s on a quiet machine, more
#: under load) and together take over a minute: slow.
SLOW = pytest.mark.slow


@dataclass(frozen=True)
class SecureBroker:
    """A broker started with ``frazil local up --secure`` in a state dir of its own."""

    state_dir: Path
    plaintext: str
    sasl_ssl: str
    mtls: str
    env: dict[str, str]
    #: What ``frazil local up --secure`` printed (stdout and stderr).
    up_output: str

    def secrets(self) -> list[str]:
        """The passwords, and a line of the CA's private key: no output may show one."""
        key_lines = (self.state_dir / "kafka" / "secure" / "ca-key.pem").read_text().splitlines()
        return [self.env[ENV_PASSWORD], self.env[ENV_KEY_PASSWORD], key_lines[1]]


def _frazil(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frazil.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    state = tmp_path_factory.mktemp("secure-kafka")
    # Below Linux's ephemeral range, as test_broker_failover.py explains.
    base = _free_base(4)
    ports = ["--state-dir", str(state), "--port", str(base), "--controller-port", str(base + 1)]
    up = _frazil(
        "local",
        "up",
        "--secure",
        "--secure-ports",
        f"{base + 2},{base + 3}",
        "--timeout",
        "120",
        *ports,
    )
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        plaintext, sasl_ssl, mtls = up.stdout.split()
        assert (sasl_ssl, mtls) == (f"127.0.0.1:{base + 2}", f"127.0.0.1:{base + 3}")
        listeners = SecureListeners(state / "kafka", "127.0.0.1", base + 2, base + 3)
        credentials = listeners.credentials()
        assert credentials is not None
        _warm_group_coordinator(plaintext)
        yield SecureBroker(
            state, plaintext, sasl_ssl, mtls, credentials.environment(), up.stdout + up.stderr
        )
    finally:
        _frazil("local", "down", *ports)


def _warm_group_coordinator(bootstrap: str) -> None:
    """Have the new broker create its offsets topic, so the first group commit finds a
    coordinator (a run until caught up commits once; NOT_COORDINATOR would only warn)."""
    ensure_topic(bootstrap, "warm-up", partitions=1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "warm-up"})
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                consumer.commit(offsets=[TopicPartition("warm-up", 0, 0)], asynchronous=False)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def _write_config(
    path: Path, lake_dir: Path, bootstrap: str, properties: dict[str, str], pipeline: Any
) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "catalog": {"warehouse": str(lake_dir / "warehouse")},
                "kafka": {"bootstrap_servers": bootstrap, "properties": properties},
                "state_dir": str(path.parent / "state"),
                "spark": {"driver_memory": "1g"},
                "pipelines": [pipeline],
            }
        )
    )
    return path


def _dead_letter_values(conf: dict[str, Any], topic: str, expected: int) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": f"check-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    found: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(found) < expected and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                found.append(msg.value() or b"")
    finally:
        consumer.close()
    return found


@SLOW
def test_sasl_ssl_end_to_end_with_credentials_from_the_environment_shown_nowhere(
    spark: Any,
    secure_broker: SecureBroker,
    lake_dir: Path,
    tmp_path: Path,
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from frazil.cli.main import app
    from frazil.engine.explain import explain
    from frazil.observe.web import Dashboard

    for name, value in secure_broker.env.items():
        monkeypatch.setenv(name, value)
    topic, table, name = f"ssl-{unique}", f"db.ssl_{unique}", f"ssl_{unique}"
    dlq = f"ssl-dead-{unique}"
    ids = produce_payments(secure_broker.plaintext, topic, 500, seed=51, partitions=2)
    bad = Producer({"bootstrap.servers": secure_broker.plaintext})
    bad.produce(topic, b"{not json", partition=1)
    bad.flush(30)
    del bad
    listeners = SecureListeners(secure_broker.state_dir / "kafka", "127.0.0.1", 1, 2)
    properties = client_properties(listeners.tls)
    assert "${FRAZIL_KAFKA_PASSWORD}" in properties["sasl.jaas.config"]
    pipeline = payments_pipeline(name, topic, table, errors={"tolerance": "all", "dlq_topic": dlq})
    path = _write_config(
        tmp_path / "frazil.yaml", lake_dir, secure_broker.sasl_ssl, properties, pipeline
    )
    config = load_config(path)
    remember(config)

    caplog.set_level(logging.INFO)
    (report,) = run(config, until_caught_up=True, spark=spark)

    assert report.records_ingested == len(ids)
    in_table = table_ids(spark, table)
    assert sorted(in_table) == sorted(ids)
    conf, refused = admin_config(config)
    assert refused == [] and conf["sasl.username"] == "frazil"
    assert _dead_letter_values(conf, dlq, 1) == [b"{not json"]
    ends = end_offsets(secure_broker.plaintext, topic, partitions=2)
    assert sum(ends.values()) == len(ids) + 1
    group = config.kafka.group_for(name)
    admin = AdminClient(conf)
    deadline = time.monotonic() + 20
    while read_group_offsets(admin, group) != {topic: ends} and time.monotonic() < deadline:
        time.sleep(0.5)
    assert read_group_offsets(admin, group) == {topic: ends}

    outputs = {"local up": secure_broker.up_output, "logs": caplog.text}
    runner = CliRunner()
    for args in (["validate", "-c", str(path)], ["status", "-c", str(path)]):
        shown = runner.invoke(app, args, terminal_width=200)
        assert shown.exit_code == 0, shown.output
        outputs[" ".join(args[:1])] = shown.output
    shown = runner.invoke(app, ["status", "-c", str(path), "-o", "json"])
    assert shown.exit_code == 0, shown.output
    outputs["status json"] = shown.output
    (row,) = json.loads(shown.output)
    assert row["lag_records"] == {topic: 0} and not row["problems"], row
    outputs["plan"] = json.dumps([e.to_json() for e in explain(spark, config, [])])
    outputs["/api/status"] = Dashboard(config).answer("/api/status")[2].decode()
    ui = spark.sparkContext.uiWebUrl
    api = f"{ui}/api/v1/applications/{spark.sparkContext.applicationId}"
    outputs["Spark environment"] = _get(f"{api}/environment")
    plans = _get(f"{api}/sql?details=true&planDescription=true&length=100000")
    assert "kafka" in plans.lower(), "no plan of a Kafka source to check"
    outputs["Spark SQL plans"] = plans
    leaks = [
        (where, s[:4])
        for where, text in outputs.items()
        for s in secure_broker.secrets()
        if s in text
    ]
    assert not leaks, leaks


@SLOW
def test_mtls_reads_with_a_client_certificate(
    spark: Any,
    secure_broker: SecureBroker,
    lake_dir: Path,
    tmp_path: Path,
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in secure_broker.env.items():
        monkeypatch.setenv(name, value)
    topic, table, name = f"mtls-{unique}", f"db.mtls_{unique}", f"mtls_{unique}"
    ids = produce_payments(secure_broker.plaintext, topic, 200, seed=52, partitions=1)
    listeners = SecureListeners(secure_broker.state_dir / "kafka", "127.0.0.1", 1, 2)
    path = _write_config(
        tmp_path / "frazil.yaml",
        lake_dir,
        secure_broker.mtls,
        client_properties(listeners.tls, mtls=True),
        payments_pipeline(name, topic, table),
    )
    config = load_config(path)
    (report,) = run(config, until_caught_up=True, spark=spark)
    assert report.records_ingested == len(ids)
    assert sorted(table_ids(spark, table)) == sorted(ids)
    (status,) = read_status(config)
    assert status.lag_records == {topic: 0} and not status.problems, status


@SLOW
def test_a_wrong_password_fails_clearly_and_writes_nothing(
    spark: Any, secure_broker: SecureBroker, lake_dir: Path, tmp_path: Path, unique: str
) -> None:
    topic, table, name = f"bad-{unique}", f"db.bad_{unique}", f"bad_{unique}"
    produce_payments(secure_broker.plaintext, topic, 10, seed=53, partitions=1)
    listeners = SecureListeners(secure_broker.state_dir / "kafka", "127.0.0.1", 1, 2)
    path = _write_config(
        tmp_path / "frazil.yaml",
        lake_dir,
        secure_broker.sasl_ssl,
        client_properties(listeners.tls),
        payments_pipeline(name, topic, table),
    )
    wrong = {**secure_broker.env, ENV_PASSWORD: "wrong-password-123"}
    for log_format in ("text", "json"):
        done = _frazil(
            "--log-format", log_format, "run", "-c", str(path), "--until-caught-up", env=wrong
        )
        assert done.returncode == 1, (done.stdout[-2000:], done.stderr[-2000:])
        said = done.stdout + done.stderr
        assert (
            f"Kafka at {secure_broker.sasl_ssl} (kafka.bootstrap_servers) refused frazil as "
            "user 'frazil' over SASL_SSL: authentication failed"
        ) in " ".join(said.split()), said[-2000:]
        assert "wrong-password-123" not in said
        assert not any(s in said for s in secure_broker.secrets())
    assert not spark.catalog.tableExists(f"lake.{table}")


@SLOW
def test_local_up_secure_prints_the_settings_and_keeps_the_secrets_in_private_files(
    secure_broker: SecureBroker,
) -> None:
    state = secure_broker.state_dir
    secure_dir = state / "kafka" / "secure"
    assert stat.S_IMODE(secure_dir.stat().st_mode) == 0o700
    for path in secure_dir.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    said = secure_broker.up_output
    assert "security.protocol: SASL_SSL" in said and "sasl.mechanism: SCRAM-SHA-512" in said
    assert f"source {secure_dir / 'client.env'}" in said
    assert not [s[:4] for s in secure_broker.secrets() if s in said]
    # The broker's user logs in with the same settings the hint prints.
    conf = {
        "bootstrap.servers": secure_broker.sasl_ssl,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": secure_broker.env[ENV_USER],
        "sasl.password": secure_broker.env[ENV_PASSWORD],
        "ssl.ca.location": str(secure_dir / "ca.pem"),
    }
    assert AdminClient(conf).list_topics(timeout=30).brokers

    status = _frazil("local", "status", "--state-dir", str(state), "-o", "json")
    shown = json.loads(status.stdout)
    assert (shown["sasl_ssl_bootstrap"], shown["mtls_bootstrap"]) == (
        secure_broker.sasl_ssl,
        secure_broker.mtls,
    )
    # Asked for: the export line, on stderr only; the running broker is kept as it is.
    plaintext_port = secure_broker.plaintext.rsplit(":", 1)[1]
    sasl_port, mtls_port = (
        b.rsplit(":", 1)[1] for b in (secure_broker.sasl_ssl, secure_broker.mtls)
    )
    again = _frazil(
        "local",
        "up",
        "--secure",
        "--show-credentials",
        "--state-dir",
        str(state),
        "--port",
        plaintext_port,
        "--controller-port",
        str(int(plaintext_port) + 1),
        "--secure-ports",
        f"{sasl_port},{mtls_port}",
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{ENV_PASSWORD}={secure_broker.env[ENV_PASSWORD]}" in again.stderr
    assert secure_broker.env[ENV_PASSWORD] not in again.stdout
