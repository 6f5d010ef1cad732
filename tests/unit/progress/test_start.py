"""Where a run starts, without Spark: the table against the checkpoint, resuming, resets."""

from __future__ import annotations

import pytest

from frazil.errors import ConfigError, PipelineError
from frazil.progress import markers
from frazil.progress.markers import Marker
from frazil.progress.start import (
    Start,
    ahead_of,
    decide_start,
    parse_reset,
    reset_marker,
    resolve_reset,
    resume_offsets,
)
from frazil.progress.table_markers import TableState


def _marker(offsets: dict[str, dict[int, int]], **extra: object) -> Marker:
    return Marker(pipeline="p", offsets=offsets, **extra)  # type: ignore[arg-type]


def test_ahead_of_names_partitions_the_table_does_not_hold() -> None:
    marker = _marker({"t": {0: 10, 1: 5}})
    assert ahead_of({"t": {0: 10, 1: 4}}, marker) == []
    assert ahead_of({"t": {0: 11, 1: 5}, "u": {0: 3}}, marker) == ["t/0", "u/0"]
    assert ahead_of({"t": {0: 0}}, None) == []
    assert ahead_of({"t": {0: 1}}, None) == ["t/0"]


def _state(marker: Marker | None, rows: int = 0) -> TableState:
    return TableState(marker=marker, snapshot_id=1 if rows or marker else None, total_records=rows)


def test_start_refuses_a_filled_table_without_this_pipelines_marker() -> None:
    with pytest.raises(PipelineError) as info:
        decide_start("p", "db.t", _state(None, rows=1234), None, False)
    message = str(info.value)
    assert "table db.t holds 1,234 rows but no progress marker of this pipeline" in message
    assert "--reset-offsets earliest, latest" in message


def test_start_decisions() -> None:
    marker = _marker({"t": {0: 10}})
    # New pipeline on a new table: the config's starting_offsets.
    assert decide_start("p", "db.t", _state(None), None, False) == Start(reason="new pipeline")
    # Lost checkpoint: from the table.
    start = decide_start("p", "db.t", _state(marker, 5), None, False)
    assert start.from_table and not start.set_aside
    # Checkpoint behind or level with the table: keep it (the offset filter drops repeats).
    assert decide_start("p", "db.t", _state(marker, 5), {"t": {0: 4}}, True) == (Start())
    # Checkpoint ahead (the table was rolled back): the table wins.
    start = decide_start("p", "db.t", _state(marker, 5), {"t": {0: 12}}, True)
    assert start.from_table and start.set_aside and "t/0" in start.reason
    # Table emptied (rolled back before the first commit) but the checkpoint went on.
    start = decide_start("p", "db.t", _state(None), {"t": {0: 12}}, True)
    assert start.set_aside and start.use_starting_offsets


def test_a_topic_created_again_sets_the_checkpoint_aside_and_starts_from_the_table() -> None:
    # The marker (its old topic's offsets already left out) and a checkpoint level with it:
    # the checkpoint still holds the old topic's offsets.
    marker = _marker({"u": {0: 10}})
    start = decide_start("p", "db.t", _state(marker, 5), {"t": {0: 50}, "u": {0: 10}}, True, ["t"])
    assert start.from_table and start.set_aside
    assert "topic(s) t were deleted and created again" in start.reason
    start = decide_start("p", "db.t", _state(marker, 5), None, False, ["t"])
    assert start.from_table and not start.set_aside
    assert decide_start("p", "db.t", _state(marker, 5), {"u": {0: 10}}, True, []) == Start()


def test_a_reset_names_only_the_topics_kafka_has_with_their_ids() -> None:
    marker = reset_marker("p", "latest", {"t": {0: 4}}, {"t": "i", "gone": "g"})
    assert marker.offsets == {"t": {0: 4}} and marker.topic_ids == {"t": "i"}
    assert marker.reset == "latest"


def test_resume_offsets_follow_the_partitions_kafka_has_now() -> None:
    marker = _marker({"t": {0: 10, 1: 4}, "deleted": {0: 3}})
    assert resume_offsets(marker, {"t": [0, 1, 2], "new": [0]}) == {
        "t": {0: 10, 1: 4, 2: markers.EARLIEST},
        "new": {0: markers.EARLIEST},
    }


def test_parse_and_resolve_reset() -> None:
    current = {"t": [0, 1]}
    earliest = {"t": {0: 3, 1: 0}}
    latest = {"t": {0: 50, 1: 60}}
    assert resolve_reset("earliest", current, earliest, latest) == {"t": {0: 3, 1: 0}}
    assert resolve_reset("latest", current, earliest, latest) == {"t": {0: 50, 1: 60}}
    spec = parse_reset('{"t": {"0": 42}}')
    assert resolve_reset(spec, current, earliest, latest) == {"t": {0: 42, 1: 0}}
    spec = parse_reset('{"t": {"0": -1, "1": -2}}')
    assert resolve_reset(spec, current, earliest, latest) == {"t": {0: 50, 1: 0}}
    for bad in ("newest", "[]", '{"t": 5}', '{"t": {"0": -3}}'):
        with pytest.raises(ConfigError, match=r"--reset-offsets"):
            parse_reset(bad)
    marker = reset_marker("p", "latest", {"t": {0: 50}})
    assert marker.to_summary()["frazil.reset"] == "latest"
