"""The config file as a whole: :class:`FrazilConfig`, and its settings besides the pipelines
(catalog, Kafka, Spark, Schema Registry, metrics).

Every model forbids unknown keys, so a typo is reported with its key path instead of being
silently ignored. Relative paths are resolved against the config file's folder by the loader.
A pipeline is :class:`~frazil.config.pipeline.PipelineConfig`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from frazil.config.base import IDENT, Frozen, Setting
from frazil.config.durations import parse_duration
from frazil.config.locations import is_remote, local_path, network_file_system, on_object_store
from frazil.config.maintenance import MaintenanceConfig, MaintenancePolicy, ResolvedPolicy
from frazil.config.pipeline import PipelineConfig
from frazil.config.secrets import mask_value
from frazil.config.storage import StorageConfig, is_s3

#: Kafka client options that Spark's Kafka source manages itself and refuses.
_SPARK_MANAGED_KAFKA_KEYS = {
    "group.id",
    "auto.offset.reset",
    "key.deserializer",
    "value.deserializer",
    "enable.auto.commit",
    "interceptor.classes",
}


class CatalogConfig(Frozen):
    """Where the Iceberg tables live.

    The embedded default is Iceberg's JDBC catalog on a SQLite file inside the warehouse
    folder, which PyIceberg's SQL catalog (and through it DuckDB) opens too.
    """

    name: Annotated[str, Field(pattern=IDENT)] = "lake"
    type: Literal["jdbc", "rest", "hadoop"] = "jdbc"
    warehouse: str = "./lake"
    # validate_default: a missing uri is exactly what _check_uri must see.
    uri: str | None = Field(default=None, validate_default=True)
    properties: dict[str, Setting] = Field(default_factory=dict)
    #: Whether a routed batch's tables commit in one catalog transaction where the catalog can
    #: (``rest``: the REST multi-table commit; ``jdbc``: one database transaction); the Hadoop
    #: catalog commits each table on its own.
    atomic_commits: bool = True

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

    @model_validator(mode="after")
    def _atomic_commits_only(self) -> CatalogConfig:
        if self.type == "hadoop" and on_object_store(self.warehouse):
            raise ValueError(
                f"catalog.type hadoop cannot keep tables on an object store "
                f"({mask_value(self.warehouse)}): a Hadoop catalog commits by renaming a "
                "metadata file, which an object store does not do atomically, so two commits "
                "can both succeed and one is lost (and exactly-once with it); use "
                "catalog.type: rest (Polaris, Nessie, Lakekeeper, AWS Glue's REST endpoint) "
                "or catalog.type: jdbc with catalog.uri (PostgreSQL, MySQL)"
            )
        return self

    def warnings(self) -> list[str]:
        """What is allowed but risky: the embedded SQLite catalog on a network file system."""
        uri = self.resolved_uri()
        if self.type != "jdbc" or not uri.startswith("jdbc:sqlite:"):
            return []
        path = uri[len("jdbc:sqlite:") :]
        kind = network_file_system(path)
        if kind is None:
            return []
        return [
            f"catalog: the SQLite catalog {path} is on a network file system ({kind}), where "
            "SQLite's locks are unreliable: two writers can corrupt it or both commit; keep "
            "the warehouse on a local disk, or use catalog.type: rest or a JDBC server "
            "(catalog.uri: jdbc:postgresql://…)"
        ]

    def resolved_uri(self) -> str:
        """The catalog URI; for the embedded JDBC catalog, the SQLite file in the warehouse."""
        if self.uri:
            return self.uri
        if self.type == "jdbc":
            return f"jdbc:sqlite:{local_path(self.warehouse).rstrip('/')}/catalog.db"
        return ""


class KafkaConfig(Frozen):
    """How to reach Kafka. ``properties`` pass through to the Kafka client (security etc.)."""

    bootstrap_servers: Annotated[str, Field(min_length=1)] = "127.0.0.1:9092"
    properties: dict[str, Setting] = Field(default_factory=dict)
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
        level = value.get("isolation.level")
        if level is not None and level not in ("read_committed", "read_uncommitted"):
            raise ValueError(
                f"isolation.level is {level!r}: use read_committed (the default: records of "
                "aborted transactions are never read) or read_uncommitted"
            )
        return value


class SchemaRegistryConfig(Frozen):
    """A Confluent-compatible Schema Registry (Confluent, Apicurio's ``/apis/ccompat/v7``, …).

    ``properties`` pass through to confluent-kafka's ``SchemaRegistryClient``
    (``ssl.ca.location``, ``basic.auth.user.info``, …).
    """

    url: Annotated[str, Field(pattern=r"^https?://")]
    username: str | None = None
    password: str | None = None
    properties: dict[str, Setting] = Field(default_factory=dict)
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


class MetricsConfig(Frozen):
    """Prometheus metrics of ``frazil run`` on ``http://<host>:<port>/metrics``."""

    port: Annotated[int, Field(ge=1, le=65535)] = 9464
    host: str = "0.0.0.0"


class SparkConfig(Frozen):
    """The Spark application: ``local[2]`` by default, or a cluster master URL."""

    master: str = "local[2]"
    app_name: str = "frazil"
    driver_memory: Annotated[str, Field(pattern=r"^\d+[kmgKMG]$")] = "1g"
    ui: bool = False
    conf: dict[str, Setting] = Field(default_factory=dict)


class FrazilConfig(Frozen):
    """The whole config file."""

    catalog: CatalogConfig = Field(default_factory=CatalogConfig)
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    schema_registry: SchemaRegistryConfig | None = None
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)
    metrics: MetricsConfig | None = None
    #: The S3-compatible object store of S3 locations (None: AWS S3 with the SDK's defaults).
    storage: StorageConfig | None = None
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
    def _dead_letters_apart(self) -> FrazilConfig:
        """A dead-letter table is never a table another pipeline writes its records to (its
        columns are the dead letters'); pipelines may share one dead-letter table."""
        from frazil.config.routing import template_pattern

        for pipeline in self.pipelines:
            dead = pipeline.errors.dlq_table
            if dead is None:
                continue
            for other in self.pipelines:
                template = other.table_template()
                if other is pipeline or not (
                    dead in other.static_tables()
                    or (template is not None and template_pattern(template).fullmatch(dead))
                ):
                    continue
                raise ValueError(
                    f"pipeline {pipeline.name!r}: errors.dlq_table {dead!r} is a table pipeline "
                    f"{other.name!r} writes its records to; give the dead-letter queue a table "
                    "of its own"
                )
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

    def s3_locations(self) -> list[str]:
        """The locations of this config on an S3-compatible store: the warehouse, the state
        folder and each pipeline's own checkpoint, in that order."""
        found = [self.catalog.warehouse, self.state_dir]
        found += [p.checkpoint for p in self.pipelines if p.checkpoint]
        return [location for location in found if is_s3(location)]

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
