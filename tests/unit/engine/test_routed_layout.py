"""The routed job's layout and outcome: which tables it may write, which columns a new table
drops, how rows spread over tasks, and how the JVM's outcome is read (no Spark session: plain
types)."""

from __future__ import annotations

import json
import re

from pyspark.sql.types import LongType, StringType, StructField, StructType

from frazil import columns as c
from frazil.config import parse_config
from frazil.config.pipeline import PipelineConfig
from frazil.engine import routed_layout
from frazil.engine.routed_job import Outcome
from frazil.engine.routed_layout import Template, new_columns, template_eligible
from frazil.jvm.build import SOURCES
from frazil.sink.evolution import TableView


def _pipeline(**extra: object) -> PipelineConfig:
    config = parse_config(
        {
            "pipelines": [
                {
                    "name": "p",
                    "topics": ["t"],
                    "route": {"field": "kind", "table": "db.t_{value}"},
                    **extra,
                }
            ]
        }
    )
    return config.pipelines[0]


def test_only_parquet_appends_without_sort_identifiers_or_aliases_are_written_by_the_job() -> None:
    assert template_eligible(_pipeline().settings_for("db.t_a"))
    assert template_eligible(_pipeline(partition_by=["days(ts)"]).settings_for("db.t_a"))
    assert not template_eligible(_pipeline(sort_by=["id"]).settings_for("db.t_a"))
    assert not template_eligible(_pipeline(identifier_fields=["id"]).settings_for("db.t_a"))
    assert not template_eligible(_pipeline(aliases={"a": "b"}).settings_for("db.t_a"))
    orc = _pipeline(table_properties={"write.format.default": "orc"})
    assert not template_eligible(orc.settings_for("db.t_a"))
    upsert = _pipeline(write={"mode": "upsert", "key": ["id"]})
    assert not template_eligible(upsert.settings_for("db.t_a"))


def test_a_new_table_drops_the_columns_none_of_its_records_filled_but_keeps_partitions() -> None:
    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("kind", StringType()),
            StructField("amount", LongType()),
            StructField("who", StringType()),
        ]
    )
    settings = _pipeline(partition_by=["bucket(4, who)"]).settings_for("db.t_a")
    template = Template(None, None, "db", "/lake/db", schema, settings)
    assert template.drops(frozenset({0, 1, 2})) == []  # `who` partitions the table
    plain = Template(None, None, "db", "/lake/db", schema, _pipeline().settings_for("db.t_a"))
    assert plain.drops(frozenset({0, 1, 2})) == ["who"]
    assert plain.drops(frozenset({1})) == ["id", "amount", "who"]
    # No column with a value (every record all null): the table keeps them all.
    assert plain.drops(frozenset()) == []


def test_new_columns_are_those_the_table_never_had() -> None:
    table = StructType([StructField("id", LongType()), StructField("name", StringType())])
    # `old` was renamed to `name` (the name mapping keeps it); `gone` was dropped.
    view = TableView(
        schema_id=3,
        schema=table,
        ids={"id": 1, "name": 2},
        names={"id": 1, "name": 2, "old": 2, "gone": 3},
        required=[],
    )
    batch = StructType(
        [StructField(n, StringType()) for n in ("id", "old", "gone", "fresh", "NAME")]
    )
    settings = _pipeline().settings_for("db.t_a")
    assert new_columns(batch, view, settings) == ["fresh"]


class _Result:
    def __init__(self, summary: dict[str, object]) -> None:
        self._summary = json.dumps(summary)

    def summary(self) -> str:
        return self._summary


def test_the_outcome_is_read_from_the_jvms_summary() -> None:
    outcome = Outcome.parse(
        _Result(
            {
                "bad": 0,
                "unmatched": 2,
                "filtered": 1,
                "deferred": 0,
                "refused": [],
                "tables": {
                    "db.t_a": {
                        "created": True,
                        "records": 5,
                        "bytes": 900,
                        "with_values": [0, 2],
                        "timestamps": [["t", 0, 1700], ["t", 1, 1800]],
                    }
                },
            }
        )
    )
    assert outcome.clean
    assert (outcome.unmatched, outcome.filtered) == (2, 1)
    written = outcome.tables["db.t_a"]
    assert written.created and written.records == 5 and written.bytes == 900
    assert written.with_values == frozenset({0, 2})
    assert written.timestamps == {("t", 0): 1700, ("t", 1): 1800}
    for key in ("bad", "deferred"):
        raw = {"bad": 0, "unmatched": 0, "filtered": 0, "deferred": 0, "refused": []}
        raw[key] = 1
        assert not Outcome.parse(_Result({**raw, "tables": {}})).clean
    refused = {"bad": 0, "unmatched": 0, "filtered": 0, "deferred": 0, "refused": ["x.y"]}
    assert not Outcome.parse(_Result({**refused, "tables": {}})).clean


def test_a_shape_fits_its_tables_only_with_the_same_types_nullability_aside() -> None:
    from pyspark.sql.types import IntegerType, MapType

    from frazil.engine.routed_layout import _same_types

    table = StructType(
        [
            StructField("id", LongType(), False),
            StructField("tags", MapType(LongType(), StringType())),
        ]
    )
    same = StructType(
        [
            StructField("id", LongType(), True),
            StructField("tags", MapType(LongType(), StringType())),
        ]
    )
    assert _same_types(same, table)
    # A map's key type is not converted on the way (Spark's own write would cast it).
    narrower = StructType(
        [StructField("id", LongType()), StructField("tags", MapType(IntegerType(), StringType()))]
    )
    assert not _same_types(narrower, table)
    assert not _same_types(StructType([StructField("id", LongType())]), table)
    assert not _same_types(LongType(), table)


def test_each_known_table_gets_a_task_and_new_tables_share_the_rest() -> None:
    def layout(known: int, template: bool) -> routed_layout.Layout:
        names = [f"db.t{i}" for i in range(known)]
        return routed_layout.Layout(
            kind=None, shapes=[], names=names, template=object() if template else None
        )  # type: ignore[arg-type]

    # Known tables only: a task each, at least TASKS_PER_CORE per core.
    assert layout(20, False).tasks(2) == (20, 20)
    assert layout(1, False).tasks(2) == (2 * routed_layout.TASKS_PER_CORE, 1)
    # A route that may meet new tables keeps NEW_TABLE_TASKS for them.
    assert layout(20, True).tasks(2) == (20 + routed_layout.NEW_TABLE_TASKS, 20)
    assert layout(0, True).tasks(2) == (routed_layout.NEW_TABLE_TASKS, 0)
    # Beyond KNOWN_TASKS_PER_CORE per core, known tables share tasks (100 small tables on 2
    # cores: not 100 tasks).
    per_core = 2 * routed_layout.KNOWN_TASKS_PER_CORE
    assert layout(100, False).tasks(2) == (per_core, per_core)
    assert layout(100, True).tasks(2) == (per_core + routed_layout.NEW_TABLE_TASKS, per_core)
    # Once a batch of the layout met no new table, the tasks kept for new ones shrink (a new
    # table still has tasks to go to); a batch that met one keeps them all.
    warm = layout(100, True)
    warm.met_new = False
    spare = 2 * routed_layout.WARM_NEW_TABLE_TASKS_PER_CORE
    assert 0 < spare < routed_layout.NEW_TABLE_TASKS
    assert warm.tasks(2) == (per_core + spare, per_core)
    warm.met_new = True
    assert warm.tasks(2) == (per_core + routed_layout.NEW_TABLE_TASKS, per_core)
    one = layout(1, True)
    one.met_new = False
    assert one.tasks(2) == (max(2 * routed_layout.TASKS_PER_CORE, 1 + spare), 1)
    # Beyond MAX_KNOWN_TASKS, however many cores, known tables share tasks.
    many = layout(routed_layout.MAX_KNOWN_TASKS + 50, False)
    assert many.tasks(1000) == (routed_layout.MAX_KNOWN_TASKS, routed_layout.MAX_KNOWN_TASKS)
    # A large cluster does not get thousands of empty tasks per batch.
    assert layout(3, False).tasks(1000) == (routed_layout.MAX_KNOWN_TASKS, 3)


def test_the_jvm_reads_the_layout_and_kinds_by_the_names_python_writes_them_with() -> None:
    """``RoutedWrites`` reads the layout's columns by position and the kinds by value: each of
    its int constants has a Python constant of the same name and value (a change on one side
    fails here)."""
    source = (SOURCES / "dev" / "frazil" / "spark" / "RoutedWrites.java").read_text()
    java = {
        name: int(value)
        for name, value in re.findall(r"public static final int (\w+) = (-?\d+);", source)
    }
    positions = ["KIND_COLUMN", "TABLE_COLUMN", "TOPIC_COLUMN", "PARTITION_COLUMN"]
    positions += ["TIMESTAMP_COLUMN", "SLOT_COLUMN", "FIRST_STRUCT"]
    codes = ["BAD", "UNMATCHED", "FILTERED", "DEFERRED", "IGNORED"]
    assert java == {name: getattr(routed_layout, name) for name in positions + codes}
    # The fixed columns fill the positions before the first shape, each once.
    assert sorted(routed_layout.FIXED_COLUMNS) == list(range(routed_layout.FIRST_STRUCT))
    assert len(set(routed_layout.FIXED_COLUMNS.values())) == routed_layout.FIRST_STRUCT
    assert routed_layout.FIXED_COLUMNS[routed_layout.KIND_COLUMN] == c.KIND
    assert routed_layout.FIXED_COLUMNS[routed_layout.TABLE_COLUMN] == c.ROUTE_TABLE
    assert routed_layout.FIXED_COLUMNS[routed_layout.SLOT_COLUMN] == c.ROUTE_SLOT
    # A shape's index is its kind, so no code may be one.
    assert all(java[code] < 0 for code in codes) and len({java[c] for c in codes}) == len(codes)
