"""How a run that was asked to stop ends when its last batch failed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from frazil.engine.runner import _raise_first_failure
from frazil.errors import PipelineError

PROXY = "An exception was raised by the Python Proxy. Return Message: Traceback ..."


def _run(restart: str | None) -> Any:
    return SimpleNamespace(
        pipeline=SimpleNamespace(name="p"),
        handler=SimpleNamespace(error=None, restart=restart),
        query=SimpleNamespace(exception=lambda: PROXY),
    )


def test_a_table_rolled_back_during_the_last_batch_ends_the_stop_cleanly() -> None:
    # Found in the chaos test (seed 27052): a rollback, then SIGTERM while the batch that
    # found it was in flight; the run exited 1 although nothing was lost.
    _raise_first_failure([_run("table lake.db.t went back from ... (rolled back?)")])


def test_any_other_failure_of_the_last_batch_is_reported() -> None:
    with pytest.raises(PipelineError, match="pipeline 'p' failed: An exception was raised"):
        _raise_first_failure([_run(None)])
