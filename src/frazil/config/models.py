"""Frozen pydantic models of the config file.

Every model forbids unknown keys, so a typo is reported with its key path instead of being
silently ignored. Relative paths are resolved against the config file's folder by the loader.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Literal, get_args
from urllib.parse import unquote, urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

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


def _check_partition_entry(entry: str, info: ValidationInfo) -> str:
    field = parse_partition_field(entry)
    # Missing from info.data means schema or kafka_metadata is itself invalid (and reported).
    # Transforms rename, drop and derive columns: checked against the resolved table schema
    # at start (and by frazil plan) instead.
    if info.data.get("transforms") or "transforms" not in info.data:
        return entry
    if "schema_" in info.data and "kafka_metadata" in info.data:
        root = field.column.split(".")[0]
        _check_partition_column(root, info.data["schema_"], info.data["kafka_metadata"])
    return entry


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


class TableSettings(_Frozen):
    """Settings of one table, overriding the pipeline's (``pipelines[].tables.<name>``).

    Unset keys take the pipeline's value; ``table_properties`` are merged over the
    pipeline's.
    """

    partition_by: list[Annotated[str, AfterValidator(_check_partition_text)]] | None = None
    sort_by: list[Annotated[str, AfterValidator(_check_sort_entry)]] | None = None
    identifier_fields: list[Annotated[str, AfterValidator(_check_identifier)]] | None = None
    table_properties: dict[str, str] = Field(default_factory=dict)
    schema_evolution: EvolutionPolicy | None = None
    aliases: dict[str, str] | None = None
    write: TableWrite | None = None
    maintenance: MaintenancePolicy | None = None


class ResolvedTable(_Frozen):
    """What one table of a pipeline gets: the pipeline's settings with the table's overrides."""

    name: str
    partition_by: list[str]
    sort_by: list[str]
    identifier_fields: list[str]
    table_properties: dict[str, str]
    schema_evolution: EvolutionPolicy
    aliases: dict[str, str]
    write: WriteConfig = Field(default_factory=WriteConfig)

    def partition_fields(self) -> list[PartitionField]:
        """The parsed ``partition_by`` transforms."""
        return [parse_partition_field(entry) for entry in self.partition_by]

    def sort_fields(self) -> list[SortField]:
        """The parsed ``sort_by`` fields."""
        return [parse_sort_field(entry) for entry in self.sort_by]


class PipelineConfig(_Frozen):
    """One stream: Kafka topics, how to decode them, and the Iceberg table(s) they land in."""

    name: Annotated[str, Field(pattern=_IDENT)]
    topics: list[Annotated[str, AfterValidator(_check_topic)]] | None = None
    topic_pattern: str | None = None
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    max_offsets_per_trigger: Annotated[int, Field(gt=0)] | None = None
    min_partitions: Annotated[int, Field(gt=0)] | None = None
    format: FormatName = "json"
    schema_: dict[str, str] | None = Field(default=None, alias="schema")
    schema_file: str | None = None
    subject: str | None = None
    message: str | None = None
    timestamp_format: str | None = None
    key_format: FormatName | None = None
    key_schema: dict[str, str] | None = None
    key_schema_file: str | None = None
    key_subject: str | None = None
    key_message: str | None = None
    key_column: Annotated[str, Field(pattern=_IDENT)] = "key"
    table: str | None = None
    route: RouteConfig | None = None
    # Before partition_by: its validator reads the already-validated kafka_metadata and
    # transforms.
    kafka_metadata: list[KafkaMetadataColumn] = Field(default_factory=list)
    transforms: list[TransformEntry] = Field(default_factory=list)
    partition_by: list[Annotated[str, AfterValidator(_check_partition_entry)]] = Field(
        default_factory=list
    )
    sort_by: list[Annotated[str, AfterValidator(_check_sort_entry)]] = Field(default_factory=list)
    identifier_fields: list[Annotated[str, AfterValidator(_check_identifier)]] = Field(
        default_factory=list
    )
    table_properties: dict[str, str] = Field(default_factory=dict)
    schema_evolution: EvolutionPolicy = "evolve"
    #: Source field → table column, for fields whose name differs from their column's.
    aliases: dict[str, str] = Field(default_factory=dict)
    tables: dict[str, TableSettings] = Field(default_factory=dict)
    write: WriteConfig = Field(default_factory=WriteConfig)
    maintenance: MaintenancePolicy | None = None
    errors: ErrorsConfig = Field(default_factory=ErrorsConfig)
    trigger: str = "1s"
    checkpoint: str | None = None

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

    @field_validator("schema_", "key_schema")
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

    @field_validator("table")
    @classmethod
    def _check_table(cls, value: str | None) -> str | None:
        if value is not None and not _TABLE.match(value):
            raise ValueError(f"{value!r} must be namespace.table, e.g. db.payments")
        return value

    @field_validator("tables")
    @classmethod
    def _check_tables(cls, value: dict[str, TableSettings]) -> dict[str, TableSettings]:
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

    @model_validator(mode="after")
    def _check_cross_fields(self) -> PipelineConfig:
        if (self.topics is None) == (self.topic_pattern is None):
            raise ValueError("set exactly one of 'topics' or 'topic_pattern'")
        if (self.table is None) == (self.route is None):
            raise ValueError(
                "set exactly one of 'table' (every record to one table) or 'route' "
                "(records to tables by field or topic)"
            )
        _check_schema_source("", self.format, self.schema_, self.schema_file, self.message)
        if self.key_format is None:
            for key in ("key_schema", "key_schema_file", "key_subject", "key_message"):
                if getattr(self, key) is not None:
                    raise ValueError(f"'{key}' needs 'key_format'")
        else:
            _check_schema_source(
                "key_", self.key_format, self.key_schema, self.key_schema_file, self.key_message
            )
        if self.format != "json" and self.timestamp_format is not None:
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
        return self

    def _check_write(self) -> None:
        write = self.write
        if write.tombstones == "delete" and self.key_format is None:
            raise ValueError(
                "write.tombstones 'delete' needs 'key_format': a tombstone names its row by "
                "its Kafka key"
            )
        if write.debezium and self.format not in ("json", "avro"):
            raise ValueError(
                f"write.debezium reads Debezium envelopes as json or avro, not {self.format}"
            )
        for name, own in self.tables.items():
            if own.write is not None and not write.merges:
                raise ValueError(
                    f"tables.{name}.write: a table's key and order_by apply to pipelines with "
                    "write.mode upsert or cdc"
                )
        if write.merges and self.identifier_fields and self.identifier_fields != write.key:
            raise ValueError(
                "identifier_fields must equal write.key (or be left out): an upsert or CDC "
                "table is identified by its key"
            )

    def value_source(self) -> str:
        """Where the value schema comes from: declared, file, registry or inferred (json)."""
        return _source(self.format, self.schema_, self.schema_file, self.subject)

    def key_source(self) -> str | None:
        """Where the key schema comes from, or None without ``key_format``."""
        if self.key_format is None:
            return None
        return _source(self.key_format, self.key_schema, self.key_schema_file, self.key_subject)

    def value_subject(self) -> str | None:
        """The registry subject of the value schema (``<first topic>-value`` by default)."""
        if self.subject:
            return self.subject
        return f"{self.topics[0]}-value" if self.topics else None

    def key_subject_name(self) -> str | None:
        """The registry subject of the key schema (``<first topic>-key`` by default)."""
        if self.key_subject:
            return self.key_subject
        return f"{self.topics[0]}-key" if self.topics else None

    def partition_fields(self) -> list[PartitionField]:
        """The parsed ``partition_by`` transforms."""
        return [parse_partition_field(entry) for entry in self.partition_by]

    @property
    def routed(self) -> bool:
        """Whether records go to tables by a route (rather than all to ``table``)."""
        return self.route is not None

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
        """One table's settings: the pipeline's, with ``tables.<table>`` over them."""
        own = self.tables.get(table, TableSettings())
        write = self.write
        if own.write is not None:
            write = write.model_copy(
                update={
                    k: v
                    for k, v in (("key", own.write.key), ("order_by", own.write.order_by))
                    if v is not None
                }
            )
        identifiers = list(
            own.identifier_fields if own.identifier_fields is not None else self.identifier_fields
        )
        properties = {**self.table_properties, **own.table_properties}
        if write.merges:
            identifiers = identifiers or list(write.key)
            properties = {**MERGE_ON_READ_PROPERTIES, **properties}
        return ResolvedTable(
            name=table,
            partition_by=list(
                own.partition_by if own.partition_by is not None else self.partition_by
            ),
            sort_by=list(own.sort_by if own.sort_by is not None else self.sort_by),
            identifier_fields=identifiers,
            table_properties=properties,
            schema_evolution=own.schema_evolution or self.schema_evolution,
            aliases=dict(own.aliases if own.aliases is not None else self.aliases),
            write=write,
        )

    def trigger_seconds(self) -> float:
        """The trigger interval in seconds."""
        return parse_duration(self.trigger)


def _source(fmt: str, schema: object, schema_file: str | None, subject: str | None) -> str:
    if fmt in ("string", "bytes"):
        return "none"
    if schema is not None:
        return "declared"
    if schema_file is not None:
        return "file"
    if fmt == "json" and subject is None:
        return "inferred"
    return "registry"


def _check_schema_source(
    prefix: str, fmt: str, schema: object, schema_file: str | None, message: str | None
) -> None:
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
            for what, source in (
                ("values", pipeline.value_source()),
                ("keys", pipeline.key_source()),
            ):
                if source == "registry":
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
            own = pipeline.tables.get(table)
            if own is not None and own.maintenance is not None:
                policy = own.maintenance
            if pipeline.maintenance is not None:
                policy = policy.over(pipeline.maintenance)
        return ResolvedPolicy.of(policy.over(general))

    def checkpoint_for(self, pipeline: PipelineConfig) -> str:
        """The pipeline's checkpoint: its own setting or ``<state_dir>/checkpoints/<name>``."""
        if pipeline.checkpoint:
            return pipeline.checkpoint
        return f"{self.state_dir.rstrip('/')}/checkpoints/{pipeline.name}"
