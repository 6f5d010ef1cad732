"""Exactly-once across tables: kill -9 after one table of a batch committed, before another."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.helpers import drain
from tests.integration.test_routing import produce_json

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _ids(spark: Any, table: str) -> list[int]:
    try:
        return [r[0] for r in spark.sql(f"SELECT id FROM lake.{table}").collect()]
    except Exception:  # not created yet
        return []


def _command(
    tmp_path: Path, lake_dir: Path, bootstrap: str, name: str, topic: str, template: str
) -> list[str]:
    """`frazil run` of a pipeline routing by ``kind`` to ``template`` (state in tmp_path)."""
    config_path = tmp_path / "frazil.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "catalog": {"warehouse": str(lake_dir / "warehouse")},
                "kafka": {"bootstrap_servers": bootstrap},
                "state_dir": str(tmp_path / "state"),
                "spark": {"driver_memory": "1g"},
                "pipelines": [
                    {
                        "name": name,
                        "topics": [topic],
                        "schema": {"id": "long", "kind": "string"},
                        "route": {"field": "kind", "table": template},
                    }
                ],
            }
        )
    )
    return [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(config_path)]


def _kill_once_written(spark: Any, command: list[str], paused: str, written: str) -> None:
    """Run with ``paused``'s commit held back; kill -9 once ``written`` holds rows."""
    env = {**os.environ, "FRAZIL_TEST_PAUSE_BEFORE_WRITE": f"{paused}:120"}
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
        while time.monotonic() < deadline and not _ids(spark, written):
            assert proc.poll() is None, "frazil exited before the kill"
            time.sleep(0.5)
        time.sleep(1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def _assert_once(spark: Any, table: str, expected: list[int]) -> None:
    counts = Counter(_ids(spark, table))
    assert sorted(counts) == expected, table
    assert max(counts.values()) == 1, f"{table} holds duplicates"


def test_a_batch_replayed_after_a_kill_between_two_tables_commits_writes_each_record_once(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, name = f"kill-route-{unique}", f"kr_{unique}"
    # A dynamic route: both tables are created by the batch that is killed, so the restart
    # must find the one that has not committed yet (its marker made at creation).
    first, second = f"db.k{unique}_a", f"db.k{unique}_b"
    records = [{"id": n, "kind": "a" if n % 3 else "b"} for n in range(300)]
    produce_json(kafka_bootstrap, topic, records, partitions=2)
    command = _command(tmp_path, lake_dir, kafka_bootstrap, name, topic, f"db.k{unique}_{{value}}")
    # The second table's write waits: the first table commits batch 0, then the kill.
    _kill_once_written(spark, command, paused=second, written=first)
    expected_a = sorted(r["id"] for r in records if r["kind"] == "a")
    expected_b = sorted(r["id"] for r in records if r["kind"] == "b")
    assert sorted(_ids(spark, first)) == expected_a
    assert _ids(spark, second) == []

    drain(spark, tmp_path / "frazil.yaml")  # the restart, in the session's Spark
    _assert_once(spark, first, expected_a)
    _assert_once(spark, second, expected_b)


def test_a_restart_without_the_checkpoint_after_a_kill_between_new_and_known_tables(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """The one job commits a batch's new tables before its known ones: killed in between,
    and restarted from the tables' markers alone (the state dir lost), the batch is read
    again from the known table's marker, and the new table's marker skips what it holds."""
    topic, name = f"kill-phase-{unique}", f"kp_{unique}"
    known, new = f"db.p{unique}_a", f"db.p{unique}_b"
    before = [{"id": n, "kind": "a"} for n in range(100)]
    produce_json(kafka_bootstrap, topic, before, partitions=2)
    command = _command(tmp_path, lake_dir, kafka_bootstrap, name, topic, f"db.p{unique}_{{value}}")
    drain(spark, tmp_path / "frazil.yaml")
    assert sorted(_ids(spark, known)) == list(range(100))

    after = [{"id": n, "kind": "a" if n % 2 else "b"} for n in range(100, 300)]
    produce_json(kafka_bootstrap, topic, after, partitions=2)
    # The known table's commit waits: the new table is created with its rows, then the kill.
    _kill_once_written(spark, command, paused=known, written=new)
    expected_b = sorted(r["id"] for r in after if r["kind"] == "b")
    assert sorted(_ids(spark, known)) == list(range(100))
    assert sorted(_ids(spark, new)) == expected_b

    # More records before the restart: the replayed batch runs past the new table's marker,
    # which then holds part of it (the write filters that part out, and must not count it).
    later = [{"id": n, "kind": "a" if n % 2 else "b"} for n in range(300, 320)]
    produce_json(kafka_bootstrap, topic, later, partitions=2)
    shutil.rmtree(tmp_path / "state")  # no checkpoint: the restart starts from the markers
    [report] = drain(spark, tmp_path / "frazil.yaml")
    again = after + later
    _assert_once(spark, known, list(range(100)) + [r["id"] for r in again if r["kind"] == "a"])
    _assert_once(spark, new, sorted(r["id"] for r in again if r["kind"] == "b"))
    assert report.rows_written == {known: 110, new: 10}
