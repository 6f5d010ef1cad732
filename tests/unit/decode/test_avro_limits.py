"""Avro schemas Spark cannot read, named by field before spark-avro refuses them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frazil.decode.avro_limits import spark_reason, unreadable


def _record(name: str, fields: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": fields, **more}


def _decimal(precision: int, scale: int = 2, kind: str = "bytes") -> dict[str, Any]:
    extra = {"name": "D", "size": 20} if kind == "fixed" else {}
    return {"type": kind, "logicalType": "decimal", "precision": precision, "scale": scale, **extra}


NODE = _record("Node", [{"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]}])


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        (NODE, "field 'next' holds record 'Node' again, inside itself"),
        (
            _record("Tree", [{"name": "kids", "type": {"type": "array", "items": "a.Tree"}}],
                    namespace="a"),
            "field 'kids[]' holds record 'a.Tree' again",
        ),
        (
            _record("Outer", [{"name": "in", "type": _record("Inner", [
                {"name": "up", "type": {"type": "map", "values": ["null", "Outer"]}}])}]),
            "field 'in.up{}' holds record 'Outer' again",
        ),
        (
            _record("R", [{"name": "amount", "type": ["null", _decimal(40)]}]),
            "field 'amount' is decimal(40,2): Spark's decimals hold at most 38 digits",
        ),
        (
            _record("R", [{"name": "m", "type": _record("M", [
                {"name": "f", "type": _decimal(39, 0, "fixed")}])}]),
            "field 'm.f' is decimal(39,0)",
        ),
    ],
)  # fmt: skip
def test_what_spark_cannot_read_is_named_by_field(schema: dict[str, Any], why: str) -> None:
    found = unreadable(json.dumps(schema))
    assert found is not None and found.startswith(why), found


@pytest.mark.parametrize(
    "schema",
    [
        _record("R", [{"name": "amount", "type": _decimal(38)}, {"name": "s", "type": "string"}]),
        # A named type used twice, side by side, is no recursion.
        _record("P", [
            {"name": "a", "type": _record("Addr", [{"name": "x", "type": "string"}])},
            {"name": "b", "type": "Addr"},
        ]),
        "long",
        ["null", "string"],
    ],
)  # fmt: skip
def test_what_spark_reads_passes(schema: Any) -> None:
    assert unreadable(json.dumps(schema)) is None


def test_spark_reason_keeps_the_message_of_the_jvm_error() -> None:
    wrapped = Exception(
        "An error occurred while calling o98.select.\n: org.apache.spark.sql.avro."
        "IncompatibleSchemaException: \nFound recursive reference in Avro schema\n\tat x.y(z)"
    )
    assert spark_reason(wrapped) == "Found recursive reference in Avro schema"
    assert (
        spark_reason(Exception("[DECIMAL] Decimal precision 40"))
        == "[DECIMAL] Decimal precision 40"
    )
