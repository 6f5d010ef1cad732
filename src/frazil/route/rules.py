"""Routes that send records to tables by a field's value or by topic (``route:``).

Each route is a pure function of column expressions, like every plan step: it sets the
record's table column (:data:`frazil.columns.TABLE`, an array: a record may go to several
tables) in the JVM, without a Python UDF. A record that matches no table goes to the route's
``default``: ``fail`` marks it (stage ``route``), ``skip`` leaves its table list empty and
its op ``skip`` (counted in the run report), a table name sends it there.

Tombstones (a null value) are never marked by a route: append tables skip them anyway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.pipeline import PipelineConfig
from frazil.config.routing import (
    DynamicRoute,
    StaticRoute,
    TopicRoute,
    is_regex_key,
    template_parts,
    template_pattern,
)
from frazil.config.variant_paths import is_variant_path, parse_variant_path
from frazil.jvm.columns import jvm_column
from frazil.route.single import SingleTableRoute

if TYPE_CHECKING:
    from pyspark.sql import Column

#: What a dynamic value becomes in a table name: lower case, other characters than
#: letters, digits and ``_`` (in runs) replaced by one ``_``.
_INVALID_RUN = "[^a-z0-9_]+"
#: Characters of an unmatched value quoted in its error.
_QUOTED_CHARS = 100


def sanitize(value: Column) -> Column:
    """A value as it appears in a table name (see :data:`_INVALID_RUN`), equal to
    :func:`sanitize_text`'s.

    frazil's own expression (``dev.frazil.spark.TableNameText``), in generated code: Spark's
    functions gave the same with a ``translate``, a ``replace`` and a ``regexp_replace``, a
    map lookup per character and a regular expression per row (~11% of a routed batch's read
    stage, bench/routing, 2026-11-30). Not Spark's ``lower`` either: with ICU's case mappings
    (Spark's default) its first use in a JVM initializes Spark's ``CollationAwareUTF8String``,
    which title-cases every Unicode code point (~2 GB allocated, a second or more of a routed
    pipeline's first batch).
    """
    return jvm_column("dev.frazil.spark.TableNameText", "column", value.cast("string"))


def sanitize_text(value: str) -> str:
    """:func:`sanitize` in Python, for docs, tests and ``frazil plan``."""
    return re.sub(_INVALID_RUN, "_", value.lower())


def topic_table(route: TopicRoute, topic: str) -> str | None:
    """The table a topic route sends ``topic``'s records to, as :meth:`TopicNameRoute.route`
    names it in the JVM; None when the topic does not match (its records go to the route's
    ``default``) or leaves a placeholder empty."""
    match = re.fullmatch(route.topic, topic)
    if match is None:
        return None
    values = {"topic": sanitize_text(topic)}
    values.update({str(i): sanitize_text(g or "") for i, g in enumerate(match.groups(), 1)})
    name = "".join(
        literal + ("" if name is None else values[name])
        for literal, name in template_parts(route.table)
    )
    # An optional group the topic leaves out names no table (``db.``): the run marks its
    # records with a route error.
    return name if template_pattern(route.table).fullmatch(name) else None


def route_error(reason: Column, detail: Column) -> Column:
    """The error struct of stage ``route``."""
    from pyspark.sql import functions as F

    return F.struct(
        F.lit(c.STAGE_ROUTE).alias("stage"),
        reason.cast("string").alias("reason"),
        detail.cast("string").alias("detail"),
    )


def field_value(batch: c.Projection, path: str) -> Column:
    """The expression of a (dotted) field of the batch's user columns, or of the value at a
    path into a variant column (``payload:user.id``) as text (null where a record does not
    have the path).

    Raises:
        KeyError: The top-level column is not in the batch.
    """
    if is_variant_path(path):
        from pyspark.sql import functions as F

        parsed = parse_variant_path(path)
        column = field_value(batch, parsed.column)
        # Every variant value has a text form (an object's or array's is its JSON): the
        # "try" only keeps a malformed value from failing the batch.
        return F.try_variant_get(column, parsed.json_path, "string")
    root, *rest = path.split(".")
    column = batch[root]
    for part in rest:
        column = column.getField(part)
    return column


@dataclass(frozen=True)
class FieldRoute:
    """``route: {field: ..., tables: {...}}`` or ``route: {field: ..., table: "...{value}"}``."""

    config: StaticRoute | DynamicRoute

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables the config names (a dynamic route's are found in the batches)."""
        return tuple(self.config.table_names())

    @property
    def dynamic(self) -> bool:
        """Whether table names come from the records."""
        return isinstance(self.config, DynamicRoute)

    @property
    def single(self) -> bool:
        """Records fan out to several tables."""
        return False

    @property
    def one_each(self) -> bool:
        """Whether a record goes to one table at most: a dynamic route's, or a static route's
        whose values each list one table."""
        cfg = self.config
        return isinstance(cfg, DynamicRoute) or all(len(cfg.targets(k)) == 1 for k in cfg.tables)

    def names(self) -> re.Pattern[str] | None:
        """The table names a dynamic route can produce, as a regular expression."""
        if isinstance(self.config, DynamicRoute):
            return template_pattern(self.config.table)
        return None

    def describe(self) -> str:
        """One line for ``frazil plan``."""
        cfg = self.config
        field = _describe_field(cfg.field)
        if isinstance(cfg, DynamicRoute):
            return f"table {cfg.table} named by {field}; else {cfg.default}"
        return (
            f"by {field} to {len(cfg.table_names())} table(s) "
            f"({len(cfg.tables)} value(s)); else {cfg.default}"
        )

    def route(self, batch: c.Projection) -> c.Projection:
        """Set each record's tables from its field's value."""
        from pyspark.sql import functions as F

        cfg = self.config
        value = field_value(batch, cfg.field).cast("string")
        if isinstance(cfg, StaticRoute):
            exact = [k for k in cfg.tables if not is_regex_key(k)]
            regexes = [k for k in cfg.tables if is_regex_key(k)]
            tables: Column | None = None
            for key in exact:
                tables = _when(tables, value == F.lit(key), _array(cfg.targets(key)))
            for key in regexes:
                tables = _when(tables, value.rlike(f"^(?:{key[1:-1]})$"), _array(cfg.targets(key)))
            assert tables is not None
            matched = tables
        else:
            name = _fill(cfg.table, {"value": sanitize(value)})
            # A value sanitises to "" only if it is "" (a run of other characters becomes
            # "_"): tested on the value, the regular expression runs once per record, in the
            # table's name, rather than once more in each test of a match (Spark does not
            # share an expression between a condition and the branches it guards).
            no_table = value.isNull() | (value == F.lit(""))
            matched = F.when(~no_table, F.array(name))
            what = F.lit(f"field {cfg.field}")
            return _settle(batch, matched, cfg.default, value, what, unmatched=no_table)
        what = F.lit(f"field {cfg.field}")
        return _settle(batch, matched, cfg.default, value, what)


@dataclass(frozen=True)
class TopicNameRoute:
    """``route: {topic: 'regex', table: 'db.x_{1}'}``: the topic's name picks the table.

    A tombstone has a topic too: with ``tombstones: delete`` it goes to its topic's table
    (Debezium's topic per source table: the tombstone after a delete, or alone, deletes the
    row of its key there); otherwise it matches nothing, as in a field's route.
    """

    config: TopicRoute
    tombstones: bool = False

    @property
    def tables(self) -> tuple[str, ...]:
        """The fixed tables of the route."""
        return tuple(self.config.table_names())

    @property
    def dynamic(self) -> bool:
        """Whether the table name depends on the topic."""
        return self.config.dynamic

    @property
    def single(self) -> bool:
        """Records fan out to several tables (or to a default)."""
        return False

    @property
    def one_each(self) -> bool:
        """A record goes to one table at most (its topic's, or the default)."""
        return True

    def names(self) -> re.Pattern[str] | None:
        """The table names the template can produce."""
        return template_pattern(self.config.table) if self.config.dynamic else None

    def describe(self) -> str:
        """One line for ``frazil plan``."""
        return f"topics /{self.config.topic}/ to {self.config.table}; else {self.config.default}"

    def route(self, batch: c.Projection) -> c.Projection:
        """Set each record's table from its topic."""
        from pyspark.sql import functions as F

        cfg = self.config
        pattern = f"^(?:{cfg.topic})$"
        topic = batch[c.TOPIC]
        groups = re.compile(cfg.topic).groups
        values: dict[str, Column] = {"topic": sanitize(topic)}
        for i in range(1, groups + 1):
            values[str(i)] = sanitize(F.regexp_extract(topic, pattern, i))
        matched = F.when(topic.rlike(pattern), F.array(_fill(cfg.table, values)))
        return _settle(
            batch, matched, cfg.default, topic, F.lit("topic"), tombstones=self.tombstones
        )


def _describe_field(field: str) -> str:
    if is_variant_path(field):
        parsed = parse_variant_path(field)
        read = f"try_variant_get({parsed.column}, '{parsed.json_path}', 'string')"
        return f"variant path {field} ({read})"
    return f"field {field}"


def _fill(template: str, values: dict[str, Column]) -> Column:
    from pyspark.sql import functions as F

    pieces: list[Column] = []
    for literal, name in template_parts(template):
        if literal:
            pieces.append(F.lit(literal))
        if name is not None:
            pieces.append(values[name])
    return F.concat(*pieces)


def _array(names: list[str]) -> Column:
    from pyspark.sql import functions as F

    return F.array(*[F.lit(n) for n in names])


def _when(chain: Column | None, condition: Column, value: Column) -> Column:
    from pyspark.sql import functions as F

    return F.when(condition, value) if chain is None else chain.when(condition, value)


def _settle(
    batch: c.Projection,
    matched: Column,
    default: str,
    value: Column,
    what: Column,
    *,
    unmatched: Column | None = None,
    tombstones: bool = False,
) -> c.Projection:
    """Apply the route's default to records ``matched`` left null (``unmatched``: a cheaper
    test of that, if the route has one); ``tombstones``: a tombstone keeps the table it
    matched (never the default), else it goes nowhere."""
    from pyspark.sql import functions as F

    result = dict(batch)
    tombstone = batch[c.VALUE].isNull()
    empty = F.array().cast("array<string>")
    no_match = matched.isNull() if unmatched is None else unmatched
    if default == "skip":
        # Null, not empty: counted as unmatched (an empty list is a tombstone's).
        tables = matched
        skipped = no_match & ~tombstone
        result[c.OP] = F.when(skipped, F.lit(c.OP_SKIP)).otherwise(batch[c.OP])
    elif default in ("fail", "dlq"):
        tables = F.coalesce(matched, empty)
        error = route_error(
            F.format_string(f"%s: value matches no table (route default: {default})", what),
            F.substring(F.coalesce(value.cast("string"), F.lit("null")), 1, _QUOTED_CHARS),
        )
        result[c.ERROR] = F.coalesce(
            batch[c.ERROR],
            F.when(no_match & ~tombstone, error).cast(c.ERROR_DDL),
        )
    else:
        tables = F.coalesce(matched, F.array(F.lit(default)))
    kept = F.coalesce(matched, empty) if tombstones else empty
    result[c.TABLE] = F.when(tombstone, kept).otherwise(tables)
    return result


Route = SingleTableRoute | FieldRoute | TopicNameRoute


def build_route(pipeline: PipelineConfig) -> Route:
    """The route of a pipeline: its one ``table``, or its ``route:``."""
    cfg = pipeline.route
    if cfg is None:
        assert pipeline.table is not None
        return SingleTableRoute(pipeline.table)
    if isinstance(cfg, TopicRoute):
        return TopicNameRoute(cfg, tombstones=pipeline.defaults.write.tombstones == "delete")
    return FieldRoute(cfg)
