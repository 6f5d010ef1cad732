"""Frozen pydantic models of the config file.

Every model forbids unknown keys, so a typo is reported with its key path instead of being
silently ignored. Relative paths are resolved against the config file's folder by the loader.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from frazil.config.durations import parse_duration
from frazil.config.partitioning import PartitionField, parse_partition_field
from frazil.config.types import TypeSyntaxError, to_spark_ddl

_IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")

#: Kafka client options that Spark's Kafka source manages itself and refuses.
_SPARK_MANAGED_KAFKA_KEYS = {
    "group.id",
    "auto.offset.reset",
    "key.deserializer",
    "value.deserializer",
    "enable.auto.commit",
    "interceptor.classes",
}

KafkaMetadataColumn = Literal["topic", "partition", "offset", "timestamp", "key", "headers"]


def _check_topic(topic: str) -> str:
    if not _TOPIC.match(topic):
        raise ValueError(
            f"{topic!r} is not a valid Kafka topic name "
            "(letters, digits, '.', '_', '-'; at most 249)"
        )
    return topic


def _check_partition_entry(entry: str) -> str:
    parse_partition_field(entry)
    return entry


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
    uri: str | None = None
    properties: dict[str, str] = Field(default_factory=dict)

    def resolved_uri(self) -> str:
        """The catalog URI; for the embedded JDBC catalog, the SQLite file in the warehouse."""
        if self.uri:
            return self.uri
        if self.type == "jdbc":
            return f"jdbc:sqlite:{self.warehouse.rstrip('/')}/catalog.db"
        return ""


class KafkaConfig(_Frozen):
    """How to reach Kafka. ``properties`` pass through to the Kafka client (security etc.)."""

    bootstrap_servers: Annotated[str, Field(min_length=1)] = "127.0.0.1:9092"
    properties: dict[str, str] = Field(default_factory=dict)

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


class SparkConfig(_Frozen):
    """The Spark application: ``local[2]`` by default, or a cluster master URL."""

    master: str = "local[2]"
    app_name: str = "frazil"
    driver_memory: Annotated[str, Field(pattern=r"^\d+[kmgKMG]$")] = "2g"
    conf: dict[str, str] = Field(default_factory=dict)


class PipelineConfig(_Frozen):
    """One stream: Kafka topics, how to decode them, and the Iceberg table they land in."""

    name: Annotated[str, Field(pattern=_IDENT)]
    topics: list[Annotated[str, AfterValidator(_check_topic)]] | None = None
    topic_pattern: str | None = None
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    max_offsets_per_trigger: Annotated[int, Field(gt=0)] | None = None
    min_partitions: Annotated[int, Field(gt=0)] | None = None
    format: Literal["json"] = "json"
    schema_: dict[str, str] | None = Field(default=None, alias="schema")
    timestamp_format: str | None = None
    table: str
    partition_by: list[Annotated[str, AfterValidator(_check_partition_entry)]] = Field(
        default_factory=list
    )
    table_properties: dict[str, str] = Field(default_factory=dict)
    kafka_metadata: list[KafkaMetadataColumn] = Field(default_factory=list)
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

    @field_validator("schema_")
    @classmethod
    def _check_schema(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("must declare at least one field, or be omitted to infer it")
        for field_name, type_text in value.items():
            if not re.match(_IDENT, field_name):
                raise ValueError(f"field name {field_name!r} must be letters, digits and '_'")
            try:
                to_spark_ddl(type_text)
            except TypeSyntaxError as exc:
                raise ValueError(f"field {field_name!r}: {exc}") from None
        return value

    @field_validator("table")
    @classmethod
    def _check_table(cls, value: str) -> str:
        if not _TABLE.match(value):
            raise ValueError(f"{value!r} must be namespace.table, e.g. db.payments")
        return value

    @field_validator("trigger")
    @classmethod
    def _check_trigger(cls, value: str) -> str:
        seconds = parse_duration(value)
        if seconds <= 0:
            raise ValueError("must be longer than zero")
        return value

    @model_validator(mode="after")
    def _check_cross_fields(self) -> PipelineConfig:
        if (self.topics is None) == (self.topic_pattern is None):
            raise ValueError("set exactly one of 'topics' or 'topic_pattern'")
        if self.schema_ is not None:
            for field in self.partition_fields():
                root = field.column.split(".")[0]
                if root not in self.schema_:
                    raise ValueError(
                        f"partition_by column {field.column!r} is not in the schema "
                        f"(fields: {', '.join(self.schema_)})"
                    )
        return self

    def partition_fields(self) -> list[PartitionField]:
        """The parsed ``partition_by`` transforms."""
        return [parse_partition_field(entry) for entry in self.partition_by]

    def trigger_seconds(self) -> float:
        """The trigger interval in seconds."""
        return parse_duration(self.trigger)


class FrazilConfig(_Frozen):
    """The whole config file."""

    catalog: CatalogConfig = Field(default_factory=CatalogConfig)
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
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

    def pipeline(self, name: str) -> PipelineConfig:
        """The pipeline called ``name``.

        Raises:
            KeyError: No pipeline has that name.
        """
        for pipeline in self.pipelines:
            if pipeline.name == name:
                return pipeline
        raise KeyError(name)

    def checkpoint_for(self, pipeline: PipelineConfig) -> str:
        """The pipeline's checkpoint: its own setting or ``<state_dir>/checkpoints/<name>``."""
        if pipeline.checkpoint:
            return pipeline.checkpoint
        return f"{self.state_dir.rstrip('/')}/checkpoints/{pipeline.name}"
