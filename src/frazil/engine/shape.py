"""A pipeline's shape: its decoders, its transform chain, and the table schema they make.

Resolved once when the pipeline starts (and by ``frazil plan``): schemas come from the config,
a schema file, the schema registry, the existing table or a sample of the topics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.config.variant_paths import is_variant_path, parse_variant_path
from frazil.decode.registry import BuildContext, Decoder, build_decoder
from frazil.engine.source_names import check_source_names
from frazil.errors import ConfigError
from frazil.source.options import SAMPLE_POLL_RECORDS, source_options
from frazil.transform.chain import TransformChain, build_chain
from frazil.transform.check import column_problems
from frazil.transform.metadata import metadata_fields

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructField, StructType

    from frazil.engine.table_views import TableViews


@dataclass(frozen=True)
class PipelineShape:
    """What a pipeline's records become.

    Attributes:
        value: The value decoder.
        key: The key decoder (``key_format``), if any.
        source_schema: The columns entering the transforms: decoded value fields, the key
            column, the Kafka metadata columns.
        chain: The transform chain.
        table_schema: The table's columns after the transforms.
    """

    value: Decoder
    key: Decoder | None
    source_schema: StructType
    chain: TransformChain
    #: Columns the write mode consumes (a CDC operation field): not table columns.
    consumed: tuple[str, ...] = ()

    @property
    def table_schema(self) -> StructType:
        """The table's columns: what the transforms make of the source columns."""
        from pyspark.sql.types import StructType

        if not self.consumed:
            return self.chain.schema
        return StructType([f for f in self.chain.schema.fields if f.name not in self.consumed])


def batch_options(config: FrazilConfig, pipeline: PipelineConfig) -> dict[str, str]:
    """The Kafka source's options for a batch read of the pipeline's topics (samples).

    Polls of Kafka's own size: a sample takes a few records from the start of each
    partition, and Spark's Kafka reader keeps each partition's last poll, decompressed, in
    the driver's fetched-data pool for 5 minutes after the read, where nothing reads it again
    (20 partitions of ~2.8 KB Debezium envelopes held ~400 MiB with polls of 20,000).
    ``kafka.properties`` still overrides it.
    """
    options = {
        k: v
        for k, v in source_options(config, pipeline).items()
        if k not in ("startingOffsets", "maxOffsetsPerTrigger", "minPartitions", "failOnDataLoss")
    }
    if "max.poll.records" not in config.kafka.properties:
        options["kafka.max.poll.records"] = str(SAMPLE_POLL_RECORDS)
    return options


def _existing_value_fields(pipeline: PipelineConfig, views: TableViews) -> StructType | None:
    """The decoded value columns of the pipeline's existing table, for an inferred JSON schema.

    Only without transforms: with them, the table's columns are not the decoded shape.
    """
    from pyspark.sql.types import StructType

    if pipeline.table is None or pipeline.transforms or pipeline.route is not None:
        return None
    if pipeline.defaults.write.debezium:  # the table holds rows, the topic envelopes
        return None
    view = views.view(pipeline.table)
    if view is None:
        return None
    # Only the columns frazil adds: a value field may start with _kafka_ too.
    skip = {f.name for f in metadata_fields(pipeline)}
    if pipeline.key is not None:
        skip.add(pipeline.key.column)
    fields = [f for f in view.schema.fields if f.name not in skip]
    return StructType(fields)


def resolve_shape(
    spark: SparkSession, config: FrazilConfig, pipeline: PipelineConfig, views: TableViews
) -> PipelineShape:
    """Build the pipeline's decoders and transform chain.

    Args:
        spark: The session.
        config: The whole config.
        pipeline: The pipeline.
        views: The existing tables: the pipeline's table's columns are what an inferred JSON
            schema keeps.

    Raises:
        ConfigError: A schema source or a transform does not fit.
        PipelineError: The registry or the topics could not give a schema.
    """

    value = build_decoder(
        BuildContext(
            spark,
            config,
            pipeline,
            "value",
            table_schema=_existing_value_fields(pipeline, views),
            batch_options=batch_options(config, pipeline),
        )
    )
    key: Decoder | None = None
    if pipeline.key is not None:
        key = build_decoder(
            BuildContext(
                spark, config, pipeline, "key", batch_options=batch_options(config, pipeline)
            )
        )
    source = source_schema(pipeline, value, key)
    chain = build_chain(spark, pipeline, source)
    # A decoder that learns record types while running (routed Avro topics) has not met
    # every table's columns yet: a table's own settings are checked when its records come.
    _check_columns(
        config, pipeline, chain.schema, tables=not getattr(value, "learns_record_types", False)
    )
    return PipelineShape(
        value=value, key=key, source_schema=source, chain=chain, consumed=consumed_columns(pipeline)
    )


def consumed_columns(pipeline: PipelineConfig) -> tuple[str, ...]:
    """Columns the write mode reads and does not write: a top-level CDC operation field."""
    write = pipeline.defaults.write
    return (write.op_field,) if write.op_field is not None and write.consumes_op_field() else ()


def _check_declared_types(pipeline: PipelineConfig, value: Decoder) -> None:
    """A declared Debezium row's types against what the envelopes' embedded Connect schemas
    (met so far) send: a type that would misread the values stops the pipeline, naming the
    ``schema`` key and the type to declare."""
    from frazil.decode.debezium import declared_type_problems

    problems = [
        (f"pipeline {pipeline.name!r}: schema.{field}", reason)
        for field, reason in declared_type_problems(value.schema, value.semantics())
    ]
    if problems:
        raise ConfigError("\n".join(f"{key}: {reason}" for key, reason in problems), problems)


def source_schema(pipeline: PipelineConfig, value: Decoder, key: Decoder | None) -> StructType:
    """The columns entering the transforms: the value's fields, the key, Kafka metadata.

    Raises:
        ConfigError: The key or a metadata column shares a value field's name.
        DecodeError: The value's own names collide or take a reserved name
            (:func:`~frazil.engine.source_names.check_source_names`).
    """
    from pyspark.sql.types import StructField, StructType

    fields: list[StructField] = list(value.schema.fields)
    if pipeline.defaults.write.debezium:
        from frazil.decode.debezium import row_schema

        try:
            write = pipeline.defaults.write
            fields = list(row_schema(value.schema, write, value.semantics()).fields)
        except ValueError as exc:
            raise ConfigError(f"pipeline {pipeline.name!r}: {exc}") from None
        if pipeline.value.schema_ is not None:
            _check_declared_types(pipeline, value)
    key_field: StructField | None = None
    if key is not None:
        assert pipeline.key is not None, "a key decoder decodes the pipeline's key_format"
        key_type = key.schema.fields[0].dataType if key.scalar else key.schema
        key_field = StructField(pipeline.key.column, key_type, True)
    metadata = metadata_fields(pipeline)
    check_source_names(pipeline, fields, key_field, metadata)
    return StructType(fields + ([key_field] if key_field is not None else []) + metadata)


def _check_columns(
    config: FrazilConfig, pipeline: PipelineConfig, schema: StructType, *, tables: bool = True
) -> None:
    """Partition, sort, route, key and ordering columns must be table columns (after decoding
    and transforms): known only now for inferred, registry and transformed schemas.
    ``tables``: also those of ``tables:`` entries."""
    index = config.pipelines.index(pipeline)
    problems = column_problems(pipeline, [f.name for f in schema.fields], index=index)
    if not tables:
        own = f"pipelines[{index}].tables."
        problems = [(key, reason) for key, reason in problems if not key.startswith(own)]
    problems += _variant_path_problems(pipeline, schema, index=index)
    if problems:
        raise ConfigError("\n".join(f"{key}: {reason}" for key, reason in problems), problems)


def _variant_path_problems(
    pipeline: PipelineConfig, schema: StructType, *, index: int
) -> list[tuple[str, str]]:
    """A ``route.field`` path (``payload:country``) must read into a ``variant`` column."""
    from pyspark.sql.types import DataType, StructType, VariantType

    field = getattr(pipeline.route, "field", None)
    if not isinstance(field, str) or not is_variant_path(field):
        return []
    column = parse_variant_path(field).column
    data_type: DataType = schema
    for part in column.split("."):
        if not isinstance(data_type, StructType) or part not in data_type.fieldNames():
            return []  # a missing column is column_problems' to report
        data_type = data_type[part].dataType
    if isinstance(data_type, VariantType):
        return []
    return [
        (
            f"pipelines[{index}].route.field",
            f"{field!r} is a path into a variant column, but column {column!r} is "
            f"{data_type.simpleString()}",
        )
    ]
