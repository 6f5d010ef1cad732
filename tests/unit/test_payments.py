"""Unit tests of the synthetic payment events (and of the producer's rate limiter)."""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timezone

import pytest

from frazil.generate.payments import (
    MAX_AMOUNT,
    MAX_DOCUMENT,
    PAYMENT_TYPES,
    PaymentGenerator,
    generate_payments,
)
from frazil.generate.producer import TokenBucket

CREATED_AT_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
# 2024-02-29T12:23:03.417Z
FIXED_NS = 1_709_209_383_417_000_000


def fixed_clock() -> int:
    return FIXED_NS


def test_event_has_the_documented_shape_and_types() -> None:
    key, value = PaymentGenerator(seed=1)()
    event = json.loads(value)

    assert list(event) == ["id", "type", "created_at", "document", "payer", "amount"]
    assert isinstance(event["id"], str)
    assert event["type"] in PAYMENT_TYPES
    assert isinstance(event["created_at"], str)
    assert CREATED_AT_RE.match(event["created_at"])
    assert isinstance(event["document"], str)
    assert event["document"].isdigit()
    assert isinstance(event["payer"], str)
    assert event["payer"].strip()
    assert type(event["amount"]) is int
    assert 1 <= event["amount"] <= MAX_AMOUNT
    assert key == event["id"].encode()


def test_value_is_compact_json_that_round_trips() -> None:
    generator = PaymentGenerator(seed=2)
    for _ in range(200):
        _, value = generator()
        event = json.loads(value)
        assert json.dumps(event, separators=(",", ":")).encode() == value


def test_ids_are_valid_unique_uuid4() -> None:
    ids = [json.loads(value)["id"] for _, value in generate_payments(5_000, seed=3)]

    assert len(set(ids)) == len(ids)
    for event_id in ids[:500]:
        parsed = uuid.UUID(event_id)
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
        assert str(parsed) == event_id


def test_created_at_is_utc_now_with_milliseconds() -> None:
    before = datetime.now(timezone.utc).replace(microsecond=0)
    _, value = PaymentGenerator()()
    after = datetime.now(timezone.utc)

    created_at = datetime.fromisoformat(json.loads(value)["created_at"].replace("Z", "+00:00"))
    assert before <= created_at <= after


def test_created_at_follows_the_injected_clock() -> None:
    _, value = PaymentGenerator(seed=4, clock_ns=fixed_clock)()

    assert json.loads(value)["created_at"] == "2024-02-29T12:23:03.417Z"


def test_created_at_pads_milliseconds() -> None:
    _, value = PaymentGenerator(clock_ns=lambda: 1_709_209_383_007_999_999)()

    assert json.loads(value)["created_at"] == "2024-02-29T12:23:03.007Z"


def test_same_seed_gives_same_events() -> None:
    first = PaymentGenerator(seed=42, clock_ns=fixed_clock)
    second = PaymentGenerator(seed=42, clock_ns=fixed_clock)

    assert [first() for _ in range(100)] == [second() for _ in range(100)]


def test_seed_fixes_everything_but_created_at() -> None:
    def strip_time(records: list[tuple[bytes, bytes]]) -> list[dict[str, object]]:
        events = [json.loads(value) for _, value in records]
        for event in events:
            del event["created_at"]
        return events

    assert strip_time(list(generate_payments(50, seed=7))) == strip_time(
        list(generate_payments(50, seed=7))
    )


def test_different_or_no_seed_gives_different_events() -> None:
    assert PaymentGenerator(seed=1)() != PaymentGenerator(seed=2)()
    assert PaymentGenerator()() != PaymentGenerator()()


def test_values_spread_over_their_ranges() -> None:
    events = [json.loads(value) for _, value in generate_payments(3_000, seed=5)]

    assert {event["type"] for event in events} == set(PAYMENT_TYPES)
    assert len({event["payer"] for event in events}) > 1_000
    assert all(0 <= int(event["document"]) < MAX_DOCUMENT for event in events)
    assert len({event["amount"] for event in events}) > 2_000


def test_name_pool_size_is_respected() -> None:
    generator = PaymentGenerator(seed=6, name_pool_size=3)
    payers = {json.loads(generator()[1])["payer"] for _ in range(300)}

    assert 1 <= len(payers) <= 3


def test_name_pool_must_not_be_empty() -> None:
    with pytest.raises(ValueError, match="name_pool_size"):
        PaymentGenerator(name_pool_size=0)


class FakeTime:
    """A monotonic clock that only moves when the code under test waits."""

    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def wait(self, seconds: float) -> None:
        assert 0.001 <= seconds <= 0.005
        # Oversleep a little, like a real sleep would.
        self.now += seconds * 1.3


@pytest.mark.parametrize("rate", [7.0, 1_000.0, 5_000.0, 250_000.0])
def test_token_bucket_holds_the_average_rate(rate: float) -> None:
    fake = FakeTime()
    bucket = TokenBucket(rate, clock=fake.clock)
    total = int(rate * 10)

    granted = 0
    while granted < total:
        granted += bucket.take(min(1_000, total - granted), fake.wait)

    # The first token is free, so N events take (N - 1) / rate, give or take one wait slice.
    assert fake.now == pytest.approx((total - 1) / rate, abs=0.01)


def test_token_bucket_caps_bursts_after_idling() -> None:
    fake = FakeTime()
    bucket = TokenBucket(100.0, burst=5, clock=fake.clock)
    fake.now += 60

    assert bucket.take(1_000, fake.wait) == 5


def test_token_bucket_rejects_non_positive_rates() -> None:
    with pytest.raises(ValueError, match="rate"):
        TokenBucket(0)
