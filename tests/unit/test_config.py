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
    assert [f.to_spark_sql() for f in pipeline.partition_fields()] == ["days(created_at)"]


def test_issue_contract_example_validates(tmp_path: Path) -> None:
    example = Path(__file__).parents[2] / "examples" / "payments.yaml"
    config = load_config(example)
    assert config.pipelines[0].schema_ == PAYMENTS_SCHEMA


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
    assert by_key["kafka.propertiez"] == "unknown key"
    assert by_key["pipelines[0].extra_key"] == "unknown key"
    assert "not a valid Kafka topic name" in by_key["pipelines[0].topics[1]"]
    assert by_key["pipelines[0].partition_by[1]"].startswith("unknown partition transform 'dayz'")
    assert "not a duration" in by_key["pipelines[0].trigger"]
    assert "unknown type 'strng'" in by_key["pipelines[0].schema"]
    assert "integer" in by_key["pipelines[0].max_offsets_per_trigger"]


def test_bad_regex_is_reported() -> None:
    problems = _problems({"pipelines": [_pipeline(topics=None, topic_pattern="payments\\.(")]})
    key, reason = problems[0]
    assert key == "pipelines[0].topic_pattern"
    assert reason.startswith("invalid regular expression")


def test_topics_and_pattern_are_exclusive() -> None:
    problems = _problems({"pipelines": [_pipeline(topic_pattern="p.*")]})
    assert problems == [("pipelines[0]", "set exactly one of 'topics' or 'topic_pattern'")]


def test_partition_column_must_be_in_schema() -> None:
    problems = _problems({"pipelines": [_pipeline(partition_by=["bucket(16, nope)"])]})
    assert problems[0][0] == "pipelines[0]"
    assert "partition_by column 'nope' is not in the schema" in problems[0][1]


def test_missing_required_keys() -> None:
    problems = _problems({"pipelines": [{"name": "p", "topics": ["t"]}]})
    assert ("pipelines[0].table", "required key is missing") in problems
    assert _problems({}) == [("pipelines", "required key is missing")]


def test_duplicate_pipeline_names() -> None:
    problems = _problems({"pipelines": [_pipeline(), _pipeline()]})
    assert "used twice" in problems[0][1]


def test_spark_managed_kafka_keys_are_refused() -> None:
    problems = _problems({"kafka": {"properties": {"group.id": "g"}}, "pipelines": [_pipeline()]})
    assert problems[0][0] == "kafka.properties"
    assert "group.id cannot be set" in problems[0][1]


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
    assert ("kafka.bootstrap_servers", "environment variable FZ_MISSING is not set") in problems


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
