"""JVM options as Spark's ``extraJavaOptions`` strings hold them."""

from __future__ import annotations

from pathlib import Path

__all__ = ["java_option"]

_SPECIAL = frozenset("\"'\\")


def java_option(flag: str, value: str | Path) -> str:
    """``flag`` followed by ``value``, one option of an ``extraJavaOptions`` string.

    Spark splits that string at white space, honouring quotes and backslashes (its
    launcher's ``parseOptionString``): a value holding either (a folder named ``My
    Projects``) is written in double quotes, its backslashes and double quotes escaped, so
    that the JVM gets it whole. Other values are written as they are.

    Args:
        flag: The option up to its value, e.g. ``-Dfrazil.log.file=``.
        value: A path or other text.
    """
    text = str(value)
    if not any(ch.isspace() or ch in _SPECIAL for ch in text):
        return f"{flag}{text}"
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'{flag}"{escaped}"'
