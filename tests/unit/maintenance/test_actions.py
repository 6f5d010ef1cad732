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
