"""Unknown commit outcomes: the REST catalog applies a commit, and the answer frazil gets is a
503, a dropped connection or nothing within its timeout (an HTTP client's retry of it then
gets a 409). frazil must look for its commit in the table before it retries or deletes a
file: every record once, and every file a snapshot refers to still there."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.fault_proxy import Faults, fault_proxy, run_until_done
from tests.integration.rest_server import rest_server
from tests.integration.test_routing import produce_json

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_commits_answered_503_dropped_or_late_after_they_applied_land_once(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    from pyiceberg.catalog import load_catalog

    topic, routed_topic = f"uo-{unique}", f"uor-{unique}"
    one, first, second = f"uo{unique}.one", f"uo{unique}.a", f"uo{unique}.b"
    produce_json(kafka_bootstrap, topic, [{"id": n, "kind": "k"} for n in range(300)])
    produce_json(kafka_bootstrap, routed_topic, [{"id": n, "kind": "k"} for n in range(300)])
    faults = Faults("mixed", every=3, skip=4, delay_s=6.0)
    with rest_server(tmp_path / "rest") as rest, fault_proxy(rest.uri, faults) as proxied:
        path = tmp_path / "frazil.yaml"
        schema = {"id": "long", "kind": "string"}
        path.write_text(
            yaml.safe_dump(
                {
                    "catalog": {
                        "type": "rest",
                        "uri": proxied,
                        "warehouse": rest.warehouse,
                        # The late answer comes after the client gave up on it.
                        "properties": {"rest.client.socket-timeout-ms": "3000"},
                    },
                    "kafka": {"bootstrap_servers": kafka_bootstrap},
                    "state_dir": str(tmp_path / "state"),
                    "spark": {"driver_memory": "1g"},
                    "pipelines": [
                        {"name": f"uo_{unique}", "topics": [topic], "table": one,
                         "schema": schema, "max_offsets_per_trigger": 40},
                        # Every record to both tables: one REST transaction per batch.
                        {"name": f"uor_{unique}", "topics": [routed_topic], "schema": schema,
                         "route": {"field": "kind", "tables": {"/.*/": [first, second]}},
                         "max_offsets_per_trigger": 40},
                    ],
                }
            )
        )  # fmt: skip
        run_until_done(path)
        assert len(faults.hit) >= 4, faults.hit
        # Read through the catalog itself, not the proxy: every file is read.
        catalog: Any = load_catalog("check", type="rest", uri=rest.uri, warehouse=rest.warehouse)
        for table in (one, first, second):
            ids = catalog.load_table(table).scan().to_arrow().column("id").to_pylist()
            counts = Counter(ids)
            assert sorted(counts) == list(range(300)), table
            assert max(counts.values()) == 1, f"{table} holds duplicates"
