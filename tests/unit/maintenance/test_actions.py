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


def test_a_compaction_that_rewrote_nothing_says_why() -> None:
    from frazil.maintenance.actions import _compaction_text

    assert _compaction_text(0, 0, 0, 0, 0, overtaken=1) == (
        "nothing rewritten: another commit of the table (a pipeline writing it) came in while "
        "the compaction ran, and Iceberg dropped the rewrites it conflicted with; the next pass "
        "tries again"
    )
    assert _compaction_text(0, 0, 0, 0, 0) == (
        "nothing rewritten: Iceberg's planner found no file group to rewrite"
    )
    assert _compaction_text(3, 2 * 1024**2, 1, 0, 0, overtaken=1) == (
        "3 data files (2.0 MiB) rewritten into 1, 0 delete files removed"
    )
