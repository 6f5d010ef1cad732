"""A batch waiting on Kafka's offsets is said once it lasts, and when it ends; a query that
gave up on Kafka fails in frazil's words."""

from __future__ import annotations

import logging
from typing import Any

from frazil.engine.kafka_watch import STALLED_S, KafkaWatch, outage_error

#: Nothing listens on port 1 here: the probe says the connection was refused.
CLOSED = "127.0.0.1:1"
GETTING = {"message": "Getting offsets from KafkaV2[Subscribe[t]]", "isTriggerActive": True}
WAITING = {"message": "Waiting for next trigger", "isTriggerActive": False}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_long_wait_for_offsets_is_warned_of_once_and_its_end_said(caplog: Any) -> None:
    clock = Clock()
    watch = KafkaWatch("pay", CLOSED, clock)
    with caplog.at_level(logging.WARNING, logger="frazil.engine.kafka_watch"):
        watch.look(GETTING)
        clock.now += STALLED_S - 1
        watch.look(GETTING)
        assert not caplog.records  # a broker restarting takes seconds
        clock.now += 1
        watch.look(GETTING)
        clock.now += 60
        watch.look(GETTING)
        clock.now += 5
        watch.look(WAITING)
    first, last = (r.getMessage() for r in caplog.records)
    assert first.startswith(
        f"pay: Kafka has not answered for 30 s at {CLOSED} (kafka.bootstrap_servers): "
        "127.0.0.1:1 refused the connection (nothing listens on that port): the next batch waits"
    )
    assert "Nothing is lost" in first
    assert last == "pay: Kafka answers again after 95 s: the run goes on"


def test_short_waits_and_other_states_say_nothing(caplog: Any) -> None:
    clock = Clock()
    watch = KafkaWatch("pay", CLOSED, clock)
    with caplog.at_level(logging.WARNING, logger="frazil.engine.kafka_watch"):
        for status in (GETTING, WAITING, GETTING, None, GETTING):
            clock.now += STALLED_S / 2
            watch.look(status)
        # Getting offsets outside a trigger is no wait of a batch.
        for _ in range(3):
            clock.now += STALLED_S
            watch.look({**GETTING, "isTriggerActive": False})
    assert not caplog.records


def test_a_query_that_gave_up_on_kafka_fails_in_frazils_words() -> None:
    text = (
        "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node "
        "assignment. Call: listNodes\n\tat org.apache.spark..."
    )
    found = outage_error("pay", CLOSED, text)
    assert found is not None
    assert str(found) == (
        f"pipeline 'pay' stopped: Kafka did not answer at {CLOSED} (kafka.bootstrap_servers): "
        "127.0.0.1:1 refused the connection (nothing listens on that port) "
        "(org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node "
        "assignment. Call: listNodes). Nothing of the batch it was planning was written; the "
        "tables hold every record committed before it. Run again once Kafka answers: the "
        "pipeline goes on from the tables' offsets, nothing lost and nothing twice"
    )
    assert outage_error("pay", CLOSED, "java.lang.IllegalStateException: other") is None
