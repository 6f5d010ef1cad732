"""The config's catalog and tables read with PyIceberg, without Spark: which tables the
pipelines write, and their health.

The read-only commands (``status``, ``tables``, ``table health``, ``optimize --dry-run``,
``dlq show``) and ``frazil ui`` answer from the tables' metadata: opening the catalog and a
table's metadata takes milliseconds where a Spark application takes seconds to start. They
find a pipeline's tables the way ``frazil run`` does at start
(:meth:`frazil.sink.tables.TableSet.known`): the route's fixed tables, and the tables its
template can produce that hold a marker of the pipeline, level by level of the namespace.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from frazil.config.catalog_clients import open_rest_catalog
from frazil.config.locations import local_path
from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.config.routing import template_pattern
from frazil.errors import FrazilError
from frazil.maintenance.facts import pyiceberg_facts, summary_of
from frazil.maintenance.health import TableHealth, health_of
from frazil.maintenance.passes import TableRef, TableReport, pick, policy_of
from frazil.maintenance.planner import plan
from frazil.progress import table_markers
from frazil.progress.rows import live_rows


class CatalogReadError(FrazilError):
    """The catalog could not be read with PyIceberg (a kind it cannot open the same way)."""


def readable(config: FrazilConfig) -> bool:
    """Whether PyIceberg opens the config's catalog: a REST catalog, or the embedded SQLite
    one (a JDBC server or a Hadoop catalog is read through Spark)."""
    catalog = config.catalog
    return catalog.type == "rest" or (
        catalog.type == "jdbc" and catalog.resolved_uri().startswith("jdbc:sqlite:")
    )


def pyiceberg_catalog(config: FrazilConfig) -> Any:
    """The config's catalog opened with PyIceberg.

    Raises:
        CatalogReadError: A catalog PyIceberg cannot open the same way (Hadoop, non-SQLite
            JDBC).
    """
    from frazil.observe.variant_type import read_variant_columns

    read_variant_columns()
    catalog = config.catalog
    if catalog.type == "rest":
        # Opening asks the server for its config: credentials it refuses fail here.
        return open_rest_catalog(config)
    uri = catalog.resolved_uri()
    if readable(config):
        from pyiceberg.catalog.sql import SqlCatalog

        path = uri[len("jdbc:sqlite:") :]
        if not os.path.exists(path):
            # No run has made the catalog yet: nothing to read, and nothing to create.
            return NoTables()
        warehouse = local_path(catalog.warehouse)
        return SqlCatalog(catalog.name, uri=f"sqlite:///{path}", warehouse=f"file://{warehouse}")
    raise CatalogReadError(
        f"frazil status and frazil ui read the catalog with PyIceberg, which opens the "
        f"embedded SQLite catalog and REST catalogs; catalog.type {catalog.type} with "
        f"{uri or 'no uri'} is not supported yet (use frazil tables, which goes through Spark)"
    )


class NoTables:
    """A catalog not made yet (the embedded one before the first run), as PyIceberg's
    catalogs answer for one without tables."""

    def table_exists(self, name: object) -> bool:
        return False

    def namespace_exists(self, name: object) -> bool:
        return False

    def list_namespaces(self, namespace: object = ()) -> list[tuple[str, ...]]:
        return []

    def list_tables(self, namespace: object) -> list[tuple[str, ...]]:
        return []

    def load_table(self, name: str) -> Any:
        from pyiceberg.exceptions import NoSuchTableError

        raise NoSuchTableError(f"Table does not exist: {name}")


def load(catalog: Any, name: str) -> Any | None:
    """The table, or None if it does not exist (yet)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table(name)
    except NoSuchTableError:
        return None


@dataclass(frozen=True)
class _View:
    """One snapshot as :mod:`frazil.progress.markers` reads it."""

    snapshot_id: int
    summary: dict[str, str]

    def get(self, key: str) -> str | None:
        return self.summary.get(key)


class CatalogTable:
    """A table loaded with PyIceberg, as the marker rules read it
    (:class:`frazil.progress.table_markers.MarkedTable`)."""

    def __init__(self, table: Any, name: str) -> None:
        self._table = table
        self._name = name

    @property
    def name(self) -> str:
        """The table's name in the catalog."""
        return self._name

    def refresh(self) -> None:
        """Read the table's metadata again."""
        self._table = self._table.refresh()

    def current_snapshot_id(self) -> int | None:
        """The current snapshot's id, or None."""
        current = self._table.current_snapshot()
        return None if current is None else int(current.snapshot_id)

    def ancestry(self) -> Iterator[_View]:
        """The current snapshot and its ancestors, newest first."""
        from pyiceberg.table.snapshots import ancestors_of

        current = self._table.current_snapshot()
        if current is None:
            return
        for snapshot in ancestors_of(current, self._table.metadata):
            yield _View(int(snapshot.snapshot_id), summary_of(snapshot))

    def total_records(self) -> int:
        """Live rows in the current snapshot, from its summary."""
        current = self._table.current_snapshot()
        return 0 if current is None else live_rows(summary_of(current))


def pipeline_tables(catalog: Any, pipeline: PipelineConfig) -> list[str]:
    """The pipeline's tables that exist: the route's fixed tables, and those its template can
    produce that hold a marker of the pipeline (as ``frazil run`` finds them at start).

    Raises:
        CatalogReadError: The catalog cannot list namespaces or tables.
    """
    found = [n for n in pipeline.static_tables() if catalog.table_exists(n)]
    template = pipeline.table_template()
    if template is None:
        return found
    try:
        listed = template_tables(catalog, template)
    except Exception as exc:
        raise CatalogReadError(
            f"pipeline {pipeline.name!r}: cannot list the tables route.table {template!r} may "
            f"have written: {str(exc).strip().splitlines()[0] if str(exc).strip() else exc!r}"
        ) from None
    for name in listed:
        if name in found:
            continue
        table = load(catalog, name)
        if table is None:
            continue
        if table_markers.find_marker(CatalogTable(table, name), pipeline.name).marker is not None:
            found.append(name)
    return found


def template_tables(catalog: Any, template: str) -> list[str]:
    """The existing tables whose names ``template`` can produce: each namespace level the
    records name is listed (its children the level's pattern matches), a fixed level is
    looked up, not listed (as :meth:`frazil.sink.tables.TableSet.template_tables`)."""
    *levels, table_level = template.split(".")

    def exists(parts: tuple[str, ...]) -> bool:
        return not parts or bool(catalog.namespace_exists(parts))

    # Each namespace with whether it was listed (so exists) or only spelled out.
    spaces: list[tuple[tuple[str, ...], bool]] = [((), True)]
    for level in levels:
        if "{" not in level:
            spaces = [((*parts, level), False) for parts, _ in spaces]
            continue
        pattern = template_pattern(level)
        children: list[tuple[tuple[str, ...], bool]] = []
        for parts, listed in spaces:
            if not listed and not exists(parts):
                continue
            for child in catalog.list_namespaces(parts):
                last = str(tuple(child)[-1])
                if pattern.fullmatch(last):
                    children.append(((*parts, last), True))
        spaces = children
    table_pattern = template_pattern(table_level)
    found: list[str] = []
    for parts, listed in spaces:
        if not parts or (not listed and not exists(parts)):
            continue
        for ident in catalog.list_tables(parts):
            last = str(tuple(ident)[-1])
            if table_pattern.fullmatch(last):
                found.append(".".join((*parts, last)))
    return sorted(found)


def config_tables(catalog: Any, config: FrazilConfig, only: str | None = None) -> list[TableRef]:
    """:func:`frazil.maintenance.passes.config_tables` found with PyIceberg's ``catalog``
    (:func:`pyiceberg_catalog`), without Spark."""
    found: dict[str, TableRef] = {}
    for pipeline in config.pipelines:
        for name in pipeline_tables(catalog, pipeline):
            found.setdefault(name, TableRef(name, pipeline))
        dead = pipeline.errors.dlq_table
        if dead is not None and catalog.table_exists(dead):
            found.setdefault(dead, TableRef(dead, pipeline, dead_letters=True))
    return pick(found, only, config)


def measure(catalog: Any, config: FrazilConfig, ref: TableRef) -> TableHealth:
    """:func:`frazil.maintenance.passes.measure` from the table's metadata, read with
    PyIceberg's ``catalog``."""
    table = catalog.load_table(ref.name)
    facts = pyiceberg_facts(table, ref.name)
    return health_of(facts, policy_of(config, ref))


def plan_pass(catalog: Any, config: FrazilConfig, tables: list[TableRef]) -> list[TableReport]:
    """A dry run's reports (:func:`frazil.maintenance.passes.run_pass` with ``dry_run``) from
    the tables' metadata, read with PyIceberg, without Spark."""
    reports: list[TableReport] = []
    for ref in tables:
        before = measure(catalog, config, ref)
        reports.append(TableReport(ref.name, before, plan(before, policy_of(config, ref))))
    return reports
