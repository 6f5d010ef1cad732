"""Synthetic payment events, fast enough to feed a broker at full speed from one Python thread.

One event, serialized as compact JSON (keys always in this order)::

    {"id":"0f8fad5b-d9cb-469f-a165-70867728950e","type":"debit",
     "created_at":"2024-02-29T12:23:03.417Z","document":"75",
     "payer":"Miss Aniya Rath","amount":9424}

``created_at`` is the wall-clock time the event was generated, in UTC, formatted as ISO 8601
with millisecond precision and a literal ``Z`` (:data:`CREATED_AT_FORMAT`). Spark parses it
unchanged: ``from_json`` with its default ``timestampFormat``
(``yyyy-MM-dd'T'HH:mm:ss[.SSS][XXX]``), ``to_timestamp(col)`` without a format, a plain
``CAST(col AS TIMESTAMP)``, or explicitly with :data:`SPARK_CREATED_AT_PATTERN`. The ``Z``
makes the instant unambiguous whatever the Spark session time zone is.

Every value comes from one :class:`random.Random`, so a seed reproduces the same ids, types,
documents, payers and amounts (for a given Faker version, which supplies the payer names);
``created_at`` stays the real event time unless a clock is injected.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from typing import Final

from faker import Faker

#: The values of the ``type`` field.
PAYMENT_TYPES: Final[tuple[str, ...]] = ("debit", "credit", "bank_slip")

#: ``created_at`` layout in :func:`time.strftime` terms plus milliseconds, e.g.
#: ``2024-02-29T12:23:03.417Z`` (always UTC).
CREATED_AT_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.<milliseconds>Z"

#: The same layout as a Spark datetime pattern, for ``to_timestamp(col, pattern)``.
SPARK_CREATED_AT_PATTERN: Final = "yyyy-MM-dd'T'HH:mm:ss.SSSX"

#: The payment event's fields as a frazil config ``schema:`` block.
PAYMENTS_SCHEMA: Final = {
    "id": "string",
    "type": "string",
    "created_at": "timestamp",
    "document": "string",
    "payer": "string",
    "amount": "long",
}

#: Spark DDL schema of one payment event, usable with ``from_json``.
SPARK_SCHEMA_DDL: Final = (
    "id STRING, type STRING, created_at TIMESTAMP, document STRING, payer STRING, amount BIGINT"
)

#: ``amount`` is drawn uniformly from ``[1, MAX_AMOUNT]`` (think cents).
MAX_AMOUNT: Final = 100_000

#: ``document`` is the decimal form of an integer drawn uniformly from ``[0, MAX_DOCUMENT)``.
MAX_DOCUMENT: Final = 1_000_000

#: Names drawn from Faker once, then reused: Faker costs ~100 µs per name, far too slow per event.
DEFAULT_NAME_POOL_SIZE: Final = 2_000

# Bit masks turning 128 random bits into a valid RFC 4122 version-4 UUID, exactly as
# uuid.UUID(int=..., version=4) does but without building a UUID object per event.
_UUID_CLEAR: Final = ~((0xF000 << 64) | (0xC000 << 48))
_UUID_SET: Final = (0x4000 << 64) | (0x8000 << 48)


class PaymentGenerator:
    """Makes payment events as Kafka ``(key, value)`` byte pairs.

    Calling the instance returns the next record: the key is the event ``id`` (UTF-8) and the
    value the compact JSON object described in the module docstring. An instance is an
    ``EventFactory`` for :func:`frazil.generate.producer.produce_events`. Not thread-safe.

    Args:
        seed: Seed for every random choice (and for Faker's name pool). ``None`` seeds from the
            operating system, so ids are then unique across runs as well.
        name_pool_size: How many distinct payer names to pre-generate.
        clock_ns: Source of the event time in nanoseconds since the Unix epoch; tests inject a
            fixed clock to make ``created_at`` reproducible too.
    """

    __slots__ = (
        "_clock_ns",
        "_last_ms",
        "_last_second",
        "_last_stamp",
        "_names",
        "_random",
        "_second_prefix",
    )

    def __init__(
        self,
        seed: int | None = None,
        *,
        name_pool_size: int = DEFAULT_NAME_POOL_SIZE,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        if name_pool_size < 1:
            raise ValueError(f"name_pool_size must be at least 1, got {name_pool_size}")
        rng = random.Random(seed)
        fake = Faker("en_US")
        fake.seed_instance(rng.getrandbits(64))
        # Names are JSON-encoded once here so the per-event path is plain string formatting.
        self._names: tuple[str, ...] = tuple(json.dumps(fake.name()) for _ in range(name_pool_size))
        self._random = rng
        self._clock_ns = clock_ns
        self._last_ms = -1
        self._last_second = -1
        self._last_stamp = ""
        self._second_prefix = ""

    def _created_at(self) -> str:
        # Formatting a datetime costs more than the rest of the event, so the text is cached per
        # millisecond and its seconds part per second.
        ms = self._clock_ns() // 1_000_000
        if ms != self._last_ms:
            second, millis = divmod(ms, 1000)
            if second != self._last_second:
                self._second_prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
                self._last_second = second
            self._last_stamp = f"{self._second_prefix}.{millis:03d}Z"
            self._last_ms = ms
        return self._last_stamp

    def __call__(self) -> tuple[bytes, bytes]:
        """Return the next event as ``(key, value)``: the id and the JSON object, both bytes."""
        rnd = self._random.random
        n = (self._random.getrandbits(128) & _UUID_CLEAR) | _UUID_SET
        h = f"{n:032x}"
        event_id = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        value = (
            f'{{"id":"{event_id}",'
            f'"type":"{PAYMENT_TYPES[int(rnd() * 3)]}",'
            f'"created_at":"{self._created_at()}",'
            f'"document":"{int(rnd() * MAX_DOCUMENT)}",'
            f'"payer":{self._names[int(rnd() * len(self._names))]},'
            f'"amount":{int(rnd() * MAX_AMOUNT) + 1}}}'
        )
        return event_id.encode(), value.encode()


def generate_payments(count: int, seed: int | None = None) -> Iterator[tuple[bytes, bytes]]:
    """Yield ``count`` payment records as ``(key, value)`` byte pairs.

    Args:
        count: How many records to yield.
        seed: See :class:`PaymentGenerator`.

    Yields:
        ``(key, value)``: the event id and the compact JSON event, both UTF-8 bytes.
    """
    generator = PaymentGenerator(seed)
    for _ in range(count):
        yield generator()
