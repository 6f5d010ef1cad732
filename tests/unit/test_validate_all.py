"""``frazil validate`` lists every problem of a config in one run (the loader's, the declared
schema's types, partitioning, transforms, routes, write keys), each at its key path, with "did
you mean" for a near miss; ``run`` and ``plan`` load through the same checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from frazil.config.known_keys import known_keys
from frazil.config.loader import load_config, parse_config
from frazil.config.models import FrazilConfig
from frazil.config.suggest import did_you_mean
from frazil.errors import ConfigError
from frazil.transform.check import config_problems

#: One config with a problem of every kind, spread over three pipelines.
MANY = """\
catalog: {wharehouse: ./lake}
pipelines:
  - name: payments
    topic: [payments]
    format: jsn
    schema:
      id: long
      amount: strin
      created: timestap
    table: db.payments
    partition_by: [days(created), bucket(id), dyas(created)]
    transforms:
      - flaten: {}
  - name: orders
    topics: [orders]
    schema: {id: long, amount: double, customer: string}
    table: db.orders
    partition_by: [nope]
    write: {mode: upsert, key: [order_id]}
    transforms:
      - rename: {custmer: buyer}
      - drop: [amount]
  - name: routed
    topics: [events]
    schema: {id: long, kind: string}
    route: {field: knd, tables: {a: db.a}}
    sort_by: [id]
    tables:
      db.a: {sort_by: [idd]}
"""

#: Every problem of MANY, in the order they are listed.
EXPECTED = [
    ("catalog.wharehouse", "unknown key (did you mean 'warehouse'?)"),
    (
        "pipelines[0].format",
        "Input should be 'json', 'avro', 'protobuf', 'string' or 'bytes' (did you mean 'json'?)",
    ),
    ("pipelines[0].schema.amount", "field 'amount': unknown type 'strin' (known: "),
    ("pipelines[0].schema.created", "field 'created': unknown type 'timestap' (known: "),
    (
        "pipelines[0].transforms[0]",
        "unknown transform 'flaten' (did you mean 'flatten'?); each transform is a mapping "
        "with one key, its name: flatten, parse_timestamp, rename, drop, cast, derive, filter "
        "or parse_json",
    ),
    ("pipelines[0].partition_by[1]", "bucket() needs a width and a column, e.g. bucket(16, id)"),
    ("pipelines[0].partition_by[2]", "unknown partition transform 'dyas' (known: "),
    ("pipelines[0].topic", "unknown key (did you mean 'topics'?)"),
    (
        "pipelines[1].transforms[0].rename",
        "field 'custmer' does not exist (fields: id, amount, customer)",
    ),
    ("pipelines[1].partition_by[0]", "column 'nope' is not in the table (columns: id, customer)"),
    ("pipelines[1].write.key[0]", "column 'order_id' is not in the table (columns: id, customer)"),
    ("pipelines[2].tables.db.a.sort_by[0]", "column 'idd' is not in the table (columns: id, kind)"),
    (
        "pipelines[2].route.field",
        "column 'knd' is not in the records after decoding and transforms (columns: id, kind)",
    ),
]


def _listed(path: Path) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        load_config(path, checks=config_problems)
    return info.value.problems


def test_every_problem_of_every_kind_is_listed_in_one_run(tmp_path: Path) -> None:
    config = tmp_path / "many.yaml"
    config.write_text(MANY)

    problems = _listed(config)

    assert [key for key, _ in problems] == [key for key, _ in EXPECTED]
    for (key, reason), (_, expected) in zip(problems, EXPECTED, strict=True):
        assert reason.startswith(expected), key
    by_key = dict(problems)
    assert by_key["pipelines[0].schema.amount"].endswith("(did you mean 'string'?)")
    assert by_key["pipelines[0].schema.created"].endswith("(did you mean 'timestamp'?)")
    assert by_key["pipelines[0].partition_by[2]"].endswith("(did you mean 'days'?)")


def test_the_message_counts_and_lists_every_problem(tmp_path: Path) -> None:
    config = tmp_path / "many.yaml"
    config.write_text(MANY)
    with pytest.raises(ConfigError) as info:
        load_config(config, checks=config_problems)
    lines = str(info.value).splitlines()
    assert lines[0] == f"{config}: {len(EXPECTED)} problems"
    assert [line.split(": ")[0].strip() for line in lines[1:]] == [key for key, _ in EXPECTED]


def test_without_the_checks_the_loader_reports_the_models_problems_only(tmp_path: Path) -> None:
    config = tmp_path / "many.yaml"
    config.write_text(MANY)
    with pytest.raises(ConfigError) as info:
        load_config(config)
    keys = [key for key, _ in info.value.problems]
    assert "pipelines[1].transforms[0].rename" not in keys
    assert "pipelines[0].schema.created" in keys


def test_a_valid_config_gets_the_checks_too() -> None:
    pipeline = {
        "name": "p",
        "topics": ["t"],
        "table": "db.t",
        "schema": {"id": "long", "payer": "string"},
        "transforms": [{"rename": {"payer": "who"}}],
        "partition_by": ["payer"],
    }
    with pytest.raises(ConfigError) as info:
        parse_config({"pipelines": [pipeline]}, checks=config_problems)
    assert info.value.problems == [
        ("pipelines[0].partition_by[0]", "column 'payer' is not in the table (columns: id, who)")
    ]
    pipeline["partition_by"] = ["who"]
    assert parse_config({"pipelines": [pipeline]}, checks=config_problems).pipelines[0]


def test_partition_by_without_transforms_is_reported_once() -> None:
    pipeline = {
        "name": "p",
        "topics": ["t"],
        "table": "db.t",
        "schema": {"id": "long"},
        "partition_by": ["nope"],
    }
    with pytest.raises(ConfigError) as info:
        parse_config({"pipelines": [pipeline]}, checks=config_problems)
    assert info.value.problems == [
        (
            "pipelines[0].partition_by[0]",
            "partition_by column 'nope' is not in the schema (fields: id)",
        )
    ]


@pytest.mark.parametrize(
    ("word", "choices", "hint"),
    [
        ("topic", ["name", "topics", "topic_pattern"], " (did you mean 'topics'?)"),
        ("flaten", ["flatten", "rename"], " (did you mean 'flatten'?)"),
        ("jsn", ["json", "avro", "protobuf", "string", "bytes"], " (did you mean 'json'?)"),
        ("value", ["table", "topics"], ""),
        ("topics", ["topics"], ""),
        (3, ["topics"], ""),
    ],
)
def test_did_you_mean(word: object, choices: list[str], hint: str) -> None:
    assert did_you_mean(word, choices) == hint


def test_known_keys_follow_the_config_as_written() -> None:
    pipeline = known_keys(FrazilConfig, ("pipelines", 0))
    assert pipeline is not None and "topics" in pipeline and "format" in pipeline
    assert "value" not in pipeline  # a group of the model, not a key of the config
    write = known_keys(FrazilConfig, ("pipelines", 0, "write"))
    assert write is not None and "mode" in write
    flatten = known_keys(FrazilConfig, ("pipelines", 0, "transforms", 1, "flatten", "flatten"))
    assert flatten == ["separator", "max_depth"]
    route = known_keys(FrazilConfig, ("pipelines", 0, "route", "static"))
    assert route is not None and "default" in route
    table = known_keys(FrazilConfig, ("pipelines", 0, "tables", "db.a"))
    assert table is not None and "partition_by" in table
    assert known_keys(FrazilConfig, ("nowhere", 1)) is None


def _frazil(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frazil.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_frazil_validate_lists_them_all(tmp_path: Path) -> None:
    config = tmp_path / "many.yaml"
    config.write_text(MANY)

    result = _frazil("validate", "-c", str(config))

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    text = " ".join(result.stderr.split())  # rich wraps long lines
    assert f"{len(EXPECTED)} problems" in text
    for key, reason in EXPECTED:
        assert f"{key}: {reason}" in text, key

    as_json = _frazil("validate", "-c", str(config), "--output", "json")
    assert as_json.returncode == 1
    listed = json.loads(as_json.stdout)
    assert listed["valid"] is False
    assert [p["key"] for p in listed["problems"]] == [key for key, _ in EXPECTED]


def test_a_pipeline_the_loader_refuses_still_gets_its_transforms_checked() -> None:
    # The usual first hour: one pipeline, a typo in a key, and transforms that do not fit.
    pipeline = {
        "name": "p",
        "topic": ["t"],
        "format": "jsn",
        "schema": {"id": "long", "payer": "strng", "bad name": "int"},
        "table": "db.t",
        "transforms": [
            {"flaten": {}},
            {"rename": {"payr": "who"}},
            {"parse_timestamp": {"field": "payer", "format": "yyyy"}},
        ],
        "partition_by": ["days(created)", "bucket(id)"],
        "trigger": "soon",
    }
    with pytest.raises(ConfigError) as info:
        parse_config({"pipelines": [pipeline]}, checks=config_problems)
    keys = [key for key, _ in info.value.problems]
    assert keys == [
        "pipelines[0].format",
        "pipelines[0].schema.payer",
        "pipelines[0].schema.bad name",
        "pipelines[0].transforms[0]",
        "pipelines[0].partition_by[1]",
        "pipelines[0].trigger",
        "pipelines[0].topic",
        # Checked with the refused keys set aside: 'payer' of a type unknown here, the
        # refused transform as if it were not there.
        "pipelines[0].transforms[1].rename",
        "pipelines[0].partition_by[0]",
    ]
    by_key = dict(info.value.problems)
    assert by_key["pipelines[0].transforms[1].rename"] == (
        "field 'payr' does not exist (fields: id, payer)"
    )
    assert by_key["pipelines[0].partition_by[0]"] == (
        "column 'created' is not in the table (columns: id, payer)"
    )
