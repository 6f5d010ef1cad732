"""Avro record types told apart by full name and aliases, as schema resolution does."""

from __future__ import annotations

import json
from typing import Any

from frazil.decode.avro import another_record


def _record(name: str, namespace: str | None = None, aliases: list[str] | None = None) -> str:
    schema: dict[str, Any] = {"type": "record", "name": name, "fields": []}
    if namespace is not None:
        schema["namespace"] = namespace
    if aliases is not None:
        schema["aliases"] = aliases
    return json.dumps(schema)


def test_the_same_full_name_is_one_type_however_it_is_written() -> None:
    assert another_record(_record("Order", "shop"), _record("shop.Order")) is None
    assert another_record(_record("Order"), _record("Order")) is None


def test_another_name_is_another_type_another_namespace_is_not() -> None:
    assert another_record(_record("Shipment", "logistics"), _record("Order", "shop")) == (
        "logistics.Shipment",
        "shop.Order",
    )
    # Avro resolves records by their unqualified name (the specification, and Java's
    # SchemaCompatibility): a version that moved the record to another namespace reads on.
    assert another_record(_record("Order", "eu"), _record("Order", "us")) is None


def test_a_renamed_record_is_the_same_type_through_its_alias_either_way() -> None:
    renamed = _record("Purchase", "shop", aliases=["Order"])
    assert another_record(renamed, _record("Order", "shop")) is None
    assert another_record(_record("Order", "shop"), renamed) is None
    assert another_record(_record("Order", "x"), _record("P", aliases=["x.Order"])) is None


def test_schemas_that_are_not_records_are_not_compared() -> None:
    assert another_record('"string"', _record("Order")) is None
    assert another_record(_record("Order"), '{"type": "array", "items": "long"}') is None
