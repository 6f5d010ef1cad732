"""The column contract of a micro-batch: the columns every plan step reads and writes.

Alongside the user's columns, a batch carries internal columns whose names start with
``__frazil_`` (reserved: the config refuses schema fields with that prefix). None of them
reach a table; the writer strips them.

* provenance: :data:`TOPIC`, :data:`PARTITION`, :data:`OFFSET`, :data:`TIMESTAMP_MS`, and the
  raw :data:`KEY`, :data:`VALUE`, :data:`HEADERS`, :data:`TIMESTAMP` while steps need them;
* :data:`ERROR`: null, or ``struct<stage, reason, detail>`` set by the first step that could
  not handle the record (a step marks, it never raises for one record);
* :data:`TABLE`: the record's target tables (``array<string>`` of ``namespace.table``; empty:
  none), set by routing;
* :data:`OP`: what the writer does with the record: :data:`OP_APPEND`; :data:`OP_UPSERT` or
  :data:`OP_DELETE` by key (``write.mode`` upsert and cdc); or :data:`OP_SKIP` for records
  that are deliberately not written (tombstones in append mode).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

#: A batch under construction: column name → expression over the raw Kafka rows. Steps read
#: earlier steps' columns as expressions and add or replace entries; the plan turns the final
#: mapping into one ``select``, so Spark analyses each batch once however many steps it has.
Projection = dict[str, "Column"]

INTERNAL_PREFIX = "__frazil_"

TOPIC = "__frazil_topic"
PARTITION = "__frazil_partition"
OFFSET = "__frazil_offset"
TIMESTAMP_MS = "__frazil_ts_ms"
KEY = "__frazil_key"
VALUE = "__frazil_value"
HEADERS = "__frazil_headers"
TIMESTAMP = "__frazil_timestamp"
ERROR = "__frazil_error"
#: The decoded Kafka key (``key_format``) for the write mode, whatever transforms do to the
#: key's own column (tombstones delete by it).
DECODED_KEY = "__frazil_decoded_key"
#: A packed decoder's value and error as one struct, unpacked over a select of its own.
PACKED = "__frazil_packed"
TABLE = "__frazil_table"
OP = "__frazil_op"

# Columns that live only inside one engine step (never in the plan's output), named here so
# that every ``__frazil_*`` name has one home.

#: A routed batch's column naming the one table a row is for (:data:`TABLE` exploded: one row
#: per record and table).
ROUTE_TABLE = "__frazil_route_table"
#: A hash of :data:`ROUTE_TABLE` (a long): the general way's cache is sorted by it, which is
#: far cheaper than sorting by names that share a long prefix (``db.events_…``), and each
#: table's scan of the cache skips the blocks whose hash range leaves its own out.
ROUTE_HASH = "__frazil_route_hash"
#: A one-table batch's flags, observed before the write's filter: the row is written; the
#: record is dropped as configured (counted).
WANTED = "__frazil_wanted"
DROPPED = "__frazil_dropped"
#: The one job's kind of row (which table layout its struct follows), and the prefix of its
#: per-layout struct columns (``__frazil_shape_<n>``).
KIND = "__frazil_kind"
#: The one job's number of a row's table: its position among the batch's known tables, -1
#: for any other (``dev.frazil.spark.TableSlot``).
ROUTE_SLOT = "__frazil_route_slot"
SHAPE_PREFIX = "__frazil_shape_"
#: The one job's staging table of new tables' template (``<namespace>.__frazil_staged_<p>``).
STAGED_PREFIX = "__frazil_staged_"
#: A failing record's error as the dead-letter queue reads it (the table's own marks or the
#: plan's).
DEAD_ERROR = "__frazil_dead_error"
#: A replayed dead letter's table it failed for (null: before routing).
FAILED_FOR = "__frazil_failed_for"
#: Spark's corrupt-record column while JSON is parsed (``columnNameOfCorruptRecord``).
JSON_CORRUPT = "__frazil_json_corrupt"

#: The error struct's type, as Spark DDL.
ERROR_DDL = "struct<stage:string,reason:string,detail:string>"

OP_APPEND = "append"
OP_UPSERT = "upsert"
OP_DELETE = "delete"
OP_SKIP = "skip"
#: The operations that reach a table.
WRITTEN_OPS = (OP_APPEND, OP_UPSERT, OP_DELETE)

#: Prefix of the optional Kafka metadata columns that do reach the table (``kafka_metadata``).
METADATA_PREFIX = "_kafka_"

#: Stages named in :data:`ERROR` (and later in dead-letter records).
STAGE_DECODE = "decode"
STAGE_TRANSFORM = "transform"
STAGE_ROUTE = "route"
STAGE_SCHEMA = "schema"
#: The write mode: a change without a key or with an unknown operation.
STAGE_MODE = "mode"


def quoted(name: str) -> str:
    """A column name as Spark parses it whatever it holds (dots, backticks): ``a.b`` is one
    column, not field ``b`` of a column ``a``."""
    return "`" + name.replace("`", "``") + "`"


def is_internal(name: str) -> bool:
    """Whether a column is frazil's own bookkeeping and must not reach a table."""
    return name.startswith(INTERNAL_PREFIX)


def explode_routes(planned: DataFrame, one_each: bool = False) -> DataFrame:
    """A routed batch with one row per record and table: :data:`ROUTE_TABLE` first, then every
    column of ``planned``; a record routed nowhere (or failed before routing) keeps one row,
    its :data:`ROUTE_TABLE` null.

    ``one_each``: the route sends a record to one table at most, so the record's row is its
    one row: its table list's first element (Spark's ``explode_outer`` builds each row it
    generates as an object and copies it, ~3% of a routed batch's read stage).
    """
    from pyspark.sql import functions as F

    if one_each:
        return planned.select(F.get(F.col(TABLE), 0).alias(ROUTE_TABLE), "*")
    return planned.select(F.explode_outer(F.col(TABLE)).alias(ROUTE_TABLE), "*")


def mode_target() -> Column:
    """The table a routed record that failed at the mode (:data:`STAGE_MODE`: an operation
    code, a key value) failed for: the one its route named, else null (routed to several, or
    to none: a record that failed earlier)."""
    from pyspark.sql import functions as F

    routes = F.col(TABLE)
    return F.when(
        (F.col(ERROR)["stage"] == F.lit(STAGE_MODE)) & (F.size(routes) == 1), F.get(routes, 0)
    )


def first_route() -> Column:
    """Whether a row of :func:`explode_routes` is its record's first (or only) one: what
    counts or sends each record once, whatever the number of tables it goes to."""
    from pyspark.sql import functions as F

    return F.coalesce(F.col(ROUTE_TABLE) == F.col(TABLE)[0], F.lit(True))


def user_schema(schema: StructType) -> StructType:
    """The user's columns of a batch schema: every one but frazil's internal columns."""
    from pyspark.sql.types import StructType

    return StructType([f for f in schema.fields if not is_internal(f.name)])


#: Put before the hex of a quoted text that is not valid UTF-8 (see :func:`quoted_text`).
NOT_UTF8_PREFIX = "(not UTF-8, hex) "


def quoted_text(text: Column) -> Column:
    """``text`` as quoted in a dead letter's ``reason`` or ``detail``: as is when it is valid
    UTF-8, otherwise its bytes in hex after :data:`NOT_UTF8_PREFIX`.

    A string cast from Kafka bytes keeps invalid sequences (Spark does not check), but
    Iceberg's ``string`` type is UTF-8 and readers such as PyArrow refuse anything else; hex
    keeps every byte quoted (the raw record is in the row's ``value`` anyway).
    """
    from pyspark.sql import functions as F

    return F.when(F.is_valid_utf8(text), text).otherwise(
        F.concat(F.lit(NOT_UTF8_PREFIX), F.hex(text))
    )


def utf8_text(data: Column) -> Column:
    """Bytes read as a string that every reader can read: as is when they are UTF-8,
    otherwise quoted in hex (:func:`quoted_text`). One to one, unlike replacing invalid
    sequences with U+FFFD, so two binary keys never become one string (an upsert key)."""
    return quoted_text(data.cast("string"))
