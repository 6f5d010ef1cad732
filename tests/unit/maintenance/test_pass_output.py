"""What ``frazil optimize`` prints for each planned action: what it did, why it failed, or
why this pass skipped it (not the plan's reason for it)."""

from __future__ import annotations

import json

from frazil.cli.app import OutputFormat, console
from frazil.cli.tables_cmd import _render
from frazil.maintenance.actions import ActionResult
from frazil.maintenance.passes import TableReport
from frazil.maintenance.planner import Planned
from tests.unit.maintenance.test_planner import _health

SKIP = "a pipeline's MERGE into it lost to a concurrent commit 40s ago"


def _report() -> TableReport:
    planned = [
        Planned("compaction", "1 partition(s) with small files"),
        Planned("expire", "3 snapshot(s) older than 1d"),
        Planned("orphans", "files no snapshot uses"),
    ]
    report = TableReport("db.t", _health(), planned)
    report.results = [
        ActionResult("db.t", "compaction", 0.0, "", skipped=SKIP),
        ActionResult("db.t", "expire", 0.4, "3 snapshots expired"),
        ActionResult("db.t", "orphans", 0.2, "", error="orphans of db.t failed: gone"),
    ]
    return report


def test_each_planned_action_says_what_it_did_or_why_not() -> None:
    with console.capture() as captured:
        _render([_report()], False, OutputFormat.text)
    text = " ".join(captured.get().split())
    assert f"skipped compaction: {SKIP}" in text
    assert "with small files" not in text  # the plan's reason is not why it was skipped
    assert "expire (0.4s): 3 snapshots expired" in text
    assert "orphans failed: orphans of db.t failed: gone" in text


def test_json_output_carries_why_an_action_was_skipped() -> None:
    with console.capture() as captured:
        _render([_report()], False, OutputFormat.json)
    [table] = json.loads(captured.get())
    assert [(r["action"], r["skipped"], r["error"]) for r in table["results"]] == [
        ("compaction", SKIP, None),
        ("expire", None, None),
        ("orphans", None, "orphans of db.t failed: gone"),
    ]
