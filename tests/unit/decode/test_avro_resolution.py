"""Where Avro's resolution would misread an older writer, and the reader that reads it."""

from __future__ import annotations

import json
from typing import Any

from frazil.decode.avro_resolution import Misread, bridge

MILLIS = {"type": "long", "logicalType": "timestamp-millis"}
MICROS = {"type": "long", "logicalType": "timestamp-micros"}


def _decimal(precision: int, scale: int) -> dict[str, Any]:
    return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}


def _record(*fields: tuple[str, Any], name: str = "R") -> str:
    return json.dumps(
        {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}
    )


def _fields(text: str) -> dict[str, Any]:
    return {f["name"]: f["type"] for f in json.loads(text)["fields"]}


def test_the_same_logical_types_leave_the_reader_as_it_is() -> None:
    reader = _record(("at", MICROS), ("amount", _decimal(12, 2)), ("n", "long"))
    writer = _record(("at", MICROS), ("amount", _decimal(9, 2)), ("n", "int"))
    b = bridge(writer, reader)
    assert (b.reader, b.changed, b.cast, b.misread) == (reader, False, False, [])


def test_a_time_unit_the_reader_lacks_is_read_in_the_writers_unit_wherever_it_is() -> None:
    nested = {"type": "record", "name": "P", "fields": [{"name": "t", "type": MILLIS}]}
    nested_r = {"type": "record", "name": "P", "fields": [{"name": "t", "type": MICROS}]}
    writer = _record(
        ("at", MILLIS),
        ("seen", ["null", MILLIS]),
        ("marks", {"type": "array", "items": MILLIS}),
        ("by", {"type": "map", "values": MILLIS}),
        ("probe", nested),
    )
    reader = _record(
        ("at", MICROS),
        ("seen", ["null", MICROS]),
        ("marks", {"type": "array", "items": MICROS}),
        ("by", {"type": "map", "values": MICROS}),
        ("probe", nested_r),
        ("extra", ["null", "string"]),
    )
    b = bridge(writer, reader)
    assert (b.changed, b.cast, b.misread) == (True, False, [])
    fields = _fields(b.reader)
    assert fields["at"] == MILLIS
    assert fields["seen"] == ["null", MILLIS]
    assert fields["marks"]["items"] == MILLIS
    assert fields["by"]["values"] == MILLIS
    assert fields["probe"]["fields"][0]["type"] == MILLIS
    assert fields["extra"] == ["null", "string"]  # the reader's own field stays


def test_a_decimal_of_another_scale_the_reader_holds_is_read_then_cast() -> None:
    b = bridge(_record(("a", _decimal(9, 2))), _record(("a", _decimal(12, 3))))
    assert (b.changed, b.cast, b.misread) == (True, True, [])
    assert _fields(b.reader)["a"] == _decimal(9, 2)


def test_values_the_reader_cannot_hold_exactly_are_named() -> None:
    writer = _record(
        ("a", _decimal(9, 2)), ("day", {"type": "int", "logicalType": "date"}), ("ok", MILLIS)
    )
    reader = _record(("a", _decimal(9, 3)), ("day", MILLIS), ("ok", MILLIS))
    b = bridge(writer, reader)
    assert b.misread == [
        Misread("a", "decimal(9,2)", "decimal(9,3)"),
        Misread("day", "date", "timestamp-millis"),
    ]


def test_a_type_without_a_logical_one_on_either_side_resolves_as_avro_does() -> None:
    writer = _record(("at", "long"), ("d", "bytes"))
    reader = _record(("at", MILLIS), ("d", _decimal(9, 2)))
    assert bridge(writer, reader).changed is False
    assert bridge(reader, writer).misread == []


def test_a_recursive_type_and_a_reference_are_walked_once() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "at", "type": MILLIS}, {"name": "next", "type": ["null", "Node"]}],
    }
    node_r = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "at", "type": MICROS}, {"name": "next", "type": ["null", "Node"]}],
    }
    b = bridge(
        _record(("head", node), ("tail", "Node")), _record(("head", node_r), ("tail", "Node"))
    )
    assert b.changed and not b.misread
    fields = _fields(b.reader)
    assert fields["head"]["fields"][0]["type"] == MILLIS
    assert fields["tail"] == "Node"
