"""Dead-letter reasons: what they are grouped and counted by.

A reason may quote the record's value (``field 'ts' does not parse as timestamp:
'yesterday-ish'``), so there are as many reasons as bad values. Grouped by their *kind*, the
reason without that value (``field 'ts' does not parse as timestamp``), ``frazil dlq show``,
the run's counts and its log lines stay a handful however many values are bad; the dead-letter
table keeps each record's full reason. A metric label goes further (:func:`reason_label`).
"""

from __future__ import annotations

import re

#: The value a reason quotes at its end (Java's and Python's regular expressions alike, so
#: Spark SQL and PyArrow group as this module does).
VALUE_QUOTED = r": '(?:[^'\\]|\\.)*'…?$"
_VALUE = re.compile(VALUE_QUOTED)

#: Quoted text in a reason: a field's name, a record's value.
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'…?")
#: The name after a word that names a table, topic or position (not a word of the sentence).
_NAMED = re.compile(
    r"\b(table|topic|partition|offset|id)\s+(?!(?:the|a|an|of|is|does|to|for|in)\b)"
    r"[^\s'(),;:]+"
)
#: A number of three digits or more (a size, a count); a type's (decimal(10,2)) stays.
_NUMBER = re.compile(r"\d{3,}")
#: Longest reason label.
_LABEL_CHARS = 120


def reason_kind(reason: str) -> str:
    """The reason without the value it quotes at its end, if any."""
    return _VALUE.sub("", reason)


def reason_label(reason: str) -> str:
    """A reason as a metric label: its wording without the values, names and numbers it
    quotes (``field '…' does not parse as timestamp: '…'``), so that the label takes a bounded
    set of values (Prometheus' guidance on label cardinality)."""
    label = _QUOTED.sub("'…'", reason)
    label = _NAMED.sub(r"\1 …", label)
    label = _NUMBER.sub("N", label)
    return label[:_LABEL_CHARS]
