"""Operators' view against a real broker and real tables: Prometheus metrics scraped over
HTTP, and the table offsets read back from the consumer group with a Kafka admin client."""

from __future__ import annotations

import threading
import time
import urllib.request
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from frazil.engine.runner import run
from frazil.observe.groups import read_group_offsets
from tests.conftest import free_ports
from tests.integration.helpers import end_offsets, payments_pipeline, produce_payments

pytestmark = pytest.mark.integration


def _scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    values: dict[str, float] = {}
    for line in text.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def _watch(
    port: int, key: str, at_least: float, stop: threading.Event
) -> tuple[threading.Thread, dict[str, float]]:
    """A thread that scrapes until ``key`` reaches ``at_least``, scrapes once more after the
    commits settled (into the dict returned), then stops the run."""
    scraped: dict[str, float] = {}

    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                values = _scrape(port)
            except OSError:
                time.sleep(0.5)
                continue
            if values.get(key, 0) >= at_least:
                time.sleep(1.5)
                scraped.update(_scrape(port))
                break
            time.sleep(0.5)
        stop.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    return watcher, scraped


def test_metrics_over_http_and_offsets_in_the_consumer_group(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"obs-{unique}", f"db.obs_{unique}", f"obs_{unique}"
    ids = produce_payments(kafka_bootstrap, topic, 3_000, seed=21)
    (port,) = free_ports(1)
    config = make_config(
        [payments_pipeline(name, topic, table, trigger="500ms")],
        metrics={"port": port, "host": "127.0.0.1"},
    )
    stop = threading.Event()
    written = f'frazil_records_written_total{{pipeline="{name}"}}'
    watcher, scraped = _watch(port, written, 3_000, stop)
    run(config, spark=spark, stop_event=stop)
    watcher.join()

    labels = f'pipeline="{name}"'
    assert scraped[f"frazil_up{{{labels}}}"] == 1.0
    assert scraped[f"frazil_records_written_total{{{labels}}}"] == len(ids)
    assert scraped[f"frazil_records_read_total{{{labels}}}"] == len(ids)
    assert scraped[f"frazil_batches_total{{{labels}}}"] >= 1
    assert scraped[f"frazil_freshness_seconds{{{labels}}}"] >= 0
    assert scraped[f"frazil_time_since_last_commit_seconds{{{labels}}}"] >= 0
    assert scraped[f'frazil_table_data_files{{{labels},table="{table}"}}'] >= 1
    for partition in range(4):
        lag = f'{{partition="{partition}",{labels},topic="{topic}"}}'
        assert scraped[f"frazil_lag_records{lag}"] == 0
        assert scraped[f"frazil_lag_seconds{lag}"] == 0
    committed = f'frazil_table_records_committed_total{{{labels},table="{table}"}}'
    assert scraped[committed] == len(ids)
    assert scraped[f'frazil_table_bytes_written_total{{{labels},table="{table}"}}'] > 0
    count = f'frazil_commit_duration_seconds_count{{{labels},table="{table}"}}'
    assert scraped[count] >= 1

    # Kafka's own tools see the offsets that are in the table.
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    group = config.kafka.group_for(name)
    assert group == f"frazil-{name}"
    deadline = time.monotonic() + 20
    found: dict[str, dict[int, int]] = {}
    while time.monotonic() < deadline:
        found = read_group_offsets(admin, group)
        if found.get(topic) == end_offsets(kafka_bootstrap, topic):
            break
        time.sleep(0.5)
    assert found == {topic: end_offsets(kafka_bootstrap, topic)}


def test_status_from_kafka_and_the_tables_without_spark(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Any
) -> None:
    import json

    import yaml
    from typer.testing import CliRunner

    from frazil.cli.main import app
    from frazil.observe.status import read_status

    topic, table, name = f"st-{unique}", f"db.st_{unique}", f"st_{unique}"
    dead = f"db.st_dead_{unique}"
    ids = produce_payments(kafka_bootstrap, topic, 2_000, seed=31, partitions=2)
    pipeline = payments_pipeline(
        name,
        topic,
        table,
        max_offsets_per_trigger=500,
        errors={"tolerance": "all", "dlq_table": dead},
    )
    config = make_config([pipeline])
    commits: list[Any] = []
    (report,) = run(config, until_caught_up=True, spark=spark, on_commit=commits.append)
    produce_payments(kafka_bootstrap, topic, 300, seed=32, partitions=2)  # not ingested yet

    (status,) = read_status(config)
    # One truth: the summary and status measure from the valid-through the table records,
    # which the last commit line showed as recorded (the stop's marker may bring it later).
    valid = status.tables[0].valid_through_ms
    assert valid is not None and valid == report.valid_through_ms
    assert commits[-1].valid_through_ms is not None and commits[-1].valid_through_ms <= valid
    assert report.freshness_lag_ms == report.last_data_commit_ms - valid  # type: ignore[operator]
    assert status.freshness_seconds is not None
    assert status.freshness_seconds * 1000 >= report.freshness_lag_ms
    assert status.pipeline == name and not status.running
    assert status.lag_records == {topic: 300}
    assert status.lag_seconds[topic] > 0
    assert status.records_per_second is not None and status.records_per_second > 0
    assert status.freshness_seconds is not None and status.freshness_seconds >= 0
    assert status.last_commit_ms is not None
    assert status.dead_letters == {}
    (t,) = status.tables
    assert t.table == table and t.records == len(ids) and t.data_files >= 1

    path = tmp_path / "frazil.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", by_alias=True)))
    shown = CliRunner().invoke(app, ["status", "-c", str(path), "-o", "json"])
    assert shown.exit_code == 0, shown.output
    (row,) = json.loads(shown.output)
    assert row["lag_records"] == {topic: 300} and row["running"] is False
    text = CliRunner().invoke(app, ["status", "-c", str(path)])
    assert text.exit_code == 0 and "lag" in text.output, text.output

    # Kafka away: the lag is unknown, with the reason, never "0 records".
    kafka = config.kafka.model_copy(update={"bootstrap_servers": "127.0.0.1:1"})
    away = config.model_copy(update={"kafka": kafka})
    (down,) = read_status(away)
    assert down.lag_records == {topic: None} and down.lag_seconds == {topic: None}
    # The cause: a timeout, or the connection refused, whichever librdkafka reports first.
    (problem,) = down.problems
    assert problem.startswith("lag unknown: Kafka does not answer at 127.0.0.1:1"), problem
    assert down.tables[0].records == len(ids)  # the tables' side stands
    path.write_text(yaml.safe_dump(away.model_dump(mode="json", by_alias=True)))
    shown = CliRunner().invoke(app, ["status", "-c", str(path), "-o", "json"])
    assert shown.exit_code == 0, shown.output
    (row,) = json.loads(shown.output)
    assert row["lag_records"] == {topic: None} and row["problems"][0].startswith("lag unknown")
    text = CliRunner().invoke(app, ["status", "-c", str(path)], terminal_width=200)
    # The lag's own line ("790 records/s" on the throughput line contains "0 records").
    (lag_line,) = [ln for ln in text.output.splitlines() if ln.strip().startswith("lag  ")]
    assert f"{topic}: unknown" in lag_line and "records" not in lag_line, text.output
    assert "lag unknown: Kafka does not answer at 127.0.0.1:1" in " ".join(text.output.split())

    # A topic misspelt in a pipeline that never committed: named, where it shows no lag and
    # no commit otherwise.
    misspelt = config.pipelines[0].model_copy(
        update={"name": f"m_{unique}", "topics": [f"{topic}-typo"]}
    )
    (never,) = read_status(config.model_copy(update={"pipelines": [misspelt]}))
    assert never.last_commit_ms is None and never.lag_records == {}
    assert never.problems == [f"topic(s) {topic}-typo do not exist at {kafka_bootstrap}"]


def test_status_counts_topics_a_pattern_matched_since_and_partitions_added(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """Partitions the pipeline has not read yet (a new topic its pattern matches, partitions
    added to a topic) are lag too, all they hold: Spark's source reads them from the start."""
    from confluent_kafka.admin import NewPartitions

    from frazil.observe.status import read_status
    from tests.integration.helpers import table_ids

    first, second = f"pst-{unique}.a", f"pst-{unique}.b"
    table, name = f"db.pst_{unique}", f"pst_{unique}"
    ids = produce_payments(kafka_bootstrap, first, 100, seed=41, partitions=2)
    pipeline = payments_pipeline(name, first, table)
    del pipeline["topics"]
    config = make_config([{**pipeline, "topic_pattern": f"pst-{unique}\\..*"}])
    run(config, until_caught_up=True, spark=spark)

    ids += produce_payments(kafka_bootstrap, second, 70, seed=42, partitions=1)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.create_partitions([NewPartitions(first, 3)]).values():
        future.result(30)
    ids += produce_payments(kafka_bootstrap, first, 90, seed=43, partitions=3)

    (status,) = read_status(config)
    assert status.lag_records == {first: 90, second: 70}
    assert status.problems == []

    run(config, until_caught_up=True, spark=spark)
    (caught_up,) = read_status(config)
    assert caught_up.lag_records == {first: 0, second: 0}
    got = table_ids(spark, table)
    assert len(got) == len(set(got)) and sorted(got) == sorted(ids)


def test_json_logs_one_line_per_commit_and_jvm_lines_in_a_file(
    make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Any, lake_dir: Any
) -> None:
    import json
    import subprocess
    import sys

    import yaml

    topic, table, name = f"lg-{unique}", f"db.lg_{unique}", f"lg_{unique}"
    ids = produce_payments(kafka_bootstrap, topic, 500, seed=41)
    config = make_config([payments_pipeline(name, topic, table)], state_dir=str(tmp_path / "st"))
    path = tmp_path / "frazil.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", by_alias=True)))
    done = subprocess.run(
        [sys.executable, "-m", "frazil.cli.main", "--log-format", "json", "run", "-c",
         str(path), "--until-caught-up"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    entries = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    commits = [e for e in entries if e.get("message") == "commit"]
    assert commits and all(e["level"] == "INFO" and e["pipeline"] == name for e in commits)
    assert sum(e["records"] for e in commits) == len(ids)
    assert all(e["freshness_s"] is not None and "lag_records" in e for e in commits)
    # Spark's own lines go to the state folder's log file, not the terminal.
    assert (tmp_path / "st" / "logs" / "spark.log").exists()
    assert " WARN " not in done.stderr
    # The JVM launcher's own line too (it reaches no logger): its output has a file.
    assert "incubator modules" not in done.stderr
    assert "incubator modules" in (tmp_path / "st" / "logs" / "jvm.log").read_text()


def test_dead_letter_metric_labels_stay_bounded_over_many_distinct_bad_values(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """Every bad record carries a value of its own; the metric's series are one per stage and
    kind of reason, whatever the values (they stay in the dead-letter table and the logs)."""
    import json as json_lib

    from confluent_kafka import Producer

    from frazil.generate.producer import ensure_topic

    topic, table, name = f"obsb-{unique}", f"db.obsb_{unique}", f"obsb_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    good = {"id": "g", "type": "pix", "created_at": "2026-11-29T10:00:00Z", "document": "d",
            "payer": "p", "amount": 1}  # fmt: skip
    values = [json_lib.dumps({**good, "id": f"g{i}"}) for i in range(30)]
    values += [json_lib.dumps({**good, "id": f"t{i}", "created_at": f"yesterday-{i}"})
               for i in range(40)]  # fmt: skip
    values += [json_lib.dumps({**good, "id": f"a{i}", "amount": f"12,x{i}"}) for i in range(40)]
    values += [f"not json {i} {{" for i in range(20)]
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for value in values:
        producer.produce(topic, value.encode())
    assert producer.flush(30) == 0
    (port,) = free_ports(1)
    config = make_config(
        [payments_pipeline(name, topic, table, trigger="500ms",
                           errors={"tolerance": "all", "dlq_table": f"db.obsb_dlq_{unique}"})],
        metrics={"port": port, "host": "127.0.0.1"},
    )  # fmt: skip
    stop = threading.Event()
    read = f'frazil_records_read_total{{pipeline="{name}"}}'
    watcher, scraped = _watch(port, read, len(values), stop)
    run(config, spark=spark, stop_event=stop)
    watcher.join()

    dead = {k: v for k, v in scraped.items() if k.startswith("frazil_records_dead_lettered")}
    series = {k: v for k, v in dead.items() if k.startswith("frazil_records_dead_lettered_total")}
    assert sum(series.values()) == 100, dead
    # 100 distinct bad values, three kinds of reason: three series, none quoting a value.
    assert len(series) == 3, series
    assert not any(
        marker in key for key in series for marker in ("yesterday-", "12,x", "not json")
    ), series
    # Every label of every frazil series takes its values from a bounded set.
    for key in scraped:
        if key.startswith("frazil_") and "{" in key:
            assert ("table=" not in key) or f'table="{table}"' in key, key
