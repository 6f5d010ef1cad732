"""Each transform as functions over the batch's column expressions.

:func:`build_step` checks one transform against the columns entering it (their Spark types,
as :mod:`frazil.transform.fields` sees them) and returns a :class:`Step`: its entries, each a
function from one :class:`State` (the user columns, the error and op columns) to the next. The
entries only compose expressions; nothing here reads data.

A value a transform cannot handle marks the record's error (stage ``transform``; the first
error wins) and leaves a null; it never raises, ANSI mode or not.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.config.transforms import (
    Cast,
    Derive,
    Drop,
    Filter,
    Flatten,
    ParseJson,
    ParseTimestamp,
    ParseTimestampOptions,
    Rename,
    Transform,
    transform_name,
)
from frazil.config.types import to_spark_ddl
from frazil.transform import sql
from frazil.transform.fields import (
    PathError,
    TimestampMode,
    field_from_ddl,
    find,
    plan_drop,
    plan_flatten,
    plan_parse_json,
    plan_parse_timestamp,
    plan_rename,
    plan_replace,
    resolve,
)
from frazil.transform.state import (
    QUOTED,
    Context,
    Entry,
    State,
    Step,
    get_path,
    put_column,
    remove_path,
    resolver,
    set_path,
    shorten,
    value_detail,
    value_reason,
)

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType

#: The corrupt-record field ``parse_json`` adds to a struct (never a column of the batch).
_CORRUPT = c.JSON_CORRUPT
#: Epochs Spark can hold as timestamps: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.
_FIRST_SECOND, _LAST_SECOND = -62135596800, 253402300799
_PER_SECOND = {"seconds": 1, "millis": 1_000, "micros": 1_000_000, "nanos": 1_000_000_000}
#: A bigint's range: nanoseconds since the epoch reach 1677 to 2262 only.
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def build_step(transform: Transform, context: Context, state: State) -> tuple[Step, State]:
    """Check ``transform`` against the columns entering it and build its step.

    Args:
        transform: The transform from the config.
        context: The JVM, the columns entering it and the probe.
        state: The batch at build time, over the columns entering it (for probes).

    Returns:
        The step, and ``state`` after it.

    Raises:
        PathError: The transform does not fit the columns.
        SqlError: An expression, a datetime pattern or a time zone is invalid.
    """
    entries: list[Entry] = []
    if isinstance(transform, Flatten):
        description = _flatten(transform, context, entries)
    elif isinstance(transform, ParseTimestamp):
        description = _parse_timestamp(transform.parse_timestamp, context, entries)
    elif isinstance(transform, Rename):
        description = _rename(transform, context, entries)
    elif isinstance(transform, Drop):
        description = _drop(transform, context, entries)
    elif isinstance(transform, Cast):
        description = _cast(transform, context, state, entries)
    elif isinstance(transform, Derive):
        description = _derive(transform, context, state, entries)
    elif isinstance(transform, Filter):
        description = _filter(transform, context, state, entries)
    else:
        assert isinstance(transform, ParseJson)
        description = _parse_json(transform, context, entries)
    step = Step(transform_name(transform), description, tuple(entries))
    return step, step.apply(state)


# --- the transforms ---------------------------------------------------------------------


def _flatten(transform: Flatten, context: Context, entries: list[Entry]) -> str:
    options = transform.flatten
    _, plan = plan_flatten(context.fields, options.separator, options.max_depth)

    def entry(state: State) -> State:
        return state.with_columns({name: get_path(state.columns, path) for name, path in plan})

    entries.append(entry)
    structs = [f.name for f in context.fields if f.children]
    if options.max_depth is None:
        depth = "all levels"
    else:
        depth = f"at most {options.max_depth} level{'s' if options.max_depth > 1 else ''}"
    if not structs:
        return "flatten: no struct columns"
    return f"flatten {', '.join(structs)} into columns joined by {options.separator!r} ({depth})"


def _parse_timestamp(options: ParseTimestampOptions, context: Context, entries: list[Entry]) -> str:
    _, names, mode = plan_parse_timestamp(context.fields, options)
    assert mode is not None  # Spark's schema always has types
    if options.format is not None:
        sql.check_pattern(context.jvm, options.format)
    if options.timezone is not None:
        sql.check_timezone(context.jvm, options.timezone)
    path = options.field
    jvm = context.jvm

    def entry(state: State) -> State:
        source = get_path(state.columns, names)
        parsed, failed, reason = _timestamp(jvm, source, mode, options, path)
        if options.as_ is None:
            columns = set_path(state.columns, names, parsed)
        else:
            columns = put_column(state.columns, options.as_, parsed)
        state = state.with_columns(columns)
        return state if failed is None else state.mark(failed, reason, value_detail(source))

    entries.append(entry)
    how = {
        "string": f"format {options.format}" if options.format else "Spark's default parsing",
        "epoch": f"epoch {options.unit}",
        "epoch_string": f"epoch {options.unit} in text",
        "wall_clock": "wall-clock time",
    }[mode]
    zone = f", in {options.timezone}" if options.timezone else ""
    target = f" → {options.as_}" if options.as_ else ""
    return f"parse_timestamp {path} ({how}{zone}){target}"


def _timestamp(
    jvm: sql.Jvm, source: Column, mode: TimestampMode, options: ParseTimestampOptions, path: str
) -> tuple[Column, Column | None, Column]:
    """The parsed timestamp, when it failed (None: it cannot) and the reason."""
    from pyspark.sql import functions as F

    if mode == "wall_clock":
        # timestamp_ntz → the instant of that wall-clock time in the zone: never fails.
        return sql.parse_timestamp(jvm, source, None, options.timezone), None, F.lit("")
    if mode == "string":
        parsed = sql.parse_timestamp(jvm, source, options.format, options.timezone)
        # try_to_timestamp returns null for bad values; the guard also catches what a
        # user's spark.sql.legacy.timeParserPolicy=EXCEPTION would raise.
        parsed, raised = sql.guarded(jvm, parsed, [source])
        problem = f"does not match {options.format}" if options.format else "is not a timestamp"
        failed = raised | (source.isNotNull() & parsed.isNull())
        return parsed, failed, value_reason(f"parse_timestamp: {path}", source, problem)
    assert options.unit is not None
    number = source if mode == "epoch" else source.try_cast("bigint")
    scale = _PER_SECOND[options.unit]
    first = max(_FIRST_SECOND * scale, _LONG_MIN)
    last = min((_LAST_SECOND + 1) * scale - 1, _LONG_MAX)
    convert = {
        "seconds": F.timestamp_seconds,
        "millis": F.timestamp_millis,
        "micros": F.timestamp_micros,
        "nanos": _nanos_to_timestamp,
    }[options.unit]
    # Out of range, the conversion overflows and raises: only convert what fits.
    parsed = F.when(number.between(first, last), convert(number))
    failed = source.isNotNull() & parsed.isNull()
    problem = f"is not an epoch in {options.unit} (years 1 to 9999)"
    return parsed, failed, value_reason(f"parse_timestamp: {path}", source, problem)


def _nanos_to_timestamp(nanos: Column) -> Column:
    """Nanoseconds since the epoch (Avro's ``timestamp-nanos``) down to Spark's microseconds,
    floored (exactly, in integers: a double would round a 19-digit number)."""
    from pyspark.sql import functions as F

    whole = nanos - F.pmod(nanos, F.lit(1000))
    return F.timestamp_micros(F.call_function("div", whole, F.lit(1000)))


def _rename(transform: Rename, context: Context, entries: list[Entry]) -> str:
    fields = context.fields
    for old, new in transform.rename.items():
        fields, names, removed = plan_rename(fields, old, new)

        def entry(
            state: State,
            names: tuple[str, ...] = names,
            new: str = new,
            removed: tuple[str, ...] | None = removed,
        ) -> State:
            columns = state.columns
            if removed is None:
                renamed = {(new if k == names[0] else k): v for k, v in columns.items()}
                return state.with_columns(renamed)
            value = get_path(columns, names)
            return state.with_columns({**remove_path(columns, removed), new: value})

        entries.append(entry)
    pairs = ", ".join(f"{old} → {new}" for old, new in transform.rename.items())
    return f"rename {pairs}"


def _drop(transform: Drop, context: Context, entries: list[Entry]) -> str:
    fields = context.fields
    for path in transform.drop:
        fields, removed = plan_drop(fields, path)

        def entry(state: State, removed: tuple[str, ...] = removed) -> State:
            return state.with_columns(remove_path(state.columns, removed))

        entries.append(entry)
    return f"drop {', '.join(transform.drop)}"


def _cast(transform: Cast, context: Context, state: State, entries: list[Entry]) -> str:
    fields = context.fields
    for path, type_text in transform.cast.items():
        names, field = resolve(fields, path)
        ddl = to_spark_ddl(type_text)
        try:
            context.probe(get_path(state.columns, names).try_cast(ddl))
        except sql.SqlError:
            raise PathError(f"cannot cast {path} ({field.type}) to {type_text}") from None
        fields, _ = plan_replace(fields, path, field_from_ddl("", type_text))

        shown = field_from_ddl("", type_text).type or type_text

        def entry(
            state: State,
            names: tuple[str, ...] = names,
            ddl: str = ddl,
            problem: str = f"is not {shown}",
            path: str = path,
        ) -> State:
            value = get_path(state.columns, names)
            cast = value.try_cast(ddl)
            failed = value.isNotNull() & cast.isNull()
            reason = value_reason(f"cast: {path}", value, problem)
            return state.with_columns(set_path(state.columns, names, cast)).mark(
                failed, reason, value_detail(value)
            )

        entries.append(entry)
        state = entry(state)
    pairs = ", ".join(f"{path} → {t}" for path, t in transform.cast.items())
    return f"cast {pairs}"


def _expression(
    text: str, what: str, context: Context, state: State
) -> tuple[sql.SqlExpression, DataType]:
    """Parse an expression, check its references against ``state`` and resolve its type."""
    expression = sql.parse(context.jvm, text)
    names = list(state.columns)
    for parts in expression.references:
        if find(names, parts[0]) is None:
            raise PathError(
                f"{what}: unknown column {parts[0]!r} in {text!r} (fields: {', '.join(names)})"
            )
    bound = expression.bind(context.jvm, resolver(state.columns))
    try:
        data_type, projection = context.probe(bound)
    except sql.SqlError as exc:
        raise PathError(f"{what}: {exc}") from None
    if not projection:
        raise PathError(
            f"{what}: {text!r} uses an aggregate, window or generator function; a transform "
            "makes one record of each record"
        )
    return expression, data_type


def _evaluate(
    jvm: sql.Jvm, expression: sql.SqlExpression, state: State
) -> tuple[Column, Column, Column]:
    """The expression over ``state``: its value, whether it raised, and its inputs as JSON."""
    from pyspark.sql import functions as F

    resolve_reference = resolver(state.columns)
    inputs = [(".".join(parts), resolve_reference(parts)) for parts in expression.references]
    value, raised = sql.guarded(
        jvm, expression.bind(jvm, resolve_reference), [v for _, v in inputs]
    )
    if inputs:
        detail = F.substring(F.to_json(F.struct(*[v.alias(k) for k, v in inputs])), 1, QUOTED)
    else:
        detail = F.lit("")
    return value, raised, detail


def _derive(transform: Derive, context: Context, state: State, entries: list[Entry]) -> str:
    from pyspark.sql.types import NullType

    jvm = context.jvm
    for name, text in transform.derive.items():
        expression, data_type = _expression(text, name, context, state)
        if isinstance(data_type, NullType):
            raise PathError(
                f"{name}: {text!r} has no type (NULL); cast it, e.g. CAST(NULL AS string)"
            )
        reason = f"derive: {name} = {shorten(text)} failed"

        def entry(
            state: State,
            name: str = name,
            expression: sql.SqlExpression = expression,
            reason: str = reason,
        ) -> State:
            from pyspark.sql import functions as F

            value, raised, detail = _evaluate(jvm, expression, state)
            columns = put_column(state.columns, name, value)
            return state.with_columns(columns).mark(raised, F.lit(reason), detail)

        entries.append(entry)
        state = entry(state)
    return "derive " + ", ".join(f"{n} = {shorten(t, 60)}" for n, t in transform.derive.items())


def _filter(transform: Filter, context: Context, state: State, entries: list[Entry]) -> str:
    from pyspark.sql.types import BooleanType, NullType

    text = transform.filter
    expression, data_type = _expression(text, "condition", context, state)
    if not isinstance(data_type, (BooleanType, NullType)):
        raise PathError(f"condition {text!r} is {data_type.simpleString()}, not a boolean")
    jvm = context.jvm
    reason = f"filter: {shorten(text)} failed"

    def entry(state: State) -> State:
        from pyspark.sql import functions as F

        keep, raised, detail = _evaluate(jvm, expression, state)
        state = state.mark(raised, F.lit(reason), detail)
        # Only records without an error are skipped: a bad record is never silently lost.
        skip = state.error.isNull() & ~F.coalesce(keep, F.lit(False))
        op = F.when(skip, F.lit(c.OP_SKIP)).otherwise(state.op)
        skipped = skip if state.skipped is None else (state.skipped | skip)
        return replace(state, op=op, skipped=skipped)

    entries.append(entry)
    return f"filter {shorten(text)} (records for which it is not true are skipped)"


def _parse_json(transform: ParseJson, context: Context, entries: list[Entry]) -> str:
    options = transform.parse_json
    _, names = plan_parse_json(context.fields, options)
    ddl = options.spark_type()
    is_struct = ddl.startswith("STRUCT<")
    shown = field_from_ddl("", ddl).type or ddl
    path = options.field

    def entry(state: State) -> State:
        from pyspark.sql import functions as F

        source = get_path(state.columns, names)
        text = source.cast("string")
        if is_struct:
            # The corrupt-record field tells a document that does not fit the schema from
            # one that merely lacks fields (both give nulls).
            schema = f"{ddl[:-1]}, {_CORRUPT}: STRING>"
            parsed = F.from_json(text, schema, {"columnNameOfCorruptRecord": _CORRUPT})
            failed = text.isNotNull() & (parsed.isNull() | parsed[_CORRUPT].isNotNull())
            value = parsed.dropFields(_CORRUPT)
        else:
            value = F.from_json(text, ddl)
            failed = text.isNotNull() & value.isNull()
        reason = value_reason(f"parse_json: {path}", text, f"is not JSON of type {shown}")
        state = state.with_columns(set_path(state.columns, names, value))
        return state.mark(failed, reason, value_detail(text))

    entries.append(entry)
    return f"parse_json {path} → {shown}"
