"""A path promoted to a column while ``frazil run`` runs: the config file gains a declared field
next to the variant column of the rest and a ``derive`` of a path; the next batches fill the new
columns without a restart, older rows keep them null until the documented backfill."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from frazil.config.loader import load_config
from frazil.engine.runner import run
from frazil.generate.producer import ensure_topic
from frazil.progress.events import CommitEvent
from tests.integration.test_variant import _produce

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("routed", [False, True], ids=["one table", "routed"])
def test_a_path_promoted_to_a_column_while_running(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path, routed: bool
) -> None:
    topic, table, name = f"promote-{unique}", f"db.promote_{unique}", f"p_{unique}"
    pipeline: dict[str, Any] = {
        "name": name, "topics": [topic], "table": table, "trigger": "500ms",
        "schema": {"id": "bigint"}, "variant": "rest", "kafka_metadata": ["offset"],
    }  # fmt: skip
    tables = [table]
    if routed:  # by a path into the rest: each table gains the promoted columns
        tables = [f"{table}_even", f"{table}_odd"]
        del pipeline["table"]
        by_parity = {"even": tables[0], "odd": tables[1]}
        pipeline["route"] = {"field": "rest:parity", "tables": by_parity}
    data = {
        "catalog": {"warehouse": str(lake_dir / "warehouse")},
        "kafka": {"bootstrap_servers": kafka_bootstrap},
        "state_dir": str(lake_dir / "state"),
        "pipelines": [pipeline],
    }
    path = tmp_path / "frazil.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    os.utime(path, ns=(10**9, 10**9))

    def record(i: int) -> bytes:
        value = {"id": i, "country": "DE", "geo": {"city": f"c{i}"}, "n": i}
        if routed:
            value["parity"] = "odd" if i % 2 else "even"
        return json.dumps(value).encode()

    committed: list[int] = []

    def on_event(event: Any) -> None:
        if isinstance(event, CommitEvent):
            committed.append(event.records)

    stop = threading.Event()
    reports: list[Any] = []
    failed: list[BaseException] = []

    def running() -> None:
        try:
            reports.extend(
                run(load_config(path), spark=spark, stop_event=stop, on_event=on_event,
                    config_path=path)
            )  # fmt: skip
        except BaseException as exc:
            failed.append(exc)

    def until(count: int, what: str) -> None:
        deadline = time.monotonic() + 120
        while sum(committed) < count:
            assert not failed, failed[0]
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.2)
        assert sum(committed) == count

    ensure_topic(kafka_bootstrap, topic, partitions=2)
    runner = threading.Thread(target=running)
    runner.start()
    try:
        _produce(kafka_bootstrap, topic, [record(i) for i in range(10)])
        until(10, "the first records")

        promoted = {**pipeline, "schema": {"id": "bigint", "country": "string"}}
        promoted["transforms"] = [
            {"derive": {"city": "try_variant_get(rest, '$.geo.city', 'string')"}}
        ]
        path.write_text(yaml.safe_dump({**data, "pipelines": [promoted]}, sort_keys=False))
        os.utime(path, ns=(2 * 10**9, 2 * 10**9))
        _produce(kafka_bootstrap, topic, [record(i) for i in range(10, 20)])
        until(20, "the records after the promotion")
    finally:
        stop.set()
        runner.join(120)
    assert not failed and reports, failed or "the run did not end"

    rows: dict[int, Any] = {}
    for each in tables:
        full = f"lake.{each}"
        columns = [f.name for f in spark.table(full).schema]
        assert columns == ["id", "rest", "_kafka_offset", "country", "city"], each
        query = f"SELECT id, country, city, to_json(rest) AS rest FROM {full}"
        rows.update((r["id"], r) for r in spark.sql(query).collect())
    assert sorted(rows) == list(range(20))
    for i, r in rows.items():
        rest = json.loads(r["rest"])
        rest.pop("parity", None)
        if i < 10:  # before: the whole rest, the new columns null
            assert (r["country"], r["city"]) == (None, None)
            assert rest == {"country": "DE", "geo": {"city": f"c{i}"}, "n": i}
        else:  # after: the promoted field out of the rest, the path derived
            assert (r["country"], r["city"]) == ("DE", f"c{i}")
            assert rest == {"geo": {"city": f"c{i}"}, "n": i}
    if routed:
        return
    full = f"lake.{table}"

    # The backfill docs/formats.md gives: an Iceberg rewrite of the older rows.
    spark.sql(
        f"""UPDATE {full}
            SET country = variant_get(rest, '$.country', 'string'),
                city = try_variant_get(rest, '$.geo.city', 'string'),
                rest = to_variant_object(map_filter(
                    variant_get(rest, '$', 'map<string,variant>'), (k, v) -> k != 'country'))
            WHERE country IS NULL AND variant_get(rest, '$.country') IS NOT NULL"""
    )
    after = spark.sql(f"SELECT id, country, city, to_json(rest) AS rest FROM {full}").collect()
    assert sorted(r["id"] for r in after) == list(range(20))
    for r in after:
        assert (r["country"], r["city"]) == ("DE", f"c{r['id']}")
        assert json.loads(r["rest"]) == {"geo": {"city": f"c{r['id']}"}, "n": r["id"]}
