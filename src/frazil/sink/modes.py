"""Write modes: set each record's operation (append, or upsert and delete by key)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.writes import WriteConfig

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType

#: Reason of a tombstone sent to the dead-letter queue by an append pipeline.
TOMBSTONE = "null value (a tombstone): an append table has no row to delete"


def append_mode(batch: c.Projection, dead_letters: bool = False) -> c.Projection:
    """Append every record, except those not to be written: skip them.

    A tombstone (null value) means nothing to an append table: it is skipped, or, with a
    dead-letter queue (where nothing is dropped unless configured), marked so that it goes
    there. A record an earlier step already set to skip (a transform's ``filter``) stays
    skipped.
    """
    from pyspark.sql import functions as F

    from frazil.decode.errors import decode_error

    skipped = F.coalesce(batch[c.OP] == F.lit(c.OP_SKIP), F.lit(False))
    tombstone = batch[c.VALUE].isNull()
    if not dead_letters:
        op = F.when(tombstone | skipped, F.lit(c.OP_SKIP)).otherwise(F.lit(c.OP_APPEND))
        return {**batch, c.OP: op}
    error = F.coalesce(
        batch[c.ERROR],
        F.when(tombstone & ~skipped, decode_error(F.lit(TOMBSTONE), F.lit(""))).cast(c.ERROR_DDL),
    )
    op = F.when(skipped, F.lit(c.OP_SKIP)).otherwise(F.lit(c.OP_APPEND))
    return {**batch, c.OP: op, c.ERROR: error}


def _path(batch: c.Projection, path: str) -> Column:
    head, *rest = path.split(".")
    if head not in batch:
        raise KeyError(head)
    column = batch[head]
    for part in rest:
        column = column[part]
    return column


def change_mode(
    batch: c.Projection,
    write: WriteConfig,
    table_keys: dict[str, list[str]],
    key_column: str | None = None,
    key_fields: frozenset[str] | None = None,
    column_types: dict[str, DataType] | None = None,
    *,
    pending_table_keys: bool = False,
    key_names: frozenset[str] | None = None,
) -> c.Projection:
    """Set each record's operation for ``write.mode`` upsert or cdc, and check its key.

    * upsert: every record is an upsert; cdc: ``op_field``'s code says upsert (insert,
      update) or delete, and a Debezium envelope was read already (:mod:`frazil.decode.debezium`).
    * A tombstone (null value) is skipped, or with ``tombstones: delete`` deletes the row of
      its Kafka key (the key column's fields, or the key itself for a one-column key).
    * A change without a value in one of its table's key columns, or with an unknown code,
      is marked (stage ``mode``): it cannot name a row; so is one routed to a table that has
      no key (no ``write.key``, and none of its own).

    Args:
        batch: The batch after routing.
        write: The pipeline's write settings.
        table_keys: Tables whose key differs from ``write.key`` (routed tables' overrides;
            without ``write.key``, the only tables with a key).
        key_column: The decoded Kafka key's (internal) column (``key_format``), for
            tombstones.
        key_fields: The decoded key's fields where it is a struct (None: a scalar key).
        column_types: The batch's columns' types, where known: a tombstone's key is read
            into its key column's type (an inferred key's ``bigint`` would widen an ``int``
            column; one that does not fit is null, and the tombstone marked).
        pending_table_keys: A table's own key columns the batch does not have (yet: a
            record type not met so far) leave that table's changes without a key value
            (marked) instead of raising; so does a tombstone whose decoded key
            (``key_names``: the names it holds, where known) lacks such a column.

    Raises:
        KeyError: ``op_field``, a key column or ``key_column`` is not a column of the batch.
    """
    from pyspark.sql import functions as F

    from frazil.decode.debezium import mode_error

    result = dict(batch)
    skipped = F.coalesce(batch[c.OP] == F.lit(c.OP_SKIP), F.lit(False))
    tombstone = batch[c.VALUE].isNull()
    error = batch[c.ERROR]
    if write.mode == "upsert":
        op: Column = F.lit(c.OP_UPSERT)
    elif write.debezium:
        op = batch[c.OP]
    else:
        assert write.op_field is not None
        code = _path(batch, write.op_field).cast("string")
        op = F.lit(None).cast("string")
        for value, what in write.ops.mapping().items():
            op = F.when(code == F.lit(value), F.lit(what)).otherwise(op)
        known = ", ".join(write.ops.mapping())
        error = F.coalesce(
            error,
            F.when(
                ~tombstone & ~skipped & op.isNull(),
                mode_error(
                    F.when(code.isNull(), F.lit(f"no operation in {write.op_field}")).otherwise(
                        # The offending code itself, e.g. unknown operation 'Z' in op.
                        F.concat(
                            F.lit("unknown operation '"),
                            code,
                            F.lit(f"' in {write.op_field} (expected {known})"),
                        )
                    ),
                    F.coalesce(code, F.lit("null")),
                ),
            ),
        )
        if write.consumes_op_field():
            # The operation is consumed: a table of current rows has no use for it.
            result.pop(write.op_field, None)
    if write.tombstones == "delete":
        assert key_column is not None
        kafka_key = batch[key_column]
        keys = sorted({k for ks in [write.key, *table_keys.values()] for k in ks})
        for name in keys:
            if (
                pending_table_keys
                and name not in write.key
                and (
                    name.split(".")[0] not in batch
                    or (key_names is not None and name not in key_names)
                )
            ):
                continue  # no record (or key) of that table decodes yet: nor its tombstones
            from_key = _from_key(kafka_key, name, keys, key_fields)
            kind = (column_types or {}).get(name)
            if kind is not None:
                from_key = from_key.try_cast(kind)
            result[name] = F.when(tombstone, from_key).otherwise(_path(batch, name))
        tombstone_op: Column = F.lit(c.OP_DELETE)
    else:
        tombstone_op = F.lit(c.OP_SKIP)
    op = F.when(skipped, F.lit(c.OP_SKIP)).when(tombstone, tombstone_op).otherwise(op)
    # A change names its row by its table's key: check each key it will be written by.
    missing = _missing_key(result, write.key, table_keys, pending=pending_table_keys)
    reason = F.concat(
        F.when(missing.contains(", "), F.lit("no value in key columns ")).otherwise(
            F.lit("no value in key column ")
        ),
        missing,
    )
    if not write.key:
        # No pipeline key: a table the records name that sets none of its own (tables.<name>
        # .write.key) cannot take a change.
        unkeyed = F.try_element_at(
            F.filter(result[c.TABLE], lambda t: ~t.isin(*table_keys)), F.lit(1)
        )
        no_key = F.concat(
            F.lit("no key for table "),
            unkeyed,
            F.lit(": set its tables.<name>.write.key, or write.key"),
        )
        reason = F.coalesce(no_key, reason)
    error = F.coalesce(
        error,
        F.when(
            op.isin(c.OP_UPSERT, c.OP_DELETE) & reason.isNotNull(),
            mode_error(reason, _keyless_detail(result, tombstone, key_column)),
        ),
    )
    result[c.OP] = op
    result[c.ERROR] = error
    return result


def _keyless_detail(result: c.Projection, tombstone: Column, key_column: str | None) -> Column:
    """A keyless change's detail: the change as decoded, in JSON (its key columns absent:
    JSON leaves nulls out), whatever the topic's format (Avro's and Protobuf's bytes say
    nothing read as text, a Debezium envelope's text starts with its schema); a tombstone's,
    its decoded Kafka key. Evaluated for such changes only."""
    from pyspark.sql import functions as F

    from frazil.transform.state import QUOTED

    user = [
        name
        for name in result
        if not name.startswith(c.INTERNAL_PREFIX) and not name.startswith(c.METADATA_PREFIX)
    ]
    change = F.to_json(F.struct(*[result[name].alias(name) for name in user]))
    if key_column is not None:
        key = F.to_json(F.struct(result[key_column].alias("key")))
        change = F.when(tombstone, key).otherwise(change)
    return F.substring(change, 1, QUOTED)


def _from_key(
    kafka_key: Column, name: str, keys: list[str], fields: frozenset[str] | None
) -> Column:
    """Key column ``name`` of a tombstone, from its decoded Kafka key: a struct key's field of
    that name (inside ``payload`` for Kafka Connect's ``{schema, payload}`` JSON), or a scalar
    key itself for a one-column key."""
    if fields is None:
        return kafka_key if keys == [name] else kafka_key[name]
    if name not in fields and fields == {"schema", "payload"}:
        return kafka_key["payload"][name]
    if sum(f.lower() == name.lower() for f in fields) > 1:
        # Spark resolves names ignoring case: `id` of a key with `id` and `ID` is ambiguous.
        # Its JSON keeps each name as written; the caller casts the text to the column's type.
        from pyspark.sql import functions as F

        quoted = name.replace("\\", "\\\\").replace("'", "\\'")
        return F.get_json_object(F.to_json(kafka_key), f"$['{quoted}']")
    return kafka_key[name]


def _missing_key(
    batch: c.Projection, key: list[str], table_keys: dict[str, list[str]], *, pending: bool = False
) -> Column:
    """The key columns a record lacks a value in, for the tables it goes to; null if none.
    ``pending``: a table key's column the batch does not have is missing in every record."""
    from pyspark.sql import functions as F

    def value(name: str) -> Column:
        if pending and name not in key and name.split(".")[0] not in batch:
            return F.lit(None)
        return _path(batch, name)

    def nulls(columns: list[str]) -> Column:
        return F.concat_ws(", ", *[F.when(value(k).isNull(), F.lit(k)) for k in columns])

    tables = batch[c.TABLE]
    others = F.lit(True)
    found: Column = F.lit(None).cast("string")
    if table_keys:
        names = list(table_keys)
        others = F.exists(tables, lambda t: ~t.isin(*names))
        for name, columns in table_keys.items():
            found = F.coalesce(
                found, F.when(F.array_contains(tables, name), F.nullif(nulls(columns), F.lit("")))
            )
    if not key:
        return found  # a table without a key of its own: marked as such (change_mode)
    return F.coalesce(found, F.when(others, F.nullif(nulls(key), F.lit(""))))
