"""How ``frazil plan`` words whether a pipeline's tables exist (no Spark session)."""

from __future__ import annotations

from pyspark.sql.types import StructType

from frazil.engine.explain import PipelineExplanation


def _state(tables: tuple[tuple[str, bool], ...], by_records: bool = False) -> str:
    return PipelineExplanation(
        pipeline="p",
        table="t",
        table_exists=bool(tables) and all(e for _, e in tables) and not by_records,
        value_format="json",
        value_schema_source="declared",
        key_format=None,
        source_schema=StructType(),
        transforms=(),
        table_schema=StructType(),
        steps=(),
        tables=tables,
        named_by_records=by_records,
    ).table_state()


def test_one_table_a_route_and_tables_the_records_name() -> None:
    assert _state((("db.t", True),)) == "exists"
    assert _state((("db.t", False),)) == "will be created"
    assert _state((("db.a", True), ("db.b", True))) == "all 2 tables exist"
    assert _state((("db.a", True), ("db.b", False), ("db.c", False))) == "1 of 3 tables exist"
    # A route whose tables the records name: its fixed ones (a default table), then the rest.
    assert _state((), by_records=True) == "tables as the records name them"
    assert _state((("db.other", True),), by_records=True) == (
        "db.other exists, others as the records name them"
    )
    assert _state((("db.a", False), ("db.b", True)), by_records=True) == (
        "1 of 2 tables exist, others as the records name them"
    )
