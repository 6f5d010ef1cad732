"""Durations such as ``trigger: 1s`` or ``500ms``."""

from __future__ import annotations

import re

_DURATION = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?|d|days?)\s*$"
)
_FACTOR = {"ms": 0.001, "mi": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """Return the duration in seconds.

    Raises:
        ValueError: ``text`` is not a number followed by ms, s, m, h or d.
    """
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration such as 500ms, 1s, 5m or 1h")
    unit = match.group(2)
    key = "mi" if unit.startswith("milli") else ("m" if unit.startswith("min") else unit[:1])
    if unit == "ms":
        key = "ms"
    return float(match.group(1)) * _FACTOR[key]
