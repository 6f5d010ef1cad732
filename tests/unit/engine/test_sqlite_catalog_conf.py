"""The embedded catalog's SQLite database runs in write-ahead-log mode (one sync per commit)."""

from __future__ import annotations

from pathlib import Path

from frazil.config.models import CatalogConfig
from frazil.engine.catalog_conf import catalog_spark_conf

KEY = "spark.sql.catalog.lake.jdbc.journal_mode"


def test_the_embedded_sqlite_catalog_uses_the_write_ahead_log(tmp_path: Path) -> None:
    catalog = CatalogConfig.model_validate({"warehouse": str(tmp_path / "lake")})
    conf = catalog_spark_conf(catalog)
    assert conf["spark.sql.catalog.lake.uri"].startswith("jdbc:sqlite:")
    assert conf[KEY] == "WAL"


def test_another_database_or_catalog_type_is_left_alone(tmp_path: Path) -> None:
    postgres = CatalogConfig.model_validate(
        {"type": "jdbc", "warehouse": str(tmp_path), "uri": "jdbc:postgresql://db/iceberg"}
    )
    rest = CatalogConfig.model_validate(
        {"type": "rest", "uri": "http://127.0.0.1:8181", "warehouse": "s3://frazil/warehouse"}
    )
    assert KEY not in catalog_spark_conf(postgres)
    assert KEY not in catalog_spark_conf(rest)


def test_the_users_catalog_property_wins(tmp_path: Path) -> None:
    catalog = CatalogConfig.model_validate(
        {"warehouse": str(tmp_path), "properties": {"jdbc.journal_mode": "DELETE"}}
    )
    assert catalog_spark_conf(catalog)[KEY] == "DELETE"
