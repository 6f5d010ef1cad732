""" "Did you mean …?" for a near miss: a key, a transform, a format, a type or a partition
transform written almost as frazil knows it (``topic`` for ``topics``, ``flaten``).

:func:`did_you_mean` words the hint; :mod:`frazil.config.known_keys` finds the keys a config
model takes at an error's location, so an unknown key is compared with its section's only.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

#: How close a word must be to be suggested (difflib's ratio): ``topic``/``topics`` is 0.91,
#: ``flaten``/``flatten`` 0.92, ``jsn``/``json`` 0.86, ``dayz``/``days`` 0.75; unrelated words
#: stay below (``value``/``table`` is 0.6).
CUTOFF = 0.75

_QUOTED = re.compile(r"'([^']*)'")


def did_you_mean(word: object, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to ``word``, or ``""`` if none is close.

    Args:
        word: What the config wrote; anything but a string gets no hint.
        choices: What it may be.
    """
    if not isinstance(word, str) or not word:
        return ""
    options = [choice for choice in dict.fromkeys(choices) if choice != word]
    matches = difflib.get_close_matches(word, options, n=1, cutoff=CUTOFF)
    return f" (did you mean {matches[0]!r}?)" if matches else ""


def quoted_choices(expected: str) -> list[str]:
    """The values of pydantic's ``expected`` text (``"'json', 'avro' or 'bytes'"``)."""
    return _QUOTED.findall(expected)
