"""The growth benchmark's pure parts: windows of commits, the metadata accounting, the
flatness ratio, the time scaling and the plots. No broker, no Spark."""

from __future__ import annotations

import math

import pytest
from bench.growth import (
    Commit,
    day_policy,
    growth,
    metadata_file_for,
    new_bytes,
    percentile,
    plot_day,
    plot_partitions,
    sample_every,
    scaled,
    window_stats,
)


def _commits(seconds: list[float], spacing: float = 0.5) -> list[Commit]:
    return [Commit(at=i * spacing, seconds=s, records=3) for i, s in enumerate(seconds)]


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.95) == 95.0
    assert percentile(values, 0.5) == 50.0
    assert percentile([7.0], 0.95) == 7.0


def test_first_window_spaces_commits_among_themselves() -> None:
    stats = window_stats(_commits([1.0, 2.0, 3.0, 4.0]), 0, 4)
    assert stats["commit_s_median"] == 2.5
    assert stats["commit_s_p95"] == 4.0
    assert stats["spacing_s"] == pytest.approx(0.5)
    assert stats["records_per_commit"] == 3


def test_later_window_is_spaced_from_the_commit_before_it() -> None:
    commits = _commits([1.0] * 6)
    commits[5] = Commit(at=10.0, seconds=1.0, records=3)
    # Commits 3..5 (0-based) follow commit 2 at 1.0 s: 9 s over 3 commits.
    assert window_stats(commits, 3, 6)["spacing_s"] == pytest.approx(3.0)


def test_one_commit_alone_has_no_spacing() -> None:
    assert math.isnan(window_stats(_commits([1.0]), 0, 1)["spacing_s"])


def test_metadata_file_is_the_one_stamped_with_the_snapshot_time() -> None:
    files = [(100, "v1.metadata.json"), (200, "v2.metadata.json"), (250, "v3.metadata.json")]
    assert metadata_file_for(200, files) == "v2.metadata.json"
    assert metadata_file_for(150, files) is None


def test_new_bytes_counts_only_files_not_seen_before() -> None:
    before = {"a.avro": 10, "v1.metadata.json": 100}
    after = {"a.avro": 10, "b.avro": 20, "v2.metadata.json": 120}
    assert new_bytes(before, after) == 140
    assert new_bytes(after, after) == 0


def test_growth_compares_the_last_quarter_with_the_second() -> None:
    assert growth([9.0, 9.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]) == 1.0
    assert growth([float(v) for v in range(1, 9)]) == pytest.approx(7.5 / 3.5)
    assert growth([1.0] * 7) is None
    assert growth([5.0, 5.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]) is None


def test_simulated_durations_are_scaled_to_the_wall_clock() -> None:
    assert scaled("1m", 0.5) == "30000ms"
    assert scaled("1h", 0.25) == "900000ms"
    assert scaled("1s", 0.0001) == "1ms"
    policy = day_policy(0.5)
    assert policy["mode"] == "inline"
    assert policy["interval"] == "30000ms"
    assert policy["expire"]["older_than"] == "30000ms"
    longer = day_policy(0.5, interval="5m", expire="1h")
    assert longer["interval"] == "150000ms"
    assert longer["expire"]["older_than"] == "1800000ms"


def test_the_policy_is_a_valid_maintenance_section() -> None:
    from frazil.config.maintenance import MaintenanceConfig

    config = MaintenanceConfig(**day_policy(0.5))
    assert config.mode == "inline"


def test_samples_are_about_twenty_within_bounds() -> None:
    assert sample_every(400) == 20
    assert sample_every(100) == 10
    assert sample_every(86_400) == 100


def test_plots_are_svg_documents() -> None:
    partitions = {
        "records": 1000,
        "max_offsets_per_trigger": 100,
        "master": "local[2]",
        "summary": {
            "16": {"events_per_s": 90.0, "batch_s_median": None},
            "4": {"events_per_s": 100.0, "batch_s_median": 0.5},
        },
    }
    svg = plot_partitions(partitions)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    # Drawn by partition count, whatever the order of the keys read back from JSON.
    assert svg.index("4 partitions") < svg.index("16 partitions")
    sample = {
        "commits": 20,
        "commit_s_median": 0.4,
        "commit_s_p95": 0.9,
        "metadata_bytes_per_commit": 4096,
        "new_metadata_bytes_per_commit": None,
        "metadata_dir_bytes": 2**20,
        "data_files": 10,
        "snapshots": 12,
        "query_s": 0.2,
    }
    day = {
        "samples": [sample, {**sample, "commits": 40}],
        "query_compacted_s": 0.01,
        "spacing_s": 0.6,
        "rate": 20,
        "policy_simulated": {"interval": "1m", "expire": {"older_than": "1m"}},
    }
    svg = plot_day(day)
    assert svg.count("<polyline") == 8  # one line per figure, the new bytes' has no points
    assert "40 commits" in svg
