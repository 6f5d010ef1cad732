"""Avro topics of different record types in one routed pipeline, through the registry.

Debezium's Avro converter registers an ``Envelope`` per source table, under each topic's
own subject (``dbserver1.inventory.customers-value``, ``…orders-value``); a pipeline over
those topics, routed by topic, writes each table's rows. Each record type is read by an
:class:`~frazil.decode.avro.AvroDecoder` of its own (its subject's versions the writers,
Avro's resolution among them, evolution as for one subject), chosen per record by the schema
id in its header. The decoded rows are one shape: every type's fields, merged by name at any
depth (Debezium's ``before`` and ``after`` hold every table's columns), each record's own
fields filled and the others null; a routed table takes the columns its records hold values
in. All in Spark SQL expressions: one ``from_avro`` per record, of its own writer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.decode import connect_types, wire
from frazil.decode.connect_types import Semantics
from frazil.decode.registry import Decoded
from frazil.decode.shapes import conform, merge_fields

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

    from frazil.decode.avro import AvroDecoder


@dataclass
class AvroTopicsDecoder:
    """Reads each record with the decoder of its writer's record type.

    Attributes:
        parts: One decoder per record type, the first topic's first: a record of an id none
            of them owns is marked as the first marks it (an unknown id, another record
            type's schema).
    """

    parts: list[AvroDecoder]

    @property
    def schema(self) -> StructType:
        """Every part's fields, merged by name (the first part's order first)."""
        merged = self.parts[0].schema
        for part in self.parts[1:]:
            merged = merge_fields(merged, part.schema)
        return merged

    @property
    def scalar(self) -> bool:
        """Records decode into a struct."""
        return False

    def version(self) -> object:
        """Changes with any part's writers or reader."""
        return tuple(part.version() for part in self.parts)

    def semantics(self) -> Semantics:
        """Each part's Connect semantic types (a field keeps the first part's naming it)."""
        row: dict[str, connect_types.Semantic] = {}
        source: dict[str, connect_types.Semantic] = {}
        for part in self.parts:
            found = part.semantics()
            for name, semantic in found.row.items():
                row.setdefault(name, semantic)
            for name, semantic in found.source.items():
                source.setdefault(name, semantic)
        return Semantics(row, source)

    def learn(self, raw: DataFrame, column: str) -> bool:
        """Each part fetches the batch's new ids: its own type's a writer (under ``evolve``
        perhaps its reader), another's marked as not its own."""
        learned = False
        for part in self.parts:
            learned = part.learn(raw, column) or learned
        return learned

    def decode(self, data: Column) -> Decoded:
        """Each record by its writer's part, projected into :attr:`schema`."""
        from pyspark.sql import functions as F

        shape = self.schema
        value: Column | None = None
        error: Column | None = None
        decoded = [part.decode(data) for part in self.parts]
        for part, found in zip(self.parts, decoded, strict=True):
            ids = part.owned()
            if not ids:
                continue
            owned = wire.matches(data, ids[0])
            for schema_id in ids[1:]:
                owned = owned | wire.matches(data, schema_id)
            row = conform(found.value, part.schema, shape)
            value = F.when(owned, row) if value is None else value.when(owned, row)
            error = F.when(owned, found.error) if error is None else error.when(owned, found.error)
        # A record of an id no part owns: the first part's mark (unknown id, another type).
        first = decoded[0].error
        return Decoded(
            value=F.lit(None).cast(shape) if value is None else value,
            error=(first if error is None else error.otherwise(first)).cast(c.ERROR_DDL),
        )
