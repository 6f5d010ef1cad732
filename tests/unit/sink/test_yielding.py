"""Maintenance and a table's MERGEs take turns; a noted MERGE conflict holds rewrites back."""

from __future__ import annotations

import threading

from frazil.sink import yielding


def test_a_rewrite_waits_for_the_running_merge_and_a_merge_for_the_running_rewrite() -> None:
    ended = yielding.merge_started("lake.db.t")
    with yielding.maintenance_turn("`lake`.`db`.`t`", wait_s=0.2) as free:
        assert not free  # the same table however quoted: the MERGE keeps it
    with yielding.maintenance_turn("lake.db.other", wait_s=0.2) as free:
        assert free
    ended()

    order: list[str] = []
    with yielding.maintenance_turn("lake.db.t", wait_s=5) as free:
        assert free

        def merging() -> None:
            done = yielding.merge_started("lake.db.t")
            order.append("merge")
            done()

        merge = threading.Thread(target=merging)
        merge.start()
        merge.join(0.3)
        assert merge.is_alive()  # held back while the rewrite runs
        order.append("rewrite ended")
    merge.join(5)
    assert order == ["rewrite ended", "merge"]


def test_a_merge_ended_by_an_error_frees_the_table() -> None:
    ended = yielding.merge_started("lake.db.e")
    ended()
    with yielding.maintenance_turn("lake.db.e", wait_s=0.1) as free:
        assert free


def test_rewrites_back_off_for_a_while_after_a_noted_conflict() -> None:
    now = 1_000_000_000
    assert yielding.backing_off(None, now) is None
    assert yielding.backing_off("not a time", now) is None
    assert yielding.backing_off(str(now - 30_000), now) == 30.0
    old = now - int(yielding.BACKOFF_S * 1000) - 1
    assert yielding.backing_off(str(old), now) is None


def test_the_back_off_follows_the_configured_length() -> None:
    now = 1_000_000_000
    assert yielding.backing_off(str(now - 30_000), now, backoff_s=20.0) is None
    assert yielding.backing_off(str(now - 10_000), now, backoff_s=20.0) == 10.0
    assert yielding.backing_off(str(now), now, backoff_s=0.0) is None
