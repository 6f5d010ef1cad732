"""The names a pipeline's source columns may take.

The columns entering the transforms come from three places: the value's fields (or a
Debezium envelope's row), the decoded key's column and the Kafka metadata columns. Where the
value's schema comes from the records (inferred JSON, Avro and Protobuf writers), nothing in
the config vouched for its names, and two kinds of name would lose data silently:

* a top-level field named like frazil's own batch columns (``__frazil_op``): the record's
  value and frazil's column are one entry of the batch, so one of them is lost (a
  ``"__frazil_op": "skip"`` record was dropped as filtered);
* names that differ only in case (``id`` and ``ID``), at the top or inside a struct: Spark
  resolves names case-insensitively, so such a table cannot be read by Spark (Iceberg keeps
  both; ``COLUMN_ALREADY_EXISTS`` on every read) and a top-level pair is one batch column.

Both stop the pipeline before it writes, naming the fields and what to do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.pipeline import PipelineConfig
from frazil.errors import ConfigError, DecodeError

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructField

#: Where a source column comes from: the value's field, the key column, a metadata column.
VALUE, KEY, METADATA = "the value's field", "the key column", "the Kafka metadata column"


def check_source_names(
    pipeline: PipelineConfig,
    value: list[StructField],
    key: StructField | None,
    metadata: list[StructField],
) -> None:
    """Refuse source columns that would collide in the batch or in Spark's reads.

    Args:
        pipeline: The pipeline (for its name, topics and value format).
        value: The value's fields (a Debezium envelope's row fields).
        key: The decoded key's column (``key_format``), if any.
        metadata: The Kafka metadata columns (``kafka_metadata``).

    Raises:
        DecodeError: The value's own names collide, or one takes a reserved name.
        ConfigError: The key column or a metadata column collides with a value field.
    """
    where = _where(pipeline)
    for f in value:
        if f.name.lower().startswith(c.INTERNAL_PREFIX):
            raise DecodeError(
                f"{where}: the value's field {f.name!r} takes a name frazil reserves for its "
                f"own batch columns (prefix {c.INTERNAL_PREFIX!r}), so its values would be "
                f"lost; {_rename_hint(pipeline, 'it')}"
            )
    named = [(f, VALUE) for f in value]
    if key is not None:
        named.append((key, KEY))
    named += [(f, METADATA) for f in metadata]
    seen: dict[str, tuple[str, str]] = {}
    for f, source in named:
        first = seen.get(f.name.lower())
        if first is not None:
            raise _clash(pipeline, first, (f.name, source))
        seen[f.name.lower()] = (f.name, source)
    for f in value:
        nested = _nested_clash(f.dataType, f.name)
        if nested is not None:
            path, a, b = nested
            raise DecodeError(
                f"{where}: the value's field {path!r} holds fields {a!r} and {b!r}, which "
                "differ only in case: Spark reads names case-insensitively and could not "
                f"read the table; {_rename_hint(pipeline, 'one of them')}"
            )


def _where(pipeline: PipelineConfig) -> str:
    topics = ", ".join(pipeline.topics) if pipeline.topics else pipeline.topic_pattern or "?"
    return f"pipeline {pipeline.name!r} (topics {topics})"


def _rename_hint(pipeline: PipelineConfig, which: str) -> str:
    hint = f"rename {which} where the records are produced"
    if pipeline.value.format == "json":
        hint += f" or declare the value's schema (value.schema) without {which}"
    return hint


def _clash(
    pipeline: PipelineConfig, first: tuple[str, str], second: tuple[str, str]
) -> ConfigError | DecodeError:
    (a, source_a), (b, source_b) = first, second
    what = "comes twice" if a == b else "differ only in case (one column to Spark)"
    if a == b and source_a == source_b:
        names = f"column {a!r} ({source_a})"
    elif a == b:
        names = f"column {a!r} ({source_a} and {source_b})"
    else:
        names = f"columns {a!r} ({source_a}) and {b!r} ({source_b})"
    message = f"{_where(pipeline)}: {names} {what}"
    sources = {source_a, source_b}
    if KEY in sources:
        return ConfigError(f"{message}; set key_column to another name")
    if METADATA in sources:
        name = a if source_a == METADATA else b
        return ConfigError(
            f"{message}; leave {name.removeprefix(c.METADATA_PREFIX)!r} out of kafka_metadata"
        )
    return DecodeError(f"{message}; {_rename_hint(pipeline, 'one of them')}")


def _nested_clash(data_type: DataType, path: str) -> tuple[str, str, str] | None:
    """The first struct under ``path`` holding two names that differ only in case."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, ArrayType):
        return _nested_clash(data_type.elementType, f"{path}[]")
    if isinstance(data_type, MapType):
        return _nested_clash(data_type.keyType, f"{path}{{key}}") or _nested_clash(
            data_type.valueType, f"{path}{{}}"
        )
    if not isinstance(data_type, StructType):
        return None
    seen: dict[str, str] = {}
    for f in data_type.fields:
        first = seen.setdefault(f.name.lower(), f.name)
        if first != f.name:
            return path, first, f.name
    for f in data_type.fields:
        found = _nested_clash(f.dataType, f"{path}.{f.name}")
        if found is not None:
            return found
    return None
