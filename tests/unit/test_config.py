"""Config validation: exact key paths and reasons, env substitution, path resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

from frazil.config import load_config, parse_config
from frazil.config.loader import redacted
from frazil.errors import ConfigError
from frazil.generate.payments import PAYMENTS_SCHEMA


def _pipeline(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "name": "payments",
        "topics": ["payments"],
        "table": "db.payments",
        "schema": {"id": "string", "created_at": "timestamp", "amount": "long"},
        "partition_by": ["days(created_at)"],
    }
    base.update(overrides)
    return base


def _problems(data: object) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return info.value.problems


def test_minimal_config_gets_documented_defaults(tmp_path: Path) -> None:
    config = parse_config({"pipelines": [_pipeline()]}, base_dir=tmp_path)
    assert config.catalog.name == "lake"
    assert config.catalog.warehouse == str(tmp_path / "lake")
    assert config.catalog.resolved_uri() == f"jdbc:sqlite:{tmp_path}/lake/catalog.db"
    assert config.kafka.bootstrap_servers == "127.0.0.1:9092"
    pipeline = config.pipelines[0]
    assert pipeline.trigger_seconds() == 1.0
    assert config.checkpoint_for(pipeline) == f"{tmp_path}/.frazil/checkpoints/payments"
    assert [f.to_spark_sql() for f in pipeline.defaults.partition_fields()] == ["days(created_at)"]


def test_the_payments_example_validates(tmp_path: Path) -> None:
    example = Path(__file__).parents[2] / "examples" / "payments.yaml"
    config = load_config(example)
    assert config.pipelines[0].value.schema_ == PAYMENTS_SCHEMA


def test_every_problem_is_reported_with_its_key_path() -> None:
    problems = _problems(
        {
            "kafka": {"bootstrap_servers": "x:1", "propertiez": {}},
            "pipelines": [
                _pipeline(
                    topics=["ok", "bad topic"],
                    partition_by=["days(created_at)", "dayz(created_at)"],
                    trigger="soon",
                    extra_key=1,
                    schema={"id": "strng"},
                    max_offsets_per_trigger="many",
                )
            ],
        }
    )
    by_key = dict(problems)
    assert by_key["kafka.propertiez"] == "unknown key (did you mean 'properties'?)"
    assert by_key["pipelines[0].extra_key"] == "unknown key"
    assert "not a valid Kafka topic name" in by_key["pipelines[0].topics[1]"]
    assert by_key["pipelines[0].partition_by[1]"].startswith("unknown partition transform 'dayz'")
    assert "not a duration" in by_key["pipelines[0].trigger"]
    assert "unknown type 'strng'" in by_key["pipelines[0].schema.id"]
    assert by_key["pipelines[0].schema.id"].endswith("(did you mean 'string'?)")
    assert "integer" in by_key["pipelines[0].max_offsets_per_trigger"]


def test_first_batch_max_offsets_is_a_count_and_zero_turns_it_off() -> None:
    problems = _problems({"pipelines": [_pipeline(first_batch_max_offsets=-1)]})
    assert problems == [
        ("pipelines[0].first_batch_max_offsets", "Input should be greater than or equal to 0")
    ]
    off = parse_config({"pipelines": [_pipeline(first_batch_max_offsets=0)]}).pipelines[0]
    assert off.first_batch_max_offsets == 0


def test_bad_regex_is_reported() -> None:
    problems = _problems({"pipelines": [_pipeline(topics=None, topic_pattern="payments\\.(")]})
    key, reason = problems[0]
    assert key == "pipelines[0].topic_pattern"
    assert reason.startswith("invalid regular expression")


def test_topics_and_pattern_are_exclusive() -> None:
    problems = _problems({"pipelines": [_pipeline(topic_pattern="p.*")]})
    assert problems == [("pipelines[0]", "set exactly one of 'topics' or 'topic_pattern'")]


def test_partition_column_must_be_in_schema() -> None:
    problems = _problems(
        {"pipelines": [_pipeline(partition_by=["days(created_at)", "bucket(16, nope)"])]}
    )
    assert problems == [
        (
            "pipelines[0].partition_by[1]",
            "partition_by column 'nope' is not in the schema (fields: id, created_at, amount)",
        )
    ]


def test_missing_required_keys() -> None:
    problems = _problems({"pipelines": [{"name": "p", "topics": ["t"]}]})
    assert (
        "pipelines[0]",
        "set exactly one of 'table' (every record to one table) or 'route' (records to tables "
        "by field or topic)",
    ) in problems
    assert _problems({}) == [("pipelines", "required key is missing")]


def test_duplicate_pipeline_names() -> None:
    problems = _problems({"pipelines": [_pipeline(), _pipeline()]})
    assert "used twice" in problems[0][1]


def test_spark_managed_kafka_keys_are_refused() -> None:
    problems = _problems({"kafka": {"properties": {"group.id": "g"}}, "pipelines": [_pipeline()]})
    assert problems[0][0] == "kafka.properties"
    assert "group.id cannot be set" in problems[0][1]


def test_isolation_level_is_read_committed_or_read_uncommitted() -> None:
    bad = {"kafka": {"properties": {"isolation.level": "committed"}}, "pipelines": [_pipeline()]}
    problems = _problems(bad)
    assert problems[0][0] == "kafka.properties"
    assert "isolation.level is 'committed'" in problems[0][1]
    # Kafka's Java consumer takes the lower-case names only.
    upper = {"properties": {"isolation.level": "READ_UNCOMMITTED"}}
    assert "isolation.level is" in _problems({"kafka": upper, "pipelines": [_pipeline()]})[0][1]
    good = {"properties": {"isolation.level": "read_uncommitted"}}
    parse_config({"kafka": good, "pipelines": [_pipeline()]})


def test_env_substitution_and_missing_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FZ_BOOT", "10.0.0.1:9092")
    monkeypatch.delenv("FZ_MISSING", raising=False)
    config = parse_config(
        {
            "kafka": {"bootstrap_servers": "${FZ_BOOT}", "properties": {"a": "${FZ_MISSING:-d}"}},
            "pipelines": [_pipeline()],
        }
    )
    assert config.kafka.bootstrap_servers == "10.0.0.1:9092"
    assert config.kafka.properties["a"] == "d"
    problems = _problems(
        {"kafka": {"bootstrap_servers": "${FZ_MISSING}"}, "pipelines": [_pipeline()]}
    )
    # One problem for the key: not also the empty value the unset variable left.
    assert problems == [("kafka.bootstrap_servers", "environment variable FZ_MISSING is not set")]
    # An unknown key is a problem of its own, whatever its value.
    problems = _problems({"pipelines": [_pipeline(trigegr="${FZ_MISSING}")]})
    assert ("pipelines[0].trigegr", "unknown key (did you mean 'trigger'?)") in problems


def test_secrets_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FZ_SECRET", "hunter2")
    config = parse_config(
        {
            "kafka": {
                "properties": {
                    "sasl.jaas.config": "x password=${FZ_SECRET}",
                    "sasl.mechanism": "PLAIN",
                }
            },
            "catalog": {"properties": {"s3.secret-access-key": "${FZ_SECRET}"}},
            "pipelines": [_pipeline()],
        }
    )
    text = str(redacted(config))
    assert "hunter2" not in text
    assert "PLAIN" in text


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("pipelines:\n  - name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_config(path)


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config("/nonexistent/frazil.yaml")


# --- schema fields that collide with frazil's own columns ------------------------------------


@pytest.mark.parametrize(
    ("field", "reason"),
    [
        (
            "__frazil_topic",
            "field name '__frazil_topic': the prefix '__frazil_' is reserved for "
            "frazil's internal columns",
        ),
        (
            "__FRAZIL_Op",
            "field name '__FRAZIL_Op': the prefix '__frazil_' is reserved for "
            "frazil's internal columns",
        ),
        (
            "_kafka_note",
            "field name '_kafka_note': the prefix '_kafka_' is reserved for kafka_metadata columns",
        ),
        (
            "_Kafka_Offset",
            "field name '_Kafka_Offset': the prefix '_kafka_' is reserved for "
            "kafka_metadata columns",
        ),
    ],
)
def test_reserved_field_prefixes(field: str, reason: str) -> None:
    schema = {"id": "string", field: "string", "created_at": "timestamp"}
    problems = _problems({"pipelines": [_pipeline(schema=schema)]})
    assert problems == [(f"pipelines[0].schema.{field}", reason)]


def test_field_colliding_with_requested_kafka_metadata_column() -> None:
    schema = {"id": "string", "created_at": "timestamp", "_kafka_timestamp": "timestamp"}
    problems = _problems({"pipelines": [_pipeline(schema=schema, kafka_metadata=["timestamp"])]})
    assert problems == [
        (
            "pipelines[0].schema._kafka_timestamp",
            "field name '_kafka_timestamp': the prefix '_kafka_' is reserved for "
            "kafka_metadata columns",
        )
    ]


def test_fields_differing_only_in_case() -> None:
    schema = {"id": "string", "created_at": "timestamp", "ID": "long"}
    problems = _problems({"pipelines": [_pipeline(schema=schema)]})
    assert problems == [
        (
            "pipelines[0].schema",
            "fields 'id' and 'ID' differ only in case, and Spark resolves column names "
            "case-insensitively",
        )
    ]


# --- triggers -------------------------------------------------------------------------------


@pytest.mark.parametrize("trigger", ["50ms", "99ms", "0.05s", "0.099 seconds"])
def test_trigger_under_100ms(trigger: str) -> None:
    problems = _problems({"pipelines": [_pipeline(trigger=trigger)]})
    assert problems == [("pipelines[0].trigger", "must be at least 100ms")]


@pytest.mark.parametrize("trigger", ["0ms", "0s", "0.0s"])
def test_zero_trigger(trigger: str) -> None:
    problems = _problems({"pipelines": [_pipeline(trigger=trigger)]})
    assert problems == [("pipelines[0].trigger", "must be longer than zero")]


def test_negative_trigger_is_not_a_duration() -> None:
    problems = _problems({"pipelines": [_pipeline(trigger="-1s")]})
    assert problems == [
        ("pipelines[0].trigger", "'-1s' is not a duration such as 500ms, 1s, 5m or 1h")
    ]


@pytest.mark.parametrize(("trigger", "seconds"), [("100ms", 0.1), ("0.1s", 0.1), ("1m", 60.0)])
def test_trigger_of_100ms_and_more_is_valid(trigger: str, seconds: float) -> None:
    config = parse_config({"pipelines": [_pipeline(trigger=trigger)]})
    assert config.pipelines[0].trigger_seconds() == seconds


# --- partitioning on columns that will exist ------------------------------------------------


@pytest.mark.parametrize("schema", [None, {"id": "string", "created_at": "timestamp"}])
def test_partition_by_requested_kafka_metadata_column(schema: dict[str, str] | None) -> None:
    pipeline = _pipeline(
        schema=schema,
        kafka_metadata=["timestamp", "topic"],
        partition_by=["days(_kafka_timestamp)", "_kafka_topic"],
    )
    if schema is None:
        del pipeline["schema"]
    config = parse_config({"pipelines": [pipeline]})
    assert config.pipelines[0].defaults.partition_by == ["days(_kafka_timestamp)", "_kafka_topic"]


@pytest.mark.parametrize("declared", [True, False])
def test_partition_by_kafka_metadata_column_not_requested(declared: bool) -> None:
    pipeline = _pipeline(kafka_metadata=["timestamp"], partition_by=["bucket(8, _kafka_offset)"])
    if not declared:
        del pipeline["schema"]
    assert _problems({"pipelines": [pipeline]}) == [
        (
            "pipelines[0].partition_by[0]",
            "partition_by column '_kafka_offset' only exists when kafka_metadata lists 'offset'",
        )
    ]


def test_partition_by_unknown_kafka_metadata_column() -> None:
    pipeline = _pipeline(partition_by=["_kafka_lag"])
    del pipeline["schema"]
    assert _problems({"pipelines": [pipeline]}) == [
        (
            "pipelines[0].partition_by[0]",
            "partition_by column '_kafka_lag' is not a Kafka metadata column (_kafka_topic, "
            "_kafka_partition, _kafka_offset, _kafka_timestamp, _kafka_key, _kafka_headers)",
        )
    ]


def test_partition_by_unchecked_columns_with_inferred_schema() -> None:
    pipeline = _pipeline(partition_by=["days(anything)", "bucket(4, payer.id)"])
    del pipeline["schema"]
    config = parse_config({"pipelines": [pipeline]})
    assert config.pipelines[0].value.schema_ is None


def test_partition_column_missing_lists_metadata_columns_too() -> None:
    pipeline = _pipeline(kafka_metadata=["partition"], partition_by=["nope"])
    assert _problems({"pipelines": [pipeline]}) == [
        (
            "pipelines[0].partition_by[0]",
            "partition_by column 'nope' is not in the schema "
            "(fields: id, created_at, amount, _kafka_partition)",
        )
    ]


def test_partition_columns_are_checked_against_a_schema_with_wrong_types() -> None:
    # A field whose type is wrong still names a column: both problems in one run.
    pipeline = _pipeline(schema={"id": "strng"}, partition_by=["days(created_at)"])
    problems = _problems({"pipelines": [pipeline]})
    assert [key for key, _ in problems] == [
        "pipelines[0].schema.id",
        "pipelines[0].partition_by[0]",
    ]


def test_partition_check_waits_for_a_schema_of_fields() -> None:
    # A schema that is not a mapping of fields names no column to check against.
    pipeline = _pipeline(schema=["id"], partition_by=["days(created_at)"])
    problems = _problems({"pipelines": [pipeline]})
    assert [key for key, _ in problems] == ["pipelines[0].schema"]


# --- catalog combinations -------------------------------------------------------------------

_REMOTE_JDBC = (
    "required when catalog.type is jdbc and catalog.warehouse is remote ({warehouse}): the "
    "embedded catalog is a SQLite file inside the warehouse, which needs a local warehouse; "
    "set catalog.uri to a JDBC URL (e.g. jdbc:postgresql://host/iceberg) or use "
    "catalog.type: rest"
)


@pytest.mark.parametrize("uri", [None, ""])
def test_rest_catalog_needs_uri(uri: str | None) -> None:
    catalog: dict[str, object] = {"type": "rest", "warehouse": "s3a://bucket/lake"}
    if uri is not None:
        catalog["uri"] = uri
    assert _problems({"catalog": catalog, "pipelines": [_pipeline()]}) == [
        (
            "catalog.uri",
            "required when catalog.type is rest: the REST catalog's endpoint, "
            "e.g. https://catalog.example.com/api/catalog",
        )
    ]


def test_rest_catalog_with_uri() -> None:
    config = parse_config(
        {
            "catalog": {"type": "rest", "uri": "https://polaris:8181/api/catalog"},
            "pipelines": [_pipeline()],
        }
    )
    assert config.catalog.resolved_uri() == "https://polaris:8181/api/catalog"


@pytest.mark.parametrize(
    "warehouse",
    [
        "s3a://bucket/lake",
        "s3://bucket/lake",
        "gs://bucket/lake",
        "abfs://container@account.dfs.core.windows.net/lake",
        "hdfs://namenode:8020/lake",
    ],
)
def test_embedded_jdbc_catalog_needs_a_local_warehouse(warehouse: str) -> None:
    problems = _problems({"catalog": {"warehouse": warehouse}, "pipelines": [_pipeline()]})
    assert problems == [("catalog.uri", _REMOTE_JDBC.format(warehouse=warehouse))]


def test_remote_warehouse_credentials_are_masked_in_the_error() -> None:
    warehouse = "s3a://AKIAEXAMPLE:hunter2hunter2@bucket/lake"
    with pytest.raises(ConfigError) as info:
        parse_config({"catalog": {"warehouse": warehouse}, "pipelines": [_pipeline()]})
    masked = "s3a://AKIAEXAMPLE:***@bucket/lake"
    assert info.value.problems == [("catalog.uri", _REMOTE_JDBC.format(warehouse=masked))]
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    "catalog",
    [
        {"type": "jdbc", "warehouse": "s3a://bucket/lake", "uri": "jdbc:postgresql://db/iceberg"},
        {"type": "hadoop", "warehouse": "./lake"},
        {"type": "hadoop", "warehouse": "hdfs://namenode:8020/lake"},
    ],
)
def test_catalog_combinations_that_work(catalog: dict[str, str]) -> None:
    config = parse_config({"catalog": catalog, "pipelines": [_pipeline()]})
    assert config.catalog.type == catalog["type"]


@pytest.mark.parametrize("warehouse", ["s3a://bucket/lake", "gs://b/lake", "abfss://c@a/lake"])
def test_a_hadoop_catalog_on_an_object_store_is_refused(warehouse: str) -> None:
    # Its commit is a rename, which an object store does not do atomically.
    with pytest.raises(ConfigError) as info:
        parse_config(
            {"catalog": {"type": "hadoop", "warehouse": warehouse}, "pipelines": [_pipeline()]}
        )
    [(key, reason)] = info.value.problems
    assert key == "catalog"
    assert reason.startswith(
        f"catalog.type hadoop cannot keep tables on an object store ({warehouse})"
    )
    assert "not do atomically" in reason and "catalog.type: rest" in reason


def test_a_sqlite_catalog_on_a_network_file_system_gets_a_warning(tmp_path: Path) -> None:
    from frazil.config.locations import network_file_system

    (tmp_path / "lake").mkdir()
    mounts = tmp_path / "mounts"
    mounts.write_text(
        f"/dev/sda1 / ext4 rw 0 0\nserver:/export {tmp_path} nfs4 rw 0 0\n", encoding="utf-8"
    )
    assert network_file_system(str(tmp_path / "lake" / "catalog.db"), str(mounts)) == "nfs4"
    assert network_file_system("/usr/lib", str(mounts)) is None
    config = parse_config({"catalog": {"warehouse": str(tmp_path)}, "pipelines": [_pipeline()]})
    assert config.catalog.warnings() == []  # this machine's own mounts: a local disk


def test_file_uri_warehouse_is_local(tmp_path: Path) -> None:
    warehouse = (tmp_path / "my lake").as_uri()
    config = parse_config({"catalog": {"warehouse": warehouse}, "pipelines": [_pipeline()]})
    assert config.catalog.warehouse == warehouse
    assert config.catalog.resolved_uri() == f"jdbc:sqlite:{tmp_path}/my lake/catalog.db"


# --- locations: URIs are left alone, local paths resolved -----------------------------------


def test_uri_locations_are_kept(tmp_path: Path) -> None:
    config = parse_config(
        {
            "catalog": {"type": "rest", "warehouse": "s3a://bucket/lake", "uri": "http://c"},
            "state_dir": "s3a://bucket/state",
            "pipelines": [
                _pipeline(checkpoint="s3a://bucket/checkpoints/payments"),
                _pipeline(name="other"),
            ],
        },
        base_dir=tmp_path,
    )
    assert config.catalog.warehouse == "s3a://bucket/lake"
    assert config.state_dir == "s3a://bucket/state"
    first, second = config.pipelines
    assert config.checkpoint_for(first) == "s3a://bucket/checkpoints/payments"
    assert config.checkpoint_for(second) == "s3a://bucket/state/checkpoints/other"


@pytest.mark.parametrize("location", ["file:///srv/frazil/state", "file:/srv/frazil/state"])
def test_file_uris_are_kept(tmp_path: Path, location: str) -> None:
    config = parse_config(
        {"state_dir": location, "pipelines": [_pipeline(checkpoint=location + "/cp")]},
        base_dir=tmp_path,
    )
    assert config.state_dir == location
    assert config.pipelines[0].checkpoint == location + "/cp"


def test_relative_locations_are_resolved(tmp_path: Path) -> None:
    config = parse_config(
        {
            "catalog": {"warehouse": "data/lake"},
            "state_dir": "state",
            "pipelines": [_pipeline(checkpoint="cp/payments")],
        },
        base_dir=tmp_path,
    )
    assert config.catalog.warehouse == str(tmp_path / "data" / "lake")
    assert config.state_dir == str(tmp_path / "state")
    assert config.pipelines[0].checkpoint == str(tmp_path / "cp" / "payments")


def test_empty_catalog_section_means_defaults(tmp_path: Path) -> None:
    config = parse_config({"catalog": None, "pipelines": [_pipeline()]}, base_dir=tmp_path)
    assert config.catalog.warehouse == str(tmp_path / "lake")


# --- secrets in validate output and errors --------------------------------------------------


def test_redacted_masks_uri_credentials_in_plain_values() -> None:
    config = parse_config(
        {
            "catalog": {
                "warehouse": "s3a://bucket/lake",
                "uri": "jdbc:postgresql://db/iceberg?user=frazil&password=pg-pass-1",
                "properties": {"credential": "client:secret", "s3.endpoint": "http://minio:9000"},
            },
            "kafka": {"bootstrap_servers": "b1:9092", "properties": {"ssl.key.password": ""}},
            "spark": {"conf": {"spark.hadoop.fs.s3a.access.key": "AKIA1234"}},
            "pipelines": [_pipeline()],
        }
    )
    data = redacted(config)
    assert data["catalog"]["uri"] == "jdbc:postgresql://db/iceberg?user=frazil&password=***"
    assert data["catalog"]["properties"] == {
        "credential": "***",
        "s3.endpoint": "http://minio:9000",
    }
    assert data["kafka"] == {
        "bootstrap_servers": "b1:9092",
        "properties": {"ssl.key.password": ""},
        "group_id": "frazil-{pipeline}",
        "commit_offsets": True,
    }
    assert data["spark"]["conf"] == {"spark.hadoop.fs.s3a.access.key": "***"}


def test_is_secret_key_stays_importable_from_the_loader() -> None:
    from frazil.config.loader import is_secret_key

    assert is_secret_key("sasl.jaas.config")
    assert not is_secret_key("sasl.mechanism")


def test_secret_values_are_masked_in_validation_errors() -> None:
    problems = _problems(
        {
            "kafka": {"properties": {"ssl.truststore.password": "s3cr3t-store"}},
            "pipelines": [_pipeline(topics=None, topic_pattern="(s3cr3t-store")],
        }
    )
    assert problems == [
        (
            "pipelines[0].topic_pattern",
            "invalid regular expression '(***': missing ), unterminated subpattern at position 0",
        )
    ]


def test_schema_fields_named_like_secrets_are_not_secrets() -> None:
    # The type 'string' of a field called access_token must not be masked in other messages.
    plain = _problems({"pipelines": [_pipeline(schema={"id": "strng"}, partition_by=[])]})
    schema = {"id": "strng", "access_token": "string"}
    problems = _problems({"pipelines": [_pipeline(schema=schema, partition_by=[])]})
    assert problems == plain
    assert "string" in problems[0][1]
    schema = {"id": "string", "token": "string"}
    config = parse_config({"pipelines": [_pipeline(schema=schema, partition_by=[])]})
    assert redacted(config)["pipelines"][0]["schema"] == {"id": "string", "token": "string"}


def test_valid_through_slack_is_a_duration() -> None:
    config = parse_config({"pipelines": [_pipeline(valid_through_slack="0s")]})
    assert config.pipelines[0].slack_ms() == 0
    assert parse_config({"pipelines": [_pipeline()]}).pipelines[0].slack_ms() == 120_000
    with pytest.raises(ConfigError) as info:
        parse_config({"pipelines": [_pipeline(valid_through_slack="soon")]})
    [(key, reason)] = info.value.problems
    assert key == "pipelines[0].valid_through_slack" and "not a duration" in reason


@pytest.mark.parametrize(
    ("written", "meant"), [("datetime", "timestamp"), ("DateTime", "timestamp"), ("text", "string")]
)
def test_a_type_named_as_other_systems_name_it_gets_frazils_name(written: str, meant: str) -> None:
    problems = dict(_problems({"pipelines": [_pipeline(schema={"at": written})]}))
    assert problems["pipelines[0].schema.at"].endswith(f"(did you mean {meant!r}?)")


def test_a_value_of_the_wrong_form_says_the_form_it_takes() -> None:
    pipeline = {"name": "p", "topics": ["t"], "table": "db.t"}
    assert _problems({"pipelines": [{**pipeline, "trigger": 5}]}) == [
        (
            "pipelines[0].trigger",
            "Input should be a valid string; a duration takes its unit: 5s (ms, s, m, h or d)",
        )
    ]
    assert _problems({"pipelines": [{**pipeline, "partition_by": "days(created_at)"}]}) == [
        ("pipelines[0].partition_by", "Input should be a valid list; write [days(created_at)]")
    ]
