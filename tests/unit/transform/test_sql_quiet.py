"""``sql.quiet()`` silences the query-context loggers as PySparkLoggers, which PySpark can use."""

from __future__ import annotations

import logging

import pytest
from pyspark.logger import PySparkLogger

from frazil.transform import sql

_NAMES = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")


def test_quiet_creates_the_loggers_pyspark_logs_an_errors_context_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As under `frazil --verbose`: nothing created the loggers before the transforms' check
    # (a registry of loggers without them, the process's own back after the test).
    manager = logging.Logger.manager
    others = {k: v for k, v in manager.loggerDict.items() if k not in _NAMES}
    monkeypatch.setattr(manager, "loggerDict", others)

    with sql.quiet():
        assert all(logging.getLogger(name).disabled for name in _NAMES)

    for name in _NAMES:
        logger = logging.getLogger(name)
        assert isinstance(logger, PySparkLogger)
        assert not logger.disabled
        # What PySpark's AnalysisException does when built (a plain Logger raised TypeError:
        # "Logger._log() got an unexpected keyword argument 'file'"); the line goes to stderr.
        logger.exception("msg", file="<stdin>", line="1", fragment="f", errorClass="X")
