"""Unknown outcomes at the object store: an upload of a table's file (a data file, one the
driver writes for the dead-letter table, a manifest) is stored, and the answer frazil gets is
a 503, a dropped connection or a late one. The upload is retried or the batch planned again,
never a file a snapshot refers to deleted: every record once in the table or the dead-letter
table, and every file there to read."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.fault_proxy import Faults, fault_proxy, run_until_done, table_uploads
from tests.integration.test_deadletter_decisions import produce_json

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_uploads_answered_503_or_dropped_after_they_were_stored_lose_nothing(
    stack: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    from pyiceberg.catalog import load_catalog

    topic, table, dead = f"osf-{unique}", f"osf_{unique}.events", f"osf_{unique}.dead"
    records: list[dict[str, Any] | str] = [{"id": n, "kind": "k"} for n in range(400)]
    for n in range(0, 400, 25):
        records[n] = f"broken {n}"  # 16 records that go to the dead letters
    produce_json(kafka_bootstrap, topic, records, partitions=2)
    addresses = stack.config("s3", "rest-catalog")
    faults = Faults("mixed", every=2, delay_s=3.0, which=table_uploads, keep_host=True)
    with fault_proxy(stack.s3_endpoint, faults) as proxied:
        config = {
            **addresses,
            "storage": {**addresses["storage"], "endpoint": proxied},
            "spark": {"master": "local[1]", "driver_memory": "1g"},
            "kafka": {"bootstrap_servers": kafka_bootstrap},
            "state_dir": str(tmp_path / "state"),
            "pipelines": [
                {
                    "name": f"osf_{unique}",
                    "topics": [topic],
                    "table": table,
                    "schema": {"id": "long", "kind": "string"},
                    "max_offsets_per_trigger": 60,
                    "errors": {"tolerance": "all", "dlq_table": dead},
                }
            ],
        }
        path = tmp_path / "frazil.yaml"
        path.write_text(yaml.safe_dump(config))
        run_until_done(path, env=stack.aws_environment())
    assert len(faults.hit) >= 4, (faults.hit, faults.commits)
    assert any(f"/osf_{unique}/dead/data/" in h for h in faults.hit), faults.hit
    assert any(f"/osf_{unique}/events/metadata/" in h for h in faults.hit), faults.hit
    # Read straight from the store, not through the proxy: every file a snapshot names.
    catalog: Any = load_catalog("check", **stack.pyiceberg_properties())
    ids = Counter(catalog.load_table(table).scan().to_arrow().column("id").to_pylist())
    broken = set(range(0, 400, 25))
    assert sorted(ids) == sorted(set(range(400)) - broken)
    assert max(ids.values()) == 1, "duplicates in the table"
    values = catalog.load_table(dead).scan().to_arrow().column("value").to_pylist()
    dead_ids = Counter(int(v.decode().split()[1]) for v in values)
    assert sorted(dead_ids) == sorted(broken)
    assert max(dead_ids.values()) == 1, "duplicates in the dead-letter table"
