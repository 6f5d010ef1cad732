"""Table upkeep on real tables: health, compaction, delete rewrites, expiry that keeps the
exactly-once marker, dry runs."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from typer.testing import CliRunner

from frazil.engine.runner import run
from frazil.generate.producer import ensure_topic
from frazil.maintenance.passes import config_tables, measure, run_pass
from frazil.progress import table_markers
from frazil.progress.events import MaintenanceDone
from frazil.sink.iceberg import IcebergTable
from tests.integration.helpers import payments_pipeline, produce_payments, table_ids

pytestmark = pytest.mark.integration

#: Compact from 2 small files; expire everything the marker does not need.
AGGRESSIVE = {
    "compaction": {"min_small_files": 2},
    "expire": {"older_than": "1ms", "retain_last": 1},
    "manifests": {"min_manifests": 2},
}


def _fill_in_small_batches(
    spark: Any, config: Any, bootstrap: str, topic: str, batches: int, seed: int
) -> list[str]:
    ids: list[str] = []
    for n in range(batches):
        ids += produce_payments(bootstrap, topic, 200, seed=seed + n)
        run(config, until_caught_up=True, spark=spark)
    return ids


def test_optimize_compacts_and_expires_and_the_marker_survives_a_lost_checkpoint(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, lake_dir: Path
) -> None:
    topic, table, name = f"mt-{unique}", f"db.mt_{unique}", f"mt_{unique}"
    pipeline = payments_pipeline(name, topic, table)
    config = make_config([pipeline], maintenance=AGGRESSIVE)
    ids = _fill_in_small_batches(spark, config, kafka_bootstrap, topic, 4, seed=100)

    (ref,) = config_tables(spark, config, only=table)
    before = measure(spark, config, ref)
    # A file per batch at least (a small batch is one task, docs/architecture.md).
    assert before.data_files >= 4 and before.small_files == before.data_files
    assert before.score < 100 and any("small data files" in r for r in before.reasons)
    assert before.expirable_snapshots > 0

    # A dry run plans and changes nothing.
    (dry,) = run_pass(spark, config, [ref], dry_run=True)
    assert [p.action for p in dry.planned][:2] == ["compaction", "manifests"]
    assert "expire" in [p.action for p in dry.planned]
    assert measure(spark, config, ref).snapshots == before.snapshots

    (report,) = run_pass(spark, config, [ref])
    assert not [r.error for r in report.results if r.error]
    after = report.after
    assert after is not None
    # One day partition (the payments share a date range): files per partition compacted.
    assert after.data_files < before.data_files
    assert after.snapshots < before.snapshots
    assert after.last_maintenance_ms is not None
    assert sorted(table_ids(spark, table)) == sorted(ids)

    # The pipeline's newest marker is still in the ancestry: with the checkpoint gone, the
    # next run resumes from the table and adds each new record once.
    handle = IcebergTable(spark, f"lake.{table}")
    assert table_markers.find_marker(handle, name).marker is not None
    shutil.rmtree(Path(config.checkpoint_for(config.pipelines[0])))
    ids += produce_payments(kafka_bootstrap, topic, 300, seed=999)
    run(config, until_caught_up=True, spark=spark)
    got = table_ids(spark, table)
    assert len(got) == len(set(got)) and sorted(got) == sorted(ids)


def test_cdc_deletes_are_compacted_away(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"mtc-{unique}", f"db.mtc_{unique}", f"mtc_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    pipeline = {
        "name": name,
        "topics": [topic],
        "table": table,
        "schema": {"id": "long", "v": "long"},
        "write": {"mode": "upsert", "key": ["id"]},
    }
    config = make_config([pipeline], maintenance=AGGRESSIVE)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for round_no in range(4):
        for i in range(50):
            producer.produce(topic, json.dumps({"id": i, "v": round_no}).encode(), partition=0)
        producer.flush(10)
        run(config, until_caught_up=True, spark=spark)
    (ref,) = config_tables(spark, config, only=table)
    before = measure(spark, config, ref)
    assert before.delete_files >= 2
    (report,) = run_pass(spark, config, [ref])
    assert not [r.error for r in report.results if r.error]
    assert report.after is not None and report.after.delete_files == 0
    rows = {r[0]: r[1] for r in spark.sql(f"SELECT id, v FROM lake.{table}").collect()}
    assert rows == {i: 3 for i in range(50)}


def test_cli_tables_health_and_dry_run(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    import yaml

    from frazil.cli.main import app

    topic, table, name = f"mcli-{unique}", f"db.mcli_{unique}", f"mcli_{unique}"
    pipeline = payments_pipeline(name, topic, table)
    config = make_config([pipeline], maintenance=AGGRESSIVE)
    _fill_in_small_batches(spark, config, kafka_bootstrap, topic, 3, seed=300)
    path = tmp_path / "frazil.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", by_alias=True)))
    runner = CliRunner()
    shown = runner.invoke(app, ["tables", "-c", str(path), "-o", "json"])
    assert shown.exit_code == 0, shown.output
    healths = {h["table"].split(".")[-1].strip("`"): h for h in json.loads(shown.output)}
    assert healths[table.split(".")[-1]]["data_files"] >= 3  # a file a batch at least
    one = runner.invoke(app, ["table", "health", table, "-c", str(path)])
    assert one.exit_code == 0 and "small data files" in one.output, one.output
    dry = runner.invoke(app, ["optimize", "-c", str(path), "--table", table, "--dry-run"])
    assert dry.exit_code == 0 and "would run compaction" in dry.output, dry.output
    unknown = runner.invoke(app, ["optimize", "-c", str(path), "--table", "db.nope"])
    assert unknown.exit_code != 0


def test_inline_maintenance_compacts_while_the_run_goes_on(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    import threading

    topic, table, name = f"mti-{unique}", f"db.mti_{unique}", f"mti_{unique}"
    pipeline = payments_pipeline(name, topic, table, trigger="500ms")
    config = make_config(
        [pipeline],
        maintenance={
            "compaction": {"min_small_files": 2},
            "mode": "inline",
            "interval": "3s",
            "budget": "30s",
        },
    )
    ensure_topic(kafka_bootstrap, topic, partitions=4)
    stop = threading.Event()
    ids: list[str] = []

    def feed() -> None:
        for n in range(8):
            ids.extend(produce_payments(kafka_bootstrap, topic, 100, seed=500 + n))
            time.sleep(1.5)
        time.sleep(8)  # passes after the last commits
        stop.set()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    events: list[Any] = []
    run(config, spark=spark, stop_event=stop, on_event=events.append)
    feeder.join()
    run(config, until_caught_up=True, spark=spark)
    got = table_ids(spark, table)
    assert len(got) == len(set(got)) and sorted(got) == sorted(ids)
    # Each action is told as it ends (frazil run prints a line for it; metrics count it).
    done = [e for e in events if isinstance(e, MaintenanceDone)]
    compactions = [e for e in done if e.action == "compaction" and not e.skipped]
    assert compactions and all(e.table == table and e.error is None for e in compactions)
    assert "rewritten into" in compactions[0].detail
    maintained = [
        r[0]
        for r in spark.sql(
            f"SELECT summary['frazil.maintenance'] FROM lake.{table}.snapshots"
        ).collect()
        if r[0]
    ]
    assert "compaction" in maintained


def test_retention_deletes_old_rows_and_sort_compaction_orders_files(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"mtr-{unique}", f"db.mtr_{unique}", f"mtr_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    pipeline = {
        "name": name,
        "topics": [topic],
        "table": table,
        "schema": {"id": "long", "ts": "timestamp"},
        "partition_by": ["days(ts)"],
    }
    config = make_config(
        [pipeline],
        maintenance={
            "retention": {"column": "ts", "older_than": "30d"},
            "compaction": {"strategy": "sort", "sort_by": ["id"], "min_small_files": 2},
        },
    )
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    recent = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() - 3600))
    for batch in range(3):
        for i in range(20):
            n = batch * 100 + (19 - i)  # ids out of order within each file
            ts = "2020-01-02T03:04:05" if i % 2 else recent
            producer.produce(topic, json.dumps({"id": n, "ts": ts}).encode(), partition=0)
        producer.flush(10)
        run(config, until_caught_up=True, spark=spark)
    (ref,) = config_tables(spark, config, only=table)
    (report,) = run_pass(spark, config, [ref])
    assert [r.action for r in report.results][:2] == ["retention", "compaction"]
    assert not [r.error for r in report.results if r.error]
    rows = spark.sql(f"SELECT id, ts FROM lake.{table}").collect()
    assert len(rows) == 30 and all(r[1].year > 2020 for r in rows)
    # The recent day's small files became one, sorted by id.
    files = spark.sql(f"SELECT lower_bounds, upper_bounds FROM lake.{table}.data_files").collect()
    assert len(files) == 1
    ids = [r[0] for r in spark.sql(f"SELECT id FROM lake.{table}").collect()]
    assert ids == sorted(ids)
    # Nothing is that old any more: the next pass changes nothing.
    (again,) = run_pass(spark, config, [ref])
    retention = next(r for r in again.results if r.action == "retention")
    assert retention.detail.startswith("no rows older than")


def test_a_renamed_pipelines_old_marker_does_not_pin_expiry(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    # The pipeline runs under one name, then under another with --reset-offsets (the table
    # is filled): the old name's newest marker must not keep every snapshot after it.
    topic, table = f"mr-{unique}", f"db.mr_{unique}"
    old, new = f"old_{unique}", f"new_{unique}"
    policy = {"expire": {"older_than": "1ms", "retain_last": 3}}
    first = make_config([payments_pipeline(old, topic, table)], maintenance=policy)
    ids = _fill_in_small_batches(spark, first, kafka_bootstrap, topic, 2, seed=300)
    renamed = make_config([payments_pipeline(new, topic, table)], maintenance=policy)
    run(renamed, until_caught_up=True, spark=spark, reset_offsets="latest")
    ids += _fill_in_small_batches(spark, renamed, kafka_bootstrap, topic, 4, seed=310)

    (ref,) = config_tables(spark, renamed, only=table)
    before = measure(spark, renamed, ref)
    pins = {name: (kept, retired) for name, kept, retired in before.pins}
    assert pins[old][1] is True and pins[old][0] > 3
    assert pins[new][1] is False
    (report,) = run_pass(spark, renamed, [ref])
    assert not [r.error for r in report.results if r.error]
    assert report.after is not None
    # The new name's newest marker and what retain_last keeps; nothing else.
    assert report.after.snapshots <= 3 + pins[new][0]
    assert report.after.snapshots < before.snapshots - 4
    assert sorted(table_ids(spark, table)) == sorted(ids)
    handle = IcebergTable(spark, f"lake.{table}")
    assert table_markers.find_marker(handle, new).marker is not None


def test_a_compaction_stops_between_slices_once_a_merge_lost_to_it(
    spark: Any, make_config: Any, unique: str
) -> None:
    # frazil maintain next to an upsert/CDC run: a MERGE that lost to a compaction's commit
    # notes it in the table; the compaction must not go on beating its retries slice by slice.
    from frazil.maintenance.actions import Actions
    from frazil.maintenance.passes import TableRef, _no_merge_lost, policy_of
    from frazil.sink.yielding import MERGE_CONFLICT_AT

    table = f"db.slices_{unique}"
    spark.sql(f"CREATE TABLE lake.{table} (id bigint, v string) USING iceberg")
    for i in range(12):
        spark.sql(f"INSERT INTO lake.{table} VALUES ({i}, 'v{i}')")
    config = make_config(
        [payments_pipeline(f"s_{unique}", f"s-{unique}", table)], maintenance=AGGRESSIVE
    )
    ref = TableRef(table, config.pipelines[0])
    handle = IcebergTable(spark, f"lake.{table}")
    actions = Actions(spark, f"lake.{table}", handle.java)
    asked: list[bool] = []

    def merge_lost_meanwhile() -> bool:
        handle.java.updateProperties().set(MERGE_CONFLICT_AT, str(int(time.time() * 1000))).commit()
        asked.append(_no_merge_lost(handle, 600))
        return asked[-1]

    before = measure(spark, config, ref)
    done = actions.compact(policy_of(config, ref), before, merge_lost_meanwhile, slice_files=4)
    assert done.startswith("4 data files") and asked == [False]
    assert measure(spark, config, ref).data_files == before.data_files - 4 + 1

    # Without a MERGE losing, slice after slice until the pass is done.
    handle.java.updateProperties().remove(MERGE_CONFLICT_AT).commit()
    middle = measure(spark, config, ref)
    actions.compact(policy_of(config, ref), middle, lambda: _no_merge_lost(handle, 600), 4)
    assert measure(spark, config, ref).data_files <= 3
    assert sorted(r[0] for r in spark.sql(f"SELECT id FROM lake.{table}").collect()) == list(
        range(12)
    )
