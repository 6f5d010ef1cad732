"""Declared JSON columns plus one ``variant`` column for the rest (``schema`` with ``variant``).

Each record's declared fields land in their typed columns; everything else of the record lands
in the variant column, so nothing is lost and nothing is a dead letter for its shape or types:

- the fields the schema does not declare, at the top level, as they are;
- a declared field whose value does not read as its type (``"12 EUR"`` for a ``bigint``,
  ``"yesterday"`` for a ``timestamp``), or that holds fields its declared struct does not (at
  any depth, in lists and maps too): its whole value, under its own name, and the typed column
  is null for that record. A declared name found in the variant column is the sign of it:
  ``WHERE variant_get(rest, '$.amount') IS NOT NULL``;
- a value that is JSON but not an object (an array, a string, a number): whole, the typed
  columns null.

A declared field whose value is missing or ``null`` is null in its column and not in the
variant column; the variant column is null when the record had nothing else. A value reads as
its type exactly as the typed JSON decoder reads it (the same decoder, ``json_decoder``: the
same tokens per type, timestamps, ``timestamp_format``, decimals rounded half-up). Values that
are not JSON or pass a limit (``variant_max_depth``, ``variant_max_bytes``) are dead letters
with the reasons of :mod:`frazil.decode.variant`.

Each record is decoded once into the declared columns; only a record that does not read whole
(a type mismatch; with a struct declared anywhere, also any field the schema does not declare,
at any depth: the JSON decoder marks unknown fields at every depth alike) has each of its
declared fields read again on its own, to tell which ones fit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.decode.fixed import NothingLearned
from frazil.decode.registry import Decoded, Decoder
from frazil.decode.shapes import let
from frazil.decode.variant import VariantDecoder

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructField, StructType

#: The typed JSON decoder of a struct: ``strict`` marks fields the struct does not declare.
Reader = Callable[["StructType", bool], Decoder]


@dataclass(frozen=True)
class TypedRestDecoder(NothingLearned):
    """Declared fields into typed columns, the rest of each JSON value into a ``variant``:
    nothing is learned, what the schema does not declare lands in the variant.

    Attributes:
        declared: The declared fields (``schema``).
        column: The variant column of the rest (``variant``).
        whole: Parses each value whole into a variant, within the limits.
        reader: The typed JSON decoder (``json_decoder``, ``timestamp_format``).
    """

    declared: StructType
    column: str
    whole: VariantDecoder
    reader: Reader

    @property
    def schema(self) -> StructType:
        """The declared fields, then the variant column."""
        from pyspark.sql.types import StructField, StructType, VariantType

        return StructType([*self.declared.fields, StructField(self.column, VariantType())])

    @property
    def scalar(self) -> bool:
        """A struct of the declared fields and the variant."""
        return False

    #: Decoded as one struct, its error inside (as :data:`frazil.columns.ERROR`), in a select
    #: of its own; the next takes the columns out of it (see :meth:`decode`).
    packed = True

    def decode(self, data: Column) -> Decoded:
        """The typed fields and the rest, and the error of a value that is not JSON or passes
        a limit, as one struct.

        The record's parts are bound once each (:func:`~frazil.decode.shapes.let`): Spark
        shares no work between the branches of the columns' conditions, so each use of the
        variant, its fields or the typed row would parse the record again. The error rides in
        the struct, since apart it would parse the value again too; the plan computes the
        struct in a select of its own and takes the columns out of it in the next
        (:attr:`packed`).
        """
        from pyspark.sql import functions as F

        parsed = self.whole.decode(data)
        at_once = self._reader(self.declared).decode(data)
        bound = F.struct(
            parsed.value.alias("variant"),
            parsed.error.cast(c.ERROR_DDL).alias("error"),
            at_once.value.alias("typed"),
            at_once.error.isNull().alias("reads"),
        )

        def split(x: Column) -> Column:
            # The value's top-level fields, each a variant; null for an array or a scalar.
            entries = F.try_variant_get(x["variant"], "$", "map<string,variant>")
            return let(entries, lambda e: F.struct(*self._columns(x, e)))

        value = F.when(data.isNotNull(), let(bound, split))
        return Decoded(value=value, error=value[c.ERROR])

    def _columns(self, bound: Column, entries: Column) -> list[Column]:
        """The declared fields, the rest and the error, named, of one record's parts."""
        fields = self._split(bound, entries)
        return [
            *[col.alias(n) for n, col in fields.items()],
            bound["error"].alias(c.ERROR),
        ]

    def _split(self, bound: Column, entries: Column) -> dict[str, Column]:
        """The declared fields and the rest, of one record's parts."""
        from pyspark.sql import functions as F

        # Frazil's decoder marks a record whose fields all read; with a nested declared
        # struct it also marks fields that struct does not declare (they must not be lost).
        whole_reads = bound["reads"]
        fields: dict[str, Column] = {}
        misfits: list[Column] = []
        for field in self.declared.fields:
            raw = F.element_at(entries, F.lit(field.name))
            reads = self._field_alone(field, raw, strict=False)
            assert reads.fields is not None
            # A nested struct's value that reads fills its column even with fields the struct
            # does not declare; the whole value is kept in the rest too.
            whole = reads
            if _holds_struct(field.dataType):
                whole = self._field_alone(field, raw, strict=True)
            fields[field.name] = F.when(whole_reads, bound["typed"][field.name]).when(
                reads.error.isNull(), reads.fields[field.name]
            )
            misfits.append(
                F.when(
                    raw.isNotNull() & whole.error.isNotNull(),
                    F.struct(F.lit(field.name).alias("key"), raw.alias("value")),
                )
            )
        fields[self.column] = _rest(bound["variant"], entries, self.declared, whole_reads, misfits)
        return fields

    def _reader(self, schema: StructType) -> Decoder:
        # strict: a field a nested struct does not declare is an error, so the record is
        # read field by field and that value kept whole; a flat schema only meets top-level
        # fields of its own, which the rest takes by name.
        return self.reader(schema, _nests(schema))

    def _field_alone(self, field: StructField, raw: Column, *, strict: bool) -> Decoded:
        """``field`` read from a JSON object holding only its value (``raw``, a variant);
        ``strict``: fields a struct in it does not declare are errors."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        text = F.concat(F.lit("{" + json.dumps(field.name) + ":"), F.to_json(raw), F.lit("}"))
        return self.reader(StructType([field]), strict).decode(F.encode(text, "UTF-8"))


def _rest(
    variant: Column,
    entries: Column,
    declared: StructType,
    whole_reads: Column,
    misfits: list[Column],
) -> Column:
    """The variant of what the typed columns do not hold: undeclared fields and misfits, or
    the whole value when it is not an object; null when nothing is left.

    A record that reads whole only sheds its declared fields (a lambda over literals: the
    misfits' expressions are not evaluated per field of every record); the others get their
    misfits' values back under their names.
    """
    from pyspark.sql import functions as F

    names = F.array(*[F.lit(f.name) for f in declared.fields])
    undeclared = F.map_filter(entries, lambda key, _value: ~F.array_contains(names, key))
    # Whether any field is undeclared, without filtering the map a second time.
    present = sum(
        (F.map_contains_key(entries, F.lit(f.name)).cast("int") for f in declared.fields),
        F.lit(0),
    )
    kept = F.map_from_entries(F.filter(F.array(*misfits), lambda entry: entry.isNotNull()))
    everything = F.map_concat(undeclared, kept)
    return (
        F.when(entries.isNull(), variant)
        .when(whole_reads, F.when(F.size(entries) > present, F.to_variant_object(undeclared)))
        .when(F.size(everything) > F.lit(0), F.to_variant_object(everything))
    )


def _nests(schema: StructType) -> bool:
    """Whether a struct is declared below the top level (in a struct, a list or a map)."""
    return any(_holds_struct(f.dataType) for f in schema.fields)


def _holds_struct(data_type: DataType) -> bool:
    """Whether ``data_type`` is or holds a struct (in a list, a map)."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, StructType):
        return True
    if isinstance(data_type, ArrayType):
        return _holds_struct(data_type.elementType)
    if isinstance(data_type, MapType):
        return _holds_struct(data_type.valueType)
    return False
