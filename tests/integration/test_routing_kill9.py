"""Exactly-once across tables: kill -9 after one table of a batch committed, before another."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_routing import produce_json

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _ids(spark: Any, table: str) -> list[int]:
    try:
        return [r[0] for r in spark.sql(f"SELECT id FROM lake.{table}").collect()]
    except Exception:  # not created yet
        return []


def test_a_batch_replayed_after_a_kill_between_two_tables_commits_writes_each_record_once(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, name = f"kill-route-{unique}", f"kr_{unique}"
    # A dynamic route: both tables are created by the batch that is killed, so the restart
    # must find the one that has not committed yet (its marker made at creation).
    first, second = f"db.k{unique}_a", f"db.k{unique}_b"
    records = [{"id": n, "kind": "a" if n % 3 else "b"} for n in range(300)]
    produce_json(kafka_bootstrap, topic, records, partitions=2)
    config_path = tmp_path / "frazil.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "catalog": {"warehouse": str(lake_dir / "warehouse")},
                "kafka": {"bootstrap_servers": kafka_bootstrap},
                "state_dir": str(tmp_path / "state"),
                "spark": {"driver_memory": "1g"},
                "pipelines": [
                    {
                        "name": name,
                        "topics": [topic],
                        "schema": {"id": "long", "kind": "string"},
                        "route": {"field": "kind", "table": f"db.k{unique}_{{value}}"},
                    }
                ],
            }
        )
    )
    command = [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(config_path)]
    # The second table's write waits: the first table commits batch 0, then the kill.
    env = {**os.environ, "FRAZIL_TEST_PAUSE_BEFORE_WRITE": f"{second}:120"}
    proc = subprocess.Popen(
        [*command, "--until-caught-up"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not _ids(spark, first):
            assert proc.poll() is None, "frazil exited before the kill"
            time.sleep(0.5)
        time.sleep(1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    expected_a = sorted(r["id"] for r in records if r["kind"] == "a")
    expected_b = sorted(r["id"] for r in records if r["kind"] == "b")
    assert sorted(_ids(spark, first)) == expected_a
    assert _ids(spark, second) == []

    done = subprocess.run(
        [*command, "--until-caught-up"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr

    for table, expected in ((first, expected_a), (second, expected_b)):
        counts = Counter(_ids(spark, table))
        assert sorted(counts) == expected, table
        assert max(counts.values()) == 1, f"{table} holds duplicates"
