"""``frazil plan``: what each pipeline would do, resolved against the real sources, no writes.

Resolves every pipeline's shape as ``frazil run`` would (schema registry, schema files, the
existing table, a sample of the topics for inferred JSON) and describes it: the decoded source
columns, each transform with the columns after it, the table's columns and the batch steps;
and warns about every column an existing table cannot take. Nothing is created or written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from frazil import columns as c
from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.engine.path_check import absent_paths
from frazil.engine.pipeline import build_pipeline
from frazil.engine.shape import batch_options
from frazil.engine.table_views import CatalogViews, TableViews
from frazil.sink.evolution import TableView, compare
from frazil.sink.iceberg import IcebergTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class TransformStep:
    """One transform: its name, what it does, and the columns after it."""

    name: str
    description: str
    schema: StructType


@dataclass(frozen=True)
class PipelineExplanation:
    """What ``frazil plan`` prints for one pipeline."""

    pipeline: str
    table: str
    table_exists: bool
    value_format: str
    value_schema_source: str
    key_format: str | None
    source_schema: StructType
    transforms: tuple[TransformStep, ...]
    table_schema: StructType
    steps: tuple[tuple[str, str], ...]
    #: The columns an existing table cannot take, in the run's words (:func:`conflicts`), and
    #: the variant paths no sampled record has.
    warnings: tuple[str, ...] = ()
    #: Where a record that cannot be written goes (the dead-letter queue, or the stop).
    bad_records: str = ""
    #: The tables the config names (``table``, a route's), each with whether it exists; a
    #: route whose tables the records name has only its fixed ones here.
    tables: tuple[tuple[str, bool], ...] = ()
    #: A one-table pipeline's existing table's columns as they are now (a table evolves
    #: past what the records first brought), else None.
    existing_schema: StructType | None = None
    #: Whether the records name tables beyond :attr:`tables` (a route's template).
    named_by_records: bool = False

    def table_state(self) -> str:
        """Whether the tables exist, in words: ``exists``, ``will be created``, or for a
        route how many of its tables exist."""
        if not self.tables:
            return "tables as the records name them"
        found = sum(1 for _, exists in self.tables if exists)
        if len(self.tables) == 1:
            state = "exists" if found else "will be created"
            if not self.named_by_records:
                return state
            state = f"{self.tables[0][0]} {state}"
        elif found == len(self.tables):
            state = f"all {found} tables exist"
        else:
            state = f"{found} of {len(self.tables)} tables exist"
        return f"{state}, others as the records name them" if self.named_by_records else state

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form (``--output json``); schemas as Spark's JSON schema."""
        return {
            "pipeline": self.pipeline,
            "table": self.table,
            "table_exists": self.table_exists,
            "format": self.value_format,
            "schema_source": self.value_schema_source,
            "key_format": self.key_format,
            "source_schema": self.source_schema.jsonValue(),
            "transforms": [
                {"name": t.name, "description": t.description, "schema": t.schema.jsonValue()}
                for t in self.transforms
            ],
            "table_schema": self.table_schema.jsonValue(),
            "steps": [{"step": name, "does": does} for name, does in self.steps],
            "warnings": list(self.warnings),
            "bad_records": self.bad_records,
            "tables": {name: exists for name, exists in self.tables},
            "existing_table_schema": (
                None if self.existing_schema is None else self.existing_schema.jsonValue()
            ),
            "tables_named_by_records": self.named_by_records,
        }


def explain(
    spark: SparkSession, config: FrazilConfig, names: list[str], views: TableViews | None = None
) -> list[PipelineExplanation]:
    """Resolve and describe the named pipelines (all if ``names`` is empty).

    Args:
        views: Where the existing tables are read (default: the session's catalog).
    """
    views = _ReadOnce(CatalogViews(spark, config.catalog.name) if views is None else views)
    result = []
    for pipeline in config.pipelines:
        if names and pipeline.name not in names:
            continue
        built = build_pipeline(spark, config, pipeline, views)
        shape, plan = built.shape, built.plan
        known = known_tables(config, pipeline)
        found = {name: views.view(name) for name in known}
        named_by_records = pipeline.table is None and (
            pipeline.table_template() is not None or bool(getattr(pipeline.route, "dynamic", False))
        )
        one = found.get(pipeline.table) if pipeline.table is not None else None
        result.append(
            PipelineExplanation(
                pipeline=pipeline.name,
                table=pipeline.describe_target(),
                table_exists=bool(found)
                and all(v is not None for v in found.values())
                and not named_by_records,
                tables=tuple((name, view is not None) for name, view in found.items()),
                existing_schema=None if one is None else c.user_schema(one.schema),
                named_by_records=named_by_records,
                value_format=pipeline.value.format,
                value_schema_source=pipeline.value.source(),
                key_format=pipeline.key.format if pipeline.key is not None else None,
                source_schema=shape.source_schema,
                transforms=tuple(
                    TransformStep(name, description, schema)
                    for name, description, schema in shape.chain.describe()
                ),
                table_schema=shape.table_schema,
                steps=tuple(plan.describe()),
                bad_records=pipeline.errors.describe(),
                warnings=(
                    *table_warnings(views, pipeline, known),
                    *conflicts(views, pipeline, shape.table_schema),
                    *absent_paths(spark, pipeline, shape.value, batch_options(config, pipeline)),
                    # What the value decoder's start met and left out (JSON's unreadable
                    # embedded schemas).
                    *getattr(shape.value, "start_notes", ()),
                ),
            )
        )
    return result


#: How long ``frazil plan`` waits for Kafka's topic list (a topic route's tables).
KAFKA_TIMEOUT_S = 3.0


def known_tables(config: FrazilConfig, pipeline: PipelineConfig) -> list[str]:
    """The tables the pipeline writes that are known before any record: its ``table``, a
    route's fixed ones, those ``tables:`` configures, and a topic route's for each topic
    it reads now (listed, or those of its ``topic_pattern`` Kafka has)."""
    from frazil.config.routing import TopicRoute
    from frazil.errors import KafkaError
    from frazil.route.rules import topic_table
    from frazil.source.clients import list_partitions

    names = pipeline.static_tables()
    route = pipeline.route
    if route is None or not getattr(route, "dynamic", False):
        return names  # every table is named in the config
    if isinstance(route, TopicRoute):
        topics = pipeline.topics
        if topics is None:
            try:
                topics = sorted(list_partitions(config, pipeline, timeout=KAFKA_TIMEOUT_S))
            except KafkaError:
                topics = []  # the plan's sampling names what is wrong with Kafka
        names += [n for n in (topic_table(route, topic) for topic in topics) if n is not None]
    # Tables the records name that the config sets up ahead.
    names += list(pipeline.tables)
    return list(dict.fromkeys(names))


def table_warnings(
    views: TableViews, pipeline: PipelineConfig, names: list[str] | None = None
) -> list[str]:
    """What the run would refuse or warn of in the pipeline's existing tables, before any
    record: a table whose markers of the pipeline a later ``--reset-offsets`` retired (the
    run refuses to start), one laid out otherwise than the config would create it (the run
    warns; :func:`~frazil.sink.table.layout_differences`). Tables a dynamic route names only
    at run time are not known here."""
    from frazil.progress.start import retired_error
    from frazil.progress.table_markers import find_markers
    from frazil.sink.iceberg import IcebergTables
    from frazil.sink.table import layout_differences

    tables = {name: views.table(name) for name in (names or pipeline.static_tables())}
    existing = {name: table for name, table in tables.items() if table is not None}
    found = _keyless_tables(pipeline, list(tables))
    if not existing:
        return found
    first = next(iter(existing.values()))
    # One walk in the JVM for all of them, as the run's start makes it.
    states = find_markers(IcebergTables(first.spark, list(existing.values())), pipeline.name)
    for (name, table), state in zip(existing.items(), states, strict=True):
        # As the start decides: a route's table without rows is not refused.
        if state.retired and (pipeline.table is not None or state.total_records > 0):
            found.append(f"the run would refuse to start: {retired_error(pipeline.name, name)}")
        found += [
            f"table {name}: {differs}"
            for differs in layout_differences(table.java, pipeline.settings_for(name))
        ]
    return found


def _keyless_tables(pipeline: PipelineConfig, names: list[str]) -> list[str]:
    """Without ``write.key``, the tables the run names that set no key of their own: their
    changes are marked (:func:`~frazil.sink.modes.change_mode`), the table never created."""
    write = pipeline.defaults.write
    if not write.merges or write.key:
        return []
    then = (
        "its changes would go to the dead-letter queue"
        if pipeline.errors.dead_letters
        else "the run would stop at its first change (errors.tolerance: none)"
    )
    return [
        f"table {name}: no key (set tables.{name}.write.key, or write.key); {then}"
        for name in names
        if not pipeline.settings_for(name).write.key
    ]


def conflicts(views: TableViews, pipeline: PipelineConfig, schema: StructType) -> list[str]:
    """The columns of the pipeline's existing tables that its records' types do not fit,
    each in the words the run marks such a record with, and what the run would then do.

    The comparison is the run's own (:func:`~frazil.sink.evolution.compare`, as each batch
    makes it before its write): a type Iceberg cannot change to, a promotion or a new column
    under ``schema_evolution: freeze``. Tables a dynamic route names only at run time are not
    known here.
    """
    found: list[str] = []
    for name in pipeline.static_tables():
        view = views.view(name)
        if view is None:
            continue
        diff = compare(c.user_schema(schema), view, pipeline.settings_for(name))
        for mismatch in diff.mismatches:
            column = mismatch.column
            if pipeline.errors.dead_letters:
                then = (
                    f"the run would send every record with a value in {column} to the "
                    "dead-letter queue"
                )
            else:
                then = (
                    f"the run would stop at the first batch with a value in {column}, "
                    "committing nothing of it (errors.tolerance: none)"
                )
            found.append(f"{mismatch.describe(name)}; {then}")
    return found


class _ReadOnce:
    """Each table's view read once (a route's tables are looked at for their state and again
    for their conflicts)."""

    def __init__(self, views: TableViews) -> None:
        self._views = views
        self._read: dict[str, TableView | None] = {}
        self._tables: dict[str, IcebergTable | None] = {}

    def view(self, name: str) -> TableView | None:
        """The table's view, or None if it does not exist."""
        if name not in self._read:
            self._read[name] = self._views.view(name)
        return self._read[name]

    def table(self, name: str) -> IcebergTable | None:
        """The table, or None if it does not exist."""
        if name not in self._tables:
            self._tables[name] = self._views.table(name)
        return self._tables[name]
