"""JSON values landed whole in one ``variant`` column (``variant: <column>``), in the JVM.

Spark's ``try_parse_json`` turns each value's text into a variant, whatever its shape: fields
that come and go, a field that is a number in one record and a string in the next, any nesting,
arrays, a bare string or number. So no record is a dead letter for its shape, only for what
is not JSON or passes a limit:

- ``empty value``: nothing but whitespace;
- ``larger than variant_max_bytes (N bytes)``: more bytes than ``variant_max_bytes``
  (default and most 16MiB, which Jackson and Spark's variant builder always take: the
  builder refuses a variant over 128 MiB, and a value encodes in up to about three times its
  text);
- ``nested deeper than variant_max_depth (N levels of objects and arrays)``: Jackson, which
  ``parse_json`` parses with, stops at 1000 levels;
- ``not valid JSON``: what ``try_parse_json`` does not read (malformed, truncated, not UTF-8,
  a byte-order mark, single quotes, ``NaN``);
- ``not valid JSON: more follows the first value``: ``parse_json`` reads the first value of
  ``{"a": 1} {"b": 2}`` and drops the rest; frazil does not drop data silently.

How deep a value nests and whether more follows it comes from ``dev.frazil.spark.JsonDepth``,
an expression of frazil's own over the value's bytes (one pass, strings skipped), since
Spark's functions do not say. Values in the Schema Registry wire format are read after their
header, as the typed JSON decoder reads them. Duplicate keys keep the last value (the session's
``spark.sql.variant.allowDuplicateKeys``), as ``from_json`` and frazil's JSON decoder do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.decode.errors import EMPTY, decode_error
from frazil.decode.fixed import FixedShape
from frazil.decode.registry import BuildContext, Decoded
from frazil.jvm.columns import jvm_column

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import StructType

#: Reason of a value ``try_parse_json`` does not read.
NOT_JSON = "not valid JSON"
#: Reason of a value with more than whitespace after its first JSON value.
TRAILING = "not valid JSON: more follows the first value"
#: Reason of a value whose bytes are not UTF-8 (Spark's parse would replace them).
NOT_UTF8 = "not valid JSON: not UTF-8 (JSON text is UTF-8, RFC 8259)"
#: Reason of a value with half a surrogate pair escaped alone (Spark's parse makes it `?`).
LONE_SURROGATE = "not valid JSON: half a UTF-16 surrogate pair escaped alone, not a character"
#: An escaped high surrogate without its low half after it, or a low one without its high
#: half before it (Java's regex; an escaped backslash before ``\u`` is no escape).
_LONE_SURROGATE = (
    r"(?i)(?<!\\)\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f][0-9a-f]{2})"
    r"|(?<!\\ud[89ab][0-9a-f]{2})(?<!\\)\\ud[c-f][0-9a-f]{2}"
)
#: What ``JsonDepth`` gives for a value with more after its first JSON value.
_TRAILING_DEPTH = -1
#: Characters of a bad value quoted in its error detail (as the JSON decoder quotes).
_QUOTED_CHARS = 200


def too_large(limit: int) -> str:
    """Reason of a value longer than ``variant_max_bytes``."""
    return f"larger than variant_max_bytes ({limit} bytes)"


def too_deep(limit: int) -> str:
    """Reason of a value nested deeper than ``variant_max_depth``."""
    return f"nested deeper than variant_max_depth ({limit} levels of objects and arrays)"


def json_depth(data: Column) -> Column:
    """How deep each value (binary) nests, or -1 when more follows its first JSON value:
    frazil's ``dev.frazil.spark.JsonDepth`` expression, resolved in the session's JVM."""
    return jvm_column("dev.frazil.spark.JsonDepth", "column", data)


def _text(data: Column) -> Column:
    """The JSON text of a value, without a Schema Registry wire-format header."""
    from pyspark.sql import functions as F

    header = F.startswith(data, F.lit(b"\x00"))
    return F.when(header, F.substring(data, 6, 2**31 - 1)).otherwise(data).cast("string")


@dataclass(frozen=True)
class VariantDecoder(FixedShape):
    """Each JSON value as one ``variant`` in :attr:`column`; a null value (a tombstone) is
    null, not an error.

    Attributes:
        column: The variant column (``variant``).
        max_depth: ``variant_max_depth``.
        max_bytes: ``variant_max_bytes`` in bytes.
    """

    column: str
    max_depth: int
    max_bytes: int

    @property
    def schema(self) -> StructType:
        """One ``variant`` field named after :attr:`column`."""
        from pyspark.sql.types import StructField, StructType, VariantType

        return StructType([StructField(self.column, VariantType())])

    def decode(self, data: Column) -> Decoded:
        """The variant, parsed only within the limits, and the reason of a value that is
        not landed."""
        from pyspark.sql import functions as F

        text = _text(data)
        size = F.octet_length(data)
        depth = json_depth(data)
        # What Spark's parse would not keep as written: bytes that are not UTF-8 (replaced)
        # and lone surrogate halves (made `?`): dead letters, as the JSON decoder's are.
        utf8 = F.is_valid_utf8(text)
        lone = F.coalesce(
            text.contains("\\u") & F.regexp_like(text, F.lit(_LONE_SURROGATE)), F.lit(False)
        )
        within = (size <= F.lit(self.max_bytes)) & (depth <= F.lit(self.max_depth)) & utf8 & ~lone
        # Gated on its input, not by a CASE around it: Spark's optimiser pushes a test of a
        # CASE's result into its branches, where it is no longer the same subexpression.
        parsed = F.try_parse_json(F.when(within, text))
        detail = F.substring(text, 1, _QUOTED_CHARS)
        # The parse is evaluated for every record in both columns (the value itself, the
        # error's first test): one common subexpression, parsed once per record. A parse
        # inside a branch would be evaluated again for the other column. A value with more
        # after its first JSON value keeps that value in the batch; its error sends it to the
        # dead letters.
        landed = parsed.isNotNull() & (depth != F.lit(_TRAILING_DEPTH))
        error = (
            F.when(landed | data.isNull(), F.lit(None))
            .when(
                size > F.lit(self.max_bytes),
                decode_error(
                    F.lit(too_large(self.max_bytes)),
                    F.concat(size.cast("string"), F.lit(" bytes: "), detail),
                ),
            )
            .when(
                depth > F.lit(self.max_depth), decode_error(F.lit(too_deep(self.max_depth)), detail)
            )
            .when(~utf8, decode_error(F.lit(NOT_UTF8), detail))
            .when(lone, decode_error(F.lit(LONE_SURROGATE), detail))
            .when(
                parsed.isNull(),
                F.when(
                    F.regexp_like(text, F.lit(r"^[ \t\r\n]*$")),
                    decode_error(F.lit(EMPTY), F.lit("")),
                ).otherwise(decode_error(F.lit(NOT_JSON), detail)),
            )
            .otherwise(decode_error(F.lit(TRAILING), detail))
        )
        value = parsed
        return Decoded(value=value, error=error.cast(c.ERROR_DDL))


def build(context: BuildContext) -> VariantDecoder:
    """The decoder of a ``variant`` value."""
    part = context.decoding
    assert part.variant is not None
    return VariantDecoder(part.variant, part.max_depth(), part.max_bytes())
