"""A randomised chaos test of exactly-once: real operations in a seeded random order.

While records arrive on several partitions and are routed to two tables, a schedule of random
operations runs against `frazil run` processes: kill -9 (driver alone, or with its JVM),
SIGTERM, checkpoint deleted or restored from an older copy, a table rolled back while the run
goes on, compaction and snapshot expiry (Iceberg's own, and `frazil maintain`'s keeping only
what markers pin), partitions added, a second run of the pipeline with a state folder of its
own, `frazil dlq replay` next to the run, the pipeline renamed and started with
`--reset-offsets` where the old name stopped. Records are good, bad (not JSON)
or good without a field the fan-out table requires: every debit and credit also goes to a
third table. Then a drain, a last replay, and a check, record by
record, that every good record is in each of its tables exactly once, and every record that
failed is in the dead-letter table exactly once per table it failed for (once, without a
table, when it failed before routing).

CI runs a bounded slice (``FRAZIL_CHAOS_SECONDS``, default 60: a few operations, a new seed
each run). Run it longer, or replay a failing schedule, with::

    FRAZIL_CHAOS_SECONDS=1800 FRAZIL_CHAOS_SEED=1234 ./scripts/test -m slow \\
        tests/integration/test_chaos.py

The seed is printed at the start and in every failure message. ``FRAZIL_CHAOS_OPERATIONS``
(comma-separated names of :data:`OPERATIONS`) draws from some of them only.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from frazil.config import load_config
from frazil.engine.replay import replay
from frazil.generate.producer import ensure_topic
from frazil.maintenance.passes import config_tables, run_pass
from frazil.progress import markers, table_markers
from frazil.sink.iceberg import IcebergTable
from tests.integration.helpers import drain
from tests.integration.test_kill9 import FrazilProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OPERATIONS = (
    "kill9",
    "kill9_group",
    "sigterm",
    "delete_checkpoint",
    "restore_checkpoint",
    "rollback",
    "compact_expire",
    "add_partition",
    "second_run",
    "dlq_replay",
    "maintain_expire",
    "rename_reset",
)

#: One record in this many is not JSON (a dead letter before routing); one in
#: ``EXTRA_EVERY`` has no ``document``, which the fan-out table requires (an identifier
#: field): a dead letter for that table alone.
BAD_EVERY = 41
EXTRA_EVERY = 29


class Records:
    """Produces routed records at a steady pace on a thread; remembers every id by table."""

    def __init__(self, bootstrap: str, topic: str, unique: str, all_table: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        self.topic, self.unique, self.all_table = topic, unique, all_table
        self.ids: dict[str, list[str]] = {"debit": [], "credit": [], "all": []}
        #: Dead letters expected: record id → the table it failed for ("" before routing).
        self.dead: dict[str, str] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.count = 0

    def _run(self) -> None:
        while not self.stop.is_set():
            for _ in range(60):
                self._one()
            self.producer.poll(0)
            time.sleep(0.2)
        self.producer.flush(30)

    def _one(self) -> None:
        i = self.count
        self.count += 1
        kind = "debit" if i % 3 else "credit"
        ident = f"{self.unique}-{i}"
        record = {
            "id": ident,
            "type": kind,
            "created_at": "2026-01-01T00:00:00",
            "document": str(i),
            "payer": "p",
            "amount": i,
        }
        key = str(i % 97).encode()
        if i % BAD_EVERY == BAD_EVERY - 1:
            # Not JSON; its id is in its bytes, for the check.
            self.producer.produce(self.topic, f"not json {ident}".encode(), key=key)
            self.dead[ident] = ""
            return
        if i % EXTRA_EVERY == EXTRA_EVERY - 1:
            record["document"] = None
            self.dead[ident] = self.all_table
        else:
            self.ids["all"].append(ident)
        # Keyed: each key's records stay in one partition, wherever partitions are added.
        self.producer.produce(self.topic, json.dumps(record).encode(), key=key)
        self.ids[kind].append(ident)


def _config(
    path: Path, lake_dir: Path, bootstrap: str, state: Path, pipeline: dict[str, Any]
) -> None:
    path.write_text(
        yaml.safe_dump(
            {
                "catalog": {"warehouse": str(lake_dir / "warehouse")},
                "kafka": {"bootstrap_servers": bootstrap},
                "state_dir": str(state),
                "spark": {"driver_memory": "1g"},
                # `frazil maintain`'s expiry: all but what the markers pin and the last 3.
                "maintenance": {"expire": {"older_than": "1ms", "retain_last": 3}},
                "pipelines": [pipeline],
            }
        )
    )


def _stopped_at(spark: Any, tables: Any, name: str) -> set[str]:
    """The offsets of pipeline ``name``'s newest marker in each of ``tables`` (JSON)."""
    return {
        json.dumps(m.offsets if m else None, sort_keys=True)
        for m in (
            table_markers.find_marker(IcebergTable(spark, f"lake.{t}"), name).marker for t in tables
        )
    }


def _ids(spark: Any, table: str) -> list[str]:
    try:
        return [r[0] for r in spark.sql(f"SELECT id FROM lake.{table}").collect()]
    except Exception:  # not created yet
        return []


def test_random_operations_keep_every_record_exactly_once(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    seed = int(os.environ.get("FRAZIL_CHAOS_SEED") or random.SystemRandom().randrange(10**6))
    seconds = float(os.environ.get("FRAZIL_CHAOS_SECONDS") or 60)
    chosen = os.environ.get("FRAZIL_CHAOS_OPERATIONS")
    operations = tuple(chosen.split(",")) if chosen else OPERATIONS
    assert set(operations) <= set(OPERATIONS), f"operations are some of {OPERATIONS}"
    print(f"chaos seed {seed}, {seconds:.0f} s")
    rng = random.Random(seed)
    topic, name = f"chaos-{unique}", f"chaos_{unique}"
    tables = {kind: f"db.chaos_{unique}_{kind}" for kind in ("debit", "credit", "all")}
    dead_table = f"db.chaos_{unique}_dead"
    ensure_topic(kafka_bootstrap, topic, partitions=3)
    pipeline = {
        "name": name,
        "topics": [topic],
        "schema": {
            "id": "string",
            "type": "string",
            "created_at": "timestamp",
            "document": "string",
            "payer": "string",
            "amount": "long",
        },
        # A fan-out: each record to its own table and to one of every record.
        "route": {
            "field": "type",
            "tables": {kind: [tables[kind], tables["all"]] for kind in ("debit", "credit")},
        },
        "tables": {tables["all"]: {"identifier_fields": ["document"]}},
        "errors": {"tolerance": "all", "dlq_table": dead_table},
        "trigger": "1s",
        "max_offsets_per_trigger": 1500,
    }
    state, other_state = tmp_path / "state", tmp_path / "state-other"
    config, other = tmp_path / "frazil.yaml", tmp_path / "other.yaml"
    _config(config, lake_dir, kafka_bootstrap, state, pipeline)
    _config(other, lake_dir, kafka_bootstrap, other_state, pipeline)
    checkpoint = state / "checkpoints" / name
    saved = tmp_path / "saved-checkpoint"
    records = Records(kafka_bootstrap, topic, unique, tables["all"])
    records.thread.start()
    log: list[str] = []

    def fail(message: str) -> str:
        return f"seed {seed}; operations {log}: {message}"

    run: FrazilProcess | None = None
    partitions, renames = 3, 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if run is None or run.proc.poll() is not None:
                if run is not None and run.proc.returncode not in (0, -9):
                    pytest.fail(fail(f"run exited {run.proc.returncode}:\n{run.output()}"))
                run = FrazilProcess(config)
                assert run.wait_commits(1, timeout=180), fail(run.output())
            time.sleep(rng.uniform(1, 5))
            op = rng.choice(operations)
            log.append(op)
            if op in ("kill9", "kill9_group"):
                run.kill9(with_jvm=op == "kill9_group")
            elif op == "sigterm":
                run.proc.send_signal(signal.SIGTERM)
                assert run.proc.wait(180) == 0, fail(run.output())
            elif op in ("delete_checkpoint", "restore_checkpoint"):
                run.proc.send_signal(signal.SIGTERM)
                assert run.proc.wait(180) == 0, fail(run.output())
                if op == "delete_checkpoint" or not saved.exists():
                    if checkpoint.exists():
                        shutil.rmtree(saved, ignore_errors=True)
                        shutil.copytree(checkpoint, saved)  # an older copy, restored later
                    shutil.rmtree(checkpoint, ignore_errors=True)
                else:
                    shutil.rmtree(checkpoint, ignore_errors=True)
                    shutil.copytree(saved, checkpoint)
            elif op == "rollback":
                table = IcebergTable(spark, f"lake.{tables[rng.choice(list(tables))]}")
                history = list(table.ancestry())
                # Not back past the pipeline's current name: a table rolled back to before a
                # rename holds no marker of that name, and a run rightly refuses to guess
                # where to go on (it asks for --reset-offsets; docs/exactly-once.md).
                named = [i for i, s in enumerate(history) if s.get(markers.PIPELINE) == name]
                back = [s.snapshot_id for s in history][1 : min(6, max(named, default=0) + 1)]
                if back:
                    target = rng.choice(back)
                    spark.sql(
                        f"CALL lake.system.rollback_to_snapshot('{table.name[5:]}', {target})"
                    )
            elif op == "compact_expire":
                kind = rng.choice(list(tables))
                try:
                    spark.sql(f"CALL lake.system.rewrite_data_files(table => '{tables[kind]}')")
                    spark.sql(
                        f"CALL lake.system.expire_snapshots(table => '{tables[kind]}', "
                        "retain_last => 20)"
                    )
                except Exception as exc:  # a conflict with the run's commit: fine, not lost
                    log.append(f"({type(exc).__name__})")
            elif op == "add_partition" and partitions < 6:
                partitions += 1
                admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
                admin.create_partitions([NewPartitions(topic, partitions)])[topic].result(30)
            elif op == "dlq_replay":
                try:
                    replay(spark, load_config(config), load_config(config).pipelines[0])
                except Exception as exc:  # no dead-letter table yet, a replay's conflict
                    log.append(f"({type(exc).__name__}: {str(exc)[:600]})")
            elif op == "maintain_expire":
                try:
                    loaded = load_config(config)
                    for report in run_pass(spark, loaded, config_tables(spark, loaded)):
                        log.extend(f"({r.error[:300]})" for r in report.results if r.error)
                except Exception as exc:  # a conflict with the run's commit: fine, not lost
                    log.append(f"({type(exc).__name__}: {str(exc)[:300]})")
            elif op == "rename_reset":
                run.proc.send_signal(signal.SIGTERM)
                assert run.proc.wait(180) == 0, fail(run.output())
                # Where the old name stopped: each table's marker says the same after a
                # stop, unless a rollback holds one back (a drain then catches it up).
                stopped_at = _stopped_at(spark, tables.values(), name)
                if len(stopped_at) != 1:
                    drain(spark, config)
                    stopped_at = _stopped_at(spark, tables.values(), name)
                if len(stopped_at) != 1 or "null" in stopped_at:
                    log.append("(not renamed: the tables' markers differ)")
                    continue
                renames += 1
                name = pipeline["name"] = f"chaos_{unique}_r{renames}"
                _config(config, lake_dir, kafka_bootstrap, state, pipeline)
                _config(other, lake_dir, kafka_bootstrap, other_state, pipeline)
                checkpoint = state / "checkpoints" / name
                shutil.rmtree(saved, ignore_errors=True)
                run = FrazilProcess(config, "--reset-offsets", stopped_at.pop(), "--yes")
                assert run.wait_commits(1, timeout=180), fail(run.output())
            elif op == "second_run":
                second = FrazilProcess(other)
                second.wait_commits(1, timeout=90)
                time.sleep(rng.uniform(0, 4))
                if rng.random() < 0.5:
                    second.kill9(with_jvm=True)
                else:
                    second.proc.send_signal(signal.SIGTERM)
                    code = second.proc.wait(180)
                    assert code == 0 or "Another run of this pipeline" in second.output(), fail(
                        second.output()
                    )
    finally:
        records.stop.set()
        records.thread.join(60)
    assert run is not None
    if run.proc.poll() is None:
        run.proc.send_signal(signal.SIGTERM)
        assert run.proc.wait(180) == 0, fail(run.output())
    # The drain, in the session's Spark (no JVM start of its own).
    try:
        drain(spark, config)
    except Exception as exc:
        pytest.fail(fail(f"the drain failed: {exc}"))
    replay(spark, load_config(config), load_config(config).pipelines[0])
    print(f"chaos seed {seed}: operations {log}")
    dead = [
        (str(r[0]), r[1] or "")
        for r in spark.sql(
            f"SELECT CASE WHEN stage = 'decode' THEN substring(CAST(value AS STRING), 10) "
            f"ELSE get_json_object(CAST(value AS STRING), '$.id') END, target_table "
            f"FROM lake.{dead_table}"
        ).collect()
    ]
    repeated = [d for d, n in Counter(dead).items() if n > 1]
    assert not repeated, fail(f"dead letters twice, e.g. {repeated[:3]}")
    assert dict(dead) == records.dead, fail(
        f"dead letters: {len(dead)} found, {len(records.dead)} expected; "
        f"missing {sorted(set(records.dead) - dict(dead).keys())[:3]}, "
        f"unexpected {sorted(dict(dead).keys() - set(records.dead))[:3]}"
    )
    for kind, table in tables.items():
        found = _ids(spark, table)
        duplicates = [i for i, n in Counter(found).items() if n > 1]
        missing = set(records.ids[kind]) - set(found)
        assert not duplicates, fail(f"{table}: {len(duplicates)} duplicated, e.g. {duplicates[:3]}")
        assert not missing, fail(f"{table}: {len(missing)} missing, e.g. {sorted(missing)[:3]}")
        assert len(found) == len(records.ids[kind]), fail(table)
