"""``string`` and ``bytes``: the payload as one column, undecoded (``value`` / ``key``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.decode.fixed import FixedShape
from frazil.decode.registry import BuildContext, Decoded, Format, register

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class PassThrough(FixedShape):
    """The payload as text (UTF-8; bytes that are not, in hex) or as bytes."""

    name: str
    binary: bool

    @property
    def schema(self) -> StructType:
        """One field named after the part (``value`` or ``key``)."""
        from pyspark.sql.types import BinaryType, StringType, StructField, StructType

        return StructType([StructField(self.name, BinaryType() if self.binary else StringType())])

    def decode(self, data: Column) -> Decoded:
        """The payload; never an error (text that is not UTF-8 is quoted in hex after
        ``(not UTF-8, hex)``: Iceberg's ``string`` type is UTF-8 and its readers refuse
        anything else; ``bytes`` keeps every byte)."""
        from pyspark.sql import functions as F

        value = data if self.binary else c.utf8_text(data)
        return Decoded(value=value, error=F.lit(None).cast(c.ERROR_DDL))


def _name(context: BuildContext) -> str:
    return context.decoding.column


register(Format("string", lambda context: PassThrough(_name(context), binary=False)))
register(Format("bytes", lambda context: PassThrough(_name(context), binary=True)))
