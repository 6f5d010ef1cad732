"""The Iceberg catalog as frazil configures it: Spark's catalog settings, the same
properties for Iceberg's catalog API, and the embedded catalog (SQLite in a local warehouse)
with the lock of its first use.

Spark's session gets these settings from :func:`~frazil.engine.session.spark_conf`; the
existing tables are read with the same properties (:mod:`frazil.engine.table_views`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from frazil.config import storage_clients
from frazil.config.locations import is_remote, is_uri, local_path
from frazil.config.models import CatalogConfig, FrazilConfig

#: The catalog wrapping Iceberg's, by catalog type (those with views need the view one: Spark
#: offers views only through a catalog that has them).
MARKED_CATALOG = {
    "jdbc": "dev.frazil.iceberg.MarkedViewCatalog",
    "rest": "dev.frazil.iceberg.MarkedViewCatalog",
    "hadoop": "dev.frazil.iceberg.MarkedCatalog",
}
#: Properties naming the catalog :data:`MARKED_CATALOG` wraps.
DELEGATE_TYPE = "frazil.delegate-type"
DELEGATE_IMPL = "frazil.delegate-impl"
#: How a JDBC catalog's URI names a SQLite database (the embedded catalog's).
SQLITE_URI = "jdbc:sqlite:"
#: Property switching off a REST catalog's multi-table commit (``MarkedCatalog``).
ATOMIC_COMMITS = "frazil.atomic-commits"


def catalog_spark_conf(catalog: CatalogConfig) -> dict[str, str]:
    """Spark settings that register ``catalog`` as an Iceberg ``SparkCatalog``.

    The embedded default is Iceberg's JDBC catalog on ``<warehouse>/catalog.db`` (SQLite),
    which PyIceberg's SQL catalog can open under the same catalog name.
    """
    prefix = f"spark.sql.catalog.{catalog.name}"
    conf = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        # Iceberg's catalog of that type, whose tables refuse a pipeline's commit planned on a
        # stale marker: the table is the lock between runs (docs/exactly-once.md).
        f"{prefix}.catalog-impl": MARKED_CATALOG[catalog.type],
        f"{prefix}.{DELEGATE_TYPE}": catalog.type,
        f"{prefix}.warehouse": _as_uri(catalog.warehouse),
        # Tables written by another process (a second frazil run, a test) must be seen at once.
        f"{prefix}.cache-enabled": "false",
    }
    if catalog.type == "jdbc":
        # V1 adds view support; without it Spark's tableExists() fails on this catalog.
        conf[f"{prefix}.jdbc.schema-version"] = "V1"
    uri = catalog.resolved_uri()
    if catalog.type == "jdbc" and uri.startswith(SQLITE_URI):
        # SQLite's write-ahead log: a commit appends to the log and syncs it once (the default
        # rollback journal syncs ~4 times and locks readers out meanwhile, so the next commit's
        # reads wait in SQLite's busy handler). A third of a routed batch's commit time went
        # there with 100 tables (bench/routing, 2026-11-26). Durability is unchanged (a commit
        # is synced before it returns); the mode is kept in the file, beside which SQLite
        # keeps catalog.db-wal and catalog.db-shm.
        conf[f"{prefix}.jdbc.journal_mode"] = "WAL"
    if not catalog.atomic_commits:
        conf[f"{prefix}.{ATOMIC_COMMITS}"] = "false"
    if uri:
        conf[f"{prefix}.uri"] = uri
    for key, value in catalog.properties.items():
        if key == "catalog-impl":
            # A catalog of the user's own, wrapped all the same.
            conf.pop(f"{prefix}.{DELEGATE_TYPE}")
            conf[f"{prefix}.{DELEGATE_IMPL}"] = value
            conf[f"{prefix}.catalog-impl"] = MARKED_CATALOG["hadoop"]
            continue
        conf[f"{prefix}.{key}"] = value
    return conf


def _as_uri(location: str) -> str:
    if is_uri(location):
        return location
    return Path(location).resolve().as_uri()


def is_embedded(config: FrazilConfig) -> bool:
    """Whether the catalog is the embedded one: SQLite in the local warehouse."""
    catalog = config.catalog
    return catalog.type == "jdbc" and not catalog.uri and not is_remote(catalog.warehouse)


def embedded_catalog_lock(config: FrazilConfig) -> contextlib.AbstractContextManager[None]:
    """A lock on the embedded catalog's warehouse, for its first use in a process.

    Iceberg's JDBC catalog creates and then migrates its SQLite tables on first use (an
    ``ALTER TABLE ... ADD COLUMN``) without a lock: ``frazil run`` and ``frazil maintain``
    started together on a new warehouse both migrated, and one stopped with "duplicate
    column name: iceberg_type".
    """
    from frazil.paths import locked

    return locked(Path(local_path(config.catalog.warehouse)) / ".catalog.lock")


def iceberg_catalog_properties(config: FrazilConfig) -> dict[str, str]:
    """The catalog's Iceberg properties, as Spark's catalog gets them
    (:func:`~frazil.engine.session.spark_conf`)."""
    prefix = f"spark.sql.catalog.{config.catalog.name}."
    props = {
        key[len(prefix) :]: value
        for key, value in catalog_spark_conf(config.catalog).items()
        if key.startswith(prefix)
    }
    for key, value in storage_clients.catalog_properties(config).items():
        props.setdefault(key, value)
    return props
