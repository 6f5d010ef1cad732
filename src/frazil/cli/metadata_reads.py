"""The catalog for the commands that read the tables without starting Spark."""

from __future__ import annotations

import os
from typing import Any

from frazil.config.models import FrazilConfig


def metadata_catalog(config: FrazilConfig) -> Any | None:
    """The config's catalog opened with PyIceberg for reads without Spark, or None where
    PyIceberg does not open it the same way (a JDBC server, a Hadoop catalog), or where
    ``FRAZIL_READS=spark`` asks for Spark's metadata tables.

    Raises:
        ServiceError: The object store or the REST catalog does not answer, or refuses the
            credentials (one line, as ``frazil run`` says it).
    """
    from frazil.engine.reachable import check_services
    from frazil.observe.catalog import pyiceberg_catalog, readable
    from frazil.observe.status import check_reads

    if not readable(config) or os.environ.get("FRAZIL_READS", "").lower() == "spark":
        return None
    check_services(config, spark=False)
    catalog = pyiceberg_catalog(config)
    check_reads(config, catalog)
    return catalog
