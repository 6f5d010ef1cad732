"""Exactly-once rules without Spark: markers, coverage, valid-through, start decisions, resets."""

from __future__ import annotations

from frazil.progress import markers, offset_rules, table_markers
from frazil.progress.markers import Marker
from frazil.progress.offset_rules import PartitionStats


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
    assert offset_rules.covered(marker, {"t": {0: 10, 1: 5}})
    assert offset_rules.covered(marker, {"t": {0: 3}})
    assert not offset_rules.covered(marker, {"t": {0: 10, 1: 6}})
    assert not offset_rules.covered(marker, {"t": {0: 10, 2: 1}})  # a partition it never saw
    assert not offset_rules.covered(None, {"t": {0: 1}})
    assert not offset_rules.covered(marker, {})


#: When the batches below were planned (epoch ms), and the slack a caught-up partition gets.
T = 1_800_000_000_000
SLACK = offset_rules.CAUGHT_UP_SLACK_MS


def test_next_marker_covers_idle_partitions_never_goes_back_and_keeps_unplanned_ones() -> None:
    previous = _marker(
        {"t": {0: 100, 1: 50}, "gone": {0: 9}},
        max_timestamps={"t": {0: T - 9_000, 1: T - 8_000}, "gone": {0: 5}},
        valid_through_ms=T - 2 * SLACK,
    )
    # An old checkpoint replays partition 1 below the marker; partition 2 is idle but planned.
    marker = offset_rules.next_marker(
        previous,
        "p",
        offset_rules.Basis({"t": {0: 120, 1: 40, 2: 0}}, batch_id=7, query_id="q", planned_at_ms=T),
        {("t", 0): PartitionStats(T - 1_000)},
    )
    # A topic the batch did not plan (deleted, or left out by a narrowed pattern) keeps its
    # offsets and largest timestamps: read again later, it continues where it was.
    assert marker.offsets == {"t": {0: 120, 1: 50, 2: 0}, "gone": {0: 9}}
    assert marker.max_timestamps == {"t": {0: T - 1_000, 1: T - 8_000}, "gone": {0: 5}}
    # Partition 2, read to its end but never written to, holds it back by the slack only.
    assert marker.valid_through_ms == T - SLACK
    assert marker.batch_id == 7


def test_a_topic_id_round_trips_and_a_topic_created_again_starts_over() -> None:
    previous = _marker(
        {"t": {0: 5000, 1: 5000}, "u": {0: 7}},
        max_timestamps={"t": {0: 1000}, "u": {0: 900}},
        topic_ids={"t": "old-id", "u": "u-id"},
    )
    summary = previous.to_summary()
    assert summary["frazil.topic-ids"] == '{"t":"old-id","u":"u-id"}'
    assert Marker.from_summary(summary.get) == previous
    assert "frazil.topic-ids" not in _marker({"t": {0: 1}}).to_summary()
    # "t" was deleted and created again: the new topic's 2,000 records are all new, and its
    # offsets replace the old topic's (not the larger of both).
    ids = {"t": "new-id", "u": "u-id"}
    assert markers.recreated_topics(previous, ids) == [("t", "old-id", "new-id")]
    assert markers.recreated_topics(previous, {"u": "u-id"}) == []  # "t" not in Kafka now
    assert markers.recreated_topics(_marker({"t": {0: 1}}), ids) == []  # no id recorded
    current = markers.current_topics(previous, ids)
    assert current is not None
    assert current.offsets == {"u": {0: 7}} and current.topic_ids == {"u": "u-id"}
    assert markers.current_topics(previous, {"t": "old-id"}) is previous
    marker = offset_rules.next_marker(
        previous,
        "p",
        offset_rules.Basis({"t": {0: 1200, 1: 800}}, batch_id=1, topic_ids={"t": "new-id"}),
        {("t", 0): PartitionStats(50)},
    )
    assert marker.offsets == {"t": {0: 1200, 1: 800}, "u": {0: 7}}
    assert marker.max_timestamps == {"t": {0: 50}, "u": {0: 900}}
    assert marker.topic_ids == {"t": "new-id", "u": "u-id"}
    # The old offsets no longer cover the new topic's batch.
    assert offset_rules.covered(previous, {"t": {0: 1200, 1: 800}})
    assert not offset_rules.covered(current, {"t": {0: 1200, 1: 800}})
    state = table_markers.TableState(previous, 3, 10)
    assert table_markers.current_state(state, ids).marker == current
    assert table_markers.current_state(state, {"t": "old-id"}) is state


def test_merged_markers_keep_the_topic_ids() -> None:
    a = _marker({"t": {0: 5}}, topic_ids={"t": "i"})
    b = _marker({"t": {0: 3}, "u": {0: 1}}, topic_ids={"t": "i", "u": "j"})
    merged = markers.merge_markers([a, b], lowest=True)
    assert merged is not None and merged.topic_ids == {"t": "i", "u": "j"}


def test_valid_through_is_the_minimum_over_partitions_even_when_all_are_read_to_their_end() -> None:
    planned = {"t": {0: 10, 1: 99}}
    stamps = {"t": {0: T - 1_000, 1: T - 2_000}}
    # Both read to their end: partition 1 has nothing after T-2s yet, but a record stamped
    # before T-1s could still come (producers batch and retry): the minimum, as the sink.
    assert offset_rules.valid_through(None, stamps, planned, set(), T) == T - 2_000
    # Partition 1 lags: nothing after its largest committed timestamp is known to be in.
    assert offset_rules.valid_through(None, stamps, planned, {("t", 1)}, T) == T - 2_000
    assert offset_rules.valid_through(None, stamps, planned, {("t", 0), ("t", 1)}, T) == T - 2_000


def test_an_idle_partition_read_to_its_end_holds_the_mark_back_by_the_slack_only() -> None:
    planned = {"t": {0: 10, 1: 99, 2: 0}}
    # Partition 1's newest record is three hours old, partition 2 never had one.
    stamps = {"t": {0: T - 1_000, 1: T - 3 * 3_600_000}}
    assert offset_rules.valid_through(None, stamps, planned, set(), T) == T - SLACK
    # Lagging, partition 1 holds it back to its newest committed record, however old.
    assert offset_rules.valid_through(None, stamps, planned, {("t", 1)}, T) == T - 3 * 3_600_000
    # A lagging partition with nothing committed yet keeps the previous mark.
    assert (
        offset_rules.valid_through(T - SLACK * 2, stamps, planned, {("t", 2)}, T) == T - SLACK * 2
    )
    assert offset_rules.valid_through(None, stamps, planned, {("t", 2)}, T) is None


def test_the_slack_is_the_pipelines_setting() -> None:
    # valid_through_slack: 0 for LogAppendTime topics without transactions (the broker's
    # clock stamps each record as it lands), longer for MirrorMaker 2 or event-time producers.
    planned = {"t": {0: 10, 1: 99}}
    stamps = {"t": {0: T - 1_000, 1: T - 3 * 3_600_000}}
    # Read to their end when planned: every record stamped before then is in.
    assert offset_rules.valid_through(None, stamps, planned, set(), T, slack_ms=0) == T
    assert (
        offset_rules.valid_through(None, stamps, planned, set(), T, slack_ms=600_000) == T - 600_000
    )
    marker = offset_rules.next_marker(
        None,
        "p",
        offset_rules.Basis(planned, batch_id=0, planned_at_ms=T, slack_ms=0),
        {("t", 0): PartitionStats(T - 1_000)},
    )
    assert marker.valid_through_ms == T


def test_a_producer_clock_ahead_never_makes_the_mark_claim_the_future() -> None:
    planned = {"t": {0: 10, 1: 99}}
    ahead = {"t": {0: T + 3_600_000, 1: T + 3_500_000}}
    assert offset_rules.valid_through(None, ahead, planned, set(), T) == T
    assert offset_rules.valid_through(None, ahead, planned, {("t", 0), ("t", 1)}, T) == T
    # One partition ahead, the other right: the right one decides.
    skewed = {"t": {0: T + 3_600_000, 1: T - 500}}
    assert offset_rules.valid_through(None, skewed, planned, set(), T) == T - 500


def test_valid_through_never_moves_back_and_stays_without_a_planning_time() -> None:
    planned = {"t": {0: 10, 1: 99}}
    stamps = {"t": {0: T - 1_000, 1: T - 2_000}}
    assert offset_rules.valid_through(T - 500, stamps, planned, set(), T) == T - 500
    # A start or reset marker does not know when its offsets were Kafka's latest.
    assert offset_rules.valid_through(T - 9_000, stamps, planned, set()) == T - 9_000
    assert offset_rules.valid_through(None, stamps, planned, set()) is None
    assert offset_rules.valid_through(None, {}, {}, set(), T) is None


def test_offset_filter_needs_a_marker() -> None:
    assert offset_rules.offset_filter(None) is None
    assert offset_rules.offset_filter(_marker({})) is None


def test_filter_is_needed_only_when_a_batch_may_start_below_the_marker() -> None:
    marker = _marker({"t": {0: 10, 1: 5}})
    assert offset_rules.starts_at_or_after({"t": {0: 10, 1: 5}}, marker)
    assert offset_rules.starts_at_or_after({"t": {0: 12, 1: 5, 2: 0}}, marker)
    assert not offset_rules.starts_at_or_after({"t": {0: 9, 1: 5}}, marker)
    assert not offset_rules.starts_at_or_after({"t": {0: 10}}, marker)  # partition 1 unknown
    assert not offset_rules.starts_at_or_after(None, marker)
    assert offset_rules.starts_at_or_after(None, None)
    # Partitions the batch does not plan (kept in the marker) hold none of its rows.
    kept = _marker({"t": {0: 10}, "gone": {0: 99}})
    assert not offset_rules.starts_at_or_after({"t": {0: 10}}, kept)
    assert offset_rules.starts_at_or_after({"t": {0: 10}}, kept, {"t": {0: 20}})
    assert not offset_rules.starts_at_or_after(
        {"t": {0: 10}}, kept, {"t": {0: 20}, "gone": {0: 99}}
    )


class _Tables:
    """Tables read at once, as the JVM hands them back (table_markers.MarkedTables)."""

    def __init__(self, raw: list[table_markers.RawState], found: list[int | None]) -> None:
        self.raw, self.found = raw, found
        self.asked: list[tuple[list[int | None], str, list[str]]] = []

    def states(self, pipeline: str, max_walk: int) -> list[table_markers.RawState]:
        return self.raw

    def interleaved(
        self,
        tables: object,
        bases: list[int | None],
        pipeline: str,
        commit_ids: list[str],
        max_walk: int,
    ) -> list[int | None]:
        self.asked.append((bases, pipeline, commit_ids))
        return self.found


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name


def test_states_read_at_once_become_markers_and_interleavings_name_their_table() -> None:
    marker = Marker(pipeline="p", offsets={"t": {0: 5}}, batch_id=2, commit_id="c2")
    tables = _Tables(
        [
            table_markers.RawState(11, 5, marker.to_summary()),
            table_markers.RawState(None, 0, None),
            # Entries of a snapshot without offsets are no marker.
            table_markers.RawState(12, 1, {"frazil.pipeline": "p"}),
        ],
        [None, 7],
    )
    states = table_markers.find_markers(tables, "p")
    assert states == [
        table_markers.TableState(marker, 11, 5),
        table_markers.TableState(None, None, 0),
        table_markers.TableState(None, 12, 1),
    ]
    errors = table_markers.check_no_interleavings(
        tables,
        [_Named("lake.db.a"), _Named("lake.db.b")],  # type: ignore[list-item]
        states[:2],
        [marker, marker],
    )
    assert tables.asked == [([11, None], "p", ["c2", "c2"])]
    assert errors[0] is None
    assert errors[1] is not None
    assert "table lake.db.b got a commit of the same pipeline from another run (snapshot 7)" in (
        str(errors[1])
    )


class _History:
    """A table's ancestry, newest first: (snapshot id, summary)."""

    def __init__(self, snapshots: list[tuple[int, dict[str, str]]]) -> None:
        self.snapshots = snapshots

    def ancestry(self) -> list[_View]:
        return [_View(i, s) for i, s in self.snapshots]


class _View:
    def __init__(self, snapshot_id: int, summary: dict[str, str]) -> None:
        self.snapshot_id = snapshot_id
        self.summary = summary

    def get(self, key: str) -> str | None:
        return self.summary.get(key)


def test_the_commit_that_took_a_batch_is_the_oldest_marker_covering_it() -> None:
    ids = {"t": "new-id"}
    old_topic = _marker({"t": {0: 10_000}}, topic_ids={"t": "old-id"}).to_summary()
    history = _History(
        [
            (5, _marker({"t": {0: 90}}, topic_ids=ids).to_summary()),
            (4, {"operation": "replace"}),  # a compaction: no marker
            (3, _marker({"t": {0: 50}}, topic_ids=ids).to_summary()),
            (2, _marker({"t": {0: 20}}, topic_ids=ids).to_summary()),
            (1, old_topic),  # the topic's earlier life: its offsets are not the batch's
        ]
    )
    assert table_markers.committed_in(history, "p", {"t": {0: 50}}, ids) == 3  # type: ignore[arg-type]
    assert table_markers.committed_in(history, "p", {"t": {0: 60}}, ids) == 5  # type: ignore[arg-type]
    assert table_markers.committed_in(history, "p", {"t": {0: 15}}, ids) == 2  # type: ignore[arg-type]
    assert table_markers.committed_in(history, "p", {"t": {0: 95}}, ids) is None  # type: ignore[arg-type]
    assert table_markers.committed_in(history, "q", {"t": {0: 15}}, ids) is None  # type: ignore[arg-type]
