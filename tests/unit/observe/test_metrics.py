"""The metrics collector on samples (no Spark, no Kafka), and the dashboard's queries."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry, generate_latest

from frazil.observe.metrics import (
    CommitHistograms,
    FrazilCollector,
    PipelineSample,
    TableSample,
    lowest_offsets,
)
from frazil.progress.events import CommitEvent

DOCS = Path(__file__).resolve().parents[3] / "docs" / "grafana"
NOW_MS = 1_800_000_000_000


def _sample() -> PipelineSample:
    return PipelineSample(
        pipeline="p",
        up=True,
        records=100,
        batches=3,
        skipped_batches=1,
        unmatched=2,
        schema_changes=1,
        filtered=5,
        dead_letters={("decode", "not a JSON object"): 4},
        last_commit_wall_ms=NOW_MS,
        valid_through_ms=NOW_MS - 5_000,
        restarts=0,
        tables=[
            TableSample("db.a", 3, 4, {"t": {0: 10, 1: 20}}, {("t", 0): NOW_MS - 1_000}),
            TableSample("db.b", 1, 2, {"t": {0: 8, 1: 25}}),
        ],
    )


def _exposition() -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FrazilCollector(lambda: [_sample()], lambda asked: {"t": {0: 12, 1: 25}}))
    histograms = CommitHistograms(registry)
    histograms.on_event(CommitEvent("p", "db.a", 3, 50, 100, NOW_MS, 1.2))
    return generate_latest(registry).decode()


def test_counters_gauges_and_lag_from_the_lowest_table_offsets() -> None:
    text = _exposition()
    assert 'frazil_records_written_total{pipeline="p"} 100.0' in text
    # + dead letters, unmatched, filtered
    assert 'frazil_records_read_total{pipeline="p"} 111.0' in text
    assert 'frazil_records_filtered_total{pipeline="p"} 5.0' in text
    assert (
        'frazil_records_dead_lettered_total{pipeline="p",reason="not a JSON object",'
        'stage="decode"} 4.0'
    ) in text
    # Partition 0: db.b has 8 of 12; partition 1: both have 25 (db.a's 20 is lower: 5 behind).
    assert 'frazil_lag_records{partition="0",pipeline="p",topic="t"} 4.0' in text
    assert 'frazil_lag_records{partition="1",pipeline="p",topic="t"} 5.0' in text
    assert 'frazil_table_data_files{pipeline="p",table="db.a"} 3.0' in text
    assert 'frazil_commit_duration_seconds_count{pipeline="p",table="db.a"} 1.0' in text
    assert lowest_offsets(_sample().tables) == {"t": {0: 8, 1: 20}}


def test_the_dashboard_and_alerts_use_only_exported_metrics() -> None:
    exported = set(re.findall(r"^# TYPE (\w+) ", _exposition(), re.M))
    names = set()
    for kind in ("counter", "histogram"):
        names |= {
            n + suffix
            for n in re.findall(rf"^# TYPE (\w+) {kind}", _exposition(), re.M)
            for suffix in (("_total",) if kind == "counter" else ("_bucket", "_count", "_sum"))
        }
    known = exported | names
    dashboard = json.loads((DOCS / "frazil-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    alerts = yaml.safe_load((DOCS / "frazil-alerts.yml").read_text())
    exprs += [r["expr"] for g in alerts["groups"] for r in g["rules"]]
    used = {m for e in exprs for m in re.findall(r"\bfrazil_\w+", e)}
    assert used and used <= known, used - known


def test_first_line_of_an_exception_without_text() -> None:
    from frazil.errors import first_line

    assert first_line(TimeoutError()) == "TimeoutError"
    assert first_line(ValueError("one\ntwo")) == "one"
    assert first_line(ValueError("x" * 400), 10) == "x" * 10


def test_no_lag_sample_while_kafka_is_away() -> None:
    """Unknown lag is absent from the scrape (Prometheus' "no data"), never a 0."""

    def away(asked: object) -> dict[str, dict[int, int]]:
        raise TimeoutError

    registry = CollectorRegistry(auto_describe=False)
    registry.register(FrazilCollector(lambda: [_sample()], away))
    text = generate_latest(registry).decode()
    assert 'frazil_records_written_total{pipeline="p"} 100.0' in text
    assert "frazil_lag_records{" not in text and "frazil_lag_seconds{" not in text


def test_dead_letter_reasons_become_labels_of_bounded_values() -> None:
    from frazil.reasons import reason_label

    assert (
        reason_label("field 'ts' does not parse as timestamp: 'yesterday-ish'")
        == reason_label("field 'at' does not parse as timestamp: 'it\\'s late'")
        == "field '…' does not parse as timestamp: '…'"
    )
    assert (
        reason_label("field v is null but required in table db.k_a (NOT NULL)")
        == "field v is null but required in table … (NOT NULL)"  # a field: one of the schema's
    )
    # Words of the sentence stay.
    assert reason_label("a field does not match the schema's type") == (
        "a field does not match the schema's type"
    )
    assert (
        reason_label("record of 1048577 bytes, decimal(10,2)") == "record of N bytes, decimal(10,2)"
    )
    assert reason_label("x" * 500) == "x" * 120
