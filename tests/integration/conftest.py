"""Integration fixtures: one SparkSession and one Iceberg warehouse per test session."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from frazil.config import FrazilConfig, parse_config

# The local production-shaped stack (object store, REST catalog, Spark cluster), started
# lazily per session: see tests/integration/stack.py.
from tests.integration.stack import stack  # noqa: F401

#: A secret in the session's Spark settings, which Spark's UI must never show.
SPARK_SECRET = "spark-ui-secret-value"


@pytest.fixture(scope="session")
def lake_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lake")


@pytest.fixture(scope="session")
def make_config(lake_dir: Path, kafka_bootstrap: str) -> Callable[..., FrazilConfig]:
    """Build a config on the session's warehouse and broker; pipelines get unique names."""

    def build(pipelines: list[dict[str, Any]], **top: Any) -> FrazilConfig:
        data: dict[str, Any] = {
            "catalog": {"warehouse": str(lake_dir / "warehouse")},
            "kafka": {"bootstrap_servers": kafka_bootstrap},
            "state_dir": str(lake_dir / "state"),
            "spark": {"driver_memory": "1g"},
            "pipelines": pipelines,
        }
        data.update(top)
        return parse_config(data, base_dir=lake_dir)

    return build


@pytest.fixture(scope="session")
def spark(make_config: Callable[..., FrazilConfig], lake_dir: Path) -> Iterator[Any]:
    from frazil.engine.session import build_spark

    config = make_config(
        [{"name": "boot", "topics": ["boot"], "table": "db.boot"}],
        catalog={
            "warehouse": str(lake_dir / "warehouse"),
            # Unused by the local file IO; there so the Spark UI test can look for it.
            "properties": {"s3.secret-access-key": SPARK_SECRET},
        },
        spark={"driver_memory": "1g", "ui": True},  # the secrets test reads the UI
    )
    session = build_spark(config)
    yield session
    session.stop()


@pytest.fixture
def unique() -> str:
    """A short unique suffix for topics, tables and pipeline names."""
    return uuid.uuid4().hex[:8]
