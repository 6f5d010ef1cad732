"""Routes whose namespace comes from the topic: restarts find the pipeline's tables wherever
the template put them, and ``--reset-offsets`` reaches every table the route can name."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Producer

from frazil.engine.runner import run
from frazil.errors import PipelineError
from frazil.generate.producer import ensure_topic

pytestmark = pytest.mark.integration

#: The topics' suffixes: each names its table's namespace.
SUFFIXES = ("alpha", "beta")


def _produce(bootstrap: str, topic: str, ids: range) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    )
    for n, i in enumerate(ids):
        producer.produce(topic, json.dumps({"id": i}).encode(), partition=n % 2)
    assert producer.flush(30) == 0


def _pipeline(u: str, **extra: Any) -> dict[str, Any]:
    pipeline: dict[str, Any] = {
        "name": f"ns_{u}",
        "topic_pattern": f"nsr_{u}\\..*",
        "schema": {"id": "long"},
        # The topic's suffix is the table's namespace.
        "route": {"topic": f"nsr_{u}\\.(\\w+)", "table": f"{{1}}_{u}.events", "default": "skip"},
        "starting_offsets": "latest",
        "trigger": "500ms",
    }
    pipeline.update(extra)
    return pipeline


def _ids(spark: Any, table: str) -> list[int]:
    try:
        return [int(r[0]) for r in spark.sql(f"SELECT id FROM lake.{table}").collect()]
    except Exception:  # not created yet
        return []


def _wait_for(condition: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError("condition not met in time")


def _first_run(spark: Any, config: Any, bootstrap: str, u: str, ids: range) -> None:
    """Run the pipeline (``starting_offsets: latest``) until ``ids`` are in, produced to
    every topic once the query reads (probes, negative ids, until each table has one)."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            run(config, spark=spark, stop_event=stop)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    try:
        probe = 0
        deadline = time.monotonic() + 180
        while not all(_ids(spark, f"{s}_{u}.events") for s in SUFFIXES):
            assert not errors, errors
            assert time.monotonic() < deadline, "the first run read nothing"
            probe -= 1
            for s in SUFFIXES:
                _produce(bootstrap, f"nsr_{u}.{s}", range(probe, probe + 1))
            time.sleep(1)
        for s in SUFFIXES:
            _produce(bootstrap, f"nsr_{u}.{s}", ids)
        _wait_for(
            lambda: all(
                sum(1 for i in _ids(spark, f"{s}_{u}.events") if i >= 0) == len(ids)
                for s in SUFFIXES
            ),
            180,
        )
    finally:
        stop.set()
        thread.join(180)
    assert not errors, errors


def _exactly_once(spark: Any, u: str, expected: list[int]) -> None:
    """Each table holds each of ``expected`` exactly once (probes at most once)."""
    for s in SUFFIXES:
        ids = _ids(spark, f"{s}_{u}.events")
        twice = [i for i, n in Counter(ids).items() if n > 1]
        assert not twice, f"{s}: {len(twice)} ids twice, e.g. {twice[:5]}"
        kept = sorted(i for i in ids if i >= 0)
        missing = sorted(set(expected) - set(kept))
        assert not missing, f"{s}: {len(missing)} ids missing, e.g. {missing[:5]}"
        assert kept == expected


def test_restart_finds_tables_in_namespaces_named_by_the_topic(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    u = unique
    for s in SUFFIXES:
        ensure_topic(kafka_bootstrap, f"nsr_{u}.{s}", partitions=2)
    config = make_config([_pipeline(u)])
    _first_run(spark, config, kafka_bootstrap, u, range(300))

    # Produced while the pipeline is down: a restart must start where the tables are, not at
    # starting_offsets (latest), which would skip them.
    for s in SUFFIXES:
        _produce(kafka_bootstrap, f"nsr_{u}.{s}", range(300, 600))
    reports = run(config, until_caught_up=True, spark=spark)
    assert "starting_offsets" not in reports[0].start
    assert reports[0].records_ingested == 300 * len(SUFFIXES)
    _exactly_once(spark, u, list(range(600)))


def test_reset_offsets_reaches_a_routed_table_whose_marker_expired(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    u = unique
    for s in SUFFIXES:
        ensure_topic(kafka_bootstrap, f"nsr_{u}.{s}", partitions=2)
    config = make_config([_pipeline(u)])
    _first_run(spark, config, kafka_bootstrap, u, range(100))

    # Another writer's commit, then an expiry that keeps only it: the table holds rows but
    # no marker of the pipeline any more.
    broken = f"beta_{u}.events"
    spark.sql(f"INSERT INTO lake.{broken} (id) VALUES (-1000)")
    spark.sql(
        f"CALL lake.system.expire_snapshots(table => '{broken}', "
        "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
    )
    for s in SUFFIXES:
        _produce(kafka_bootstrap, f"nsr_{u}.{s}", range(100, 150))
    with pytest.raises(PipelineError) as refused:
        run(config, until_caught_up=True, spark=spark)
    assert broken in str(refused.value) and "--reset-offsets" in str(refused.value)

    # The reset records a marker in every table the route can name, the broken one too.
    run(config, until_caught_up=True, spark=spark, reset_offsets="latest")
    for s in SUFFIXES:
        _produce(kafka_bootstrap, f"nsr_{u}.{s}", range(150, 400))
    run(config, until_caught_up=True, spark=spark)
    for s in SUFFIXES:
        ids = _ids(spark, f"{s}_{u}.events")
        twice = [i for i, n in Counter(ids).items() if n > 1]
        assert not twice, f"{s}: ids twice, e.g. {twice[:5]}"
        assert sorted(i for i in ids if i >= 150) == list(range(150, 400))
        # The first run's records, once; those produced before the reset were skipped by it.
        assert sorted(i for i in ids if 0 <= i < 100) == list(range(100))
        assert not [i for i in ids if 100 <= i < 150]


def test_tables_are_found_level_by_level_and_only_with_a_marker(
    spark: Any, make_config: Any, unique: str
) -> None:
    from pyspark.sql.types import LongType, StructField, StructType

    from frazil.progress.markers import Marker
    from frazil.route.rules import build_route
    from frazil.sink.tables import TableSet

    u = unique
    pipeline = make_config(
        [
            _pipeline(
                u,
                route={"topic": f"nsr_{u}\\.(\\w+)", "table": f"lv_{u}_{{1}}.sub.t_{{1}}"},
            )
        ]
    ).pipelines[0]
    tables = TableSet(spark, "lake", pipeline, build_route(pipeline), "jdbc")
    assert tables.template_tables() == []  # no namespace yet: nothing, no error
    schema = StructType([StructField("id", LongType())])
    names = [
        f"lv_{u}_a.sub.t_a",
        f"lv_{u}_b.sub.t_b",
        f"lv_{u}_b.sub.other",  # the table's name does not fit
        f"lv_{u}_c.elsewhere.t_c",  # nor does its namespace
        f"lv_{u}_d.sub.t_d",
    ]
    for name in names:
        tables.create(name, schema)
    # Every table the template can produce, whether it holds a marker or not…
    fitting = [f"lv_{u}_a.sub.t_a", f"lv_{u}_b.sub.t_b", f"lv_{u}_d.sub.t_d"]
    assert tables.template_tables() == fitting
    assert sorted(tables.nameable()) == fitting
    # …and of those, the pipeline's are those with its marker.
    marker = Marker(pipeline=pipeline.name, offsets={f"nsr_{u}.a": {0: 1}})
    tables.target(fitting[0]).table.commit_summary_only(marker.to_summary())
    assert sorted(tables.known()) == [fitting[0]]
