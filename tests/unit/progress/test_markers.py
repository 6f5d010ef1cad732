"""Exactly-once rules without Spark: markers, coverage, valid-through, start decisions, resets."""

from __future__ import annotations

import pytest

from frazil.errors import ConfigError, PipelineError
from frazil.progress import markers
from frazil.progress.markers import Marker, PartitionStats, TableState


def _marker(offsets: dict[str, dict[int, int]], **extra: object) -> Marker:
    return Marker(pipeline="p", offsets=offsets, **extra)  # type: ignore[arg-type]


def test_marker_round_trips_through_a_summary() -> None:
    marker = Marker(
        pipeline="payments",
        offsets={"t": {0: 10, 1: 7}},
        max_timestamps={"t": {0: 1_700_000_000_123}},
        valid_through_ms=1_700_000_000_123,
        batch_id=4,
        query_id="q",
        commit_id="c1",
    )
    summary = marker.to_summary()
    assert summary["frazil.offsets"] == '{"t":{"0":10,"1":7}}'
    assert summary["frazil.valid-through"] == "2023-11-14T22:13:20.123Z"
    got = Marker.from_summary({**summary, "added-records": "17"}.get)
    assert got == marker
    assert Marker.from_summary({"added-records": "1"}.get) is None


def test_format_ms() -> None:
    assert markers.format_ms(0) == "1970-01-01T00:00:00.000Z"


def test_covered_only_when_every_planned_partition_is_in_the_table() -> None:
    marker = _marker({"t": {0: 10, 1: 5}})
    assert markers.covered(marker, {"t": {0: 10, 1: 5}})
    assert markers.covered(marker, {"t": {0: 3}})
    assert not markers.covered(marker, {"t": {0: 10, 1: 6}})
    assert not markers.covered(marker, {"t": {0: 10, 2: 1}})  # a partition it never saw
    assert not markers.covered(None, {"t": {0: 1}})
    assert not markers.covered(marker, {})


def test_ahead_of_names_partitions_the_table_does_not_hold() -> None:
    marker = _marker({"t": {0: 10, 1: 5}})
    assert markers.ahead_of({"t": {0: 10, 1: 4}}, marker) == []
    assert markers.ahead_of({"t": {0: 11, 1: 5}, "u": {0: 3}}, marker) == ["t/0", "u/0"]
    assert markers.ahead_of({"t": {0: 0}}, None) == []
    assert markers.ahead_of({"t": {0: 1}}, None) == ["t/0"]


def test_next_marker_covers_idle_partitions_never_goes_back_and_drops_gone_topics() -> None:
    previous = _marker(
        {"t": {0: 100, 1: 50}, "gone": {0: 9}},
        max_timestamps={"t": {0: 1000, 1: 900}, "gone": {0: 5}},
        valid_through_ms=900,
    )
    # An old checkpoint replays partition 1 below the marker; partition 2 is idle but planned.
    marker = markers.next_marker(
        previous,
        pipeline="p",
        planned={"t": {0: 120, 1: 40, 2: 0}},
        stats={("t", 0): PartitionStats(1500)},
        lagging=set(),
        batch_id=7,
        query_id="q",
    )
    assert marker.offsets == {"t": {0: 120, 1: 50, 2: 0}}
    assert marker.max_timestamps == {"t": {0: 1500, 1: 900}}
    assert marker.valid_through_ms == 1500
    assert marker.batch_id == 7


def test_valid_through_is_held_back_by_lagging_partitions_only() -> None:
    planned = {"t": {0: 10, 1: 99}}
    stamps = {"t": {0: 5_000, 1: 2_000}}
    # Both read to their end: the largest committed timestamp.
    assert markers.valid_through(None, stamps, planned, set()) == 5_000
    # Partition 1 lags: nothing after its largest committed timestamp is known to be in.
    assert markers.valid_through(None, stamps, planned, {("t", 1)}) == 2_000
    # Both lag: the minimum.
    assert markers.valid_through(None, stamps, planned, {("t", 0), ("t", 1)}) == 2_000
    # A lagging partition with nothing committed yet keeps the previous mark.
    assert markers.valid_through(1_000, {"t": {0: 5_000}}, planned, {("t", 1)}) == 1_000
    # The mark never moves back.
    assert markers.valid_through(3_000, stamps, planned, {("t", 1)}) == 3_000
    assert markers.valid_through(None, {}, planned, set()) is None


def test_offset_filter_needs_a_marker() -> None:
    assert markers.offset_filter(None) is None
    assert markers.offset_filter(_marker({})) is None


def _state(marker: Marker | None, rows: int = 0) -> TableState:
    return TableState(marker=marker, snapshot_id=1 if rows or marker else None, total_records=rows)


def test_start_refuses_a_filled_table_without_this_pipelines_marker() -> None:
    with pytest.raises(PipelineError) as info:
        markers.decide_start("p", "db.t", _state(None, rows=1234), None, False)
    message = str(info.value)
    assert "table db.t holds 1,234 rows but no progress marker of this pipeline" in message
    assert "--reset-offsets earliest, latest" in message


def test_start_decisions() -> None:
    marker = _marker({"t": {0: 10}})
    # New pipeline on a new table: the config's starting_offsets.
    assert markers.decide_start("p", "db.t", _state(None), None, False) == markers.Start(
        reason="new pipeline"
    )
    # Lost checkpoint: from the table.
    start = markers.decide_start("p", "db.t", _state(marker, 5), None, False)
    assert start.from_table and not start.set_aside
    # Checkpoint behind or level with the table: keep it (the offset filter drops repeats).
    assert markers.decide_start("p", "db.t", _state(marker, 5), {"t": {0: 4}}, True) == (
        markers.Start()
    )
    # Checkpoint ahead (the table was rolled back): the table wins.
    start = markers.decide_start("p", "db.t", _state(marker, 5), {"t": {0: 12}}, True)
    assert start.from_table and start.set_aside and "t/0" in start.reason
    # Table emptied (rolled back before the first commit) but the checkpoint went on.
    start = markers.decide_start("p", "db.t", _state(None), {"t": {0: 12}}, True)
    assert start.set_aside and start.use_starting_offsets


def test_resume_offsets_follow_the_partitions_kafka_has_now() -> None:
    marker = _marker({"t": {0: 10, 1: 4}, "deleted": {0: 3}})
    assert markers.resume_offsets(marker, {"t": [0, 1, 2], "new": [0]}) == {
        "t": {0: 10, 1: 4, 2: markers.EARLIEST},
        "new": {0: markers.EARLIEST},
    }


def test_parse_and_resolve_reset() -> None:
    current = {"t": [0, 1]}
    earliest = {"t": {0: 3, 1: 0}}
    latest = {"t": {0: 50, 1: 60}}
    assert markers.resolve_reset("earliest", current, earliest, latest) == {"t": {0: 3, 1: 0}}
    assert markers.resolve_reset("latest", current, earliest, latest) == {"t": {0: 50, 1: 60}}
    spec = markers.parse_reset('{"t": {"0": 42}}')
    assert markers.resolve_reset(spec, current, earliest, latest) == {"t": {0: 42, 1: 0}}
    spec = markers.parse_reset('{"t": {"0": -1, "1": -2}}')
    assert markers.resolve_reset(spec, current, earliest, latest) == {"t": {0: 50, 1: 0}}
    for bad in ("newest", "[]", '{"t": 5}', '{"t": {"0": -3}}'):
        with pytest.raises(ConfigError, match=r"--reset-offsets"):
            markers.parse_reset(bad)
    marker = markers.reset_marker("p", "latest", {"t": {0: 50}})
    assert marker.to_summary()["frazil.reset"] == "latest"


def test_filter_is_needed_only_when_a_batch_may_start_below_the_marker() -> None:
    marker = _marker({"t": {0: 10, 1: 5}})
    assert markers.starts_at_or_after({"t": {0: 10, 1: 5}}, marker)
    assert markers.starts_at_or_after({"t": {0: 12, 1: 5, 2: 0}}, marker)
    assert not markers.starts_at_or_after({"t": {0: 9, 1: 5}}, marker)
    assert not markers.starts_at_or_after({"t": {0: 10}}, marker)  # partition 1 unknown
    assert not markers.starts_at_or_after(None, marker)
    assert markers.starts_at_or_after(None, None)
