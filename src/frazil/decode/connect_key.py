"""JSON keys of Kafka Connect's JSON converter with ``schemas.enable=true``.

Such a key carries its Connect schema in every record: ``{"schema": {"type": "struct",
"fields": [{"field": "id", "type": "int32"}]}, "payload": {"id": 7}}`` (Debezium's keys, any
Connect source's). The key is the payload, in the types its schema states (``int32`` an
``int``, a ``Decimal`` a decimal, a ``Timestamp`` a timestamp): the key column holds
``{"id": 7}``, not the wrapper with its schema, and a tombstone names its row in the types
the row's own columns have (an inferred ``bigint`` would widen an ``int`` key column).

The schema is read once, from the keys sampled at the start of each partition, when the
pipeline starts (a topic per source table: each table's key fields); records are
decoded in the JVM by :class:`~frazil.decode.json.JsonDecoder` and mapped with Spark SQL
expressions (:func:`frazil.decode.connect_types.convert`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from frazil.decode import connect_types
from frazil.decode.connect_types import Semantic, Semantics

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

    from frazil.decode.json import JsonDecoder
    from frazil.decode.registry import Decoded

#: The field a scalar key's one column is named by in :attr:`ConnectKeyDecoder.schema`.
SCALAR_FIELD = "key"


def wrapped_key_schemas(samples: list[bytes]) -> list[Any]:
    """The distinct Connect schemas of the sampled keys, in the order met, if the first key
    that parses as JSON is a ``{"schema", "payload"}`` wrapper whose schema Connect reads (a
    pipeline over a topic per source table meets one key schema per table); empty otherwise
    (keys written without ``schemas.enable``, or not JSON: decoded as they are). Keys of
    another shape after the first are left out."""
    met: dict[str, Any] = {}
    for data in samples:
        found = connect_types.sampled_json(data)
        if found is connect_types.NOT_JSON:
            continue
        wrapped = isinstance(found, dict) and set(found) == {"schema", "payload"}
        readable = wrapped and not isinstance(connect_types.read_type(found["schema"]), str)
        if not readable:
            if not met:
                return []
            continue
        met.setdefault(json.dumps(found["schema"], sort_keys=True), found["schema"])
    return list(met.values())


def merged_schema(schemas: list[Any]) -> Any:
    """One Connect schema reading every key of ``schemas``: the first, or for struct keys a
    struct of every field met, in the order met (the first schema naming a field gives its
    type), each optional: a topic's key holds only its own table's fields."""
    first = schemas[0]
    if not isinstance(first, dict) or first.get("type") != "struct" or len(schemas) == 1:
        return first
    fields: dict[str, Any] = {}
    for schema in schemas:
        if isinstance(schema, dict) and schema.get("type") == "struct":
            for f in schema.get("fields") or []:
                fields.setdefault(f["field"], {**f, "optional": True})
    return {"type": "struct", "optional": False, "fields": list(fields.values())}


def _semantic_type(semantic: Semantic, kind: DataType) -> DataType:
    return connect_types.target_type(semantic, kind) or kind


@dataclass
class ConnectKeyDecoder:
    """Decodes wrapped keys into their payload, in the types their Connect schema states.

    Attributes:
        connect: The key's Connect schema (as the first sampled key embedded it).
        reader: Reads ``{"payload": …}`` (the wrapper's ``schema`` left unread).
    """

    connect: Any
    reader: JsonDecoder

    @property
    def _payload(self) -> DataType:
        return self.reader.schema["payload"].dataType

    @property
    def _fields(self) -> dict[str, Semantic]:
        return connect_types.connect_struct(self.connect)

    @property
    def schema(self) -> StructType:
        """The payload's fields (a struct key), or its one value as field ``key``."""
        from pyspark.sql.types import StructField, StructType

        payload = self._payload
        if not self.scalar:
            assert isinstance(payload, StructType)
            fields = self._fields
            return StructType(
                [
                    StructField(f.name, _semantic_type(fields[f.name], f.dataType), True)
                    if f.name in fields
                    else f
                    for f in payload.fields
                ]
            )
        semantic = connect_types.connect_field(self.connect)
        return StructType([StructField(SCALAR_FIELD, _semantic_type(semantic, payload), True)])

    @property
    def scalar(self) -> bool:
        """A key whose Connect schema is not a struct (``int64``, ``string``) is one value."""
        from pyspark.sql.types import StructType

        return not isinstance(self._payload, StructType)

    def version(self) -> object:
        """The key's schema is read once, at start."""
        return 0

    def semantics(self) -> Semantics:
        """The key's types are mapped here; nothing for the row's."""
        return connect_types.NONE

    def learn(self, raw: DataFrame, column: str) -> bool:
        """Nothing to learn: keys are read by the schema the pipeline started with."""
        return False

    def decode(self, data: Column) -> Decoded:
        """The payload, mapped; a key that does not fit is marked by the reader."""
        from pyspark.sql import functions as F

        from frazil.decode.registry import Decoded

        read = self.reader.decode(data)
        assert read.fields is not None
        payload = read.fields["payload"]
        kind = self._payload
        if self.scalar:
            semantic = connect_types.connect_field(self.connect)
            value = connect_types.convert(payload, semantic, kind)
            return Decoded(value=payload if value is None else value, error=read.error)
        from pyspark.sql.types import StructType

        assert isinstance(kind, StructType)
        fields = self._fields
        columns: dict[str, Column] = {}
        for f in kind.fields:
            mapped = None
            if f.name in fields:
                mapped = connect_types.convert(payload[f.name], fields[f.name], f.dataType)
            columns[f.name] = payload[f.name] if mapped is None else mapped
        # A null payload (or a null key) stays null, not a struct of nulls.
        value = F.when(
            payload.isNotNull(), F.struct(*[col.alias(name) for name, col in columns.items()])
        )
        return Decoded(value=value, error=read.error, fields=columns)


def build(schemas: list[Any], reader: type[JsonDecoder], **options: Any) -> ConnectKeyDecoder:
    """The decoder of keys wrapped with ``schemas`` (from :func:`wrapped_key_schemas`);
    ``options`` are the JSON reader's (its engine)."""
    from pyspark.sql.types import StructField, StructType

    connect = merged_schema(schemas)
    payload = connect_types.read_type(connect)
    assert not isinstance(payload, str), "wrapped_key_schemas returns readable schemas only"
    return ConnectKeyDecoder(
        connect, reader(StructType([StructField("payload", payload, True)]), **options)
    )
