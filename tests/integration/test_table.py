"""Creating a pipeline's table through Iceberg's catalog API, as Spark's CREATE TABLE would."""

from __future__ import annotations

from typing import Any

from frazil.config import parse_config
from frazil.sink.evolution import NAME_MAPPING
from frazil.sink.iceberg import iceberg_catalog, identifier
from frazil.sink.table import ensure_table


def _ensure(spark: Any, pipeline: Any, schema: Any) -> tuple[str, bool]:
    return ensure_table(spark, "lake", pipeline.settings_for(pipeline.table), schema, pipeline.name)


def _pipeline(table: str, partition_by: list[str], **extra: Any) -> Any:
    return parse_config(
        {
            "pipelines": [
                {
                    "name": "p",
                    "topics": ["t"],
                    "table": table,
                    "schema": {
                        "id": "string",
                        "at": "timestamp",
                        "local_at": "timestamp_ntz",
                        "n": "long",
                        "price": "decimal(10,2)",
                        "tags": "array<string>",
                        "attrs": "map<string,int>",
                        "who": "struct<name:string,age:int>",
                    },
                    "partition_by": partition_by,
                    **extra,
                }
            ]
        }
    ).pipelines[0]


def test_table_is_created_with_specs_types_and_properties(spark: Any, unique: str) -> None:
    from pyspark.sql.types import StructType

    from frazil.decode.json_infer import schema_from_config

    pipeline = _pipeline(
        f"deep_{unique}.ns.events",
        ["days(at)", "bucket(8, id)", "truncate(4, who.name)", "hours(local_at)", "n"],
        table_properties={"write.parquet.compression-codec": "zstd"},
    )
    schema: StructType = schema_from_config(pipeline)
    name, created = _ensure(spark, pipeline, schema)
    assert created and name == f"`lake`.`deep_{unique}`.`ns`.`events`"
    table = iceberg_catalog(spark, "lake").loadTable(
        identifier(spark, [f"deep_{unique}", "ns", "events"])
    )
    spec = [(str(f.name()), str(f.transform())) for f in table.spec().fields()]
    # The same field names and transforms as CREATE TABLE ... PARTITIONED BY (...).
    assert spec == [
        ("at_day", "day"),
        ("id_bucket", "bucket[8]"),
        ("who.name_trunc", "truncate[4]"),
        ("local_at_hour", "hour"),
        ("n", "identity"),
    ]
    props = table.properties()
    assert props.get("write.parquet.compression-codec") == "zstd"
    assert props.get("write.distribution-mode") == "none"
    # A reserved property: it becomes the metadata's format version.
    assert table.operations().current().formatVersion() == 2
    # Spark reads it back with the declared types, every column nullable as in plain DDL.
    read = spark.table(name).schema
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in read.fields] == [
        ("id", "string", True),
        ("at", "timestamp", True),
        ("local_at", "timestamp_ntz", True),
        ("n", "bigint", True),
        ("price", "decimal(10,2)", True),
        ("tags", "array<string>", True),
        ("attrs", "map<string,int>", True),
        ("who", "struct<name:string,age:int>", True),
    ]
    # A second start finds it and leaves it alone.
    assert _ensure(spark, pipeline, schema) == (name, False)


def test_an_existing_table_is_given_a_name_mapping(spark: Any, unique: str) -> None:
    from pyspark.sql.types import StringType, StructField, StructType

    spark.sql(f"CREATE TABLE lake.db.narrow_{unique} (id string) USING iceberg")
    pipeline = _pipeline(f"db.narrow_{unique}", [])
    schema = StructType([StructField("id", StringType())])

    _, created = _ensure(spark, pipeline, schema)

    assert not created
    table = iceberg_catalog(spark, "lake").loadTable(identifier(spark, ["db", f"narrow_{unique}"]))
    # Iceberg's default mapping: field id 1 is known as "id" (renames keep old names).
    assert '"names":["id"]' in str(table.properties().get(NAME_MAPPING)).replace(" ", "")


def test_sort_order_identifier_fields_and_format_version(spark: Any, unique: str) -> None:
    from frazil.decode.json_infer import schema_from_config

    pipeline = _pipeline(
        f"db.sorted_{unique}",
        ["days(at)"],
        sort_by=["n desc", "id asc nulls last"],
        identifier_fields=["id"],
        table_properties={"format-version": "3", "write.format.default": "orc"},
    )
    _ensure(spark, pipeline, schema_from_config(pipeline))

    table = iceberg_catalog(spark, "lake").loadTable(identifier(spark, ["db", f"sorted_{unique}"]))
    order = [
        (str(table.schema().findColumnName(f.sourceId())), str(f.direction()), str(f.nullOrder()))
        for f in table.sortOrder().fields()
    ]
    assert order == [("n", "DESC", "NULLS LAST"), ("id", "ASC", "NULLS LAST")]
    assert [str(n) for n in table.schema().identifierFieldNames()] == ["id"]
    assert table.schema().findField("id").isRequired()
    assert table.operations().current().formatVersion() == 3
    assert table.properties().get("write.format.default") == "orc"


def test_an_existing_table_partitioned_otherwise_than_the_config_is_warned_of(
    spark: Any, unique: str, caplog: Any
) -> None:
    import logging

    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    name = f"db.spec_{unique}"
    schema = StructType([StructField("id", StringType()), StructField("at", TimestampType())])
    _ensure(spark, _pipeline(name, ["days(at)"]), schema)
    with caplog.at_level(logging.WARNING, logger="frazil.sink.table"):
        _ensure(spark, _pipeline(name, ["days(at)"]), schema)
        assert not caplog.records  # the same spec: nothing to say
        _, created = _ensure(spark, _pipeline(name, ["days(at)", "bucket(4, id)"]), schema)

    assert not created
    [record] = caplog.records
    assert record.getMessage().startswith(
        f"table {name}: it is partitioned by days(at), the config's partition_by says days(at), "
        "bucket(4, id): partition_by applies when frazil creates a table"
    )
    table = iceberg_catalog(spark, "lake").loadTable(identifier(spark, ["db", f"spec_{unique}"]))
    assert [str(f.transform()) for f in table.spec().fields()] == ["day"]


def test_an_existing_append_table_then_written_by_key_is_warned_of(
    spark: Any, unique: str, caplog: Any
) -> None:
    """A table created for appends keeps copy-on-write and no identifier fields when the
    config turns to upsert: the run says so, once per opening, and how to change the modes."""
    import logging

    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    name = f"db.tokey_{unique}"
    schema = StructType([StructField("id", StringType()), StructField("at", TimestampType())])
    _ensure(spark, _pipeline(name, []), schema)
    upsert = {"write": {"mode": "upsert", "key": ["id"]}}
    with caplog.at_level(logging.WARNING, logger="frazil.sink.table"):
        _, created = _ensure(spark, _pipeline(name, [], **upsert), schema)
    assert not created
    [record] = caplog.records
    message = record.getMessage()
    assert message.startswith(
        f"table {name}: written by key (upsert) but not created for it: its "
        "write.delete.mode, write.merge.mode, write.update.mode are copy-on-write"
    )
    assert "its identifier fields are none, the config's id" in message
    assert message.endswith(
        f"ALTER TABLE {name} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read', "
        "'write.merge.mode'='merge-on-read', 'write.update.mode'='merge-on-read')"
    )

    # Once the modes are set as suggested, only the identifier fields are left to say.
    spark.sql(
        f"ALTER TABLE lake.{name} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read', "
        "'write.merge.mode'='merge-on-read', 'write.update.mode'='merge-on-read')"
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="frazil.sink.table"):
        _ensure(spark, _pipeline(name, [], **upsert), schema)
    [record] = caplog.records
    assert "copy-on-write" not in record.getMessage()
    assert "identifier fields are none" in record.getMessage()
