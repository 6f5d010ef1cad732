"""How many tasks (and data files) a one-table append takes, and when a merged table is
said to be crowded with files, without Spark."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

from frazil.engine.table_write import (
    CROWDED_FILES,
    ONE_TASK_RECORDS,
    RECORDS_PER_TASK,
    TableWriter,
    write_tasks,
)


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


def test_a_merged_table_crowded_with_files_is_said_once(caplog: Any) -> None:
    totals = {"total-data-files": 120, "total-delete-files": 60}
    target = SimpleNamespace(
        qualified="lake.db.orders",
        table=SimpleNamespace(current_total=lambda key: totals[key]),
    )
    writer = TableWriter(None, None, None, None, None, None)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="frazil.engine.table_write"):
        writer._say_if_crowded(target)  # type: ignore[arg-type]
        totals["total-delete-files"] = CROWDED_FILES - 120
        for _ in range(3):
            writer._say_if_crowded(target)  # type: ignore[arg-type]
    assert [r.getMessage() for r in caplog.records] == [
        "lake.db.orders holds 120 data and 80 delete files: each MERGE reads them all and "
        "slows as they grow; compact the table (maintenance: {mode: inline}, frazil maintain "
        "beside the run, or frazil optimize; see docs/maintenance.md)"
    ]
