"""The declared transform chain: a pipeline's ``transforms:``, applied in order, in the JVM.

:func:`build_chain` runs once per pipeline, when it starts (and for ``frazil plan``). It
checks every transform against the columns the transforms before it leave, starting from the
columns that enter the chain (decoded value fields, the key column, the ``_kafka_*``
metadata columns), and resolves the types Spark gives each transform's output on an empty
DataFrame, so the table's schema is known before any record is read. A transform that does
not fit raises :class:`~frazil.errors.ConfigError` naming it.

:meth:`TransformChain.apply` is then a pure function of column expressions: it replaces the
batch's user columns with the transformed ones and updates its error and op columns. No
Spark job, no DataFrame; the plan composes it into the batch's one ``select``.

The transforms are described in docs/transforms.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.partitioning import PartitionField
from frazil.config.pipeline import PipelineConfig
from frazil.config.transforms import Derive, Transform, transform_name
from frazil.errors import ConfigError, PipelineError
from frazil.transform import sql
from frazil.transform.fields import PathError, field_from_spark
from frazil.transform.state import Context, State, Step
from frazil.transform.steps import build_step

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

    from frazil.columns import Projection


@dataclass(frozen=True)
class TransformChain:
    """A pipeline's transforms, checked against the columns entering them.

    Attributes:
        pipeline: The pipeline's name, for messages.
        input_schema: The user columns entering the chain, in order.
        schema: The user columns after the chain: the table's columns. Every column and
            nested field is nullable (optional in the table): a transform may leave a null.
        steps: One step per transform, in order.
        schemas: The user columns after each step.
    """

    pipeline: str
    input_schema: StructType
    schema: StructType
    steps: tuple[Step, ...] = ()
    schemas: tuple[StructType, ...] = ()

    def apply(self, batch: Projection) -> Projection:
        """The batch with its user columns transformed.

        Internal columns (``__frazil_*``) stay where they are and as they are, except the
        error column (records a transform could not handle) and the op column (records a
        filter skipped); the transformed user columns take the place of the user columns.

        Raises:
            PipelineError: The batch's user columns are not the ones the chain was built
                for (the plan must rebuild the chain when the decoded columns change).
        """
        from pyspark.sql import functions as F

        if not self.steps:
            return dict(batch)
        expected = [f.name for f in self.input_schema.fields]
        present = [name for name in batch if not c.is_internal(name)]
        if sorted(present) != sorted(expected):
            raise PipelineError(
                f"pipeline {self.pipeline!r}: the transforms were built for the columns "
                f"{', '.join(expected)}, but the batch has {', '.join(present)}"
            )
        error = batch[c.ERROR] if c.ERROR in batch else F.lit(None).cast(c.ERROR_DDL)
        op = batch[c.OP] if c.OP in batch else F.lit(None).cast("string")
        state = State({name: batch[name] for name in expected}, error, op)
        for step in self.steps:
            state = step.apply(state)
        result: Projection = {}
        placed = False
        for name, column in batch.items():
            if c.is_internal(name):
                result[name] = column
            elif not placed:
                result.update(state.columns)
                placed = True
        result[c.ERROR] = state.error
        result[c.OP] = state.op
        return result

    def describe(self) -> list[tuple[str, str, StructType]]:
        """Per transform: its name, what it does in one line, and the columns after it."""
        return [
            (step.name, step.description, _nullable_struct(schema))
            for step, schema in zip(self.steps, self.schemas, strict=True)
        ]


def partition_paths(pipeline: PipelineConfig) -> list[tuple[str, PartitionField]]:
    """The ``partition_by`` fields that read a path into a variant column, with their config
    keys (the pipeline's, then each table's): each path is derived into a column of its own
    after the transforms, once however many tables name it."""
    named = [("partition_by", pipeline.defaults.partition_fields())] + [
        (f"tables.{name}.partition_by", own.partition_fields())
        for name, own in pipeline.tables.items()
    ]
    seen: set[str] = set()
    found: list[tuple[str, PartitionField]] = []
    for key, fields in named:
        for j, field in enumerate(fields):
            if field.source is not None and field.column not in seen:
                seen.add(field.column)
                found.append((f"{key}[{j}]", field))
    return found


def build_chain(
    spark: SparkSession, pipeline: PipelineConfig, schema: StructType
) -> TransformChain:
    """Check the pipeline's transforms against ``schema`` and build the chain.

    Args:
        spark: The session: its SQL parser reads expressions, and an empty DataFrame of each
            transform's input columns resolves its output types (analysis only, no job).
        pipeline: The pipeline, with its ``transforms``.
        schema: The user columns entering the chain, in order: the decoded value fields, the
            key column, the ``_kafka_*`` metadata columns.

    Raises:
        ConfigError: A transform does not fit the columns it gets (a field that does not
            exist, a type it cannot read, an invalid expression, pattern or time zone); the
            message names the pipeline and the transform, e.g. ``pipeline 'payments':
            transforms[2].rename: field 'payer' does not exist (fields: id, amount)``.
    """
    jvm = sql.Jvm(spark)
    current = schema
    steps: list[Step] = []
    schemas: list[StructType] = []
    with sql.quiet():
        for index, transform in enumerate(pipeline.transforms):
            key = f"transforms[{index}].{transform_name(transform)}"
            step, current = _build(spark, jvm, pipeline, key, transform, current)
            steps.append(step)
            schemas.append(current)
        # Partition columns of paths into a variant: derived last, as a derive step would.
        for key, field in partition_paths(pipeline):
            assert field.source is not None
            derive = Derive(derive={field.column: field.source})
            step, current = _build(spark, jvm, pipeline, key, derive, current)
            steps.append(step)
            schemas.append(current)
    return TransformChain(
        pipeline=pipeline.name,
        input_schema=schema,
        schema=_nullable_struct(current),
        steps=tuple(steps),
        schemas=tuple(schemas),
    )


def _build(
    spark: SparkSession,
    jvm: sql.Jvm,
    pipeline: PipelineConfig,
    key: str,
    transform: Transform,
    current: StructType,
) -> tuple[Step, StructType]:
    """One transform's step and the columns after it, checked over ``current``; ``key``
    names it in errors (``transforms[2].derive``)."""
    frame = spark.createDataFrame([], current)
    context = Context(
        jvm=jvm,
        fields=tuple(field_from_spark(f) for f in current.fields),
        probe=partial(_probe, frame),
    )
    try:
        step, after = build_step(transform, context, _initial_state(current))
        return step, _resolve(frame, after)
    except (PathError, sql.SqlError) as exc:
        reason = str(exc)
        message = f"pipeline {pipeline.name!r}: {key}: {reason}"
        raise ConfigError(message, [(key, reason)]) from None


def _initial_state(schema: StructType) -> State:
    """The build-time batch: the input columns by name, no error, no op."""
    from pyspark.sql import functions as F

    columns = {f.name: F.col(c.quoted(f.name)) for f in schema.fields}
    return State(columns, F.lit(None).cast(c.ERROR_DDL), F.lit(None).cast("string"))


def _probe(frame: DataFrame, column: Column) -> tuple[DataType, bool]:
    """Resolve one column over ``frame``: its type, and whether it is a plain projection."""
    try:
        probed = frame.select(column.alias("probe"))
        data_type = probed.schema.fields[0].dataType
        plan = probed._jdf.queryExecution().analyzed()
        source = frame._jdf.queryExecution().analyzed()
    except sql.spark_errors() as exc:
        raise sql.SqlError(sql.first_line(exc)) from None
    # A plain projection is a Project right over the frame; an aggregate makes an
    # Aggregate, a generator (explode) or a window function put a node in between.
    projection = plan.getClass().getSimpleName() == "Project" and plan.child().fastEquals(source)
    return data_type, bool(projection)


def _resolve(frame: DataFrame, state: State) -> StructType:
    """The user columns' types after a step, as Spark resolves them over ``frame``."""
    from pyspark.sql.types import NullType, StructType

    if not state.columns:
        raise PathError("no columns would be left")
    columns = [column.alias(name) for name, column in state.columns.items()]
    try:
        resolved = frame.select(*columns, state.error.alias(c.ERROR), state.op.alias(c.OP))
        fields = resolved.schema.fields[: len(columns)]
    except sql.spark_errors() as exc:
        raise sql.SqlError(sql.first_line(exc)) from None
    for f in fields:
        if c.is_internal(f.name.lower()):
            raise PathError(f"column {f.name!r}: the prefix {c.INTERNAL_PREFIX!r} is reserved")
        if isinstance(f.dataType, NullType):
            raise PathError(f"column {f.name!r} has no type (NULL); cast it")
    return StructType(fields)


def _nullable_struct(schema: StructType) -> StructType:
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, _nullable(f.dataType), True) for f in schema.fields])


def _nullable(data_type: DataType) -> DataType:
    """The type with every nested field, element and map value nullable."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, StructType):
        return _nullable_struct(data_type)
    if isinstance(data_type, ArrayType):
        return ArrayType(_nullable(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(data_type.keyType, _nullable(data_type.valueType), True)
    return data_type
