"""The tables of one pipeline: those it writes now, found at start, created on first sight.

A pipeline with one ``table`` creates it when it starts. A routed pipeline creates each table
when the first records for it arrive, with the columns those records hold a value in (each
event type's table gets its own columns), the pipeline's defaults and the table's overrides
(``pipelines[].tables.<name>``). At start it finds the tables it wrote before: the route's
fixed tables and, for a route whose names come from the records, every table whose name
the template can produce and which holds a marker of the pipeline, in whichever namespace
the records put it (the catalog is listed level by level: :meth:`TableSet.template_tables`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from frazil.config.pipeline import PipelineConfig
from frazil.config.routing import template_pattern
from frazil.config.table_settings import ResolvedTable
from frazil.errors import PipelineError
from frazil.progress import markers, offset_rules, table_markers
from frazil.route.rules import Route
from frazil.sink.evolution import TableView
from frazil.sink.iceberg import IcebergTable, iceberg_catalog, namespace
from frazil.sink.table import (
    ensure_table,
    qualified,
    table_exists,
    warn_if_laid_out_otherwise,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType


@dataclass
class Target:
    """A table the pipeline writes: its config name, qualified name and live handle."""

    name: str
    qualified: str
    table: IcebergTable
    settings: ResolvedTable
    last: markers.Marker | None = None
    #: Largest timestamps observed by the last commit, not yet in a marker.
    pending: dict[tuple[str, int], offset_rules.PartitionStats] = field(default_factory=dict)
    lagging: set[tuple[str, int]] = field(default_factory=set)
    #: When the batch of the last commit was planned (epoch ms; see ``offset_rules.valid_through``).
    planned_at_ms: int | None = None
    #: The table's columns, re-read when its schema id changes.
    view: TableView | None = None
    #: ``time.monotonic()`` of the run's last commit to the table.
    committed_at: float | None = None
    #: The table's newest marker of the pipeline when the run last looked (a batch's start,
    #: its commits): a marker found later must not be behind it.
    seen: markers.Marker | None = None


@dataclass
class TableSet:
    """Opens, finds and creates a pipeline's tables.

    Attributes:
        spark: The session.
        catalog: The Spark catalog name.
        pipeline: The pipeline.
        route: The pipeline's route.
        catalog_type: The catalog's type (``catalog.type``): whether a routed batch may
            create its new tables from a template (``jdbc`` and ``hadoop`` only). No default,
            so that no caller gets the embedded catalog's type by leaving it out.
    """

    spark: SparkSession
    catalog: str
    pipeline: PipelineConfig
    route: Route
    catalog_type: str

    def target(self, name: str) -> Target:
        """A handle on an existing table."""
        full = qualified(self.catalog, name)
        return Target(name, full, IcebergTable(self.spark, full), self.pipeline.settings_for(name))

    def in_list(self, name: str, tables: Any, index: int) -> Target:
        """A handle on a table just created, its Java ``Table`` at ``index`` of the Java list
        ``tables`` (see :meth:`frazil.sink.iceberg.IcebergTable.in_list`)."""
        full = qualified(self.catalog, name)
        return Target(
            name,
            full,
            IcebergTable.in_list(self.spark, full, tables, index),
            self.pipeline.settings_for(name),
        )

    def create(self, name: str, schema: StructType) -> Target:
        """Create the table if missing, and open it.

        Safe from several threads at once: a table or namespace another thread (or run)
        created first is used as it is (:func:`~frazil.sink.table.ensure_table`).
        """
        ensure_table(
            self.spark,
            self.catalog,
            self.pipeline.settings_for(name),
            schema,
            self.pipeline.name,
        )
        return self.target(name)

    def create_routed(self, name: str, user: StructType, with_values: set[str]) -> Target:
        """Create a table a route names for the first time, with the batch's columns that
        its records fill (and those its partitioning, sort order and identifier fields
        need), and open it."""
        from pyspark.sql.types import StructType

        settings = self.pipeline.settings_for(name)
        needed = set(with_values)
        needed |= {p.column.split(".")[0] for p in settings.partition_fields()}
        needed |= {s.column.split(".")[0] for s in settings.sort_fields()}
        needed |= set(settings.identifier_fields)
        fields = [f for f in user.fields if f.name in needed] or list(user.fields)
        return self.create(name, StructType(fields))

    def adopt(
        self,
        name: str,
        user: StructType,
        with_values: set[str],
        start: Callable[[table_markers.TableState], markers.Marker | None],
        *,
        sender: str,
        hint: str = "",
    ) -> Target:
        """Make a table the pipeline's records go to for the first time one of its tables:
        created if missing (:meth:`create_routed`), refused if it holds another writer's rows,
        and given a marker without data (``start``: where it holds everything of the
        pipeline before; None commits nothing) if it has none of the pipeline yet, so that
        the next run finds it among the pipeline's tables.

        Args:
            name: The table.
            user: The batch's user columns.
            with_values: Those holding a value in at least one of the table's records.
            start: The start marker, given the table's state.
            sender: Who sends it records, for the refusal ("the route sends records").
            hint: What the refusal suggests, appended to it.

        Raises:
            PipelineError: The table holds rows but no marker of the pipeline.
        """
        if self.exists(name):
            target = self.target(name)
            warn_if_laid_out_otherwise(target.table.java, target.settings)
        else:
            target = self.create_routed(name, user, with_values)
        state = table_markers.find_marker(target.table, self.pipeline.name)
        if state.marker is None and state.total_records > 0:
            raise PipelineError(
                f"pipeline {self.pipeline.name!r}: {sender} to table {name}, which holds "
                f"{state.total_records:,} rows but no progress marker of this pipeline: frazil "
                f"will not mix them into another writer's table{hint}"
            )
        if state.marker is None:
            marker = start(state)
            if marker is not None:
                target.table.commit_summary_only(marker.to_summary())
        return target

    def new_table_namespace(self) -> str | None:
        """The namespace the route creates its tables in: the template's, or that of most
        of its fixed tables (None: the route names no table of its own, or the records
        name the namespace)."""
        template = self.pipeline.table_template()
        if template is not None:
            head = template.rsplit(".", 1)[0]
            return None if "{" in head else head
        spaces = [n.rsplit(".", 1)[0] for n in self.route.tables if "." in n]
        return max(sorted(set(spaces)), key=spaces.count) if spaces else None

    def exists(self, name: str) -> bool:
        """Whether the table exists."""
        return table_exists(self.spark, qualified(self.catalog, name))

    def known(self) -> dict[str, Target]:
        """The tables the pipeline wrote before (and that exist now): the route's fixed
        tables, and the existing tables whose names its template can produce that hold a
        marker of the pipeline, in whatever namespace the template put them."""
        found: dict[str, Target] = {n: self.target(n) for n in self.route.tables if self.exists(n)}
        for name in self.template_tables():
            if name in found:
                continue
            target = self.target(name)
            if table_markers.find_marker(target.table, self.pipeline.name).marker is not None:
                found[name] = target
        return found

    def warn_if_written_otherwise(self, known: dict[str, Target]) -> None:
        """At a run's start: warn of the pipeline's tables (:meth:`known`) that it writes by
        key but that were created for appends (copy-on-write; their partitioning was compared
        when the route first met them, :meth:`adopt`). A one-table pipeline's table is
        checked as it is opened (:func:`~frazil.sink.table.ensure_table`)."""
        if self.pipeline.table is None and self.pipeline.defaults.write.merges:
            for target in known.values():
                warn_if_laid_out_otherwise(target.table.java, target.settings, spec=False)

    def nameable(self) -> dict[str, Target]:
        """Every existing table the route can send records to, whether it holds a marker of
        the pipeline or not (those ``--reset-offsets`` records its marker in)."""
        found: dict[str, Target] = {n: self.target(n) for n in self.route.tables if self.exists(n)}
        for name in self.template_tables():
            found.setdefault(name, self.target(name))
        return found

    def template_tables(self) -> list[str]:
        """The existing tables whose names the route's template can produce, found in the
        catalog: each namespace level the records name is listed (its children the level's
        pattern matches), each namespace found has its tables listed; a fixed level is
        looked up, not listed. Nothing for a route without a template.

        Raises:
            PipelineError: The catalog cannot list namespaces or tables.
        """
        template = self.pipeline.table_template()
        if template is None:
            return []
        *levels, table_level = template.split(".")
        ice = iceberg_catalog(self.spark, self.catalog)
        try:
            spaces = self._namespaces(ice, levels)
            table_pattern = template_pattern(table_level)
            found: list[str] = []
            for parts in spaces:
                for ident in ice.listTables(namespace(self.spark, parts)):
                    if table_pattern.fullmatch(str(ident.name())):
                        found.append(".".join([*parts, str(ident.name())]))
        except Exception as exc:  # py4j wraps the catalog's exception
            raise PipelineError(
                f"pipeline {self.pipeline.name!r}: cannot list the tables route.table "
                f"{template!r} may have written before in catalog {self.catalog!r} (needed to "
                f"restart from them): {str(exc).strip().splitlines()[0]}"
            ) from None
        return sorted(found)

    def _namespaces(self, ice: Any, levels: list[str]) -> list[list[str]]:
        """The existing namespaces the template's namespace ``levels`` can produce."""

        def exists(parts: list[str]) -> bool:
            return not parts or bool(ice.namespaceExists(namespace(self.spark, parts)))

        # Each namespace with whether it was listed (so exists) or only spelled out.
        found: list[tuple[list[str], bool]] = [([], True)]
        for level in levels:
            if "{" not in level:
                found = [([*parts, level], False) for parts, _ in found]
                continue
            pattern = template_pattern(level)
            children: list[tuple[list[str], bool]] = []
            for parts, listed in found:
                if not listed and not exists(parts):
                    continue
                for child in ice.listNamespaces(namespace(self.spark, parts)):
                    last = str(list(child.levels())[-1])
                    if pattern.fullmatch(last):
                        children.append(([*parts, last], True))
            found = children
        return [parts for parts, listed in found if listed or exists(parts)]
