"""One pipeline of the config: :class:`PipelineConfig`, and the checks that span its keys
(``partition_by`` columns against the schema and ``kafka_metadata``, settings that only fit
together).

Its groups live in modules of their own: :mod:`frazil.config.decoding` (``value``, ``key``),
:mod:`frazil.config.table_settings` (``defaults``, ``tables``), and
:mod:`frazil.config.flat_keys`, which maps the flat keys the config writes to them and back.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails

from frazil.columns import METADATA_PREFIX
from frazil.config.base import IDENT, Frozen, check_regex
from frazil.config.decoding import Decoding, check_schema_source, each_field_problem
from frazil.config.durations import parse_duration
from frazil.config.errors import ErrorsConfig
from frazil.config.flat_keys import (
    KEY_SETTINGS,
    as_reported,
    as_written,
    flatten,
    gather,
    is_unknown_key,
)
from frazil.config.partitioning import parse_partition_field
from frazil.config.routing import (
    RouteConfig,
    StaticRoute,
    TopicRoute,
    check_table_name,
    template_pattern,
)
from frazil.config.table_settings import INHERITED, ResolvedTable, TableSettings
from frazil.config.transforms import TransformEntry
from frazil.config.writes import TableWrite, WriteConfig

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")

#: Each micro-batch is at least one Iceberg commit: faster triggers pile up snapshots and
#: metadata files faster than they are worth, and Spark's own per-batch work takes about this.
MIN_TRIGGER_MS = 100

KafkaMetadataColumn = Literal["topic", "partition", "offset", "timestamp", "key", "headers"]
KAFKA_METADATA_COLUMNS: tuple[str, ...] = get_args(KafkaMetadataColumn)


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


def _partition_column_errors(
    data: dict[Any, Any], found: list[InitErrorDetails]
) -> list[InitErrorDetails]:
    """``partition_by`` columns missing from the declared schema and the Kafka metadata.

    Checked for each entry that parses, once the schema, ``kafka_metadata`` and
    ``transforms`` are valid (the schema's own error is the one to fix). Transforms rename,
    drop and derive columns: with them, partition columns are checked against the resolved
    table schema at start (and by ``frazil plan``) instead.
    """
    failed = {error["loc"] for error in found if not is_unknown_key(error)}
    heads = {loc[0] for loc in failed if loc}
    entries = data.get("partition_by")
    schema = data["schema"] if "schema" in data else data.get("schema_")
    variant = data.get("variant")
    if isinstance(schema, dict) and isinstance(variant, str):
        # The variant column of the rest, whose paths partition_by may read.
        schema = {**schema, variant: "variant"}
    if (
        heads & {"kafka_metadata", "transforms"}
        # A field whose type is wrong still names a column; a schema that is not a mapping
        # of fields names none.
        or failed & {("schema",), ("schema_",)}
        or (schema is not None and not isinstance(schema, dict))
        or data.get("transforms")
        or not isinstance(entries, list)
        or ("partition_by",) in failed
    ):
        return []
    kafka_metadata = data.get("kafka_metadata", [])
    errors = []
    for index, entry in enumerate(entries):
        if ("partition_by", index) in failed:
            continue
        root = parse_partition_field(entry).reads.split(".")[0]
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


#: ``first_batch_max_offsets`` unless set: a batch a cold JVM (JIT not warmed, first Iceberg
#: commit) decodes and commits in a second or two, where a first batch of 500k records took
#: 6-9 s (docs/benchmarks.md, 2026-11-22).
DEFAULT_FIRST_BATCH_MAX_OFFSETS = 20_000


class PipelineConfig(Frozen):
    """One stream: Kafka topics, how to decode them, and the Iceberg table(s) they land in.

    The config writes every key flat under the pipeline; the model gathers them in groups:
    ``value`` and ``key`` from ``format``, ``schema``, … and ``key_format``,
    ``key_schema``, …; ``defaults`` from ``partition_by``, ``sort_by``, …, ``write`` and
    ``maintenance``. Problems name the keys as written (``pipelines[0].key_schema``), in
    the order of :data:`frazil.config.flat_keys.LAYOUT`, and a dump writes them flat again.

    Attributes:
        value: How the records' values are decoded.
        key: How their keys are decoded; None without ``key_format``.
        defaults: The settings of each table the pipeline writes, unless ``tables`` says
            otherwise; ``defaults.write`` is the pipeline's write mode.
        tables: Per-table overrides, by table name (:meth:`settings_for`).
    """

    name: Annotated[str, Field(pattern=IDENT)]
    topics: list[Annotated[str, AfterValidator(_check_topic)]] | None = None
    topic_pattern: str | None = None
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    max_offsets_per_trigger: Annotated[int, Field(gt=0)] | None = None
    #: Most records in the first micro-batch of a run with a larger backlog, so that a cold
    #: JVM commits within seconds; later batches take ``max_offsets_per_trigger`` (or all).
    #: ``0`` turns it off. See :meth:`frazil.engine.pipeline_run.PipelineRun.start`.
    first_batch_max_offsets: Annotated[int, Field(ge=0)] = DEFAULT_FIRST_BATCH_MAX_OFFSETS
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
    #: How long after its timestamp a record may still reach a partition's readable end
    #: (producer retries, transactions): a partition read to its end holds valid-through back
    #: by this much at most. See docs/exactly-once.md#valid-through.
    valid_through_slack: str = "120s"
    # key_column given without key_format: unused, but dumped as it was written.
    _idle_key_column: str | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _from_flat_keys(
        cls, data: Any, handler: ModelWrapValidatorHandler[PipelineConfig]
    ) -> PipelineConfig:
        if not isinstance(data, dict):
            return handler(data)
        grouped, key, misplaced = gather(data)
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
        errors = each_field_problem(as_written(found, data, misplaced), data)
        errors += _partition_column_errors(data, errors)
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, as_reported(errors, data))
        assert pipeline is not None
        given = [f"key_{name}" for name in KEY_SETTINGS if key.get(name) is not None]
        pipeline._check_together(given if keyless else [])
        if keyless:
            pipeline._idle_key_column = key.get("column")
        return pipeline

    @model_serializer(mode="wrap")
    def _to_flat_keys(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        data = handler(self)
        # A table's overrides dump what they leave to the pipeline as null, as they read it.
        for name, own in self.tables.items():
            dumped = data["tables"][name]
            for key in INHERITED:
                if key in own.model_fields_set:
                    continue
                if info.exclude_none:
                    dumped.pop(key, None)
                else:
                    dumped[key] = None
        # Without key_format, the key's settings dump as they always did: only key_column set.
        idle_key_column = (self._idle_key_column or "key") if self.key is None else None
        return flatten(data, idle_key_column, info)

    @property
    def key_column(self) -> str:
        """The column the decoded key goes to (``key_column``; ``key`` by default), as
        written even without ``key_format``, where it names no column."""
        if self.key is not None:
            return self.key.column
        return self._idle_key_column or "key"

    @field_validator("topics")
    @classmethod
    def _check_topics(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("must list at least one topic")
        return value

    @field_validator("topic_pattern")
    @classmethod
    def _check_pattern(cls, value: str | None) -> str | None:
        return None if value is None else check_regex(value)

    @field_validator("table")
    @classmethod
    def _check_table(cls, value: str | None) -> str | None:
        return None if value is None else check_table_name(value)

    @field_validator("tables", mode="before")
    @classmethod
    def _null_is_unset(cls, value: Any) -> Any:
        # A table's key set to null takes the pipeline's value, as a key left out does.
        if not isinstance(value, dict):
            return value
        return {
            name: (
                {k: v for k, v in own.items() if v is not None or k not in INHERITED}
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

    @field_validator("valid_through_slack")
    @classmethod
    def _check_slack(cls, value: str) -> str:
        if parse_duration(value) < 0:
            raise ValueError("must not be negative")
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
        check_schema_source(self.value)
        if keyless:
            raise ValueError(f"'{keyless[0]}' needs 'key_format'")
        if self.key is not None:
            check_schema_source(self.key)
        if self.value.format != "json" and self.value.timestamp_format is not None:
            raise ValueError("'timestamp_format' applies to format json only")
        if (
            self.value.format != "json"
            and (self.key is None or self.key.format != "json")
            and "json_decoder" in self.value.model_fields_set
        ):
            raise ValueError("'json_decoder' applies to format json (or key_format json) only")
        if self.value.variant is not None:
            self._check_variant()
        if self.errors.dlq_table is not None and self.errors.dlq_table in self.static_tables():
            raise ValueError(
                f"errors.dlq_table {self.errors.dlq_table!r} is also a table the pipeline "
                "writes its records to; give the dead-letter queue a table of its own"
            )
        template = self.table_template()
        if (
            self.errors.dlq_table is not None
            and template is not None
            and template_pattern(template).fullmatch(self.errors.dlq_table)
        ):
            raise ValueError(
                f"errors.dlq_table {self.errors.dlq_table!r} is a name route.table "
                f"{template!r} can produce for the records' tables; give the dead-letter queue "
                "a table the route cannot name"
            )
        if getattr(self.route, "default", None) == "dlq" and not self.errors.dead_letters:
            raise ValueError(
                "route default 'dlq' needs a dead-letter queue: set errors.tolerance: all "
                "with errors.dlq_topic or errors.dlq_table"
            )
        self._check_write()

    def _check_variant(self) -> None:
        """``variant`` lands JSON whole into a table of format version 3 (Iceberg's first with
        the ``variant`` type), parsed by Spark's ``parse_json`` (``json_decoder`` still picks
        the decoder of a JSON key)."""
        if self.defaults.write.debezium:
            raise ValueError(
                "write.debezium reads Debezium envelopes into the row's columns; 'variant' lands "
                "values whole"
            )
        owners = [("table_properties", self.defaults.table_properties)] + [
            (f"tables.{name}.table_properties", own.table_properties or {})
            for name, own in self.tables.items()
        ]
        for key, properties in owners:
            version = properties.get("format-version")
            if version is not None and version.strip() in ("1", "2"):
                raise ValueError(
                    f"{key} format-version {version.strip()}: a 'variant' column needs Iceberg "
                    "format version 3 (the default for such tables)"
                )

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
        if write.merges and not write.key:
            self._check_table_keys(write.mode)
        identifiers = self.defaults.identifier_fields
        if write.merges and identifiers and identifiers != write.key:
            raise ValueError(
                "identifier_fields must equal write.key (or be left out): an upsert or CDC "
                "table is identified by its key"
            )

    def _check_table_keys(self, mode: str) -> None:
        """Without ``write.key``, every table the route names from the config alone sets its
        own; a table the records name (a topic's, a field value's) and ``tables:`` does not
        list gets its changes marked keyless when they come."""
        keyed = {n for n, own in self.tables.items() if own.write is not None and own.write.key}
        if self.route is None or not keyed:
            raise ValueError(
                f"write: mode {mode} needs 'key': the columns identifying a row (a routed "
                "pipeline may instead set each table's own in tables.<name>.write.key)"
            )
        for name in self.route.table_names():
            if name not in keyed:
                raise ValueError(
                    f"tables.{name}.write.key: the route sends changes to {name} and "
                    f"write.key is not set: mode {mode} needs the columns identifying its rows"
                )

    def static_tables(self) -> list[str]:
        """The tables known from the config alone: ``table``, or those the route names."""
        if self.table is not None:
            return [self.table]
        assert self.route is not None
        return self.route.table_names()

    def table_template(self) -> str | None:
        """The route's table template when its names come from the records, else None."""
        template = getattr(self.route, "table", None)
        if not isinstance(template, str) or "{" not in template:
            return None
        return template

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

    def slack_ms(self) -> int:
        """``valid_through_slack`` in milliseconds."""
        return int(parse_duration(self.valid_through_slack) * 1000)

    def trigger_seconds(self) -> float:
        """The trigger interval in seconds."""
        return parse_duration(self.trigger)
