"""The error mark a decoder sets on a record it cannot decode."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil import columns as c

if TYPE_CHECKING:
    from pyspark.sql import Column

#: Reason of a value with nothing in it to decode (no bytes after a wire-format header, or
#: nothing but whitespace for JSON), whatever the format.
EMPTY = "empty value"


def decode_error(reason: Column, detail: Column) -> Column:
    """The error struct of stage ``decode`` (``columns.ERROR_DDL``)."""
    from pyspark.sql import functions as F

    return F.struct(
        F.lit(c.STAGE_DECODE).alias("stage"),
        reason.cast("string").alias("reason"),
        detail.cast("string").alias("detail"),
    )


def hex_prefix(data: Column, length: int = 32) -> Column:
    """The first ``length`` bytes of a binary value in hex, quoted in error details."""
    from pyspark.sql import functions as F

    return F.hex(F.substring(data, 1, length))


#: Longest value quoted in a reason (as the JVM decoder's ``JsonDecoder.QUOTED_CHARS``).
QUOTED_CHARS = 60


def quoted_value(text: Column) -> Column:
    """``text`` as a reason quotes it: in single quotes, cut at :data:`QUOTED_CHARS`
    characters (then …), backslash, quote, newline, tab and carriage return escaped."""
    from pyspark.sql import functions as F

    cut = F.substring(text, 1, QUOTED_CHARS)
    # Java's regular expressions: in the replacement, \\ is one backslash, $1 the group.
    escaped = F.regexp_replace(cut, r"([\\'])", r"\\$1")
    for char, letter in (("\n", "n"), ("\t", "t"), ("\r", "r")):
        escaped = F.regexp_replace(escaped, char, "\\\\" + letter)
    more = F.when(F.length(text) > QUOTED_CHARS, F.lit("…")).otherwise(F.lit(""))
    return F.concat(F.lit("'"), escaped, F.lit("'"), more)
