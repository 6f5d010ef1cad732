"""Avro topics of different record types in one routed pipeline, through the registry.

Debezium's Avro converter registers an ``Envelope`` per source table, under each topic's own
subject (``dbserver1.inventory.customers-value``, ``…orders-value``); a pipeline over those
topics, routed by topic, writes each table's rows. The listed topics' subjects are read at
start; a record type met later (a source table added while running, another topic of a
``topic_pattern``) gets its decoder when a batch holds it, as a new writer id does. Each record
type is read by an :class:`~frazil.decode.avro.AvroDecoder` of its own (its subject's versions
the writers, Avro's resolution among them, evolution as for one subject), chosen per record by
the schema id in its header. The decoded rows are one shape: every type's fields, merged by name
at any depth (Debezium's ``before`` and ``after`` hold every table's columns), each record's own
fields filled and the others null; a routed table takes the columns its records hold values in.
All in Spark SQL expressions: one ``from_avro`` per record, of its own writer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.decode import connect_types, wire
from frazil.decode.avro_limits import unreadable
from frazil.decode.connect_types import Semantics
from frazil.decode.registry import Decoded
from frazil.decode.shapes import conform, let, merge_fields

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

    from frazil.decode.avro import AvroDecoder


@dataclass
class AvroTopicsDecoder:
    """Reads each record with the decoder of its writer's record type.

    Attributes:
        parts: One decoder per record type, the first topic's first, then the other listed
            topics', then those met while running: a record of an id none of them owns is
            marked as the first marks it (an unknown id, not an Avro schema).
    """

    parts: list[AvroDecoder]
    #: Several record types decode as one struct holding the error (:attr:`packed`); a key
    #: (one column) does not.
    packs: bool = False
    #: Record types (and their columns) may come while running.
    learns_record_types: bool = True

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
        """The batch's new ids, each to the part of its record type (a writer, under
        ``evolve`` perhaps the reader): a record type no part reads gets a part of its own,
        its first id the reader."""
        from frazil.decode.avro import AvroDecoder, full_name, shape_of

        spark = raw.sparkSession
        first = self.parts[0]
        registry = first.registry
        if registry is None:
            return False
        known = {i for part in self.parts for i in part.writers}
        types = {full_name(part.reader): part for part in self.parts}
        # Each new id to its record type's part (Avro would resolve two types of the same
        # unqualified name, Debezium's Envelopes, against each other): a type no part reads
        # gets one; an id that is no Avro record to the first part, which marks it.
        given: dict[int, set[int]] = {}
        learned = False
        for schema_id in sorted(wire.ids_in(raw, column) - known):
            schema = registry.by_id(schema_id)
            if (
                schema is None
                or schema.schema_type != "AVRO"
                or not (name := full_name(schema.text))
                or (name not in types and unreadable(schema.text) is not None)
            ):
                # The first part marks it (an unknown id; a schema Spark cannot read, why).
                given.setdefault(id(first), set()).add(schema_id)
                continue
            if name not in types:
                shape, scalar = shape_of(spark, schema.text, "value")
                types[name] = AvroDecoder(
                    schema=shape,
                    scalar=scalar,
                    reader=schema.text,
                    registry=registry,
                    reader_id=schema_id,
                    evolve=first.evolve,
                )
                self.parts.append(types[name])
            given.setdefault(id(types[name]), set()).add(schema_id)
        for part in self.parts:
            learned = part.learn_ids(given.get(id(part), set()), spark) or learned
        return learned

    @property
    def packed(self) -> bool:
        """Several record types (and :attr:`packs`): decoded as one struct, the error inside,
        in a select of its own (the plan takes the columns out of it in the next): named in
        each column's extraction, the choice among the types would be decoded once per
        column."""
        return self.packs and len(self.parts) > 1

    def decode(self, data: Column) -> Decoded:
        """Each record by its writer's part, projected into :attr:`schema`; with several
        parts, as one struct holding the error too when :attr:`packed`."""
        from pyspark.sql import functions as F

        if len(self.parts) == 1:
            return self.parts[0].decode(data)
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
            # The record decoded once (a lambda's argument), then read into the shape:
            # conforming names the decoded struct once per nested field, and Spark shares
            # no work inside a branch, so each would decode the record again.
            if self.packed:
                both = F.struct(found.value.alias("value"), found.error.alias("error"))
                row = let(both, _packer(part.schema, shape))
            else:
                row = let(found.value, _conformer(part.schema, shape))
                error = (
                    F.when(owned, found.error) if error is None else error.when(owned, found.error)
                )
            value = F.when(owned, row) if value is None else value.when(owned, row)
        # A record of an id no part owns: the first part's mark (unknown id, another type).
        first = decoded[0].error.cast(c.ERROR_DDL)
        if not self.packed:
            return Decoded(
                value=F.lit(None).cast(shape) if value is None else value,
                error=(first if error is None else error.otherwise(first)).cast(c.ERROR_DDL),
            )
        unknown = F.struct(
            *[F.lit(None).cast(f.dataType).alias(f.name) for f in shape.fields],
            first.alias(c.ERROR),
        )
        packed = unknown if value is None else value.otherwise(unknown)
        # No record (a tombstone's value): null, as one part decodes it.
        packed = F.when(data.isNotNull(), packed)
        return Decoded(value=packed, error=packed[c.ERROR])


def _conformer(part: StructType, shape: StructType) -> Callable[[Column], Column]:
    """A part's decoded value in the shape."""
    return lambda value: conform(value, part, shape)


def _packer(part: StructType, shape: StructType) -> Callable[[Column], Column]:
    """A part's decoded ``bound.value`` in the shape, its ``bound.error`` as the last field."""
    from pyspark.sql import functions as F

    def pack(bound: Column) -> Column:
        row = conform(bound["value"], part, shape)
        return F.struct(
            *[row[f.name].alias(f.name) for f in shape.fields],
            bound["error"].cast(c.ERROR_DDL).alias(c.ERROR),
        )

    return pack
