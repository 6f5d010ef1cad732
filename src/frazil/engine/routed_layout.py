"""The routed job's layout: each row of a routed batch given its table's kind and shape and
a task that writes whole tables, and the template of the tables a batch meets first.

The layout is built once per batch shape and table set (:class:`Layout`), from the known
tables' write columns (:func:`table_columns`, :func:`build_layout`) and, where the pipeline's
defaults allow the job to create tables, a staged table those are created like
(:class:`Template`, :func:`make_template`). :mod:`frazil.engine.routed_job` runs the job
with it, sized by :mod:`frazil.engine.routed_sizing`'s guesses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from frazil import columns as c
from frazil.config.pipeline import PipelineConfig
from frazil.config.table_settings import ResolvedTable
from frazil.jvm.columns import jvm_column
from frazil.sink.conform import WriteColumns, write_columns
from frazil.sink.evolution import TableView, compare, spark_schema

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

# The contract with the JVM helper: ``RoutedWrites`` reads the layout's columns by position
# and the kinds by value, with constants of the same names and values as these
# (tests/unit/engine/test_routed_layout.py reads them from the Java source and compares).

#: A row's kind: the index of the table shape holding its values, or a code for a row the
#: job does not write: a record with an error, one the route matched to no table, one
#: dropped as configured, one its table must first change for, and the other tables' rows
#: of a dropped record (not counted).
BAD, UNMATCHED, FILTERED, DEFERRED, IGNORED = -1, -2, -3, -4, -5
#: The layout's columns before the table shapes: the row's kind and table, the record's
#: Kafka topic, partition and timestamp (ms), and the table's slot (its position among the
#: known tables, -1 for another).
#: Their positions; table shape ``i`` is the column at ``FIRST_STRUCT + i``.
KIND_COLUMN, TABLE_COLUMN, TOPIC_COLUMN, PARTITION_COLUMN, TIMESTAMP_COLUMN = 0, 1, 2, 3, 4
SLOT_COLUMN = 5
FIRST_STRUCT = 6
#: The fixed columns by position (the layout's first FIRST_STRUCT columns).
FIXED_COLUMNS: dict[int, str] = {
    KIND_COLUMN: c.KIND,
    TABLE_COLUMN: c.ROUTE_TABLE,
    TOPIC_COLUMN: c.TOPIC,
    PARTITION_COLUMN: c.PARTITION,
    TIMESTAMP_COLUMN: c.TIMESTAMP_MS,
    SLOT_COLUMN: c.ROUTE_SLOT,
}
#: Tasks per core that write the tables, at least: each task writes whole tables (a table's
#: rows are shuffled to one task), so that a table gets one file per partition and batch.
TASKS_PER_CORE = 2
#: At most this many tasks per core write a batch's known tables (several tables per task
#: beyond it): each task costs its scheduling and a shuffle read whatever it holds, and a
#: route's small tables written by a task each made a batch of 100 tables take ~3× one
#: table's (bench/routing, 2026-11-26); 20 tables on 2 cores still get a task each.
KNOWN_TASKS_PER_CORE = 10
#: At most this many tasks write a batch's known tables, however many cores.
MAX_KNOWN_TASKS = 200
#: Tasks of a batch that may meet new tables (how many is known only once it is written).
NEW_TABLE_TASKS = 32
#: Tasks per core for new tables once a batch of the layout met none (its table set is then
#: likely the route's whole: the NEW_TABLE_TASKS ran empty in every warm batch, ~20 of 52
#: tasks for 100 tables). A new table still lands in one of them; the next batch, with the
#: new table set, has a layout of its own and NEW_TABLE_TASKS again.
WARM_NEW_TABLE_TASKS_PER_CORE = 1
#: Table properties a new table may set and still be written by the job (Parquet only).
_FORMAT = "write.format.default"


@dataclass(frozen=True)
class Template:
    """How the job writes a table it meets first, and how that table is then created."""

    #: A staged (never committed) table with the new tables' schema, spec and properties.
    java_table: Any
    #: The properties new tables are created with (a Java map).
    properties: Any
    namespace: str
    #: Where the namespace's tables go (a new table's location is ``<this>/<name>``).
    location: str
    #: The template's columns as Spark types (the new tables' columns, in order).
    schema: StructType
    settings: ResolvedTable

    @cached_property
    def columns(self) -> list[Column]:
        """The batch's columns as the new tables take them (built once: a cast each)."""
        from pyspark.sql import functions as F

        return [F.col(f.name).cast(f.dataType).alias(f.name) for f in self.schema]

    def drops(self, with_values: frozenset[int]) -> list[str]:
        """The columns a new table does not get: those none of its records filled (the
        general way creates routed tables with the columns their records hold)."""
        if not with_values:
            return []
        needed = {p.column.split(".")[0] for p in self.settings.partition_fields()}
        names = self.schema.fieldNames()
        return [n for i, n in enumerate(names) if i not in with_values and n not in needed]


@dataclass
class Layout:
    """The job's columns for one batch shape and table set (built once, reused per batch)."""

    kind: Column
    shapes: list[Column]
    #: The known tables, sorted: a table's slot is its position here.
    names: list[str]
    template: Template | None
    #: Each row's table slot (:func:`table_slot`), which the kind and the task test.
    slot: Column | None = None
    #: The column types each shape must have: those of the tables written with it.
    expected: dict[int, list[StructType]] = field(default_factory=dict)
    _fits: bool | None = None
    #: Whether a batch written with the layout met a table first (None: none written yet).
    met_new: bool | None = None
    #: Whether the route sends a record to one table at most (no record's row to repeat).
    one_each: bool = False
    #: Each row's task, per task counts (total, known) and hot tables (built once: a branch
    #: per known table).
    _tasks: dict[tuple[int, int, tuple[str, ...]], Column] = field(default_factory=dict)

    def fits(self, frame: DataFrame) -> bool:
        """Whether each shape's columns have exactly its tables' types (Iceberg's writers
        take Spark's values as they are: where a conversion is left to Spark's own write,
        such as a map's key type, the batch goes the general way)."""
        if self._fits is None:
            actual = {f.name: f.dataType for f in frame.schema.fields}
            self._fits = all(
                _same_types(actual[_shape_name(i)], table)
                for i, tables in self.expected.items()
                for table in tables
            )
        return self._fits

    def tasks(self, cores: int) -> tuple[int, int]:
        """How many tasks write a batch, and how many of them take the known tables."""
        known = min(len(self.names), cores * KNOWN_TASKS_PER_CORE, MAX_KNOWN_TASKS)
        new = 0
        if self.template is not None:
            new = NEW_TABLE_TASKS
            if self.met_new is False:
                new = min(NEW_TABLE_TASKS, cores * WARM_NEW_TABLE_TASKS_PER_CORE)
        return max(min(cores * TASKS_PER_CORE, MAX_KNOWN_TASKS), known + new), known

    def frame(
        self,
        planned: DataFrame,
        cores: int,
        hot: tuple[str, ...] = (),
        topic: str | None = None,
    ) -> DataFrame:
        """The planned batch in the job's layout, shuffled by table; ``topic``: the batch's
        one Kafka topic, if it reads one (its rows then carry no topic name: the writer is
        told it once, :func:`~frazil.engine.routed_job.run`).

        Each known table gets a task of its own (up to KNOWN_TASKS_PER_CORE per core, then
        tables share them in turn), so that tables of like size spread evenly over the cores:
        hashed, several would often share a task while others stay empty. Tables met first
        hash to the tasks after those. A ``hot`` table
        (:func:`~frazil.engine.routed_sizing.hot_tables`) gets a task per Kafka partition,
        consecutive from one its slot hashes to.
        """
        from pyspark.sql import functions as F

        # The slot first, in a projection of its own: the kind and the task then read it as a
        # column (Spark keeps a projection apart whose expensive column the next one reads
        # more than once), so each row's table name is looked up once.
        routes = c.explode_routes(planned, self.one_each)
        if self.slot is not None:
            routes = routes.select("*", self.slot.alias(c.ROUTE_SLOT))
        else:
            routes = routes.select("*", F.lit(-1).alias(c.ROUTE_SLOT))
        with_kind = routes.select("*", self.kind.alias(c.KIND))
        total, known = self.tasks(cores)
        fixed = [F.col(FIXED_COLUMNS[i]) for i in range(FIRST_STRUCT)]
        if self.names:
            # A known table's rows carry its slot, not its name, through the shuffle (the
            # writer finds the name by slot): ~24 bytes less a row to write, compress and read.
            # The task reads the name only where the slot is -1 (:meth:`_task`).
            slot = F.col(c.ROUTE_SLOT)
            fixed[TABLE_COLUMN] = F.when(slot < 0, F.col(c.ROUTE_TABLE)).alias(c.ROUTE_TABLE)
        if topic is not None:
            fixed[TOPIC_COLUMN] = F.lit(None).cast("string").alias(c.TOPIC)
        out = with_kind.select(*fixed, *self.shapes)
        return out.repartitionById(total, self._task_of(total, known, hot))

    def _task_of(self, total: int, known: int, hot: tuple[str, ...]) -> Column:
        """:meth:`_task`, with ``hot`` tables spread over a task per Kafka partition (each
        built once per task counts and hot tables)."""
        from pyspark.sql import functions as F

        task = self._tasks.get((total, known, hot))
        if task is not None:
            return task
        if hot:
            slot = F.col(c.ROUTE_SLOT)
            # Consecutive tasks by Kafka partition from one the table's slot hashes to (hot
            # tables are known; a hash, not the slot itself, so that hot tables next to each
            # other in the names do not start at neighbouring tasks and share most of them).
            spread = F.pmod(F.pmod(F.hash(slot), F.lit(total)) + F.col(c.PARTITION), F.lit(total))
            is_hot = slot_in(slot, [self.names.index(name) for name in hot])
            task = F.when(is_hot, spread).otherwise(self._task_of(total, known, ()))
        else:
            task = self._task(total, known)
        if len(self._tasks) > 8:
            self._tasks.clear()
        self._tasks[total, known, hot] = task
        return task

    def _task(self, total: int, known: int) -> Column:
        """A row's task: its known table's own by the table's slot (with more known tables
        than ``known`` tasks, tables share them in turn), or one of the rest by a hash of its
        name. The slot is a number the row already holds: a branch per table compared each
        row's table name with every name before its own, and a hash set of the names looked
        the name up once more per row.
        """
        from pyspark.sql import functions as F

        rt = F.col(c.ROUTE_TABLE)
        spare = total - known
        others = (
            F.pmod(F.hash(rt), F.lit(spare)) + F.lit(known)
            if spare
            else F.pmod(F.hash(rt), F.lit(total))
        )
        if not self.names or not known:
            return others
        slot = F.col(c.ROUTE_SLOT)
        own = slot if len(self.names) <= known else F.pmod(slot, F.lit(known))
        return F.when(slot >= 0, own).otherwise(others)


def table_slot(column: Column, names: Sequence[str]) -> Column:
    """Each row's position of ``column``'s value among ``names``, -1 for any other value or
    null (``dev.frazil.spark.TableSlot``: one hash lookup per row), built in one JVM call."""
    return jvm_column("dev.frazil.spark.TableSlot", "column", column, json.dumps(list(names)))


def slot_in(column: Column, slots: Sequence[int]) -> Column:
    """Whether ``column`` holds one of ``slots`` (Spark's ``In`` of integers, a ``switch`` in
    generated code), built in one JVM call."""
    from pyspark.sql import functions as F

    if len(slots) == 1:
        return column == F.lit(slots[0])
    return jvm_column("dev.frazil.spark.ValueSets", "isInInts", column, json.dumps(list(slots)))


def template_eligible(settings: ResolvedTable) -> bool:
    """Whether a new table with these settings can be written by the job: appends in Parquet,
    no sort order, no identifier fields, no aliases (the general way handles those)."""
    return (
        not settings.write.merges
        and not settings.sort_by
        and not settings.identifier_fields
        and not settings.aliases
        and settings.table_properties.get(_FORMAT, "parquet").lower() == "parquet"
    )


def new_columns(user: StructType, view: TableView, settings: ResolvedTable) -> list[str]:
    """The batch columns a table has no column for (nor had: a dropped one is not new)."""
    out = []
    for f in user.fields:
        try:
            view.column_for(settings.aliases.get(f.name, f.name))
        except KeyError:
            out.append(f.name)
    return out


def table_columns(
    schema: StructType,
    user: StructType,
    view: TableView,
    settings: ResolvedTable,
    name: str,
    shared: dict[tuple[object, ...], WriteColumns],
) -> tuple[WriteColumns, list[str]] | None:
    """A known table's write columns for a batch whose new columns are all null in its rows,
    and those new columns; None if the table must change for the batch whatever its rows hold
    (a wider type, a nested field, a NOT NULL column to relax).

    Tables of the same columns share their write columns (``shared``): building them costs
    py4j round trips, and a route's tables often have the same columns.
    """
    diff = compare(user, view, settings, with_values=set())
    if diff.desired is not None:
        return None
    # The table's name is in the columns only through the reasons of the marks.
    named = bool(diff.mismatches or view.required)
    key = (
        name if named else None,
        view.schema.json(),
        # Nested fields are matched by field id: a former name at one table may be a dropped
        # field's at another of the same columns.
        view.former,
        tuple(view.required),
        tuple(sorted(diff.columns.items())),
        tuple((m.path, m.column) for m in diff.mismatches),
    )
    columns = shared.get(key)
    if columns is None:
        columns = shared[key] = write_columns(schema, view, diff, name)
    return columns, new_columns(user, view, settings)


def build_layout(
    schema: StructType,
    known: dict[str, tuple[WriteColumns, list[str]]],
    template: Template | None,
    views: dict[str, TableView],
    one_each: bool = False,
) -> Layout:
    """The kind of each row and the table shapes (one struct per distinct column list);
    ``one_each``: the route sends a record to one table at most (see :attr:`Layout.one_each`).
    """
    from pyspark.sql import functions as F

    rt = F.col(c.ROUTE_TABLE)
    # Whether the row is its record's first (the row that counts it). With one table a
    # record at most every row is, and comparing names would cost a string comparison a row.
    first = F.lit(True) if one_each else rt == F.get(F.col(c.TABLE), 0)
    written = F.col(c.OP).isin(*c.WRITTEN_OPS)
    kind = (
        F.when(F.col(c.ERROR).isNotNull(), F.when(rt.isNull() | first, BAD).otherwise(IGNORED))
        .when(rt.isNull(), F.when(F.col(c.TABLE).isNull(), UNMATCHED).otherwise(IGNORED))
        .when(~written, F.when((F.col(c.OP) == c.OP_SKIP) & first, FILTERED).otherwise(IGNORED))
    )
    shapes: list[list[Column]] = []
    shape_of: dict[int, int] = {}  # id(WriteColumns.table) -> shape index
    shape_keys: dict[tuple[str, ...], int] = {}
    plain_error = str(F.col(c.ERROR))
    own_errors: dict[int, bool] = {}  # id(WriteColumns) -> marks values of its own
    layout = Layout(kind, [], [], template, one_each=one_each)
    # Tables whose rows take the same kind expression share one branch: the table's name
    # found in a set (Spark's InSet beyond a few names), not compared with each name in turn.
    # A branch is built once per distinct (shape, new columns, own errors): each Column is a
    # py4j round trip, and a route's tables mostly share one (100 tables: ~0.15 s a layout).
    branches: dict[tuple[int, tuple[str, ...], int | None], tuple[Column, list[str]]] = {}
    for name, (columns, new) in sorted(known.items()):
        index = shape_of.get(id(columns.table))
        if index is None:
            key = tuple(str(col) for col in columns.table)
            index = shape_keys.get(key)
            if index is None:
                index = shape_keys[key] = len(shapes)
                shapes.append(list(columns.table))
            shape_of[id(columns.table)] = index
        own = own_errors.get(id(columns))
        if own is None:
            own = own_errors[id(columns)] = str(columns.error) != plain_error
        branch_key = (index, tuple(new), id(columns) if own else None)
        entry = branches.get(branch_key)
        if entry is None:
            branch: Column = F.lit(index)
            if new:
                deferred = F.lit(False)
                for n in new:
                    deferred = deferred | F.col(n).isNotNull()
                branch = F.when(deferred, DEFERRED).otherwise(branch)
            if own:
                branch = F.when(columns.error.isNotNull(), BAD).otherwise(branch)
            entry = branches[branch_key] = (branch, [])
        entry[1].append(name)
        layout.names.append(name)
        layout.expected.setdefault(index, []).append(views[name].schema)
    slot_of = {name: i for i, name in enumerate(layout.names)}
    slot = F.col(c.ROUTE_SLOT)
    for branch, names in branches.values():
        # Tested by the row's slot (a number) rather than its name: one lookup per row.
        test = slot >= 0 if len(branches) == 1 else slot_in(slot, [slot_of[n] for n in names])
        kind = kind.when(test, branch)
    layout.slot = table_slot(rt, layout.names) if layout.names else None
    if template is not None:
        kind = kind.otherwise(len(shapes))
        layout.expected[len(shapes)] = [template.schema]
        shapes.append(template.columns)
    else:
        kind = kind.otherwise(DEFERRED)
    layout.kind = kind
    layout.shapes = [
        F.when(F.col(c.KIND) == i, F.struct(*cols)).alias(_shape_name(i))
        for i, cols in enumerate(shapes)
    ]
    return layout


def _shape_name(index: int) -> str:
    return f"{c.SHAPE_PREFIX}{index}"


def _same_types(actual: Any, table: StructType) -> bool:
    """Same column names and types, nullability aside."""
    from pyspark.sql.types import StructType

    if not isinstance(actual, StructType) or len(actual.fields) != len(table.fields):
        return False
    return all(
        a.name == t.name and a.dataType.simpleString() == t.dataType.simpleString()
        for a, t in zip(actual.fields, table.fields, strict=True)
    )


def make_template(
    spark: SparkSession,
    catalog: str,
    pipeline: PipelineConfig,
    namespace: str,
    user: StructType,
) -> Template | None:
    """The template of the tables a batch creates in ``namespace``, or None if the pipeline's
    defaults ask for what the job does not write (see :func:`template_eligible`)."""
    from frazil.errors import FrazilError
    from frazil.sink.iceberg import iceberg_catalog, identifier
    from frazil.sink.table import ensure_namespace, table_layout

    staged_name = f"{namespace}.{c.STAGED_PREFIX}{pipeline.name}"
    settings = pipeline.settings_for(staged_name)
    if not template_eligible(settings) or not user.fields:
        return None
    try:
        schema, spec, _order, properties = table_layout(spark, settings, user, pipeline.name)
    except FrazilError:  # e.g. a partition column this batch lacks: the general way says so
        return None
    ensure_namespace(spark, catalog, namespace.split("."))
    staged = (
        iceberg_catalog(spark, catalog)
        .buildTable(identifier(spark, staged_name.split(".")), schema)
        .withPartitionSpec(spec)
        .withProperties(properties)
        .createTransaction()
        .table()
    )
    location = str(staged.location()).rstrip("/").rsplit("/", 1)[0]
    return Template(
        java_table=staged,
        properties=properties,
        namespace=namespace,
        location=location,
        schema=spark_schema(spark, staged.schema()),
        settings=settings,
    )
