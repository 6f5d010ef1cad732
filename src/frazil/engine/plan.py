"""The batch plan: the ordered steps every micro-batch of a pipeline runs, in the JVM.

Each step is a function over the batch's column expressions (:data:`frazil.columns.Projection`,
the column contract of :mod:`frazil.columns`); none raises for a per-record problem, each marks
the record's error column instead. The plan composes the steps into one ``select`` over the raw
Kafka rows: Spark analyses one projection per batch instead of one per step (each analysis
costs tens of milliseconds through py4j, on every micro-batch).

The plan is built once per pipeline; anything that depends on data (schemas,
later registry ids and routing) is looked up inside the steps, so it can change between batches
without restarting the streaming query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frazil import columns as c
from frazil.columns import Projection
from frazil.config.pipeline import PipelineConfig
from frazil.decode.registry import Decoder
from frazil.errors import ConfigError
from frazil.route.rules import Route, build_route
from frazil.sink.modes import append_mode, change_mode
from frazil.source.raw import to_contract
from frazil.transform.metadata import add_metadata

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

    from frazil.transform.chain import TransformChain


@dataclass(frozen=True)
class Step:
    """One step of the plan.

    ``materialized``: the step reads its input as columns of a ``select`` of their own, not
    as the expressions that compute them. A step that names a costly expression's result
    many times (the Debezium unwrap: the decoded envelope's ``op``, ``before`` and ``after``
    for every row field) would otherwise copy the decoder's call into each place: a plan of
    megabytes, code too large to compile, the record decoded again for each.
    """

    name: str
    description: str
    apply: Callable[[Projection], Projection]
    materialized: bool = False


@dataclass(frozen=True)
class BatchPlan:
    """A pipeline's steps, and the tables its route can produce."""

    pipeline: str
    steps: tuple[Step, ...]
    tables: tuple[str, ...]
    #: The decoders by raw column (``value``, ``key``): they may learn between batches.
    decoders: tuple[tuple[str, Decoder], ...] = ()
    #: Whether every record goes to one table (no fan-out).
    single: bool = True
    #: Whether a record goes to one table at most (a route's table list holds one or none).
    one_each: bool = True
    _projections: dict[tuple[object, ...], list[Projection]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _schemas: dict[tuple[object, ...], StructType] = field(
        default_factory=dict, compare=False, repr=False
    )
    #: The last segment's columns aliased, per shape: an alias is a py4j round trip (and
    #: PySpark asks for the active session with each), some 30 per micro-batch otherwise.
    _selects: dict[tuple[object, ...], list[Column]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def _key(self, raw: DataFrame) -> tuple[object, ...]:
        return (tuple(raw.columns), *(d.version() for _, d in self.decoders))

    def schema_of(self, raw: DataFrame) -> StructType:
        """The planned batch's schema (internal columns included), cached like the plan."""
        key = self._key(raw)
        cached = self._schemas.get(key)
        if cached is None:
            cached = self.run(raw).schema
            self._schemas[key] = cached
        return cached

    def _segments(self, raw: DataFrame) -> list[Projection]:
        """The steps' columns as one projection per materialised segment (one, unless a
        step is :attr:`Step.materialized`): the first over the raw Kafka rows, each next one
        over the columns of the one before.

        Built once per shape of the raw rows and reused: the expressions name columns, not a
        batch, and building them costs py4j round trips on every micro-batch otherwise.
        """
        from pyspark.sql import functions as F

        key = self._key(raw)
        cached = self._projections.get(key)
        if cached is None:
            cached = []
            current = to_contract(list(raw.columns))
            for step in self.steps:
                if step.materialized:
                    cached.append(current)
                    current = {name: F.col(c.quoted(name)) for name in current}
                current = step.apply(current)
            cached.append(current)
            self._projections[key] = cached
        return cached

    def stage(self, raw: DataFrame) -> tuple[DataFrame, Projection]:
        """The batch up to its last materialised segment, and the columns after every step
        as expressions over it (a copy to change). Internal columns of ``raw`` that the
        steps do not produce are carried through (a replay's table a record failed for)."""
        *before, last = self._segments(raw)
        frame = raw
        for projection in before:
            frame = _select_carrying(frame, projection)
        return frame, dict(last)

    def learn(self, raw: DataFrame) -> bool:
        """Let the decoders learn what a batch with undecodable records holds (new schema ids).

        Returns whether any decoder learned something: the batch is then planned again.
        """
        learned = False
        for column, decoder in self.decoders:
            learned = decoder.learn(raw, column) or learned
        return learned

    def run(self, raw: DataFrame) -> DataFrame:
        """Apply every step to a batch of raw Kafka rows (lazily: nothing runs yet)."""
        frame, projection = self.stage(raw)
        key = self._key(raw)
        aliased = self._selects.get(key)
        if aliased is None:
            aliased = [column.alias(name) for name, column in projection.items()]
            self._selects[key] = aliased
        return frame.select(*aliased)

    def describe(self) -> list[tuple[str, str]]:
        """``(step, what it does)`` in order, for ``--dry-run``-style output and docs."""
        source = ("source", "Kafka rows into the column contract (provenance, error, table, op)")
        return [source, *[(s.name, s.description) for s in self.steps]]


def select(raw: DataFrame, batch: Projection) -> DataFrame:
    """One ``select`` that materialises a projection over ``raw``."""
    return raw.select(*[column.alias(name) for name, column in batch.items()])


def _select_carrying(frame: DataFrame, batch: Projection) -> DataFrame:
    """:func:`select`, keeping ``frame``'s internal columns ``batch`` does not produce."""
    from pyspark.sql import functions as F

    carried = [F.col(n) for n in frame.columns if c.is_internal(n) and n not in batch]
    return frame.select(*[column.alias(name) for name, column in batch.items()], *carried)


def _prune(batch: Projection, keep_raw: bool = False) -> Projection:
    # The raw key/value/headers are dead weight once decoded, unless failing records go to a
    # dead-letter queue, which keeps them byte for byte (Spark drops them from the plan of
    # any write that does not read them).
    dropped: tuple[str, ...] = (c.TIMESTAMP, c.DECODED_KEY)
    if not keep_raw:
        dropped += (c.KEY, c.VALUE, c.HEADERS)
    return {k: v for k, v in batch.items() if k not in dropped}


def decode_value(decoder: Decoder, batch: Projection) -> Projection:
    """Place a decoded value: a struct's fields become columns, a scalar one column."""
    from pyspark.sql import functions as F

    decoded = decoder.decode(batch[c.VALUE])
    result = dict(batch)
    if getattr(decoder, "packed", False):
        # One struct (the error inside) whose parts must be computed once: a select of its
        # own; the next step takes the columns out of it.
        result[c.PACKED] = decoded.value
        return result
    if decoder.scalar:
        result[decoder.schema.fields[0].name] = decoded.value
    else:
        for f in decoder.schema.fields:
            result[f.name] = (
                decoded.fields[f.name] if decoded.fields is not None else decoded.value[f.name]
            )
    result[c.ERROR] = F.coalesce(batch[c.ERROR], decoded.error)
    return result


def unpack_value(decoder: Decoder, batch: Projection) -> Projection:
    """A packed decoder's fields and error out of the column :func:`decode_value` made."""
    from pyspark.sql import functions as F

    result = dict(batch)
    packed = result.pop(c.PACKED)
    for f in decoder.schema.fields:
        result[f.name] = packed[f.name]
    result[c.ERROR] = F.coalesce(batch[c.ERROR], packed[c.ERROR])
    return result


def decode_key(decoder: Decoder, column: str, batch: Projection) -> Projection:
    """Place a decoded key as one column (a struct for record keys)."""
    from pyspark.sql import functions as F

    decoded = decoder.decode(batch[c.KEY])
    result = dict(batch)
    result[column] = decoded.value
    result[c.DECODED_KEY] = decoded.value
    result[c.ERROR] = F.coalesce(batch[c.ERROR], decoded.error)
    return result


def route_step(route: Route, pipeline: PipelineConfig, batch: Projection) -> Projection:
    """Run the route, naming the config key when its field is not a column."""
    try:
        return route.route(batch)
    except KeyError as exc:
        raise _not_a_column(pipeline, "route.field", exc.args[0], batch) from None


def _not_a_column(pipeline: PipelineConfig, key: str, name: str, batch: Projection) -> ConfigError:
    """The error of a config key naming a column the batch does not have."""
    columns = ", ".join(n for n in batch if not c.is_internal(n))
    return ConfigError(
        f"pipeline {pipeline.name!r}: {key} {name!r} is not a column of the batch after "
        f"transforms (columns: {columns})"
    )


def _mode_step(
    pipeline: PipelineConfig,
    key_decoder: Decoder | None = None,
    chain: TransformChain | None = None,
    *,
    pending: bool = False,
) -> Step:
    """The write mode's step. ``pending``: the decoder learns record types while running, so
    a table's own key may name columns no record type met so far has (its rows are marked
    keyless until then, rather than the plan failing)."""
    dead = pipeline.errors.dead_letters
    write = pipeline.defaults.write
    if not write.merges:
        return Step(
            "mode",
            "append; tombstones to the dead-letter queue" if dead else "append; tombstones skipped",
            lambda batch: append_mode(batch, dead_letters=dead),
        )
    table_keys = {
        name: own.write.key
        for name, own in pipeline.tables.items()
        if own.write is not None and own.write.key is not None and own.write.key != write.key
    }
    what = (
        "upsert by key"
        if write.mode == "upsert"
        else "changes by Debezium op"
        if write.debezium
        else f"changes by {write.op_field}"
    )
    tombstones = (
        "tombstones delete by Kafka key" if write.tombstones == "delete" else ("tombstones skipped")
    )

    # The columns after transforms, as the plan was built for them (replanned as they grow).
    types = {f.name: f.dataType for f in chain.schema.fields} if chain is not None else None

    def apply(batch: Projection) -> Projection:
        # Read when the batch is planned: a key decoder's shape may have been learned.
        fields = (
            frozenset(f.name for f in key_decoder.schema.fields)
            if key_decoder is not None and not key_decoder.scalar
            else None
        )
        try:
            return change_mode(
                batch,
                write,
                table_keys,
                c.DECODED_KEY if pipeline.key is not None else None,
                fields,
                types,
                pending_table_keys=pending,
                key_names=_key_names(key_decoder) if pending else None,
            )
        except KeyError as exc:
            raise _not_a_column(pipeline, "write: column", exc.args[0], batch) from None

    keys = ", ".join(write.key) or "; ".join(f"{n}: {', '.join(k)}" for n, k in table_keys.items())
    return Step("mode", f"{what} ({keys}); {tombstones}", apply)


def _key_names(key_decoder: Decoder | None) -> frozenset[str] | None:
    """The names a decoded Kafka key holds values of (a struct's fields; a Connect
    ``{schema, payload}`` key's payload fields); None for a scalar key or none."""
    from pyspark.sql.types import StructType

    if key_decoder is None or key_decoder.scalar:
        return None
    schema = key_decoder.schema
    names = frozenset(schema.fieldNames())
    if names == {"schema", "payload"} and isinstance(schema["payload"].dataType, StructType):
        return frozenset(schema["payload"].dataType.fieldNames())
    return names


def build_plan(
    pipeline: PipelineConfig,
    decoder: Decoder,
    key_decoder: Decoder | None = None,
    chain: TransformChain | None = None,
    route: Route | None = None,
) -> BatchPlan:
    """The plan of one pipeline with the given value (and key) decoders and transforms."""
    route = route or build_route(pipeline)
    dead = pipeline.errors.dead_letters
    metadata = ", ".join(pipeline.kafka_metadata) or "none"
    decoders: list[tuple[str, Decoder]] = [("value", decoder)]
    steps = [
        Step(
            "decode",
            f"{pipeline.value.format} values into {len(decoder.schema.fields)} column(s); "
            "undecodable records marked",
            lambda batch: decode_value(decoder, batch),
        )
    ]
    if getattr(decoder, "packed", False):
        steps.append(
            Step(
                "unpack",
                "the decoded struct's fields as columns",
                lambda batch: unpack_value(decoder, batch),
                materialized=True,
            )
        )
    write = pipeline.defaults.write
    if write.debezium:
        from frazil.decode.debezium import unwrap

        steps.append(
            Step(
                "debezium",
                "Debezium envelopes into their rows (after; before for deletes), op into the "
                "operation",
                # The semantics are read from the decoder's schema as it is for this batch
                # (an Avro reader may have evolved): once per batch, never per record.
                lambda batch: unwrap(batch, decoder.schema, write, decoder.semantics()),
                materialized=True,
            )
        )
    if key_decoder is not None:
        key = pipeline.key
        assert key is not None, "a key decoder decodes the pipeline's key_format"
        decoders.append(("key", key_decoder))
        steps.append(
            Step(
                "decode key",
                f"{key.format} keys into column {key.column!r}; undecodable keys marked",
                lambda batch: decode_key(key_decoder, key.column, batch),
            )
        )
    steps.append(
        Step(
            "metadata",
            f"Kafka metadata columns: {metadata}",
            lambda batch: add_metadata(batch, pipeline),
        )
    )
    if chain is not None and chain.steps:
        derived = len(chain.steps) - len(pipeline.transforms)
        steps.append(
            Step(
                "transform",
                f"{len(pipeline.transforms)} declared transform(s)"
                + (
                    f", {derived} partition column(s) derived from variant paths" if derived else ""
                ),
                chain.apply,
            )
        )
    steps += [
        Step("route", route.describe(), lambda batch: route_step(route, pipeline, batch)),
        _mode_step(
            pipeline, key_decoder, chain, pending=getattr(decoder, "learns_record_types", False)
        ),
        Step(
            "prune",
            "keep raw key, value and headers for the dead-letter queue"
            if dead
            else "drop raw key, value and headers",
            lambda batch: _prune(batch, keep_raw=dead),
        ),
    ]
    return BatchPlan(
        pipeline.name, tuple(steps), route.tables, tuple(decoders), route.single, route.one_each
    )
