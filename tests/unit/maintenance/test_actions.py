"""Retrying maintenance actions after commit conflicts, and naming what failed."""

from __future__ import annotations

import pytest

from frazil.errors import MaintenanceError
from frazil.maintenance import actions
from frazil.maintenance.actions import with_retries


def test_a_conflict_is_retried_and_another_failure_names_the_jvms_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(actions, "BACKOFF_S", 0.0)
    calls: list[int] = []

    def conflicting() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("org.apache.iceberg.exceptions.CommitFailedException: changed")
        return "done"

    assert with_retries("compaction of db.t", conflicting) == "done"
    assert len(calls) == 3

    def broken() -> str:
        # As py4j words a JVM failure: its first line only names the call.
        raise RuntimeError(
            "An error occurred while calling o354.execute.\n"
            ": org.apache.iceberg.exceptions.RuntimeIOException: Failed to open m1.avro\n"
            "\tat org.apache.iceberg.Foo.bar(Foo.java:1)"
        )

    with pytest.raises(MaintenanceError) as info:
        with_retries("manifests of db.t", broken)
    assert str(info.value) == (
        "manifests of db.t failed: "
        "org.apache.iceberg.exceptions.RuntimeIOException: Failed to open m1.avro"
    )


def test_file_group_commits_that_lost_are_retried_then_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Iceberg's compaction with partial progress and no failed commit allowed: a file
    group's commit that lost to a pipeline's commit fails the action (by default it is only
    logged, and the pass said "0 data files rewritten" with no reason)."""
    monkeypatch.setattr(actions, "BACKOFF_S", 0.0)
    calls: list[int] = []

    def losing() -> str:
        calls.append(1)
        raise RuntimeError(
            "An error occurred while calling o501.execute.\n"
            ": java.lang.RuntimeException: partial-progress.enabled is true but 1 rewrite "
            "commits failed. This is more than the maximum allowed failures of 0. Check the "
            "logs to determine why the individual commits failed.\n\tat org.apache.Foo(X.java:1)"
        )

    with pytest.raises(MaintenanceError) as info:
        with_retries("compaction of db.t", losing)
    assert len(calls) == actions.ATTEMPTS
    assert str(info.value) == (
        "compaction of db.t failed: its commits kept losing to concurrent commits of the table "
        "(a pipeline writing it: Iceberg refuses a rewrite of files another commit deleted rows "
        "of); the next pass tries again"
    )
