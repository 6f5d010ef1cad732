"""The batch window and cursor without Spark: where a batch starts, what lags, its markers."""

from __future__ import annotations

from typing import Any

import pytest

from frazil.engine.window import BatchCursor, BatchWindow
from frazil.errors import PipelineError
from frazil.progress import offset_rules
from frazil.progress.markers import Marker
from frazil.progress.offset_rules import PartitionStats

#: When the offset log says a batch was planned: a minute apart, batch 0 at this instant.
PLANNED_AT_0 = 1_800_000_000_000


class _Log:
    """The checkpoint's offset log: planned offsets by batch id (purged ones missing)."""

    def __init__(self, planned: dict[int, dict[str, dict[int, int]]]) -> None:
        self.planned = planned

    def planned_offsets(self, batch_id: int) -> dict[str, dict[int, int]]:
        if batch_id not in self.planned:
            raise PipelineError(f"batch {batch_id} is not in the offset log")
        return self.planned[batch_id]

    def planned_at_ms(self, batch_id: int) -> int | None:
        return PLANNED_AT_0 + 60_000 * batch_id

    def initial_offsets(self) -> dict[str, dict[int, int]] | None:
        return self.initial

    initial: dict[str, dict[int, int]] | None = None


class _Admin:
    def __init__(self, latest: dict[str, dict[int, int]]) -> None:
        self.latest = latest
        self.asked: list[dict[str, list[int]]] = []

    def offsets(self, partitions: dict[str, list[int]], spec: str) -> dict[str, dict[int, int]]:
        assert spec == "latest"
        self.asked.append(partitions)
        return self.latest


def _cursor(log: dict[int, dict[str, dict[int, int]]], admin: Any = None) -> BatchCursor:
    return BatchCursor(_Log(log), admin)  # type: ignore[arg-type]


def _window(cursor: BatchCursor, batch_id: int) -> BatchWindow:
    return cursor.open(None, batch_id, cursor.planned(batch_id), 0.0, "q")  # type: ignore[arg-type]


def test_a_batch_starts_at_the_previous_batch_end() -> None:
    cursor = _cursor({0: {"t": {0: 5}}, 1: {"t": {0: 9}}})
    first = _window(cursor, 0)
    assert first.start is None  # the first batch of a checkpoint: the filter decides
    cursor.done(first)
    assert _window(cursor, 1).start == {"t": {0: 5}}


def test_without_the_previous_batch_the_offset_log_tells_where_it_starts() -> None:
    cursor = _cursor({3: {"t": {0: 30}}, 4: {"t": {0: 40}}})
    assert _window(cursor, 4).start == {"t": {0: 30}}


def test_a_purged_previous_batch_leaves_the_start_unknown() -> None:
    cursor = _cursor({4: {"t": {0: 40}}})
    assert _window(cursor, 4).start is None


def test_a_new_query_forgets_the_previous_batch() -> None:
    cursor = _cursor({0: {"t": {0: 5}}, 1: {"t": {0: 9}}})
    cursor.done(_window(cursor, 0))
    cursor.new_query()
    assert cursor.last is None
    assert _window(cursor, 1).start == {"t": {0: 5}}  # from the log, not remembered


def test_a_skipped_batch_moves_the_start_but_keeps_the_lagging_partitions() -> None:
    admin = _Admin({"t": {0: 50, 1: 9}})
    cursor = _cursor({0: {"t": {0: 5, 1: 9}}, 1: {"t": {0: 9, 1: 9}}}, admin)
    cursor.done(_window(cursor, 0))
    cursor.skipped(1, {"t": {0: 9, 1: 9}})
    last = cursor.last
    assert last is not None
    assert (last.batch_id, last.planned, last.lagging) == (1, {"t": {0: 9, 1: 9}}, {("t", 0)})


def test_lagging_partitions_come_from_kafka_only_with_an_admin() -> None:
    planned = {"t": {0: 5, 1: 9}}
    assert _window(_cursor({0: planned}), 0).lagging == set()
    admin = _Admin({"t": {0: 8, 1: 9}})
    window = _window(_cursor({0: planned}, admin), 0)
    assert window.lagging == {("t", 0)}
    assert admin.asked == [{"t": [0, 1]}]


def test_partitions_are_sorted_by_topic_then_partition() -> None:
    window = _window(_cursor({0: {"b": {1: 1, 0: 1}, "a": {2: 1}}}), 0)
    assert window.partitions == (("a", 2), ("b", 0), ("b", 1))


def test_the_window_makes_each_commit_marker_from_the_planned_range() -> None:
    cursor = _cursor({6: {"t": {0: 20, 1: 4}}, 5: {"t": {0: 10, 1: 4}}})
    window = _window(cursor, 6)
    previous = Marker(pipeline="p", offsets={"t": {0: 10, 1: 4}}, max_timestamps={"t": {0: 7}})
    marker = window.marker(previous, "p", {("t", 0): PartitionStats(11)})
    assert marker.offsets == {"t": {0: 20, 1: 4}}
    assert marker.max_timestamps["t"][0] == 11
    assert (marker.batch_id, marker.query_id, marker.pipeline) == (6, "q", "p")
    # Never below what the table holds already (a replayed, re-planned batch).
    assert window.marker(Marker("p", {"t": {0: 30, 1: 4}}), "p", {}).offsets == {"t": {0: 30, 1: 4}}


def test_valid_through_counts_from_when_spark_planned_the_batch() -> None:
    # Batch 6 was planned at PLANNED_AT_0 + 6 min (a replay may run it much later): partition 1,
    # read to its end then but idle, holds the mark back to that moment less the slack.
    window = _window(_cursor({6: {"t": {0: 20, 1: 4}}, 5: {"t": {0: 10, 1: 4}}}), 6)
    planned_at = PLANNED_AT_0 + 6 * 60_000
    assert window.planned_at_ms == planned_at
    fresh = planned_at - 1_000
    marker = window.marker(None, "p", {("t", 0): PartitionStats(fresh)})
    assert marker.valid_through_ms == planned_at - offset_rules.CAUGHT_UP_SLACK_MS
    cursor = _cursor({6: {"t": {0: 20, 1: 4}}})
    cursor.done(_window(cursor, 6))
    assert cursor.last is not None and cursor.last.planned_at_ms == planned_at
    # A start marker knows nothing of when its offsets were read: the mark stays.
    assert (
        window.start_marker(Marker("p", {"t": {0: 10}}, valid_through_ms=5), "p").valid_through_ms
        == 5
    )


def test_a_start_marker_holds_everything_before_the_batch() -> None:
    window = _window(_cursor({6: {"t": {0: 20}}, 5: {"t": {0: 10}}}), 6)
    start = window.start_marker(None, "p")
    assert (start.offsets, start.batch_id, start.query_id) == ({"t": {0: 10}}, 5, "q")
    assert window.starts_at(start)
    assert not window.starts_at(Marker("p", {"t": {0: 12}}))


class _Topics:
    """Kafka's topic ids now."""

    def __init__(self, ids: dict[str, str]) -> None:
        self.ids = ids

    def topic_ids(self, topics: Any) -> dict[str, str]:
        return {t: i for t, i in self.ids.items() if t in set(topics)}


def test_a_topic_created_again_under_the_query_stops_the_batch() -> None:
    from frazil.errors import TopicRecreated

    kafka = _Topics({"t": "a", "u": "b"})
    cursor = BatchCursor(_Log({}), None, kafka)  # type: ignore[arg-type]
    cursor.new_query({"t": "a"})
    # A topic the query discovered is recorded as first seen.
    assert cursor.topic_ids("p", {"t": {0: 1}, "u": {0: 1}}) == {"t": "a", "u": "b"}
    kafka.ids["t"] = "c"
    with pytest.raises(TopicRecreated) as info:
        cursor.topic_ids("p", {"t": {0: 1}})
    assert info.value.topics == [("t", "a", "c")]
    assert "t (topic id a -> c)" in str(info.value)
    # A new query starts from the ids its offsets were decided on.
    cursor.new_query({"t": "c"})
    assert cursor.topic_ids("p", {"t": {0: 0}}) == {"t": "c"}


def test_a_window_leaves_out_the_old_offsets_of_a_topic_created_again() -> None:
    from frazil.progress.table_markers import TableState

    window = BatchWindow(
        batch=None,  # type: ignore[arg-type]
        batch_id=0,
        planned={"t": {0: 300}},
        start=None,
        lagging=set(),
        started=0.0,
        query_id="q",
        topic_ids={"t": "new"},
    )
    old = TableState(Marker("p", {"t": {0: 5000}}, topic_ids={"t": "old"}), 1, 5000)
    assert window.current(old).marker == Marker(
        "p",
        {},
        commit_id=old.marker.commit_id,  # type: ignore[union-attr]
    )
    marker = window.marker(old.marker, "p", {})
    assert marker.offsets == {"t": {0: 300}} and marker.topic_ids == {"t": "new"}


def _planned_window(start: dict[str, dict[int, int]] | None) -> BatchWindow:
    planned = {"t": {0: 15, 1: 10, 2: 7}, "u": {0: 3}}
    return BatchWindow(None, 4, planned, start, set(), 0.0, "q")  # type: ignore[arg-type]


def test_a_window_counts_its_records_and_the_partitions_it_reads() -> None:
    window = _planned_window({"t": {0: 5, 1: 10, 2: 7}, "u": {0: 0}})
    assert window.records == 13
    assert window.ranges == 2  # t/1 and t/2 are idle
    # A partition the start does not name is not known to hold records.
    assert _planned_window({"t": {0: 5}}).ranges == 1
    unknown = _planned_window(None)
    assert unknown.records is None
    assert unknown.ranges == 4


def test_a_querys_first_batch_counts_its_records_from_the_sources_initial_offsets() -> None:
    log = _Log({0: {"t": {0: 15, 1: 10}}})
    log.initial = {"t": {0: 5, 1: 10}}
    cursor = BatchCursor(log)  # type: ignore[arg-type]
    window = cursor.open(None, 0, log.planned[0], 0.0, "q")  # type: ignore[arg-type]
    # The markers and the offset filter still go by the start, which is not known.
    assert window.start is None
    assert window.records == 10 and window.ranges == 1
