"""How an Avro decoder is built from its config: a schema file (``schema_file``), or a
Schema Registry subject's versions, the newest that reads all before it the reader.

A routed pipeline over listed topics whose subjects hold different record types (Debezium's
Avro ``Envelope`` per source table) gets a decoder per record type
(:class:`~frazil.decode.avro_topics.AvroTopicsDecoder`); one table over such topics is
refused at start.
"""

from __future__ import annotations

from pathlib import Path

from frazil.decode import wire
from frazil.decode.avro import (
    AvroDecoder,
    full_name,
    keep_dropped,
    parse_avro,
    shape_of,
    unresolved,
)
from frazil.decode.avro_limits import unreadable
from frazil.decode.registry import BuildContext, Decoder, Format, register
from frazil.decode.schema_registry import RegisteredSchema, SubjectNotFoundError
from frazil.errors import ConfigError


def build(context: BuildContext) -> Decoder:
    """The Avro decoder of the context's part: of its ``schema_file``, or of its registry
    subject (for a routed pipeline, one that also reads the record types it meets).

    Raises:
        ConfigError: The schema file cannot be read or is no Avro schema; the subject holds
            no Avro schema; a single-table pipeline's topics hold different record types.
    """
    spark = context.spark
    name = context.decoding.column
    schema_file = context.decoding.schema_file
    if schema_file is not None:
        key = context.config_key("schema_file")
        try:
            text = Path(schema_file).read_text()
            parse_avro(spark, text)
        except OSError as exc:
            raise ConfigError(f"{key}: cannot read {schema_file}: {exc}") from None
        except ValueError as exc:
            raise ConfigError(f"{key}: {schema_file} is not an Avro schema: {exc}") from None
        try:
            schema, scalar = shape_of(spark, text, name)
        except ValueError as exc:
            raise ConfigError(f"{key}: {schema_file}: {exc}") from None
        return AvroDecoder(schema=schema, scalar=scalar, reader=text)
    found = wire.subject_schemas(context, "AVRO", "Avro", all_versions=True)
    others = other_record_types(context, found)
    first = registry_decoder(context, found)
    if context.pipeline.route is None or full_name(first.reader) is None:
        return first
    from frazil.decode.avro_topics import AvroTopicsDecoder

    # Routed: a record type met later (a topic created while running, a pattern's topics)
    # gets a decoder of its own then.
    parts = [first, *(registry_decoder(context, f) for f in others)]
    return AvroTopicsDecoder(parts, packs=context.part == "value")


def registry_decoder(context: BuildContext, found: wire.SubjectSchemas) -> AvroDecoder:
    """The decoder of one subject's record type: its versions the writers, the newest that
    reads all before it the reader (under ``evolve``, with the fields they dropped)."""
    spark, pipeline = context.spark, context.pipeline
    registry, versions, latest = found.registry, found.versions, found.latest
    writers = {v.schema_id: v for v in versions if v.schema_type == "AVRO"}
    writers[latest.schema_id] = latest
    evolve = pipeline.defaults.schema_evolution == "evolve" and context.part == "value"
    # Versions Spark cannot read are never the reader (their records are marked): the
    # newest that it can read is, and none at all stops the pipeline here.
    beyond = {i: why for i, w in writers.items() if (why := unreadable(w.text)) is not None}
    readable = [i for i in writers if i not in beyond]
    if not readable:
        why = beyond[latest.schema_id]
        raise ConfigError(
            f"{context.key_path}: subject {found.subject!r} version {latest.version}: Spark "
            f"cannot read this Avro schema: {why}"
        )
    reader_id = latest.schema_id if latest.schema_id in readable else max(readable)
    reader = writers[reader_id].text
    own = {i: w for i, w in writers.items() if i not in beyond}
    passed: set[int] = set()
    if evolve:
        # The subject's older versions' fields the newest dropped stay in the reader: their
        # records (still in the topic) keep those values, as a table's columns stay. A
        # version that cannot read those before it is passed over, as while running
        # (AvroDecoder.learn).
        for candidate in sorted(own, reverse=True):
            merged = own[candidate].text
            for older in sorted((w for i, w in own.items() if i < candidate), key=_newest):
                merged = keep_dropped(spark, merged, older.text)
            if any(unresolved(spark, merged, w.text) for i, w in own.items() if i < candidate):
                passed.add(candidate)
                continue
            reader, reader_id = merged, candidate
            break
    try:
        schema, scalar = shape_of(spark, reader, context.decoding.column)
    except ValueError as exc:
        raise ConfigError(
            f"{context.key_path}: subject {found.subject!r} (schema id {reader_id}): Spark "
            f"cannot read this Avro schema: {exc}"
        ) from None
    return AvroDecoder(
        schema=schema,
        scalar=scalar,
        reader=reader,
        registry=registry,
        writers=writers,
        reader_id=reader_id,
        evolve=evolve,
        _unresolved={i: why for i, w in own.items() if (why := unresolved(spark, reader, w.text))},
        _passed=passed,
        _unreadable=beyond,
    )


def other_record_types(
    context: BuildContext, first: wire.SubjectSchemas
) -> list[wire.SubjectSchemas]:
    """The subjects of the pipeline's other topics (``<topic>-value``, ``<topic>-key``) that
    hold record types other than ``first``'s and than each other's, in topic order: each
    read by a decoder of its own (Debezium's Avro ``Envelope`` per source table). Only for a
    routed pipeline over listed topics without ``subject:``.

    Raises:
        ConfigError: Such topics for a single table (one table, one record type).
    """
    topics = context.pipeline.topics or []
    if context.decoding.subject is not None or len(topics) < 2:
        return []
    names = {full_name(first.latest.text)}
    if None in names:
        return []
    found: list[wire.SubjectSchemas] = []
    for topic in topics[1:]:
        subject = context.decoding.subject_name([topic])
        assert subject is not None
        try:
            theirs = first.registry.latest(subject)
        except SubjectNotFoundError:
            continue
        name = full_name(theirs.text)
        if name is None or name in names:
            continue
        if context.pipeline.route is None:
            raise ConfigError(
                f"{context.config_key('subject')}: topics {topics[0]!r} and {topic!r} hold "
                f"different Avro record types (subject {first.subject!r}: "
                f"'{full_name(first.latest.text)}', {subject!r}: '{name}'), and one table "
                "holds one record type: route the topics to tables of their own (route: "
                "{topic: ...}), give each topic a pipeline, or set subject: to a schema "
                "that reads them all"
            )
        names.add(name)
        found.append(
            wire.subject_schemas(
                context, "AVRO", "Avro", all_versions=True, subject=subject, registry=first.registry
            )
        )
    return found


def _newest(schema: RegisteredSchema) -> int:
    return -schema.schema_id


register(Format(name="avro", build=build))
