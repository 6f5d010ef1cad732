"""The maintenance planner, health score and expiry cutoff: pure rules, no Spark."""

from __future__ import annotations

import dataclasses

import pytest

from frazil.config import parse_config
from frazil.config.maintenance import MaintenancePolicy, ResolvedPolicy, parse_size
from frazil.errors import ConfigError
from frazil.maintenance.expiry import Protected, expiry_cutoff
from frazil.maintenance.health import PartitionHealth, TableHealth, _expirable, score
from frazil.maintenance.planner import ORDER, plan

NOW = 1_800_000_000_000


def _health(**changes: object) -> TableHealth:
    base = TableHealth(
        table="lake.db.t",
        target_file_bytes=128 * 1024**2,
        small_below_bytes=96 * 1024**2,
        data_files=10,
        data_bytes=10_000,
        records=100,
        small_files=10,
        delete_files=0,
        avg_file_bytes=1_000,
        median_file_bytes=1_000,
        snapshots=10,
        expirable_snapshots=0,
        manifests=3,
        metadata_files=5,
        metadata_bytes=5_000,
        last_commit_ms=NOW,
        last_maintenance_ms=None,
        orphans_checked_ms=NOW,
        format_version=2,
        score=100,
        reasons=(),
        partitions=(
            PartitionHealth("a", 8, 8_000, 8, 1_000, 0, 80),
            PartitionHealth("b", 2, 2_000, 2, 1_000, 0, 20),
        ),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_small_files_in_a_partition_lower_the_score_and_plan_compaction() -> None:
    policy = ResolvedPolicy()
    scored = score(_health(), policy)
    assert scored.partitions_to_compact == 1  # b has 2 small files, below min_small_files 5
    assert scored.score < 100
    assert scored.reasons == (
        "8 small data files (below 96.0 MiB) in 1 partition(s) with 5 or more "
        "(maintenance.compaction.min_small_files)",
    )
    assert [p.action for p in plan(scored, policy, NOW)] == ["compaction"]


def test_a_healthy_table_scores_100_and_needs_nothing() -> None:
    healthy = _health(
        small_files=0,
        partitions=(PartitionHealth("a", 1, 200 * 1024**2, 0, 1, 0, 10),),
    )
    scored = score(healthy, ResolvedPolicy())
    assert (scored.score, scored.reasons) == (100, ())
    assert plan(scored, ResolvedPolicy(), NOW) == []


def test_deletes_manifests_expiry_and_orphans_in_order() -> None:
    policy = ResolvedPolicy.of(
        MaintenancePolicy.model_validate({"retention": {"column": "ts", "older_than": "30d"}})
    )
    needy = _health(
        delete_files=4,
        manifests=25,
        expirable_snapshots=7,
        orphans_checked_ms=None,
        partitions=(PartitionHealth("a", 3, 3_000, 3, 1_000, 4, 30),),
    )
    scored = score(needy, policy)
    planned = [p.action for p in plan(scored, policy, NOW)]
    assert planned == list(ORDER)
    assert any("delete files" in r for r in scored.reasons)
    assert any("25 manifests" in r for r in scored.reasons)
    assert any("7 snapshots" in r for r in scored.reasons)


def test_format_3_tables_get_no_position_delete_rewrite() -> None:
    needy = score(_health(delete_files=4, format_version=3), ResolvedPolicy())
    assert "deletes" not in [p.action for p in plan(needy, ResolvedPolicy(), NOW)]


def test_orphans_only_once_per_every() -> None:
    policy = ResolvedPolicy()
    recent = score(
        _health(small_files=0, partitions=(), orphans_checked_ms=NOW - 3_600_000), policy
    )
    assert "orphans" not in [p.action for p in plan(recent, policy, NOW)]
    old = dataclasses.replace(recent, orphans_checked_ms=NOW - 2 * 86_400_000)
    assert "orphans" in [p.action for p in plan(old, policy, NOW)]


def test_disabled_sections_plan_nothing() -> None:
    policy = ResolvedPolicy.of(
        MaintenancePolicy.model_validate(
            {"compaction": {"enabled": False}, "orphans": {"enabled": False}}
        )
    )
    assert plan(score(_health(orphans_checked_ms=None), policy), policy, NOW) == []


def test_expiry_never_reaches_the_newest_marker() -> None:
    assert expiry_cutoff(NOW, 3600, None) == NOW - 3_600_000
    assert expiry_cutoff(NOW, 3600, NOW - 10_000_000) == NOW - 10_000_000
    assert expiry_cutoff(NOW, 3600, NOW - 1_000) == NOW - 3_600_000
    assert Protected({"a": 5, "a/dlq": 3}).since_ms == 3
    assert Protected({}).since_ms is None


def test_expirable_counts_old_snapshots_beyond_retain_last_before_the_marker() -> None:
    policy = ResolvedPolicy.of(
        MaintenancePolicy.model_validate({"expire": {"older_than": "1ms", "retain_last": 2}})
    )
    times = [1_000, 2_000, 3_000, 4_000, 5_000]
    assert _expirable(times, policy, None) == 3
    assert _expirable(times, policy, 2_000) == 1  # the marker snapshot at 2000 and later stay


def test_sections_replace_sections_and_defaults_fill_the_rest() -> None:
    config = parse_config(
        {
            "maintenance": {"expire": {"older_than": "2h"}, "compaction": {"min_small_files": 9}},
            "pipelines": [
                {
                    "name": "a",
                    "topics": ["t"],
                    "table": "db.t",
                    "maintenance": {"compaction": {"strategy": "sort", "sort_by": ["id"]}},
                    "tables": {"db.t": {"maintenance": {"expire": {"retain_last": 3}}}},
                }
            ],
        }
    )
    policy = config.policy_for(config.pipelines[0], "db.t")
    assert policy.expire.retain_last == 3 and policy.expire.older_than == "1h"
    assert policy.compaction.strategy == "sort" and policy.compaction.min_small_files == 5
    other = config.policy_for(None, "db.x")
    assert other.expire.older_than == "2h" and other.compaction.min_small_files == 9


@pytest.mark.parametrize(
    ("maintenance", "message"),
    [
        ({"orphans": {"older_than": "12h"}}, "maintenance.orphans.older_than: must be at least 1d"),
        ({"compaction": {"strategy": "zorder"}}, "strategy zorder needs 'sort_by'"),
        ({"compaction": {"sort_by": ["id"]}}, "'sort_by' applies to strategies sort and zorder"),
        ({"expire": {"older_than": "soon"}}, "is not a duration"),
        ({"compaction": {"target_file_size": "big"}}, "is not a size"),
        ({"interval": "0s"}, "maintenance.interval: must be longer than zero"),
        ({"merge_backoff": "a while"}, "maintenance.merge_backoff: 'a while' is not a duration"),
        ({"retention": {"column": "ts"}}, "maintenance.retention.older_than"),
    ],
)
def test_policy_errors_name_their_key(maintenance: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as failed:
        parse_config(
            {
                "maintenance": maintenance,
                "pipelines": [{"name": "a", "topics": ["t"], "table": "db.t"}],
            }
        )
    assert message in str(failed.value)


def test_sizes() -> None:
    assert parse_size("128MB") == 128_000_000
    assert parse_size("64MiB") == 64 * 1024**2
    assert parse_size("1048576") == 1048576
    assert parse_size(5) == 5
    with pytest.raises(ValueError, match="not a size"):
        parse_size("12 parsecs")
