"""The catalog for the commands that read the tables without starting Spark."""

from __future__ import annotations

import os
from typing import Any

from frazil.config.models import FrazilConfig


def reads_metadata(config: FrazilConfig) -> bool:
    """Whether the tables' metadata is read with PyIceberg: it opens the config's catalog the
    same way as Spark, and ``FRAZIL_READS=spark`` does not ask for Spark's metadata tables."""
    from frazil.observe.catalog import readable

    return readable(config) and os.environ.get("FRAZIL_READS", "").lower() != "spark"


def metadata_catalog(config: FrazilConfig) -> Any | None:
    """The config's catalog opened with PyIceberg for reads without Spark, or None where
    PyIceberg does not open it the same way (a JDBC server, a Hadoop catalog), or where
    ``FRAZIL_READS=spark`` asks for Spark's metadata tables (:func:`reads_metadata`).

    Raises:
        ServiceError: The object store or the REST catalog does not answer, or refuses the
            credentials (one line, as ``frazil run`` says it).
    """
    from frazil.engine.reachable import check_services
    from frazil.observe.catalog import pyiceberg_catalog
    from frazil.observe.status import check_reads

    if not reads_metadata(config):
        return None
    check_services(config, spark=False)
    catalog = pyiceberg_catalog(config)
    check_reads(config, catalog)
    return catalog
