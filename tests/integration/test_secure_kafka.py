"""A Kafka listener that needs SASL credentials (``sasl.jaas.config``, Java-only settings).

Resuming from the table must work with whatever security settings Spark's own source accepts
(frazil asks Kafka through the JVM's client, not librdkafka), and the password must appear
nowhere: not in Spark's UI (Environment and SQL pages), not in frazil's errors.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from collections import Counter
from typing import Any

import pytest

from frazil.config.secrets import remember, scrub
from frazil.engine.runner import run
from tests.integration.conftest import SPARK_SECRET
from tests.integration.helpers import payments_pipeline, produce_payments, table_ids

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
