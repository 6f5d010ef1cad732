"""Ctrl-C during a run: the first says at once what it does, a second stops without waiting."""

from __future__ import annotations

import os
import signal

import pytest

from frazil.engine.runner import AGAIN, STOPPING, StoppedNow, _Signals


def test_a_first_ctrl_c_says_what_it_does_and_a_second_stops_now() -> None:
    said: list[str] = []
    # Whatever handled Ctrl-C before (Python's own; PySpark's once a SparkContext started in
    # this process) handles it again after the run.
    before = signal.getsignal(signal.SIGINT)
    with _Signals(said.append) as signals:
        os.kill(os.getpid(), signal.SIGINT)
        assert signals.stop.is_set()
        assert said == ["stopping after the batch in flight commits (Ctrl-C again to stop now)"]
        with pytest.raises(StoppedNow):
            os.kill(os.getpid(), signal.SIGINT)
    assert said == [STOPPING + AGAIN]
    assert signal.getsignal(signal.SIGINT) is before


def test_sigterm_stops_after_the_batch_and_a_second_one_changes_nothing() -> None:
    said: list[str] = []
    with _Signals(said.append) as signals:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.stop.is_set()
    assert said == ["stopping after the batch in flight commits"]


def test_stopped_now_is_no_exception_a_handler_could_take_for_a_failure() -> None:
    assert not issubclass(StoppedNow, Exception)
    # Py4J logs a KeyboardInterrupt that interrupts a call into the JVM with a stack trace.
    assert not issubclass(StoppedNow, KeyboardInterrupt)
