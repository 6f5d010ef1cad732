"""The static check of a pipeline's transforms, without Spark (``frazil validate``).

When the config declares the schema, the columns entering the transforms are known by name
and type: each transform is planned over them in order (:mod:`frazil.transform.fields`), so a
rename of a field that does not exist, or a flatten whose columns collide, is reported before
anything starts. A derived column's type is unknown here: it is tracked by name only, and
whatever reads it is taken on trust (the start of ``frazil run`` checks it with Spark).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from pydantic import ValidationError

from frazil.columns import METADATA_PREFIX
from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.config.transforms import (
    Cast,
    Derive,
    Drop,
    Flatten,
    FlattenOptions,
    ParseJson,
    ParseJsonOptions,
    ParseTimestamp,
    ParseTimestampOptions,
    Rename,
    Transform,
    transform_name,
)
from frazil.config.types import TypeSyntaxError, to_spark_ddl
from frazil.config.variant_paths import is_variant_path, parse_variant_path
from frazil.transform.fields import (
    Field,
    Fields,
    PathError,
    field_from_ddl,
    plan_drop,
    plan_flatten,
    plan_parse_json,
    plan_parse_timestamp,
    plan_rename,
    plan_replace,
    put,
)

#: The types of the ``kafka_metadata`` columns (as :func:`~frazil.transform.metadata.
#: metadata_fields` makes them), in the config's type language.
METADATA_TYPES = {
    "topic": "string",
    "partition": "int",
    "offset": "long",
    "timestamp": "timestamp",
    "key": "string",
    "headers": "array<struct<key:string,value:binary>>",
}

#: Type text of a column whose type a static check cannot know.
UNKNOWN = "?"


def declared_fields(pipeline: PipelineConfig) -> dict[str, str] | None:
    """The columns entering the transforms, name → type text, if the config declares them.

    The value's ``schema`` fields (and its ``variant`` column of the rest), the key column
    (``key_format``), then the Kafka metadata columns, in the order the plan adds them. None
    when the value schema is not declared (inferred, a schema file, the registry): then only
    the start of ``frazil run`` can check.
    A type this function cannot tell (an Avro key) is :data:`UNKNOWN`.
    """
    if pipeline.value.schema_ is None:
        return None
    fields = dict(pipeline.value.schema_)
    if pipeline.value.variant is not None:  # the rest of each value, after the declared fields
        fields[pipeline.value.variant] = "variant"
    key = pipeline.key
    if key is not None:
        if key.format == "string":
            key_type = "string"
        elif key.format == "bytes":
            key_type = "binary"
        elif key.format == "json" and key.schema_:
            inner = ",".join(f"{name}:{t}" for name, t in key.schema_.items())
            key_type = f"struct<{inner}>"
        else:
            key_type = UNKNOWN
        fields[key.column] = key_type
    for name in pipeline.kafka_metadata:
        fields[f"{METADATA_PREFIX}{name}"] = METADATA_TYPES[name]
    return fields


def config_problems(data: dict[str, Any], config: FrazilConfig | None) -> list[tuple[str, str]]:
    """:func:`static_problems` of every pipeline, for the loader's ``checks``.

    Args:
        data: The parsed config tree.
        config: The config, or None when it does not validate: then each pipeline that
            validates on its own is checked, so a typo elsewhere does not hide its problems.
    """
    if config is not None:
        return [
            problem
            for index, pipeline in enumerate(config.pipelines)
            for problem in static_problems(pipeline, index=index)
        ]
    raw = data.get("pipelines")
    problems: list[tuple[str, str]] = []
    for index, entry in enumerate(raw if isinstance(raw, list) else []):
        if isinstance(entry, dict):
            problems += _salvaged_problems(entry, index)
    return problems


#: Rounds of setting a refused pipeline's keys aside (each round answers one layer: a key
#: refused on its own, then what only fits together).
_SALVAGE_ROUNDS = 4
#: A transform that keeps the columns as they are: stands in for a refused entry, so the
#: entries after it keep their places (and key paths).
_NO_OP = {"filter": "true"}


def _salvaged_problems(entry: dict[str, Any], index: int) -> list[tuple[str, str]]:
    """:func:`static_problems` of a pipeline the loader refused, as far as they can be told.

    The refused keys are set aside (an unknown key dropped, a refused transform replaced by
    one that changes nothing, a field of a type that does not parse taken as of unknown
    type, a missing ``topics`` or ``table`` stood in for) until the rest validates; the
    problems found at keys the loader refused are left out, as it reported them already.
    Nothing if the pipeline does not validate even so.
    """
    data = dict(entry)
    unknown: set[str] = set()
    refused: set[str] = set()
    pipeline: PipelineConfig | None = None
    for _ in range(_SALVAGE_ROUNDS):
        try:
            pipeline = PipelineConfig.model_validate(data)
            break
        except ValidationError as exc:
            errors = exc.errors()
        if not all(_set_aside(data, tuple(e["loc"]), unknown, refused) for e in errors):
            return []
    if pipeline is None:
        return []
    fields = declared_fields(pipeline)
    if fields is None or pipeline.defaults.write.debezium:
        return []
    fields.update((name, UNKNOWN) for name in unknown if name in fields)
    prefix = f"pipelines[{index}]."
    found = static_problems(pipeline, index=index, fields=fields)
    return [
        (key, reason)
        for key, reason in found
        if not any(key == prefix + r or key.startswith(prefix + r + ".") for r in refused)
    ]


def _parses(type_text: str) -> bool:
    try:
        to_spark_ddl(type_text)
    except TypeSyntaxError:
        return False
    return True


def _set_aside(
    data: dict[str, Any], loc: tuple[str | int, ...], unknown: set[str], refused: set[str]
) -> bool:
    """Set aside the key at ``loc`` of a refused pipeline (see :func:`_salvaged_problems`);
    False if it cannot be."""
    if not loc:  # settings that only fit together: stand in for what is missing
        if "topics" not in data and "topic_pattern" not in data:
            data["topics"] = ["_"]
            return True
        if "table" not in data and "route" not in data:
            data["table"] = "_._"
            return True
        return False
    head = loc[0]
    if not isinstance(head, str) or head in ("name", "table", "route", "topics", "topic_pattern"):
        if head == "name":
            data["name"] = "_"
            return True
        return False
    if head in ("schema", "schema_", "key_schema") and len(loc) == 2 and isinstance(loc[1], str):
        fields = dict(data[head])
        type_text = fields.pop(loc[1])
        if head != "key_schema" and isinstance(type_text, str) and not _parses(type_text):
            # A field whose type does not parse is still a column, of a type unknown here
            # (a field whose name is refused is not).
            fields[loc[1]] = "string"
            unknown.add(loc[1])
        data[head] = fields
        refused.add(f"{head}.{loc[1]}")
        return True
    if head in ("transforms", "partition_by") and len(loc) >= 2 and isinstance(loc[1], int):
        entries = list(data[head])
        entries[loc[1]] = _NO_OP if head == "transforms" else "_"
        data[head] = entries
        refused.add(f"{head}[{loc[1]}]")
        return True
    if head == "format" and ("schema" in data or "schema_" in data):
        data["format"] = "json"  # the only format a declared schema goes with
        refused.add(head)
        return True
    if head in ("schema", "schema_", "format", "transforms", "kafka_metadata"):
        return False  # the columns themselves are in doubt
    data.pop(head, None)
    refused.add(head)
    return True


def check_transforms(
    pipeline: PipelineConfig, fields: dict[str, str] | None, *, index: int | None = None
) -> list[tuple[str, str]]:
    """Check that each transform fits the columns the ones before it leave.

    Args:
        pipeline: The pipeline.
        fields: The columns entering the transforms, name → type text (see
            :func:`declared_fields`); a type that does not parse is unknown. None: nothing
            can be checked.
        index: The pipeline's position in the config, for key paths such as
            ``pipelines[0].transforms[1].rename``; without it they start at ``transforms``.

    Returns:
        ``(key path, reason)`` per problem, in order. After a problem the check goes on as if
        the failing entry were not there, so one mistake is reported once.
    """
    if fields is None:
        return []
    prefix = "" if index is None else f"pipelines[{index}]."
    columns: Fields = tuple(field_from_ddl(name, t) for name, t in fields.items())
    problems: list[tuple[str, str]] = []
    for i, transform in enumerate(pipeline.transforms):
        key = f"{prefix}transforms[{i}].{transform_name(transform)}"
        columns, reasons = plan(columns, transform)
        problems.extend((key, reason) for reason in reasons)
    return problems


def planned_columns(pipeline: PipelineConfig, fields: dict[str, str]) -> list[str]:
    """The names of the columns the transforms leave (a failing entry taken as absent)."""
    columns: Fields = tuple(field_from_ddl(name, t) for name, t in fields.items())
    for transform in pipeline.transforms:
        columns = plan(columns, transform)[0]
    return [column.name for column in columns]


def column_problems(
    pipeline: PipelineConfig, columns: list[str], *, index: int
) -> list[tuple[str, str]]:
    """The keys naming a column the records do not have after decoding and transforms:
    ``partition_by``, ``sort_by``, ``identifier_fields`` (also per table), ``route.field``,
    and an upsert or CDC ``write.key`` / ``write.order_by``.

    The start of ``frazil run`` and ``frazil plan`` check them against the resolved schema;
    ``frazil validate`` against the declared one. Same keys, same words.

    Args:
        pipeline: The pipeline.
        columns: The column names after decoding and transforms, in order.
        index: The pipeline's position in the config, for the key paths.

    Returns:
        ``(key path, reason)`` per problem, in the order above.
    """
    write = pipeline.defaults.write
    records = set(columns)
    consumed = write.op_field if write.consumes_op_field() else None
    # A CDC operation field is consumed by the write: no column of the table.
    columns = [name for name in columns if name != consumed]
    known = set(columns)
    listed = ", ".join(columns)
    prefix = f"pipelines[{index}]."
    problems: list[tuple[str, str]] = []

    def missing(key: str, column: str, where: str = "in the table") -> None:
        if column == consumed:
            reason = (
                f"column {column!r} is write.op_field, which the write consumes: it is not a "
                f"column of the table (columns: {listed})"
            )
        else:
            reason = f"column {column!r} is not {where} (columns: {listed})"
        problems.append((prefix + key, reason))

    for j, field in enumerate(pipeline.defaults.partition_fields()):
        root = field.reads.split(".")[0]
        if root not in known:
            missing(f"partition_by[{j}]", root)
    for name, own in pipeline.tables.items():
        for j, field in enumerate(own.partition_fields()):
            root = field.reads.split(".")[0]
            if root not in known:
                missing(f"tables.{name}.partition_by[{j}]", root)
        for j, entry in enumerate(own.sort_by):
            root = entry.split()[0].split(".")[0]
            if root not in known:
                missing(f"tables.{name}.sort_by[{j}]", root)
    for j, entry in enumerate(pipeline.defaults.sort_by):
        root = entry.split()[0].split(".")[0]
        if root not in known:
            missing(f"sort_by[{j}]", root)
    for j, ident in enumerate(pipeline.defaults.identifier_fields):
        if ident not in known:
            missing(f"identifier_fields[{j}]", ident)
    path = getattr(pipeline.route, "field", None)
    if isinstance(path, str):
        root = route_root(path)
        if root not in records:
            missing("route.field", root, "in the records after decoding and transforms")
    if write.merges:
        named: list[tuple[str, str]] = [(f"write.key[{j}]", k) for j, k in enumerate(write.key)]
        if write.order_by:
            named.append(("write.order_by", write.order_by))
        for table, own in pipeline.tables.items():
            if own.write is not None:
                named += [
                    (f"tables.{table}.write.key[{j}]", k) for j, k in enumerate(own.write.key or [])
                ]
                if own.write.order_by:
                    named.append((f"tables.{table}.write.order_by", own.write.order_by))
        kept = {column for _, column in write.envelope_columns()}
        for key, column in named:
            if column not in known:
                missing(key, column)
                if write.debezium and column.startswith("__") and column not in kept:
                    bare = column[2:]
                    path = "source." + bare[7:] if bare.startswith("source_") else bare
                    key_path, reason = problems[-1]
                    problems[-1] = (
                        key_path,
                        f"{reason}; an envelope field kept as a column is named in "
                        f"write.debezium_fields (such as {path!r} for {column!r})",
                    )
    return problems


def route_root(field: str) -> str:
    """The top-level column a ``route.field`` reads: ``a`` of ``a.b`` and of ``a:b.c``."""
    column = parse_variant_path(field).column if is_variant_path(field) else field
    return column.split(".")[0]


def static_problems(
    pipeline: PipelineConfig, *, index: int, fields: dict[str, str] | None = None
) -> list[tuple[str, str]]:
    """What can be checked of a valid pipeline against its declared schema, without Spark:
    its transforms (:func:`check_transforms`), then the columns its keys name
    (:func:`column_problems`). Nothing when the schema is not declared, or for Debezium
    envelopes (the table holds the rows inside them).

    Args:
        pipeline: The pipeline.
        index: Its position in the config, for the key paths.
        fields: The columns entering the transforms; :func:`declared_fields` if None.
    """
    fields = declared_fields(pipeline) if fields is None else fields
    if fields is None:
        return []
    write = pipeline.defaults.write
    if write.debezium:
        # The declared schema is the row's; the envelope fields kept follow its columns.
        declared = list(pipeline.value.schema_ or {})
        kept = {column: "string" for _, column in write.envelope_columns()}
        rest = {name: t for name, t in fields.items() if name not in declared}
        fields = {**{n: fields[n] for n in declared if n in fields}, **kept, **rest}
    problems = check_transforms(pipeline, fields, index=index)
    columns = column_problems(pipeline, planned_columns(pipeline, fields), index=index)
    if not pipeline.transforms:
        # Without transforms the loader has checked partition_by against the schema already.
        prefix = f"pipelines[{index}].partition_by["
        columns = [(key, reason) for key, reason in columns if not key.startswith(prefix)]
    return problems + columns


def plan(columns: Fields, transform: Transform) -> tuple[Fields, list[str]]:
    """The columns after one transform, and the reasons of the entries that do not fit."""
    reasons: list[str] = []
    for entry in _entries(transform):
        try:
            columns = entry(columns)
        except PathError as exc:
            reasons.append(str(exc))
    return columns, reasons


def _entries(transform: Transform) -> list[Callable[[Fields], Fields]]:
    """One planner per entry of the transform, applied in order."""
    if isinstance(transform, Flatten):
        return [partial(_flatten, options=transform.flatten)]
    if isinstance(transform, ParseTimestamp):
        return [partial(_parse_timestamp, options=transform.parse_timestamp)]
    if isinstance(transform, ParseJson):
        return [partial(_parse_json, options=transform.parse_json)]
    if isinstance(transform, Rename):
        return [partial(_rename, old=old, new=new) for old, new in transform.rename.items()]
    if isinstance(transform, Drop):
        return [partial(_drop, path=path) for path in transform.drop]
    if isinstance(transform, Cast):
        return [partial(_cast, path=path, type_text=t) for path, t in transform.cast.items()]
    if isinstance(transform, Derive):
        return [partial(_derive, name=name) for name in transform.derive]
    return []  # filter keeps the columns as they are


def _flatten(columns: Fields, options: FlattenOptions) -> Fields:
    return plan_flatten(columns, options.separator, options.max_depth)[0]


def _parse_timestamp(columns: Fields, options: ParseTimestampOptions) -> Fields:
    return plan_parse_timestamp(columns, options)[0]


def _parse_json(columns: Fields, options: ParseJsonOptions) -> Fields:
    return plan_parse_json(columns, options)[0]


def _rename(columns: Fields, old: str, new: str) -> Fields:
    return plan_rename(columns, old, new)[0]


def _drop(columns: Fields, path: str) -> Fields:
    return plan_drop(columns, path)[0]


def _cast(columns: Fields, path: str, type_text: str) -> Fields:
    return plan_replace(columns, path, field_from_ddl("", type_text))[0]


def _derive(columns: Fields, name: str) -> Fields:
    # The expression's type is Spark's to say: tracked by name only.
    return put(columns, Field(name, None))[0]
