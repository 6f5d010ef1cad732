"""Frozen pydantic models of the config file.

Every model forbids unknown keys, so a typo is reported with its key path instead of being
silently ignored. Relative paths are resolved against the config file's folder by the loader.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, Generic, Literal, TypeVar, get_args
from urllib.parse import unquote, urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ErrorType

from frazil.columns import INTERNAL_PREFIX, METADATA_PREFIX
from frazil.config.durations import parse_duration
from frazil.config.errors import ErrorsConfig
from frazil.config.maintenance import MaintenanceConfig, MaintenancePolicy, ResolvedPolicy
from frazil.config.partitioning import PartitionField, parse_partition_field
from frazil.config.routing import (
    EvolutionPolicy,
    RouteConfig,
    StaticRoute,
    TopicRoute,
    check_table_name,
)
from frazil.config.secrets import mask_value
from frazil.config.sorting import SortField, parse_sort_field
from frazil.config.transforms import TransformEntry
from frazil.config.types import TypeSyntaxError, to_spark_ddl
from frazil.config.writes import MERGE_ON_READ_PROPERTIES, TableWrite, WriteConfig

_IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
# A scheme of two or more characters, then ':/': s3a://b/x, file:///x and file:/x are URIs,
# a relative path such as lake/x (or a Windows drive, C:/x) is not.
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")

#: Each micro-batch is at least one Iceberg commit: faster triggers pile up snapshots and
#: metadata files faster than they are worth, and Spark's own per-batch work takes about this.
MIN_TRIGGER_MS = 100

#: Kafka client options that Spark's Kafka source manages itself and refuses.
_SPARK_MANAGED_KAFKA_KEYS = {
    "group.id",
    "auto.offset.reset",
    "key.deserializer",
    "value.deserializer",
    "enable.auto.commit",
    "interceptor.classes",
}

#: Value and key formats. ``string``/``bytes`` pass the payload through as one column.
FormatName = Literal["json", "avro", "protobuf", "string", "bytes"]
#: Formats whose schema can come from a Schema Registry (wire format: magic byte + id).
REGISTRY_FORMATS = ("json", "avro", "protobuf")

#: Which part of a record a :class:`Decoding` decodes.
Part = Literal["value", "key"]

KafkaMetadataColumn = Literal["topic", "partition", "offset", "timestamp", "key", "headers"]
KAFKA_METADATA_COLUMNS: tuple[str, ...] = get_args(KafkaMetadataColumn)


def is_uri(location: str) -> bool:
    """Whether a location is a URI (``s3a://b/x``, ``file:///x``) rather than a local path."""
    return bool(_URI.match(location))


def is_remote(location: str) -> bool:
    """Whether a location is a URI on another file system than the local one (not ``file:``)."""
    match = _URI.match(location)
    return match is not None and match.group(1).lower() != "file"


def local_path(location: str) -> str:
    """The local path of a ``file:`` URI; any other location unchanged."""
    if is_uri(location) and not is_remote(location):
        return unquote(urlsplit(location).path)
    return location


def _check_topic(topic: str) -> str:
    if not _TOPIC.match(topic):
        raise ValueError(
            f"{topic!r} is not a valid Kafka topic name "
            "(letters, digits, '.', '_', '-'; at most 249)"
        )
    return topic


def _check_partition_column(
    root: str, schema: dict[str, str] | None, kafka_metadata: list[str]
) -> None:
    if root.startswith(METADATA_PREFIX):
        _check_metadata_column(root, kafka_metadata)
        return
    if schema is None:
        # Inferred at start: only Kafka metadata columns can be checked before then.
        return
    if root not in schema:
        columns = [*schema, *(f"{METADATA_PREFIX}{name}" for name in kafka_metadata)]
        raise ValueError(
            f"partition_by column {root!r} is not in the schema (fields: {', '.join(columns)})"
        )


def _check_metadata_column(column: str, kafka_metadata: list[str]) -> None:
    name = column[len(METADATA_PREFIX) :]
    if name in kafka_metadata:
        return
    if name in KAFKA_METADATA_COLUMNS:
        raise ValueError(
            f"partition_by column {column!r} only exists when kafka_metadata lists {name!r}"
        )
    known = ", ".join(f"{METADATA_PREFIX}{m}" for m in KAFKA_METADATA_COLUMNS)
    raise ValueError(f"partition_by column {column!r} is not a Kafka metadata column ({known})")


def _check_field_name(name: str) -> None:
    if not re.match(_IDENT, name):
        raise ValueError(f"field name {name!r} must be letters, digits and '_'")
    # Spark resolves column names case-insensitively, so __FRAZIL_X collides just the same.
    lowered = name.lower()
    if lowered.startswith(INTERNAL_PREFIX):
        raise ValueError(
            f"field name {name!r}: the prefix {INTERNAL_PREFIX!r} is reserved for "
            "frazil's internal columns"
        )
    if lowered.startswith(METADATA_PREFIX):
        raise ValueError(
            f"field name {name!r}: the prefix {METADATA_PREFIX!r} is reserved for "
            "kafka_metadata columns"
        )


def _check_case_collisions(names: Iterable[str]) -> None:
    seen: dict[str, str] = {}
    for name in names:
        first = seen.setdefault(name.lower(), name)
        if first != name:
            raise ValueError(
                f"fields {first!r} and {name!r} differ only in case, and Spark resolves "
                "column names case-insensitively"
            )


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class CatalogConfig(_Frozen):
    """Where the Iceberg tables live.

    The embedded default is Iceberg's JDBC catalog on a SQLite file inside the warehouse
    folder, which PyIceberg's SQL catalog (and through it DuckDB) opens too.
    """

    name: Annotated[str, Field(pattern=_IDENT)] = "lake"
    type: Literal["jdbc", "rest", "hadoop"] = "jdbc"
    warehouse: str = "./lake"
    # validate_default: a missing uri is exactly what _check_uri must see.
    uri: str | None = Field(default=None, validate_default=True)
    properties: dict[str, str] = Field(default_factory=dict)

    @field_validator("uri")
    @classmethod
    def _check_uri(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value:
            return value
        kind, warehouse = info.data.get("type"), info.data.get("warehouse")
        if kind == "rest":
            raise ValueError(
                "required when catalog.type is rest: the REST catalog's endpoint, "
                "e.g. https://catalog.example.com/api/catalog"
            )
        if kind == "jdbc" and isinstance(warehouse, str) and is_remote(warehouse):
            raise ValueError(
                f"required when catalog.type is jdbc and catalog.warehouse is remote "
                f"({mask_value(warehouse)}): the embedded catalog is a SQLite file inside the "
                "warehouse, which needs a local warehouse; set catalog.uri to a JDBC URL "
                "(e.g. jdbc:postgresql://host/iceberg) or use catalog.type: rest"
            )
        return value

    def resolved_uri(self) -> str:
        """The catalog URI; for the embedded JDBC catalog, the SQLite file in the warehouse."""
        if self.uri:
            return self.uri
        if self.type == "jdbc":
            return f"jdbc:sqlite:{local_path(self.warehouse).rstrip('/')}/catalog.db"
        return ""


class KafkaConfig(_Frozen):
    """How to reach Kafka. ``properties`` pass through to the Kafka client (security etc.)."""

    bootstrap_servers: Annotated[str, Field(min_length=1)] = "127.0.0.1:9092"
    properties: dict[str, str] = Field(default_factory=dict)
    #: The consumer group frazil commits each pipeline's table offsets to, after each commit,
    #: so Kafka's own tools show its lag; ``{pipeline}`` is the pipeline's name.
    group_id: Annotated[str, Field(min_length=1)] = "frazil-{pipeline}"
    #: Whether to commit them (recovery never reads them: the tables are the truth).
    commit_offsets: bool = True

    def group_for(self, pipeline: str) -> str:
        """The consumer group of one pipeline."""
        return self.group_id.replace("{pipeline}", pipeline)

    @field_validator("properties")
    @classmethod
    def _no_spark_managed_keys(cls, value: dict[str, str]) -> dict[str, str]:
        bad = sorted(set(value) & _SPARK_MANAGED_KAFKA_KEYS)
        if bad:
            raise ValueError(
                f"{', '.join(bad)} cannot be set: Spark's Kafka source manages "
                "consumer groups, offsets and deserializers itself"
            )
        return value


class SchemaRegistryConfig(_Frozen):
    """A Confluent-compatible Schema Registry (Confluent, Apicurio's ``/apis/ccompat/v7``, …).

    ``properties`` pass through to confluent-kafka's ``SchemaRegistryClient``
    (``ssl.ca.location``, ``basic.auth.user.info``, …).
    """

    url: Annotated[str, Field(pattern=r"^https?://")]
    username: str | None = None
    password: str | None = None
    properties: dict[str, str] = Field(default_factory=dict)
    #: Attempts for one request before the pipeline stops (with exponential backoff).
    retries: Annotated[int, Field(ge=0)] = 5
    timeout: str = "10s"

    @field_validator("timeout")
    @classmethod
    def _check_timeout(cls, value: str) -> str:
        if parse_duration(value) <= 0:
            raise ValueError("must be longer than zero")
        return value

    @model_validator(mode="after")
    def _check_auth(self) -> SchemaRegistryConfig:
        if (self.username is None) != (self.password is None):
            raise ValueError("set both 'username' and 'password', or neither")
        return self


class MetricsConfig(_Frozen):
    """Prometheus metrics of ``frazil run`` on ``http://<host>:<port>/metrics``."""

    port: Annotated[int, Field(ge=1, le=65535)] = 9464
    host: str = "0.0.0.0"


class SparkConfig(_Frozen):
    """The Spark application: ``local[2]`` by default, or a cluster master URL."""

    master: str = "local[2]"
    app_name: str = "frazil"
    driver_memory: Annotated[str, Field(pattern=r"^\d+[kmgKMG]$")] = "1g"
    ui: bool = False
    conf: dict[str, str] = Field(default_factory=dict)


def _check_sort_entry(entry: str) -> str:
    parse_sort_field(entry)
    return entry


def _check_partition_text(entry: str) -> str:
    parse_partition_field(entry)
    return entry


def _check_identifier(name: str) -> str:
    if not re.match(_IDENT, name):
        raise ValueError(f"{name!r} must be a top-level column name")
    return name


class Decoding(_Frozen):
    """How one part of a pipeline's records, the value or the key, is decoded.

    The config writes these settings flat under the pipeline: ``format``, ``schema``,
    ``schema_file``, ``subject``, ``message`` and ``timestamp_format`` for the value;
    ``key_format``, ``key_schema``, ``key_schema_file``, ``key_subject``, ``key_message``
    and ``key_column`` for the key (:class:`PipelineConfig` gathers them).

    Attributes:
        part: Which part this decodes: ``value`` or ``key``.
        format: The part's format.
        schema_: Declared JSON fields, name → type (``schema``); None to read the schema
            from ``schema_file`` or the registry, or (JSON) to infer it.
        schema_file: A schema file: JSON Schema, Avro, ``.proto`` or a descriptor set.
        subject: The registry subject; None for ``<first topic>-<part>``.
        message: Protobuf: the full name of the message the records hold.
        timestamp_format: JSON values: the pattern of timestamps written as text.
        column: The column the part becomes when decoded whole: always for the key
            (``key_column``, default ``key``); for a value only as one scalar (``string``,
            ``bytes``, an Avro schema that is not a record), named ``value``.
    """

    part: Part
    format: FormatName = "json"
    schema_: dict[str, str] | None = Field(default=None, alias="schema")
    schema_file: str | None = None
    subject: str | None = None
    message: str | None = None
    timestamp_format: str | None = None
    column: Annotated[str, Field(pattern=_IDENT)]

    @model_validator(mode="before")
    @classmethod
    def _column_named_by_part(cls, data: Any) -> Any:
        # key_column defaults to "key"; a value's column is always "value".
        if isinstance(data, dict) and "column" not in data:
            return {**data, "column": data.get("part")}
        return data

    @field_validator("schema_")
    @classmethod
    def _check_schema(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("must declare at least one field, or be omitted to infer it")
        for field_name, type_text in value.items():
            _check_field_name(field_name)
            try:
                to_spark_ddl(type_text)
            except TypeSyntaxError as exc:
                raise ValueError(f"field {field_name!r}: {exc}") from None
        _check_case_collisions(value)
        return value

    def source(self) -> str:
        """Where the part's schema comes from: ``none`` (``string``, ``bytes``),
        ``declared``, ``file``, ``registry`` or ``inferred`` (JSON)."""
        if self.format in ("string", "bytes"):
            return "none"
        if self.schema_ is not None:
            return "declared"
        if self.schema_file is not None:
            return "file"
        if self.format == "json" and self.subject is None:
            return "inferred"
        return "registry"

    def subject_name(self, topics: list[str] | None) -> str | None:
        """The registry subject of the part's schema: ``subject``, or by the topic name
        strategy ``<first topic>-value`` / ``<first topic>-key`` (None for a
        ``topic_pattern`` pipeline, which must name it)."""
        if self.subject:
            return self.subject
        return f"{topics[0]}-{self.part}" if topics else None

    def config_key(self, name: str) -> str:
        """The key one of the part's settings is written as under the pipeline, for
        messages: ``schema_file`` is ``key_schema_file`` for the key."""
        return f"key_{name}" if self.part == "key" else name


def _check_schema_source(part: Decoding) -> None:
    prefix = part.config_key("")  # "key_" for the key: messages name the keys as written
    fmt, schema, schema_file, message = part.format, part.schema_, part.schema_file, part.message
    if fmt in ("string", "bytes"):
        for key, value in (("schema", schema), ("schema_file", schema_file), ("message", message)):
            if value is not None:
                raise ValueError(f"'{prefix}{key}' does not apply to {prefix}format {fmt}")
        return
    if schema is not None and fmt != "json":
        raise ValueError(
            f"'{prefix}schema' declares JSON fields; {prefix}format {fmt} takes "
            f"'{prefix}schema_file' or the schema registry"
        )
    if schema is not None and schema_file is not None:
        raise ValueError(f"set '{prefix}schema' or '{prefix}schema_file', not both")
    if message is not None and fmt != "protobuf":
        raise ValueError(f"'{prefix}message' applies to {prefix}format protobuf only")
    if fmt == "protobuf" and schema_file is not None and message is None:
        raise ValueError(
            f"'{prefix}message' is required with '{prefix}schema_file': the full name of "
            "the message the records hold (e.g. shop.v1.Order)"
        )


#: What ``TableSettings.write`` holds: the whole write config (a pipeline's defaults, a
#: resolved table), or one table's own key and ordering column (its overrides; None: none).
WriteT = TypeVar("WriteT", WriteConfig, TableWrite | None)

#: The keys of a table's overrides that take the pipeline's value when left out or set to
#: null; ``table_properties`` are merged over the pipeline's instead.
_INHERITED = (
    "partition_by",
    "sort_by",
    "identifier_fields",
    "schema_evolution",
    "aliases",
    "write",
    "maintenance",
)


class TableSettings(_Frozen, Generic[WriteT]):
    """How a pipeline's tables are laid out, written and kept up.

    One model in three roles:

    * ``TableSettings[WriteConfig]``, a pipeline's ``defaults``: the keys written flat under
      the pipeline (``partition_by``, ``sort_by``, …, ``write``, ``maintenance``), for each
      of its tables;
    * ``TableSettings[TableWrite | None]``, one table's overrides
      (``pipelines[].tables.<name>``): only the keys the table sets count (left out or
      null: the pipeline's); ``table_properties`` are merged over the pipeline's, and
      ``write`` holds the table's own ``key`` and ``order_by``;
    * :class:`ResolvedTable`: the two merged, by :meth:`for_table`.

    Attributes:
        partition_by: Partition transforms (``days(created_at)``, ``bucket(16, id)``, …).
        sort_by: The table's sort order (``created_at desc``, …).
        identifier_fields: The table's identifier fields.
        table_properties: Iceberg table properties.
        schema_evolution: ``evolve`` (new fields become columns) or ``freeze``.
        aliases: Source field → table column, for fields whose name differs from their
            column's.
        write: See :data:`WriteT`.
        maintenance: The table's upkeep; unset sections come from the top level's.
    """

    partition_by: list[Annotated[str, AfterValidator(_check_partition_text)]] = Field(
        default_factory=list
    )
    sort_by: list[Annotated[str, AfterValidator(_check_sort_entry)]] = Field(default_factory=list)
    identifier_fields: list[Annotated[str, AfterValidator(_check_identifier)]] = Field(
        default_factory=list
    )
    table_properties: dict[str, str] = Field(default_factory=dict)
    schema_evolution: EvolutionPolicy = "evolve"
    aliases: dict[str, str] = Field(default_factory=dict)
    # None is a table's overrides' default (their write is the pipeline's); validated, so
    # that settings holding a WriteConfig cannot be made without one.
    write: WriteT = Field(default=None, validate_default=True)
    maintenance: MaintenancePolicy | None = None

    @classmethod
    def model_parametrized_name(cls, params: tuple[Any, ...]) -> str:
        """Errors name the model the way users know it: ``instance of TableSettings``."""
        return cls.__name__

    def partition_fields(self) -> list[PartitionField]:
        """The parsed ``partition_by`` transforms."""
        return [parse_partition_field(entry) for entry in self.partition_by]

    def sort_fields(self) -> list[SortField]:
        """The parsed ``sort_by`` fields."""
        return [parse_sort_field(entry) for entry in self.sort_by]

    def for_table(
        self: TableSettings[WriteConfig], name: str, own: TableSettings[TableWrite | None] | None
    ) -> ResolvedTable:
        """One table's settings: these, with the table's overrides ``own`` over them.

        A key ``own`` sets replaces this one (lists and aliases whole: an empty list is an
        override too); ``table_properties`` are merged, ``write`` takes the table's key and
        ``order_by``, and unset ``maintenance`` sections come from these. An upsert or CDC
        table is identified by its key and gets merge-on-read properties, unless it says
        otherwise.
        """

        def pick(key: str) -> Any:
            return getattr(own if own is not None and key in own.model_fields_set else self, key)

        write = self.write
        properties = dict(self.table_properties)
        maintenance = self.maintenance
        if own is not None:
            properties.update(own.table_properties)
            if own.write is not None:
                write = write.model_copy(
                    update={
                        k: v
                        for k, v in (("key", own.write.key), ("order_by", own.write.order_by))
                        if v is not None
                    }
                )
            if own.maintenance is not None:
                maintenance = own.maintenance.over(maintenance)
        identifiers = list(pick("identifier_fields"))
        if write.merges:
            identifiers = identifiers or list(write.key)
            properties = {**MERGE_ON_READ_PROPERTIES, **properties}
        # Copies: a caller changing its table's lists must not change the pipeline's.
        return ResolvedTable(
            name=name,
            partition_by=list(pick("partition_by")),
            sort_by=list(pick("sort_by")),
            identifier_fields=identifiers,
            table_properties=properties,
            schema_evolution=pick("schema_evolution"),
            aliases=dict(pick("aliases")),
            write=write,
            maintenance=maintenance,
        )


class ResolvedTable(TableSettings[WriteConfig]):
    """What one table of a pipeline gets: the pipeline's settings with the table's overrides
    (:meth:`TableSettings.for_table`).

    Attributes:
        name: The table (``namespace.table``).
    """

    name: str
    write: WriteConfig = Field(default_factory=WriteConfig)


#: The groups of :class:`PipelineConfig` that keys written flat under a pipeline fill.
_GROUPS = ("value", "key", "defaults")

#: Every key written under a pipeline: None for a field of the pipeline itself, or the group
#: holding it and its name there. In the order they were declared while each was the
#: pipeline's own field, which is the order problems are reported and dumps list them in.
_LAYOUT: dict[str, tuple[str, str] | None] = {
    "name": None,
    "topics": None,
    "topic_pattern": None,
    "starting_offsets": None,
    "max_offsets_per_trigger": None,
    "min_partitions": None,
    **{
        key: ("value", key)
        for key in ("format", "schema", "schema_file", "subject", "message", "timestamp_format")
    },
    **{
        f"key_{key}": ("key", key)
        for key in ("format", "schema", "schema_file", "subject", "message", "column")
    },
    "table": None,
    "route": None,
    "kafka_metadata": None,
    "transforms": None,
    **{
        key: ("defaults", key)
        for key in (
            "partition_by",
            "sort_by",
            "identifier_fields",
            "table_properties",
            "schema_evolution",
            "aliases",
        )
    },
    "tables": None,
    "write": ("defaults", "write"),
    "maintenance": ("defaults", "maintenance"),
    "errors": None,
    "trigger": None,
    "checkpoint": None,
}
# The value's schema is also accepted under its attribute's name (populate_by_name).
_ACCEPTED: dict[str, tuple[str, str] | None] = {**_LAYOUT, "schema_": ("value", "schema_")}
#: (group, name there) → the key written under the pipeline.
_WRITTEN_AS = {place: key for key, place in _ACCEPTED.items() if place is not None}
_RANK = {key: i for i, key in enumerate(_LAYOUT)} | {"schema_": list(_LAYOUT).index("schema")}
#: The key's settings besides its format, which need ``key_format``.
_KEY_SETTINGS = ("schema", "schema_file", "subject", "message")
_KNOWN_ERRORS = frozenset(get_args(ErrorType))


def _gather(data: dict[Any, Any]) -> tuple[dict[Any, Any], dict[Any, Any], list[Any]]:
    """Put the flat keys of a pipeline in their groups.

    Returns:
        The pipeline's input; the key's settings (validated there only with ``key_format``);
        keys named like a group, which the config does not have.
    """
    groups: dict[str, dict[Any, Any]] = {
        "value": {"part": "value"},
        "key": {"part": "key"},
        "defaults": {},
    }
    grouped: dict[Any, Any] = {}
    misplaced = []
    for name, value in data.items():
        place = _ACCEPTED.get(name) if isinstance(name, str) else None
        if place is not None:
            groups[place[0]][place[1]] = value
        elif name in _GROUPS:
            misplaced.append(name)
        else:
            grouped[name] = value
    key = groups["key"]
    if key.get("format") is None:
        # key_format: null is no key_format.
        key.pop("format", None)
    else:
        grouped["key"] = key
    # A pipeline without write: appends.
    groups["defaults"].setdefault("write", {})
    grouped["value"] = groups["value"]
    grouped["defaults"] = groups["defaults"]
    return grouped, key, misplaced


def _written_as(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """An error's location with the key the config writes (``defaults.write`` → ``write``)."""
    if len(loc) >= 2 and loc[0] in _GROUPS:
        key = _WRITTEN_AS.get((str(loc[0]), str(loc[1])))
        if key is not None:
            return (key, *loc[2:])
    return loc


def _moved(error: ErrorDetails, loc: tuple[int | str, ...]) -> InitErrorDetails:
    """The same error at another location, with the same type and message."""
    if error["type"] in _KNOWN_ERRORS:
        return InitErrorDetails(
            type=error["type"], loc=loc, input=error["input"], ctx=error.get("ctx", {})
        )
    # A custom error (a discriminator's): the message it had, taken as it is.
    return InitErrorDetails(
        type=PydanticCustomError(error["type"], error["msg"]), loc=loc, input=error["input"]
    )


def _is_unknown_key(error: InitErrorDetails) -> bool:
    return error["type"] == "extra_forbidden" and len(error["loc"]) == 1


def _reported_order(error: InitErrorDetails, position: dict[Any, int]) -> tuple[int, int]:
    """Where pydantic reported an error while every key was the pipeline's own field: fields
    in the order of :data:`_LAYOUT` (a list's entries by index), then unknown keys as
    written (``position``: each key's place in the input)."""
    loc = error["loc"]
    if _is_unknown_key(error):
        return len(_LAYOUT), position.get(loc[0], 0)
    if not loc:
        return -1, 0
    entry = loc[1] if loc[0] == "partition_by" and len(loc) > 1 else -1
    return _RANK.get(str(loc[0]), len(_LAYOUT)), entry if isinstance(entry, int) else -1


def _partition_column_errors(
    data: dict[Any, Any], found: list[InitErrorDetails]
) -> list[InitErrorDetails]:
    """``partition_by`` columns missing from the declared schema and the Kafka metadata.

    Checked for each entry that parses, once the schema, ``kafka_metadata`` and
    ``transforms`` are valid (the schema's own error is the one to fix). Transforms rename,
    drop and derive columns: with them, partition columns are checked against the resolved
    table schema at start (and by ``frazil plan``) instead.
    """
    failed = {error["loc"] for error in found if not _is_unknown_key(error)}
    heads = {loc[0] for loc in failed if loc}
    entries = data.get("partition_by")
    if (
        heads & {"schema", "schema_", "kafka_metadata", "transforms"}
        or data.get("transforms")
        or not isinstance(entries, list)
        or ("partition_by",) in failed
    ):
        return []
    schema = data["schema"] if "schema" in data else data.get("schema_")
    kafka_metadata = data.get("kafka_metadata", [])
    errors = []
    for index, entry in enumerate(entries):
        if ("partition_by", index) in failed:
            continue
        root = parse_partition_field(entry).column.split(".")[0]
        try:
            _check_partition_column(root, schema, kafka_metadata)
        except ValueError as exc:
            errors.append(
                InitErrorDetails(
                    type="value_error",
                    loc=("partition_by", index),
                    input=entry,
                    ctx={"error": exc},
                )
            )
    return errors


class PipelineConfig(_Frozen):
    """One stream: Kafka topics, how to decode them, and the Iceberg table(s) they land in.

    The config writes every key flat under the pipeline; the model gathers them in groups:
    ``value`` and ``key`` from ``format``, ``schema``, … and ``key_format``,
    ``key_schema``, …; ``defaults`` from ``partition_by``, ``sort_by``, …, ``write`` and
    ``maintenance``. Problems name the keys as written (``pipelines[0].key_schema``), in
    the order of :data:`_LAYOUT`, and a dump writes them flat again.

    Attributes:
        value: How the records' values are decoded.
        key: How their keys are decoded; None without ``key_format``.
        defaults: The settings of each table the pipeline writes, unless ``tables`` says
            otherwise; ``defaults.write`` is the pipeline's write mode.
        tables: Per-table overrides, by table name (:meth:`settings_for`).
    """

    name: Annotated[str, Field(pattern=_IDENT)]
    topics: list[Annotated[str, AfterValidator(_check_topic)]] | None = None
    topic_pattern: str | None = None
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    max_offsets_per_trigger: Annotated[int, Field(gt=0)] | None = None
    min_partitions: Annotated[int, Field(gt=0)] | None = None
    value: Decoding
    key: Decoding | None = None
    table: str | None = None
    route: RouteConfig | None = None
    kafka_metadata: list[KafkaMetadataColumn] = Field(default_factory=list)
    transforms: list[TransformEntry] = Field(default_factory=list)
    defaults: TableSettings[WriteConfig]
    tables: dict[str, TableSettings[TableWrite | None]] = Field(default_factory=dict)
    errors: ErrorsConfig = Field(default_factory=ErrorsConfig)
    trigger: str = "1s"
    checkpoint: str | None = None
    # key_column given without key_format: unused, but dumped as it was written.
    _idle_key_column: str | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _from_flat_keys(
        cls, data: Any, handler: ModelWrapValidatorHandler[PipelineConfig]
    ) -> PipelineConfig:
        if not isinstance(data, dict):
            return handler(data)
        grouped, key, misplaced = _gather(data)
        found: list[ErrorDetails] = []
        pipeline: PipelineConfig | None = None
        try:
            pipeline = handler(grouped)
        except ValidationError as exc:
            found += exc.errors()
        keyless = "key" not in grouped
        if keyless and len(key) > 1:
            # A key's settings without key_format are still checked, each for itself, before
            # _check_together refuses them: on their own, as the pipeline holds no key.
            try:
                Decoding.model_validate(key)
            except ValidationError as exc:
                found += [{**error, "loc": ("key", *error["loc"])} for error in exc.errors()]
        errors = [_moved(error, _written_as(error["loc"])) for error in found]
        errors += [
            InitErrorDetails(type="extra_forbidden", loc=(name,), input=data[name])
            for name in misplaced
        ]
        errors += _partition_column_errors(data, errors)
        if errors:
            position = {name: i for i, name in enumerate(data)}
            errors.sort(key=lambda error: _reported_order(error, position))
            raise ValidationError.from_exception_data(cls.__name__, errors)
        assert pipeline is not None
        given = [f"key_{name}" for name in _KEY_SETTINGS if key.get(name) is not None]
        pipeline._check_together(given if keyless else [])
        if keyless:
            pipeline._idle_key_column = key.get("column")
        return pipeline

    @model_serializer(mode="wrap")
    def _to_flat_keys(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        data = handler(self)
        groups: dict[str, dict[str, Any]] = {name: data.pop(name, None) or {} for name in _GROUPS}
        # A table's overrides dump what they leave to the pipeline as null, as they read it.
        for name, own in self.tables.items():
            dumped = data["tables"][name]
            for key in _INHERITED:
                if key in own.model_fields_set:
                    continue
                if info.exclude_none:
                    dumped.pop(key, None)
                else:
                    dumped[key] = None
        flat: dict[str, Any] = {}
        for key, place in _LAYOUT.items():
            if place is None:
                if key in data:
                    flat[key] = data[key]
            elif place[0] == "key" and self.key is None:
                # As a pipeline without key_format always dumped: only key_column set.
                value = (self._idle_key_column or "key") if key == "key_column" else None
                if value is not None or not info.exclude_none:
                    flat[key] = value
            else:
                group, name = place
                if name == "schema" and not info.by_alias:
                    name, key = "schema_", "schema_" if key == "schema" else key
                if name in groups[group]:
                    flat[key] = groups[group][name]
        return flat

    @field_validator("topics")
    @classmethod
    def _check_topics(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("must list at least one topic")
        return value

    @field_validator("topic_pattern")
    @classmethod
    def _check_pattern(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {value!r}: {exc}") from None
        return value

    @field_validator("table")
    @classmethod
    def _check_table(cls, value: str | None) -> str | None:
        if value is not None and not _TABLE.match(value):
            raise ValueError(f"{value!r} must be namespace.table, e.g. db.payments")
        return value

    @field_validator("tables", mode="before")
    @classmethod
    def _null_is_unset(cls, value: Any) -> Any:
        # A table's key set to null takes the pipeline's value, as a key left out does.
        if not isinstance(value, dict):
            return value
        return {
            name: (
                {k: v for k, v in own.items() if v is not None or k not in _INHERITED}
                if isinstance(own, dict)
                else own
            )
            for name, own in value.items()
        }

    @field_validator("tables")
    @classmethod
    def _check_tables(
        cls, value: dict[str, TableSettings[TableWrite | None]]
    ) -> dict[str, TableSettings[TableWrite | None]]:
        for name in value:
            check_table_name(name)
        return value

    @field_validator("trigger")
    @classmethod
    def _check_trigger(cls, value: str) -> str:
        seconds = parse_duration(value)
        if seconds <= 0:
            raise ValueError("must be longer than zero")
        # Rounded: 0.1s and 100ms must compare equal despite binary floating point.
        if round(seconds * 1000, 6) < MIN_TRIGGER_MS:
            raise ValueError(f"must be at least {MIN_TRIGGER_MS}ms")
        return value

    def _check_together(self, keyless: list[str]) -> None:
        """Settings that only fit together, once each is valid on its own.

        Args:
            keyless: The key's settings given without ``key_format``.
        """
        if (self.topics is None) == (self.topic_pattern is None):
            raise ValueError("set exactly one of 'topics' or 'topic_pattern'")
        if (self.table is None) == (self.route is None):
            raise ValueError(
                "set exactly one of 'table' (every record to one table) or 'route' "
                "(records to tables by field or topic)"
            )
        _check_schema_source(self.value)
        if keyless:
            raise ValueError(f"'{keyless[0]}' needs 'key_format'")
        if self.key is not None:
            _check_schema_source(self.key)
        if self.value.format != "json" and self.value.timestamp_format is not None:
            raise ValueError("'timestamp_format' applies to format json only")
        if self.errors.dlq_table is not None and self.errors.dlq_table in self.static_tables():
            raise ValueError(
                f"errors.dlq_table {self.errors.dlq_table!r} is also a table the pipeline "
                "writes its records to; give the dead-letter queue a table of its own"
            )
        if getattr(self.route, "default", None) == "dlq" and not self.errors.dead_letters:
            raise ValueError(
                "route default 'dlq' needs a dead-letter queue: set errors.tolerance: all "
                "with errors.dlq_topic or errors.dlq_table"
            )
        self._check_write()

    def _check_write(self) -> None:
        write = self.defaults.write
        if write.tombstones == "delete" and self.key is None:
            raise ValueError(
                "write.tombstones 'delete' needs 'key_format': a tombstone names its row by "
                "its Kafka key"
            )
        if write.debezium and self.value.format not in ("json", "avro"):
            raise ValueError(
                f"write.debezium reads Debezium envelopes as json or avro, not {self.value.format}"
            )
        for name, own in self.tables.items():
            if own.write is not None and not write.merges:
                raise ValueError(
                    f"tables.{name}.write: a table's key and order_by apply to pipelines with "
                    "write.mode upsert or cdc"
                )
        identifiers = self.defaults.identifier_fields
        if write.merges and identifiers and identifiers != write.key:
            raise ValueError(
                "identifier_fields must equal write.key (or be left out): an upsert or CDC "
                "table is identified by its key"
            )

    def static_tables(self) -> list[str]:
        """The tables known from the config alone: ``table``, or those the route names."""
        if self.table is not None:
            return [self.table]
        assert self.route is not None
        return self.route.table_names()

    def describe_target(self) -> str:
        """``table``, or a short description of the route, for messages and reports."""
        if self.table is not None:
            return self.table
        route = self.route
        if isinstance(route, StaticRoute):
            return f"{', '.join(route.table_names())} by {route.field}"
        assert route is not None
        if isinstance(route, TopicRoute):
            return f"{route.table} by topic"
        return f"{route.table} by {route.field}"

    def settings_for(self, table: str) -> ResolvedTable:
        """One table's settings: the pipeline's ``defaults``, with ``tables.<table>`` over them."""
        return self.defaults.for_table(table, self.tables.get(table))

    def trigger_seconds(self) -> float:
        """The trigger interval in seconds."""
        return parse_duration(self.trigger)


class FrazilConfig(_Frozen):
    """The whole config file."""

    catalog: CatalogConfig = Field(default_factory=CatalogConfig)
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    schema_registry: SchemaRegistryConfig | None = None
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)
    metrics: MetricsConfig | None = None
    state_dir: str = "./.frazil"
    pipelines: Annotated[list[PipelineConfig], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_pipelines(self) -> FrazilConfig:
        seen: set[str] = set()
        for pipeline in self.pipelines:
            if pipeline.name in seen:
                raise ValueError(f"pipeline name {pipeline.name!r} is used twice")
            seen.add(pipeline.name)
        return self

    @model_validator(mode="after")
    def _one_group_per_pipeline(self) -> FrazilConfig:
        if len(self.pipelines) > 1 and "{pipeline}" not in self.kafka.group_id:
            raise ValueError(
                "kafka.group_id must contain {pipeline} when the config has several "
                "pipelines: each pipeline's offsets go to a group of its own"
            )
        return self

    @model_validator(mode="after")
    def _registry_when_needed(self) -> FrazilConfig:
        if self.schema_registry is not None:
            return self
        for pipeline in self.pipelines:
            for what, part in (("values", pipeline.value), ("keys", pipeline.key)):
                if part is not None and part.source() == "registry":
                    raise ValueError(
                        f"pipeline {pipeline.name!r} reads {what} through the schema registry "
                        "(no schema or schema_file given): set schema_registry.url"
                    )
        return self

    def pipeline(self, name: str) -> PipelineConfig:
        """The pipeline called ``name``.

        Raises:
            KeyError: No pipeline has that name.
        """
        for pipeline in self.pipelines:
            if pipeline.name == name:
                return pipeline
        raise KeyError(name)

    def policy_for(self, pipeline: PipelineConfig | None, table: str) -> ResolvedPolicy:
        """A table's upkeep: its own ``maintenance``, its pipeline's, then the top level's."""
        general = MaintenancePolicy(
            **{n: getattr(self.maintenance, n) for n in MaintenancePolicy.model_fields}
        )
        policy = MaintenancePolicy()
        if pipeline is not None:
            policy = pipeline.settings_for(table).maintenance or policy
        return ResolvedPolicy.of(policy.over(general))

    def checkpoint_for(self, pipeline: PipelineConfig) -> str:
        """The pipeline's checkpoint: its own setting or ``<state_dir>/checkpoints/<name>``."""
        if pipeline.checkpoint:
            return pipeline.checkpoint
        return f"{self.state_dir.rstrip('/')}/checkpoints/{pipeline.name}"
