"""Matching a batch's columns to a table's (no Spark session): ids, renames, evolution."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from frazil.config import parse_config
from frazil.config.table_settings import ResolvedTable
from frazil.decode.shapes import promotes
from frazil.sink.evolution import Mismatch, TableView, _fits, _merge, compare

TABLE = "db.events"


def _settings(**overrides: Any) -> ResolvedTable:
    pipeline: dict[str, Any] = {"name": "events", "topics": ["events"], "table": TABLE}
    pipeline.update(overrides)
    return parse_config({"pipelines": [pipeline]}).pipelines[0].settings_for(TABLE)


EVOLVE = _settings()
FREEZE = _settings(schema_evolution="freeze")


def _struct(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, data_type, True) for name, data_type in fields])


def _view(
    schema: StructType,
    *,
    former: dict[str, int] | None = None,
    ids: dict[str, int] | None = None,
    required: list[str] | None = None,
    identifiers: frozenset[str] = frozenset(),
) -> TableView:
    """A table whose top-level columns have ids 1, 2, … (or ``ids``); ``former`` adds names
    the name mapping knows (as :meth:`TableView.read` does, current names are known too)."""
    ids = ids if ids is not None else {f.name: i for i, f in enumerate(schema.fields, 1)}
    names = {**(former or {}), **ids}
    return TableView(
        schema_id=1,
        schema=schema,
        ids=ids,
        names=names,
        required=required or [],
        identifiers=identifiers,
    )


BASE = _struct(("id", StringType()), ("amount", IntegerType()), ("ts", TimestampType()))


# --- same schema ---------------------------------------------------------------------------


def test_same_columns_need_nothing() -> None:
    diff = compare(BASE, _view(BASE), EVOLVE)
    assert diff.columns == {"id": "id", "amount": "amount", "ts": "ts"}
    assert diff.additions == []
    assert diff.desired is None
    assert diff.mismatches == []
    assert diff.dropped == []


def test_batch_with_fewer_columns_in_another_order() -> None:
    batch = _struct(("ts", TimestampType()), ("id", StringType()))
    diff = compare(batch, _view(BASE), FREEZE)
    assert diff.columns == {"ts": "ts", "id": "id"}
    assert diff.desired is None
    assert diff.mismatches == []


def test_columns_match_case_insensitively() -> None:
    batch = _struct(("ID", StringType()), ("Amount", IntegerType()))
    diff = compare(batch, _view(BASE), FREEZE)
    assert diff.columns == {"ID": "id", "Amount": "amount"}
    assert diff.mismatches == []


# --- new top-level columns -----------------------------------------------------------------


def test_new_column_under_evolve() -> None:
    batch = _struct(("id", StringType()), ("note", StringType()), ("amount", IntegerType()))
    diff = compare(batch, _view(BASE), EVOLVE)
    assert diff.columns == {"id": "id", "note": "note", "amount": "amount"}
    assert diff.additions == ["add column note string"]
    assert diff.mismatches == []
    assert diff.desired == StructType([*BASE.fields, StructField("note", StringType(), True)])


def test_new_column_under_freeze() -> None:
    batch = _struct(("id", StringType()), ("note", StringType()))
    diff = compare(batch, _view(BASE), FREEZE)
    assert diff.columns == {"id": "id"}
    assert diff.additions == []
    assert diff.desired is None
    assert diff.mismatches == [Mismatch("note", "string", "-", "not in the table")]


def test_new_nullable_false_column_is_added_optional() -> None:
    batch = StructType([StructField("id", StringType()), StructField("n", LongType(), False)])
    diff = compare(batch, _view(BASE), EVOLVE)
    assert diff.desired is not None
    assert diff.desired["n"] == StructField("n", LongType(), True)


def test_with_values_restricts_new_columns() -> None:
    batch = _struct(
        ("id", StringType()), ("amount", IntegerType()), ("a", StringType()), ("b", LongType())
    )
    diff = compare(batch, _view(BASE), EVOLVE, with_values={"id", "b"})
    # Existing columns are matched whether they hold values or not; of the new ones, only b.
    assert diff.columns == {"id": "id", "amount": "amount", "b": "b"}
    assert diff.additions == ["add column b bigint"]
    assert diff.desired == StructType([*BASE.fields, StructField("b", LongType(), True)])


def test_with_values_empty_adds_nothing() -> None:
    batch = _struct(("id", StringType()), ("a", StringType()))
    diff = compare(batch, _view(BASE), EVOLVE, with_values=set())
    assert diff.columns == {"id": "id"}
    assert diff.desired is None


def test_with_values_under_freeze_does_not_mark_empty_new_columns() -> None:
    batch = _struct(("id", StringType()), ("a", StringType()), ("b", StringType()))
    diff = compare(batch, _view(BASE), FREEZE, with_values={"a"})
    assert diff.mismatches == [Mismatch("a", "string", "-", "not in the table")]


# --- types of existing columns -------------------------------------------------------------


def test_int_into_long_table_fits() -> None:
    table = _struct(("n", LongType()))
    for settings in (EVOLVE, FREEZE):
        diff = compare(_struct(("n", IntegerType())), _view(table), settings)
        assert diff.columns == {"n": "n"}
        assert diff.additions == []
        assert diff.desired is None
        assert diff.mismatches == []


def test_long_into_int_table_widens_under_evolve() -> None:
    batch = _struct(("id", StringType()), ("amount", LongType()))
    diff = compare(batch, _view(BASE), EVOLVE)
    assert diff.columns == {"id": "id", "amount": "amount"}
    assert diff.additions == ["widen amount int to bigint"]
    assert diff.mismatches == []
    assert diff.desired == _struct(
        ("id", StringType()), ("amount", LongType()), ("ts", TimestampType())
    )


def test_long_into_int_table_is_a_mismatch_under_freeze() -> None:
    batch = _struct(("id", StringType()), ("amount", LongType()))
    diff = compare(batch, _view(BASE), FREEZE)
    assert diff.columns == {"id": "id"}
    assert diff.desired is None
    assert diff.mismatches == [
        Mismatch("amount", "bigint", "int", "schema_evolution is freeze"),
    ]


def test_string_into_int_table_is_a_mismatch() -> None:
    batch = _struct(("id", StringType()), ("amount", StringType()))
    for settings in (EVOLVE, FREEZE):
        diff = compare(batch, _view(BASE), settings)
        assert diff.columns == {"id": "id"}
        assert diff.desired is None
        assert diff.mismatches == [
            Mismatch("amount", "string", "int", "Iceberg cannot change a int column to string")
        ]


def test_struct_into_string_table_is_a_mismatch() -> None:
    table = _struct(("payload", StringType()))
    batch = _struct(("payload", _struct(("a", IntegerType()))))
    diff = compare(batch, _view(table), EVOLVE)
    assert diff.mismatches == [
        Mismatch(
            "payload",
            "struct<a:int>",
            "string",
            "Iceberg cannot change a string column to struct<a:int>",
        )
    ]


def test_float_widens_to_double_and_decimal_precision_widens() -> None:
    table = _struct(("f", FloatType()), ("d", DecimalType(10, 2)))
    batch = _struct(("f", DoubleType()), ("d", DecimalType(12, 2)))
    diff = compare(batch, _view(table), EVOLVE)
    assert diff.additions == ["widen f float to double", "widen d decimal(10,2) to decimal(12,2)"]
    assert diff.desired == batch


def test_mismatch_in_one_column_leaves_the_others() -> None:
    batch = _struct(("id", LongType()), ("amount", LongType()), ("note", StringType()))
    diff = compare(batch, _view(BASE), EVOLVE)
    assert diff.mismatches == [
        Mismatch("id", "bigint", "string", "Iceberg cannot change a string column to bigint")
    ]
    assert diff.columns == {"amount": "amount", "note": "note"}
    assert diff.additions == ["widen amount int to bigint", "add column note string"]
    assert diff.desired == StructType(
        [
            StructField("id", StringType(), True),
            StructField("amount", LongType(), True),
            StructField("ts", TimestampType(), True),
            StructField("note", StringType(), True),
        ]
    )


# --- nested fields -------------------------------------------------------------------------


PAYLOAD = _struct(("a", IntegerType()), ("b", StringType()))


def test_new_nested_struct_field_under_evolve() -> None:
    table = _struct(("id", StringType()), ("payload", PAYLOAD))
    batch = _struct(
        ("id", StringType()),
        ("payload", _struct(("c", DoubleType()), ("a", IntegerType()))),
    )
    diff = compare(batch, _view(table), EVOLVE)
    assert diff.columns == {"id": "id", "payload": "payload"}
    assert diff.additions == ["add field payload.c double"]
    assert diff.mismatches == []
    assert diff.desired == _struct(
        ("id", StringType()),
        ("payload", _struct(("a", IntegerType()), ("b", StringType()), ("c", DoubleType()))),
    )


def test_new_nested_struct_field_under_freeze() -> None:
    table = _struct(("payload", PAYLOAD))
    batch = _struct(("payload", _struct(("a", IntegerType()), ("c", DoubleType()))))
    diff = compare(batch, _view(table), FREEZE)
    assert diff.columns == {}
    assert diff.desired is None
    assert diff.mismatches == [Mismatch("payload.c", "double", "-", "not in the table")]


def test_nested_fields_match_case_insensitively_in_the_tables_names() -> None:
    table = _struct(("payload", PAYLOAD))
    batch = _struct(("payload", _struct(("A", LongType()))))
    diff = compare(batch, _view(table), EVOLVE)
    assert diff.additions == ["widen payload.a int to bigint"]
    assert diff.desired == _struct(("payload", _struct(("a", LongType()), ("b", StringType()))))


def test_nested_promotion_under_freeze() -> None:
    table = _struct(("payload", PAYLOAD))
    batch = _struct(("payload", _struct(("a", LongType()))))
    diff = compare(batch, _view(table), FREEZE)
    assert diff.mismatches == [Mismatch("payload.a", "bigint", "int", "schema_evolution is freeze")]


def test_new_field_in_array_of_structs() -> None:
    table = _struct(("items", ArrayType(_struct(("sku", StringType())), True)))
    batch = _struct(
        ("items", ArrayType(_struct(("sku", StringType()), ("qty", IntegerType())), True))
    )
    diff = compare(batch, _view(table), EVOLVE)
    assert diff.columns == {"items": "items"}
    assert diff.additions == ["add field items.element.qty int"]
    assert diff.desired == batch
    frozen = compare(batch, _view(table), FREEZE)
    assert frozen.mismatches == [Mismatch("items.element.qty", "int", "-", "not in the table")]


def test_new_field_in_map_of_structs() -> None:
    table = _struct(("attrs", MapType(StringType(), _struct(("x", IntegerType())), True)))
    batch = _struct(
        (
            "attrs",
            MapType(StringType(), _struct(("x", IntegerType()), ("y", StringType())), True),
        )
    )
    diff = compare(batch, _view(table), EVOLVE)
    assert diff.additions == ["add field attrs.value.y string"]
    assert diff.desired == batch
    frozen = compare(batch, _view(table), FREEZE)
    assert frozen.mismatches == [Mismatch("attrs.value.y", "string", "-", "not in the table")]


def test_map_key_types_do_not_change() -> None:
    table = _struct(("m", MapType(IntegerType(), StringType())))
    batch = _struct(("m", MapType(LongType(), StringType())))
    diff = compare(batch, _view(table), EVOLVE)
    assert diff.desired is None
    assert diff.mismatches == [
        Mismatch(
            "m",
            "map<bigint,string>",
            "map<int,string>",
            "Iceberg cannot change a map<int,string> column to map<bigint,string>",
        )
    ]


def test_narrower_map_key_fits() -> None:
    table = _struct(("m", MapType(LongType(), StringType())))
    batch = _struct(("m", MapType(IntegerType(), StringType())))
    diff = compare(batch, _view(table), FREEZE)
    assert diff.mismatches == []
    assert diff.desired is None


def test_nested_mismatch_drops_the_whole_column() -> None:
    table = _struct(("payload", PAYLOAD))
    batch = _struct(("payload", _struct(("a", StringType()), ("c", DoubleType()))))
    diff = compare(batch, _view(table), EVOLVE)
    assert diff.columns == {}
    assert diff.additions == []
    assert diff.desired is None
    assert diff.mismatches == [
        Mismatch("payload.a", "string", "int", "Iceberg cannot change a int column to string")
    ]


# --- renamed and dropped columns, aliases --------------------------------------------------


def test_renamed_column_follows_its_field_id() -> None:
    table = _struct(("id", StringType()), ("ts", TimestampType()), ("amount_usd", LongType()))
    view = _view(table, former={"amount": 3})
    assert view.column_for("amount") == "amount_usd"
    batch = _struct(("id", StringType()), ("amount", LongType()))
    diff = compare(batch, view, FREEZE)
    assert diff.columns == {"id": "id", "amount": "amount_usd"}
    assert diff.mismatches == []
    assert diff.desired is None


def test_renamed_column_widens_under_its_new_name() -> None:
    table = _struct(("amount_usd", IntegerType()))
    view = _view(table, former={"amount": 1})
    diff = compare(_struct(("amount", LongType())), view, EVOLVE)
    assert diff.columns == {"amount": "amount_usd"}
    assert diff.additions == ["widen amount_usd int to bigint"]
    assert diff.desired == _struct(("amount_usd", LongType()))


def test_dropped_column_is_not_written() -> None:
    table = _struct(("id", StringType()), ("amount", LongType()))
    view = _view(table, former={"note": 9})
    assert view.column_for("note") is None
    batch = _struct(("id", StringType()), ("note", StringType()), ("amount", LongType()))
    for settings in (EVOLVE, FREEZE):
        diff = compare(batch, view, settings)
        assert diff.dropped == ["note"]
        assert diff.columns == {"id": "id", "amount": "amount"}
        assert diff.additions == []
        assert diff.desired is None
        assert diff.mismatches == []


def test_column_for_new_name_raises() -> None:
    with pytest.raises(KeyError):
        _view(BASE).column_for("nope")
    assert _view(BASE).column_for("AMOUNT") == "amount"


def test_aliases_map_source_fields_to_columns() -> None:
    settings = _settings(aliases={"amt": "amount", "memo": "note"})
    assert settings.aliases == {"amt": "amount", "memo": "note"}
    batch = _struct(("id", StringType()), ("amt", IntegerType()), ("memo", StringType()))
    diff = compare(batch, _view(BASE), settings)
    # amt is the table's amount; memo is new and is added under its alias.
    assert diff.columns == {"id": "id", "amt": "amount", "memo": "note"}
    assert diff.additions == ["add column note string"]
    assert diff.desired == StructType([*BASE.fields, StructField("note", StringType(), True)])


def test_alias_to_a_renamed_column() -> None:
    table = _struct(("amount_usd", LongType()))
    settings = _settings(aliases={"amt": "amount"})
    diff = compare(_struct(("amt", IntegerType())), _view(table, former={"amount": 1}), settings)
    assert diff.columns == {"amt": "amount_usd"}
    assert diff.desired is None


def test_alias_from_table_override() -> None:
    settings = _settings(
        aliases={"amt": "other"},
        tables={TABLE: {"aliases": {"amt": "amount"}, "schema_evolution": "freeze"}},
    )
    diff = compare(_struct(("amt", LongType())), _view(BASE), settings)
    assert diff.mismatches == [Mismatch("amount", "bigint", "int", "schema_evolution is freeze")]
    # The records holding the value are those with one in the batch's own column.
    assert [m.column for m in diff.mismatches] == ["amt"]


def test_alias_under_freeze_for_a_new_column() -> None:
    settings = _settings(aliases={"memo": "note"}, schema_evolution="freeze")
    diff = compare(_struct(("memo", StringType())), _view(BASE), settings)
    assert diff.mismatches == [Mismatch("memo", "string", "-", "not in the table")]


def _nested_view() -> TableView:
    """A table whose ``payload.a`` and ``items.element.a`` a user renamed to ``alpha`` and
    whose ``payload.c`` and ``items.element.c`` a user dropped (Iceberg's JSON of its schema
    and name mapping, as :meth:`TableView.read` reads them)."""

    def column(fid: int, name: str, kind: Any) -> dict[str, Any]:
        return {"id": fid, "name": name, "required": False, "type": kind}

    parsed = {
        "type": "struct",
        "fields": [
            column(1, "id", "long"),
            column(
                2,
                "payload",
                {"type": "struct", "fields": [column(4, "alpha", "int"), column(5, "b", "string")]},
            ),
            column(
                3,
                "items",
                {
                    "type": "list",
                    "element-id": 7,
                    "element-required": False,
                    "element": {"type": "struct", "fields": [column(8, "alpha", "long")]},
                },
            ),
        ],
    }
    mapping = [
        {"field-id": 1, "names": ["id"]},
        {
            "field-id": 2,
            "names": ["payload"],
            "fields": [
                {"field-id": 4, "names": ["a", "alpha"]},
                {"field-id": 5, "names": ["b"]},
                {"field-id": 6, "names": ["c"]},
            ],
        },
        {
            "field-id": 3,
            "names": ["items"],
            "fields": [
                {
                    "field-id": 7,
                    "names": ["element"],
                    "fields": [
                        {"field-id": 8, "names": ["a", "alpha"]},
                        {"field-id": 9, "names": ["c"]},
                    ],
                }
            ],
        },
    ]
    schema = _struct(
        ("id", LongType()),
        ("payload", _struct(("alpha", IntegerType()), ("b", StringType()))),
        ("items", ArrayType(_struct(("alpha", LongType())), True)),
    )
    return TableView.parse(1, parsed, schema, [], json.dumps(mapping))


def test_renamed_and_dropped_nested_fields_follow_their_field_ids() -> None:
    view = _nested_view()
    assert view.former == {
        (("payload",), "a", "alpha"),
        (("payload",), "c", None),
        (("items",), "a", "alpha"),
        (("items",), "c", None),
    }
    batch = _struct(
        ("id", LongType()),
        ("payload", _struct(("a", IntegerType()), ("b", StringType()), ("c", StringType()))),
        ("items", ArrayType(_struct(("a", LongType()), ("c", StringType())), True)),
    )
    for settings in (EVOLVE, FREEZE):
        diff = compare(batch, view, settings)
        # Nothing added back, nothing refused: a renamed field takes its former name's values.
        assert diff.columns == {"id": "id", "payload": "payload", "items": "items"}
        assert diff.additions == []
        assert diff.desired is None
        assert diff.mismatches == []
        assert diff.dropped == ["payload.c", "items.element.c"]


def test_a_renamed_nested_field_widens_under_its_new_name() -> None:
    batch = _struct(("payload", _struct(("a", LongType()))))
    diff = compare(batch, _nested_view(), EVOLVE)
    assert diff.additions == ["widen payload.alpha int to bigint"]
    assert diff.desired == _struct(
        ("id", LongType()),
        ("payload", _struct(("alpha", LongType()), ("b", StringType()))),
        ("items", ArrayType(_struct(("alpha", LongType())), True)),
    )


def test_a_former_and_a_current_name_in_one_batch_both_evolve_the_field() -> None:
    # payload.a was renamed b; records of two producer versions in one batch: the former
    # name's struct has gained y, the current name's has not. y is added once and kept,
    # whichever of the two is merged last.
    def column(fid: int, name: str, kind: Any) -> dict[str, Any]:
        return {"id": fid, "name": name, "required": False, "type": kind}

    inner = {"type": "struct", "fields": [column(3, "x", "int")]}
    parsed = {
        "type": "struct",
        "fields": [column(1, "payload", {"type": "struct", "fields": [column(2, "b", inner)]})],
    }
    mapping = [
        {
            "field-id": 1,
            "names": ["payload"],
            "fields": [
                {"field-id": 2, "names": ["a", "b"], "fields": [{"field-id": 3, "names": ["x"]}]}
            ],
        }
    ]
    x = _struct(("x", IntegerType()))
    view = TableView.parse(
        1, parsed, _struct(("payload", _struct(("b", x)))), [], json.dumps(mapping)
    )
    xy = _struct(("x", IntegerType()), ("y", IntegerType()))
    for pair in ((("a", xy), ("b", x)), (("b", x), ("a", xy)), (("a", xy), ("b", xy))):
        diff = compare(_struct(("payload", _struct(*pair))), view, EVOLVE)
        assert diff.additions == ["add field payload.b.y int"], pair
        assert diff.desired == _struct(("payload", _struct(("b", xy)))), pair


# --- required columns ----------------------------------------------------------------------


def test_required_column_is_made_optional_under_evolve() -> None:
    table = StructType(
        [StructField("id", StringType(), False), StructField("amount", LongType(), False)]
    )
    view = _view(table, required=["id", "amount"], identifiers=frozenset({"id"}))
    batch = _struct(("id", StringType()), ("amount", LongType()))
    diff = compare(batch, view, EVOLVE)
    assert diff.additions == ["make amount optional"]
    assert diff.desired == StructType(
        [StructField("id", StringType(), False), StructField("amount", LongType(), True)]
    )
    frozen = compare(batch, view, FREEZE)
    assert frozen.additions == []
    assert frozen.desired is None


def test_widening_an_identifier_field_keeps_it_required() -> None:
    table = StructType([StructField("id", IntegerType(), False)])
    view = _view(table, required=["id"], identifiers=frozenset({"id"}))
    diff = compare(_struct(("id", LongType())), view, EVOLVE)
    assert diff.additions == ["widen id int to bigint"]
    assert diff.desired == StructType([StructField("id", LongType(), False)])


def test_required_nested_field_is_not_relaxed_silently() -> None:
    payload = StructType([StructField("a", IntegerType(), False), StructField("b", StringType())])
    table = _struct(("payload", payload))
    batch = _struct(("payload", _struct(("a", IntegerType()), ("c", StringType()))))
    diff = compare(batch, _view(table), EVOLVE)
    assert diff.desired is not None
    merged = diff.desired["payload"].dataType
    assert isinstance(merged, StructType)
    assert not merged["a"].nullable or "make payload.a optional" in diff.additions


# --- the type rules ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("batch", "table", "fits"),
    [
        (IntegerType(), IntegerType(), True),
        (NullType(), IntegerType(), True),
        (ByteType(), ShortType(), True),
        (ShortType(), IntegerType(), True),
        (IntegerType(), LongType(), True),
        (LongType(), IntegerType(), False),
        (FloatType(), DoubleType(), True),
        (DoubleType(), FloatType(), False),
        (DecimalType(10, 2), DecimalType(12, 2), True),
        (DecimalType(5, 1), DecimalType(10, 2), True),
        (DecimalType(12, 2), DecimalType(10, 2), False),
        (DecimalType(10, 3), DecimalType(10, 2), False),
        (IntegerType(), DecimalType(20, 0), False),
        (IntegerType(), StringType(), False),
        (StringType(), IntegerType(), False),
    ],
)
def test_fits(batch: DataType, table: DataType, fits: bool) -> None:
    assert _fits(batch, table) is fits


@pytest.mark.parametrize(
    ("table", "batch", "promotable"),
    [
        (IntegerType(), LongType(), True),
        (ShortType(), LongType(), True),
        (FloatType(), DoubleType(), True),
        (DecimalType(10, 2), DecimalType(12, 2), True),
        (DecimalType(10, 2), DecimalType(12, 3), False),
        (DecimalType(12, 2), DecimalType(10, 2), False),
        (LongType(), IntegerType(), False),
        (IntegerType(), DoubleType(), False),
        (IntegerType(), StringType(), False),
        (StringType(), IntegerType(), False),
    ],
)
def test_promotable(table: DataType, batch: DataType, promotable: bool) -> None:
    assert promotes(table, batch) is promotable


def test_merge_keeps_the_tables_type_when_the_batch_fits() -> None:
    merged, changes, problems = _merge("n", IntegerType(), LongType(), True)
    assert (merged, changes, problems) == (LongType(), [], [])


def test_merge_widens() -> None:
    merged, changes, problems = _merge("n", LongType(), IntegerType(), True)
    assert (merged, changes, problems) == (LongType(), ["widen n int to bigint"], [])


def test_merge_keeps_table_field_order_and_appends_new_fields() -> None:
    table = _struct(("a", IntegerType()), ("b", StringType()))
    batch = _struct(("z", StringType()), ("b", StringType()), ("y", LongType()))
    merged, changes, problems = _merge("s", batch, table, True)
    assert merged == _struct(
        ("a", IntegerType()), ("b", StringType()), ("z", StringType()), ("y", LongType())
    )
    assert changes == ["add field s.z string", "add field s.y bigint"]
    assert problems == []


def test_merge_collects_every_nested_problem() -> None:
    table = _struct(("a", IntegerType()), ("b", StringType()))
    batch = _struct(("a", StringType()), ("b", IntegerType()), ("c", StringType()))
    _, changes, problems = _merge("s", batch, table, False)
    assert changes == []
    assert problems == [
        Mismatch("s.a", "string", "int", "Iceberg cannot change a int column to string"),
        Mismatch("s.b", "int", "string", "Iceberg cannot change a string column to int"),
        Mismatch("s.c", "string", "-", "not in the table"),
    ]


def test_merge_array_of_primitives_widens_elements() -> None:
    merged, changes, problems = _merge("xs", ArrayType(LongType()), ArrayType(IntegerType()), True)
    assert merged == ArrayType(LongType(), True)
    assert changes == ["widen xs.element int to bigint"]
    assert problems == []
