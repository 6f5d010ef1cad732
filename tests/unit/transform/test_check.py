"""The static check of transforms against a declared schema (``frazil validate``, no Spark)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from frazil.config import parse_config
from frazil.config.pipeline import PipelineConfig
from frazil.transform.check import check_transforms, declared_fields

_SCHEMA = {
    "id": "string",
    "type": "string",
    "created_at": "string",
    "ts_ms": "long",
    "amount": "string",
    "payer": "string",
    "customer": "struct<name:string,address:struct<city:string,zip:string>>",
    "meta": "struct<trace:string>",
    "tags": "array<struct<k:string>>",
    "payload": "string",
}


def _pipeline(transforms: list[Any], **extra: Any) -> PipelineConfig:
    data = {
        "name": "p",
        "topics": ["t"],
        "table": "db.t",
        "schema": _SCHEMA,
        "transforms": transforms,
        **extra,
    }
    return parse_config({"pipelines": [data]}).pipelines[0]


def _check(transforms: list[Any], **extra: Any) -> list[tuple[str, str]]:
    pipeline = _pipeline(transforms, **extra)
    return check_transforms(pipeline, declared_fields(pipeline), index=0)


_FIELDS = "id, type, created_at, ts_ms, amount, payer, customer, meta, tags, payload"


def test_declared_fields_are_value_key_then_metadata_in_plan_order() -> None:
    pipeline = _pipeline(
        [],
        key_format="json",
        key_schema={"k": "string"},
        key_column="the_key",
        kafka_metadata=["offset", "headers"],
    )
    fields = declared_fields(pipeline)
    assert fields is not None
    assert list(fields) == [*_SCHEMA, "the_key", "_kafka_offset", "_kafka_headers"]
    assert fields["the_key"] == "struct<k:string>"
    assert fields["_kafka_offset"] == "long"
    assert fields["_kafka_headers"] == "array<struct<key:string,value:binary>>"
    string_key = _pipeline([], key_format="string")
    assert declared_fields(string_key)["key"] == "string"  # type: ignore[index]


def test_without_a_declared_schema_nothing_is_checked() -> None:
    pipeline = parse_config(
        {
            "pipelines": [
                {"name": "p", "topics": ["t"], "table": "db.t", "transforms": [{"drop": ["x"]}]}
            ]
        }
    ).pipelines[0]
    assert declared_fields(pipeline) is None
    assert check_transforms(pipeline, None) == []


def test_the_documented_chain_fits_the_declared_schema() -> None:
    assert (
        _check(
            [
                {"flatten": {"separator": "_", "max_depth": 3}},
                {"parse_timestamp": {"field": "created_at", "format": "yyyy-MM-dd HH:mm:ss"}},
                {"parse_timestamp": {"field": "ts_ms", "unit": "millis", "as": "ts"}},
                {"rename": {"payer": "payer_name", "customer_address_city": "city"}},
                {"drop": ["meta_trace"]},
                {"cast": {"amount": "decimal(12,2)"}},
                {"derive": {"amount_jpy": "amount * 150"}},
                {"filter": "type <> 'test'"},
                {"parse_json": {"field": "payload", "as": "map"}},
                {"drop": ["ts", "amount_jpy", "city", "payload"]},
            ]
        )
        == []
    )


def test_a_missing_field_names_the_key_and_the_fields() -> None:
    pipeline = _pipeline([{"cast": {"id": "int"}}, {"rename": {"payr": "payer_name"}}])
    reason = f"field 'payr' does not exist (fields: {_FIELDS})"
    fields = declared_fields(pipeline)
    assert check_transforms(pipeline, fields, index=3) == [
        ("pipelines[3].transforms[1].rename", reason)
    ]
    assert check_transforms(pipeline, fields) == [("transforms[1].rename", reason)]


def test_flatten_follows_struct_types_depth_and_separator() -> None:
    flat = {"flatten": {"separator": "__", "max_depth": 1}}
    assert (
        _check([flat, {"drop": ["customer__name", "customer__address.zip", "meta__trace"]}]) == []
    )
    assert _check([flat, {"drop": ["customer__address__city"]}]) == [
        (
            "pipelines[0].transforms[1].drop",
            "field 'customer__address__city' does not exist (fields: id, type, created_at, "
            "ts_ms, amount, payer, customer__name, customer__address, meta__trace, tags, "
            "payload)",
        )
    ]
    # Arrays of structs stay as they are; the nested field is gone after flatten.
    assert _check([{"flatten": None}, {"drop": ["tags", "customer.name"]}]) == [
        (
            "pipelines[0].transforms[1].drop",
            "field 'customer.name' does not exist (fields: id, type, created_at, ts_ms, amount, "
            "payer, customer_name, customer_address_city, customer_address_zip, meta_trace, "
            "payload)",
        )
    ]


def test_flatten_refuses_columns_that_would_collide() -> None:
    assert _check([{"derive": {"meta_trace": "1"}}, {"flatten": None}]) == [
        (
            "pipelines[0].transforms[1].flatten",
            "column 'meta_trace' would come twice (from meta.trace and meta_trace); rename one "
            "first or choose another separator",
        )
    ]


def test_nested_paths_rename_moves_out_and_empty_structs_disappear() -> None:
    assert _check([{"rename": {"customer.address.city": "city"}}, {"drop": ["city"]}]) == []
    # meta had only trace: moving it out removes meta.
    assert _check([{"rename": {"meta.trace": "trace"}}, {"drop": ["meta"]}]) == [
        (
            "pipelines[0].transforms[1].drop",
            "field 'meta' does not exist (fields: id, type, created_at, ts_ms, amount, payer, "
            "customer, tags, payload, trace)",
        )
    ]
    assert _check([{"drop": ["customer.address.zip"]}, {"drop": ["customer.address.zip"]}]) == [
        (
            "pipelines[0].transforms[1].drop",
            "field 'customer.address.zip' does not exist (fields of customer.address: city)",
        )
    ]
    assert _check([{"drop": ["payer.first"]}]) == [
        ("pipelines[0].transforms[0].drop", "field 'payer.first': 'payer' is string, not a struct")
    ]


def test_rename_refuses_a_taken_name_but_allows_a_change_of_case() -> None:
    assert _check([{"rename": {"payer": "id"}}]) == [
        (
            "pipelines[0].transforms[0].rename",
            "cannot rename 'payer' to 'id': column 'id' already exists",
        )
    ]
    assert _check([{"rename": {"payer": "Payer"}}, {"drop": ["Payer"]}]) == []


def test_names_match_case_insensitively_like_spark() -> None:
    assert _check([{"drop": ["CUSTOMER.Name", "Payer"]}]) == []


def test_dropping_everything_is_refused() -> None:
    problems = _check([{"drop": list(_SCHEMA)}])
    assert problems == [
        ("pipelines[0].transforms[0].drop", "dropping 'payload' would leave no columns")
    ]


def test_types_follow_casts_and_parse_timestamp_checks_them() -> None:
    assert _check([{"parse_timestamp": {"field": "ts_ms"}}]) == [
        (
            "pipelines[0].transforms[0].parse_timestamp",
            "field 'ts_ms' is bigint: set 'unit' (seconds, millis or micros) to read epoch numbers",
        )
    ]
    assert _check([{"cast": {"amount": "double"}}, {"parse_timestamp": {"field": "amount"}}]) == [
        (
            "pipelines[0].transforms[1].parse_timestamp",
            "field 'amount' is double: parse_timestamp reads strings, integer epochs (with "
            "'unit') or timestamp_ntz",
        )
    ]
    twice = {"parse_timestamp": {"field": "created_at"}}
    assert _check([twice, twice]) == [
        (
            "pipelines[0].transforms[1].parse_timestamp",
            "field 'created_at' is a timestamp already (declared so, or an ISO time an "
            "inferred schema reads as one): drop this parse_timestamp, or declare the field as "
            "string to parse it here",
        )
    ]
    ntz = [{"cast": {"created_at": "timestamp_ntz"}}]
    assert _check([*ntz, {"parse_timestamp": {"field": "created_at", "timezone": "UTC"}}]) == []
    assert _check([*ntz, {"parse_timestamp": {"field": "created_at", "format": "yyyy"}}]) == [
        (
            "pipelines[0].transforms[1].parse_timestamp",
            "field 'created_at' is timestamp_ntz, a wall-clock time already: 'format' and "
            "'unit' do not apply",
        )
    ]
    # Epochs in text are fine; `as` writes a new column the next transforms can use.
    as_new = {"parse_timestamp": {"field": "payload", "unit": "seconds", "as": "at"}}
    assert _check([as_new, {"drop": ["at"]}]) == []


def test_parse_json_needs_text_and_its_struct_can_be_flattened() -> None:
    assert _check([{"parse_json": {"field": "ts_ms"}}]) == [
        ("pipelines[0].transforms[0].parse_json", "field 'ts_ms' is bigint, not a JSON string")
    ]
    parsed = {"parse_json": {"field": "payload", "as": "struct", "schema": {"a": "int"}}}
    assert _check([parsed, {"flatten": None}, {"drop": ["payload_a"]}]) == []


def test_derived_columns_are_tracked_by_name_only() -> None:
    derived = {"derive": {"extra": "named_struct('a', 1)"}}
    assert _check([derived, {"drop": ["extra.a"]}, {"parse_timestamp": {"field": "extra"}}]) == []
    assert _check([derived, {"drop": ["other"]}])[0][1].startswith("field 'other' does not exist")


def test_metadata_and_key_columns_can_be_transformed() -> None:
    extra = {"kafka_metadata": ["offset", "key"], "key_format": "string", "key_column": "k"}
    assert _check([{"rename": {"_kafka_offset": "off", "k": "the_key"}}], **extra) == []


def test_one_mistake_is_reported_once() -> None:
    problems = _check([{"rename": {"nope": "x", "payer": "who"}}, {"drop": ["who", "x"]}])
    assert [key for key, _ in problems] == [
        "pipelines[0].transforms[0].rename",
        "pipelines[0].transforms[1].drop",
    ]


def _frazil(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frazil.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_validate_reports_transform_problems_and_counts(tmp_path: Path) -> None:
    pipeline = {
        "name": "p",
        "topics": ["t"],
        "table": "db.t",
        "schema": {"id": "string", "payer": "string"},
        "transforms": [{"rename": {"payr": "payer_name"}}, {"drop": ["id"]}],
    }
    config = tmp_path / "frazil.yaml"
    config.write_text(yaml.safe_dump({"pipelines": [pipeline]}))

    result = _frazil("validate", "-c", str(config))

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    stderr = " ".join(result.stderr.split())  # rich wraps long lines
    assert "frazil.yaml: 1 problem " in stderr
    assert (
        "pipelines[0].transforms[0].rename: field 'payr' does not exist (fields: id, payer)"
        in stderr
    )
    json_result = _frazil("validate", "-c", str(config), "--output", "json")
    assert json_result.returncode == 1
    assert '"key": "pipelines[0].transforms[0].rename"' in json_result.stdout

    pipeline["transforms"] = [{"rename": {"payer": "payer_name"}}, {"drop": ["id"]}]
    config.write_text(yaml.safe_dump({"pipelines": [pipeline]}))
    result = _frazil("validate", "-c", str(config))
    assert result.returncode == 0, result.stderr
    assert "2 transforms" in " ".join(result.stdout.split())


def test_order_by_cannot_name_the_consumed_op_field_and_names_debezium_fields() -> None:
    """A CDC op field is consumed by the write (no column of the table); a Debezium
    envelope's kept fields are columns after the row's, named by ``debezium_fields``."""
    from frazil.transform.check import static_problems

    schema = {"id": "long", "op": "string", "ver": "long"}
    cdc = {"mode": "cdc", "key": ["id"], "op_field": "op", "order_by": "op"}
    pipeline = _pipeline([], schema=schema, write=cdc)
    assert static_problems(pipeline, index=0) == [
        (
            "pipelines[0].write.order_by",
            "column 'op' is write.op_field, which the write consumes: it is not a column of "
            "the table (columns: id, ver)",
        )
    ]
    fine = _pipeline([], schema=schema, write={**cdc, "order_by": "ver"})
    assert static_problems(fine, index=0) == []

    debezium = {"mode": "cdc", "key": ["id"], "debezium": True, "order_by": "__source_lsn"}
    pipeline = _pipeline([], schema={"id": "long", "name": "string"}, write=debezium)
    [(key, reason)] = static_problems(pipeline, index=0)
    assert key == "pipelines[0].write.order_by"
    assert reason == (
        "column '__source_lsn' is not in the table (columns: id, name); an envelope field "
        "kept as a column is named in write.debezium_fields (such as 'source.lsn' for "
        "'__source_lsn')"
    )
    kept = {**debezium, "debezium_fields": ["source.lsn"]}
    pipeline = _pipeline([], schema={"id": "long", "name": "string"}, write=kept)
    assert static_problems(pipeline, index=0) == []
