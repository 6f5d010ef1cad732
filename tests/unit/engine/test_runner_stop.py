"""How a run that was asked to stop ends when its last batch failed."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from frazil.engine.runner import _raise_first_failure, _wait
from frazil.errors import PipelineError, PipelineFailed, TopicRecreated

PROXY = "An exception was raised by the Python Proxy. Return Message: Traceback ..."


#: Nothing listens on port 1 here.
KAFKA = SimpleNamespace(kafka=SimpleNamespace(bootstrap_servers="127.0.0.1:1"))


def _run(restart: str | None, failure: str = PROXY) -> Any:
    return SimpleNamespace(
        pipeline=SimpleNamespace(name="p"),
        config=KAFKA,
        handler=SimpleNamespace(error=None, failure=None, restart=restart),
        query=SimpleNamespace(exception=lambda: failure),
    )


def test_a_table_rolled_back_during_the_last_batch_ends_the_stop_cleanly() -> None:
    # Found in the chaos test (seed 27052): a rollback, then SIGTERM while the batch that
    # found it was in flight; the run exited 1 although nothing was lost.
    _raise_first_failure([_run("table lake.db.t went back from ... (rolled back?)")])


def test_any_other_failure_of_the_last_batch_is_reported() -> None:
    with pytest.raises(PipelineError, match="pipeline 'p' failed: An exception was raised"):
        _raise_first_failure([_run(None)])


def test_a_query_that_gave_up_on_kafka_is_reported_in_frazils_words() -> None:
    gone = "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node"
    with pytest.raises(PipelineError) as failed:
        _raise_first_failure([_run(None, gone)])
    assert str(failed.value).startswith(
        "pipeline 'p' stopped: Kafka did not answer at 127.0.0.1:1 (kafka.bootstrap_servers): "
        "127.0.0.1:1 refused the connection"
    )


def test_the_batchs_own_exception_is_reported_as_the_cause() -> None:
    # Spark's text for a failed callback is "An exception was raised by the Python Proxy",
    # the cause deep in a quoted traceback: the batch's own exception is the cause instead.
    run = _run(None)
    run.handler.failure = RuntimeError("Invalid value abc for configuration max.poll.records")
    with pytest.raises(PipelineFailed, match=r"^pipeline 'p' failed: Invalid value abc") as failed:
        _raise_first_failure([run])
    assert failed.value.__cause__ is run.handler.failure


class _LateFailure:
    """A handler whose batch fails (a topic created again) just after the runner first looked:
    the first read of ``error`` sees none, every later one the failure, until the restart."""

    def __init__(self) -> None:
        self.reads = 0
        self.found: BaseException | None = TopicRecreated("p", [("t", "a", "b")])
        self.failure = None
        self.restart = None

    @property
    def error(self) -> BaseException | None:
        self.reads += 1
        return None if self.reads == 1 else self.found


def test_a_batch_failing_just_after_the_look_is_restarted_not_reported() -> None:
    # Found in CI (test_topic_changes): the batch's TopicRecreated landed between the loop's
    # look at the run and a second look at all runs, and the run ended with it.
    stop = threading.Event()
    handler = _LateFailure()
    restarted: list[str] = []

    def restart_from_table(why: str) -> None:
        restarted.append(why)
        handler.found = None
        stop.set()

    query = SimpleNamespace(isActive=True, exception=lambda: None)
    query.awaitTermination = lambda timeout: None
    run = SimpleNamespace(
        pipeline=SimpleNamespace(name="p"),
        config=KAFKA,
        handler=handler,
        query=query,
        warming=False,
        hand_over=lambda: False,
        restart_cause=lambda: str(handler.found) if handler.found else None,
        restart_from_table=restart_from_table,
    )
    _wait([run], stop)
    assert restarted and "created again" in restarted[0]
