"""What counts as a secret, and how it is masked in values, mappings, text and Spark's UI."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from frazil.config import parse_config
from frazil.config.secrets import (
    SPARK_DEFAULT_REDACTION_REGEX,
    is_secret_key,
    mask_value,
    redact_mapping,
    redact_text,
    secret_values,
    spark_redaction_conf,
)

#: What Spark puts in place of a redacted value or string part (Utils.REDACTION_REPLACEMENT_TEXT).
SPARK_MASK = "*********(redacted)"


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.keystore.key",
        "sasl.jaas.config",
        "listener.name.sasl_ssl.plain.sasl.jaas.config",
        "SASL.JAAS.CONFIG",
        "basic.auth.user.info",
        "schema.registry.basic.auth.user.info",
        "credential",
        "rest.credential",
        "token",
        "s3.session-token",
        "sasl.oauthbearer.client.credentials.client.secret",
        "s3.secret-access-key",
        "s3.access-key-id",
        "spark.hadoop.fs.s3a.access.key",
        "spark.hadoop.fs.s3a.secret.key",
        "accessKey",
        "gcs.private-key",
        "private_key",
        "db.passwd",
    ],
)
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.truststore.location",
        "sasl.mechanism",
        "security.protocol",
        "bootstrap.servers",
        "s3.endpoint",
        "uri",
        "warehouse",
        "io-impl",
        "user",
    ],
)
def test_keys_that_are_not_secret(key: str) -> None:
    assert not is_secret_key(key)


@pytest.mark.parametrize(
    ("value", "masked"),
    [
        ("s3a://AKIA:wJalr@bucket/lake", "s3a://AKIA:***@bucket/lake"),
        # An unencoded '@' in the password: everything up to the host's '@' is masked.
        ("s3a://AKIA:wJa@lr@bucket/lake", "s3a://AKIA:***@bucket/lake"),
        ("redis://:pw@cache:6379/0", "redis://:***@cache:6379/0"),
        ("https://user:pw@host", "https://user:***@host"),
        (
            "jdbc:postgresql://db/iceberg?user=frazil&password=pg-pass",
            "jdbc:postgresql://db/iceberg?user=frazil&password=***",
        ),
        (
            "jdbc:postgresql://frazil:pg-pass@db:5432/iceberg?ssl=true",
            "jdbc:postgresql://frazil:***@db:5432/iceberg?ssl=true",
        ),
        (
            "jdbc:sqlserver://db;user=frazil;password=pg-pass;databaseName=iceberg",
            "jdbc:sqlserver://db;user=frazil;password=***;databaseName=iceberg",
        ),
        (
            "https://idp/oauth?access_token=abc&scope=x",
            "https://idp/oauth?access_token=***&scope=x",
        ),
        (
            'PlainLoginModule required username="alice" password="alice-secret";',
            'PlainLoginModule required username="alice" password="***";',
        ),
        # Nothing to mask: ports, empty passwords, '@' in a path, plain text.
        ("jdbc:postgresql://db:5432/iceberg", "jdbc:postgresql://db:5432/iceberg"),
        ("jdbc:postgresql://db/iceberg?password=", "jdbc:postgresql://db/iceberg?password="),
        ("http://host:80/path@x", "http://host:80/path@x"),
        ("b1:9092,b2:9092", "b1:9092,b2:9092"),
        ("s3a://bucket/lake", "s3a://bucket/lake"),
    ],
)
def test_mask_value(value: str, masked: str) -> None:
    assert mask_value(value) == masked


def test_redact_mapping() -> None:
    data = {
        "kafka": {
            "bootstrap_servers": "b1:9092",
            "properties": {
                "sasl.jaas.config": 'PlainLoginModule required username="u" password="p";',
                "sasl.mechanism": "PLAIN",
                "ssl.key.password": "",
            },
        },
        "catalog": {"uri": "jdbc:mysql://root:toor@db/iceberg", "properties": {"token": "t0k"}},
        "pipelines": [
            {"checkpoint": "s3a://AK:SK@bucket/cp", "schema": {"password_hash": "string"}}
        ],
        "count": 3,
    }
    assert redact_mapping(data) == {
        "kafka": {
            "bootstrap_servers": "b1:9092",
            "properties": {
                "sasl.jaas.config": "***",
                "sasl.mechanism": "PLAIN",
                "ssl.key.password": "",
            },
        },
        "catalog": {"uri": "jdbc:mysql://root:***@db/iceberg", "properties": {"token": "***"}},
        "pipelines": [
            {"checkpoint": "s3a://AK:***@bucket/cp", "schema": {"password_hash": "string"}}
        ],
        "count": 3,
    }


def test_redact_text() -> None:
    text = (
        "login failed for alice-secret (prefix alice-secret-2) with pw, "
        "url jdbc:postgresql://db/x?password=other"
    )
    secrets = ["alice-secret", "alice-secret-2", "pw", ""]
    assert redact_text(text, secrets) == (
        "login failed for *** (prefix ***) with pw, url jdbc:postgresql://db/x?password=***"
    )


def test_redact_text_without_known_secrets() -> None:
    assert redact_text("open s3a://AK:SK@b/x failed", []) == "open s3a://AK:***@b/x failed"


def test_secret_values_of_a_config() -> None:
    jaas = 'PlainLoginModule required username="u" password="kafka-pw";'
    config = parse_config(
        {
            "catalog": {
                "type": "jdbc",
                "warehouse": "s3a://AKIAWAREHOUSE:wh-secret@bucket/lake",
                "uri": "jdbc:postgresql://db/iceberg?user=frazil&password=pg-pass",
                "properties": {"s3.secret-access-key": "s3-secret", "s3.endpoint": "http://m:9000"},
            },
            "kafka": {
                "bootstrap_servers": "b1:9092",
                "properties": {
                    "sasl.jaas.config": jaas,
                    "sasl.mechanism": "PLAIN",
                },
            },
            "spark": {"conf": {"spark.hadoop.fs.s3a.access.key": "AKIASPARK"}},
            "pipelines": [
                {
                    "name": "p",
                    "topics": ["t"],
                    "table": "db.t",
                    "schema": {"id": "string", "access_token": "string"},
                }
            ],
        }
    )
    assert secret_values(config) == [
        jaas,
        "AKIASPARK",
        "s3-secret",
        "wh-secret",
        "kafka-pw",
        "pg-pass",
    ]


def test_spark_redaction_conf() -> None:
    keys = (
        "passw(?:or)?d|secret|token|credential|jaas|basic[._-]?auth[._-]?user[._-]?info"
        "|keystore[._-]?key|private[._-]?key|access[._-]?key"
    )
    uri = r"[a-z][a-z0-9+.-]*://[^/?#\s:@]*:[^/?#\s]+@"
    assert spark_redaction_conf() == {
        "spark.redaction.regex": f"(?i){keys}|{uri}",
        "spark.sql.redaction.options.regex": f"(?i)url|{keys}|{uri}",
        "spark.sql.redaction.string.regex": (
            r"(?i)(?<=://)[^/?#\s:@]*:[^/?#\s]+(?=@)"
            rf"|(?<=[?&;])[^=&;?#\s]*(?:{keys})[^=&;?#\s]*=[^&;#\s]*"
        ),
    }


# The regexes use only syntax that Python's re and java.util.regex read alike, so Spark's rules
# are reproduced here in Python: Utils.redact replaces a value when the regex is found in its key
# or its value, and Utils.redact(regex, text) replaces every match inside a string.


def _spark_redacts(setting: str, key: str, value: str) -> bool:
    pattern = re.compile(spark_redaction_conf()[setting])
    return bool(pattern.search(key) or pattern.search(value))


def _spark_replaces(text: str) -> str:
    pattern = re.compile(spark_redaction_conf()["spark.sql.redaction.string.regex"])
    return pattern.sub(SPARK_MASK, text)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("spark.sql.catalog.lake.credential", "client:secret"),
        ("spark.sql.catalog.lake.uri", "jdbc:postgresql://db/iceberg?user=u&password=p"),
        ("spark.sql.catalog.lake.warehouse", "s3a://AKIA:sk@bucket/lake"),
        ("spark.sql.catalog.lake.ssl.keystore.key", "-----BEGIN PRIVATE KEY-----"),
        ("spark.x.basic.auth.user.info", "u:p"),
        ("spark.hadoop.fs.s3a.access.key", "AKIA"),
        ("spark.hadoop.fs.s3a.access-key", "AKIA"),
    ],
)
def test_spark_environment_page_hides(key: str, value: str) -> None:
    assert _spark_redacts("spark.redaction.regex", key, value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("spark.sql.catalog.lake.s3.endpoint", "http://minio:9000"),
        ("spark.sql.catalog.lake.warehouse", "s3a://bucket/lake"),
        ("spark.x.ssl.truststore.certificates", "-----BEGIN CERTIFICATE-----"),
        ("spark.master", "local[2]"),
    ],
)
def test_spark_environment_page_shows(key: str, value: str) -> None:
    assert not _spark_redacts("spark.redaction.regex", key, value)


@pytest.mark.parametrize("word", SPARK_DEFAULT_REDACTION_REGEX.removeprefix("(?i)").split("|"))
def test_spark_defaults_are_kept(word: str) -> None:
    example = word.replace("[.]?", ".")
    assert _spark_redacts("spark.redaction.regex", f"spark.x.{example}", "v")
    assert _spark_redacts("spark.sql.redaction.options.regex", f"kafka.{example}", "v")


@pytest.mark.parametrize(
    ("key", "value", "hidden"),
    [
        ("kafka.sasl.jaas.config", 'PlainLoginModule required password="p";', True),
        ("kafka.ssl.keystore.key", "PEM", True),
        ("url", "jdbc:h2:mem:x", True),
        ("path", "s3a://AKIA:sk@bucket/x", True),
        ("kafka.bootstrap.servers", "b1:9092", False),
        ("subscribe", "payments", False),
    ],
)
def test_spark_sql_options_redaction(key: str, value: str, hidden: bool) -> None:
    assert _spark_redacts("spark.sql.redaction.options.regex", key, value) is hidden


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (
            "FileScan parquet [s3a://AKIA:sk@bucket/t/data]",
            f"FileScan parquet [s3a://{SPARK_MASK}@bucket/t/data]",
        ),
        (
            "JDBCRelation(jdbc:postgresql://db/x?user=u&password=p&ssl=true)",
            f"JDBCRelation(jdbc:postgresql://db/x?user=u&{SPARK_MASK}&ssl=true)",
        ),
        (
            "jdbc:sqlserver://db;user=u;password=p;x=1",
            f"jdbc:sqlserver://db;user=u;{SPARK_MASK};x=1",
        ),
        ("https://idp/t?access_token=abc&x=1", f"https://idp/t?{SPARK_MASK}&x=1"),
        ("Filter (token#12 = abc)", "Filter (token#12 = abc)"),
        ("jdbc:postgresql://db:5432/x", "jdbc:postgresql://db:5432/x"),
    ],
)
def test_spark_plan_string_redaction(text: str, redacted: str) -> None:
    assert _spark_replaces(text) == redacted


def test_secrets_module_does_not_import_spark() -> None:
    code = "import sys, frazil.config.secrets; print('pyspark' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
