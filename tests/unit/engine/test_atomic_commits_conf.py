"""``catalog.atomic_commits``: the REST catalog's multi-table commit, on unless switched off."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from frazil.config.models import CatalogConfig
from frazil.engine.catalog_conf import ATOMIC_COMMITS, catalog_spark_conf

REST = {"type": "rest", "uri": "http://127.0.0.1:8181", "warehouse": "s3://frazil/warehouse"}


def test_atomic_commits_are_on_by_default_and_leave_the_catalog_properties_alone() -> None:
    catalog = CatalogConfig.model_validate(REST)
    assert catalog.atomic_commits is True
    assert not any(k.endswith(ATOMIC_COMMITS) for k in catalog_spark_conf(catalog))


def test_switched_off_the_wrapping_catalog_is_told() -> None:
    catalog = CatalogConfig.model_validate({**REST, "atomic_commits": False})
    assert catalog_spark_conf(catalog)[f"spark.sql.catalog.lake.{ATOMIC_COMMITS}"] == "false"


def test_the_key_takes_a_boolean_only() -> None:
    with pytest.raises(ValidationError, match="atomic_commits"):
        CatalogConfig.model_validate({**REST, "atomic_commits": "sometimes"})


def test_the_java_side_reads_the_same_property() -> None:
    from frazil.jvm.build import SOURCES

    java = (SOURCES / "dev" / "frazil" / "iceberg" / "MarkedCatalog.java").read_text()
    assert f'ATOMIC_COMMITS = "{ATOMIC_COMMITS}"' in java
