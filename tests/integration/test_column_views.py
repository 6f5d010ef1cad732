"""Tables' columns read for many tables at once, as a routed batch reads them, equal those
read one table at a time; and a test of a column against many names built in one JVM call."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frazil.engine.routed_layout import slot_in, table_slot
from frazil.sink.evolution import NAME_MAPPING, TableView
from frazil.sink.iceberg import IcebergTable, IcebergTables

pytestmark = pytest.mark.integration


def test_views_read_at_once_equal_views_read_one_by_one(spark: Any, unique: str) -> None:
    ns = f"lake.views_{unique}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    spark.sql(
        f"CREATE TABLE {ns}.keyed (id BIGINT NOT NULL, who STRUCT<name: STRING, age: INT>,"
        " tags MAP<STRING, ARRAY<DOUBLE>>, at TIMESTAMP) USING iceberg"
    )
    spark.sql(f"ALTER TABLE {ns}.keyed SET IDENTIFIER FIELDS id")
    spark.sql(f"ALTER TABLE {ns}.keyed RENAME COLUMN at TO seen_at")
    mapping = [
        {"field-id": 1, "names": ["id", "order_id"]},
        {"field-id": 5, "names": ["tags"]},
    ]
    spark.sql(
        f"ALTER TABLE {ns}.keyed SET TBLPROPERTIES ('{NAME_MAPPING}' = '{json.dumps(mapping)}')"
    )
    spark.sql(f"CREATE TABLE {ns}.plain (n INT, s STRING, d DECIMAL(10, 2)) USING iceberg")
    spark.sql(f"CREATE TABLE {ns}.same (n INT, s STRING, d DECIMAL(10, 2)) USING iceberg")
    tables = [IcebergTable(spark, f"{ns}.{t}") for t in ("keyed", "plain", "same")]

    raw = IcebergTables(spark, tables).column_views([2, 0, 1], NAME_MAPPING)

    from pyspark.sql.types import StructType

    at_once = [
        TableView.parse(
            int(r["schema_id"]),
            json.loads(r["schema"]),
            StructType.fromJson(json.loads(r["spark"])),
            list(r["identifiers"]),
            r["mapping"],
        )
        for r in raw
    ]
    one_by_one = [TableView.read(spark, tables[i].java) for i in (2, 0, 1)]
    assert at_once == one_by_one
    keyed = at_once[1]
    assert keyed.identifiers == frozenset({"id"})
    assert keyed.required == ["id"]
    assert keyed.column_for("order_id") == "id"
    assert keyed.column_for("seen_at") == "seen_at"
    assert keyed.schema_id > 0
    assert at_once[0].mapping_text is None


def test_a_table_slot_is_the_names_position_and_minus_one_for_any_other(spark: Any) -> None:
    """The slot a routed row's kind and task read: generated code and Spark's interpreted
    evaluation alike."""
    from pyspark.sql import functions as F

    values = ["a.b", "it's", "ünï", "x", "", "not known", None]
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i int, name string")
    names = ["", "a.b", "it's", "x", "ünï"]
    expected = [names.index(v) if v in names else -1 for v in values]
    slotted = frame.select("i", table_slot(F.col("name"), names).alias("slot"))
    for mode in ("CODEGEN_ONLY", "NO_CODEGEN"):
        spark.conf.set("spark.sql.codegen.factoryMode", mode)
        spark.conf.set("spark.sql.codegen.wholeStage", str(mode == "CODEGEN_ONLY").lower())
        try:
            rows = sorted(slotted.collect())
            picked = sorted(r["i"] for r in slotted.where(slot_in(F.col("slot"), [1, 3])).collect())
        finally:
            spark.conf.unset("spark.sql.codegen.factoryMode")
            spark.conf.unset("spark.sql.codegen.wholeStage")
        assert [r["slot"] for r in rows] == expected, mode
        assert picked == [0, 3], mode
    assert slotted.schema["slot"].nullable is False


def test_tables_java_list_built_from_lists_holding_them(spark: Any, unique: str) -> None:
    """A list of tables copies the rows of the lists that hold them (the ledger's last list,
    the one a creation returned) and adds the others: the same tables, in order, either way."""
    ns = f"lake.lists_{unique}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    names = [f"t{i}" for i in range(6)]
    for name in names:
        spark.sql(f"CREATE TABLE {ns}.{name} (n INT) USING iceberg")
    first = [IcebergTable(spark, f"{ns}.{n}") for n in names[:4]]
    IcebergTables(spark, first).java_tables()
    assert [t.held_in[1] for t in first if t.held_in is not None] == [0, 1, 2, 3]
    # Two tables handed over in a Java list of their own, not yet read from it.
    made = spark.sparkContext._jvm.java.util.ArrayList()
    for name in names[4:]:
        made.add(IcebergTable(spark, f"{ns}.{name}").java)
    later = [IcebergTable.in_list(spark, f"{ns}.{n}", made, i) for i, n in enumerate(names[4:])]
    # Out of the first list's order, a table in none, the handed-over ones last.
    loose = IcebergTable(spark, f"{ns}.t1")
    mixed = [first[2], first[3], first[0], loose, *later]
    java = IcebergTables(spark, mixed).java_tables()
    assert [str(java.get(i).name()) for i in range(java.size())] == [
        f"lake.{ns.split('.')[1]}.{n}" for n in ("t2", "t3", "t0", "t1", "t4", "t5")
    ]
    # Each now stands in the new list, and a handle never read resolves from it.
    assert all(t.held_in is not None and t.held_in[0] is java for t in mixed)
    assert str(later[1].java.name()) == f"lake.{ns.split('.')[1]}.t5"
