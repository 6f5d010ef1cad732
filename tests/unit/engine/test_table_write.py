"""How many tasks (and data files) a one-table append takes, without Spark."""

from __future__ import annotations

from frazil.engine.table_write import ONE_TASK_RECORDS, RECORDS_PER_TASK, write_tasks


def test_a_trickle_is_one_task_and_one_file() -> None:
    assert write_tasks(15, ranges=4, cores=2) == 1
    assert write_tasks(ONE_TASK_RECORDS - 1, ranges=64, cores=2) == 1


def test_a_larger_batch_keeps_every_core_busy_and_needs_a_task_per_share() -> None:
    assert write_tasks(20_000, ranges=4, cores=2) == 2
    assert write_tasks(20 * RECORDS_PER_TASK, ranges=64, cores=2) == 20


def test_a_batch_is_read_as_planned_when_it_needs_its_tasks_or_its_size_is_unknown() -> None:
    assert write_tasks(500_000, ranges=4, cores=2) is None
    assert write_tasks(1, ranges=1, cores=2) is None
    assert write_tasks(20_000, ranges=2, cores=2) is None
    assert write_tasks(None, ranges=64, cores=2) is None
