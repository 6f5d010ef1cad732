"""The Schema Registry wire format in a batch: magic byte 0, a 4-byte schema id, the payload.

Shared by the registry-backed decoders: which ids a batch holds, and the marks of records that
are not in the wire format or name an id the decoder does not know.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from frazil.decode.errors import EMPTY, decode_error, hex_prefix
from frazil.decode.registry import BuildContext
from frazil.decode.schema_registry import (
    HEADER_BYTES,
    RegisteredSchema,
    SchemaRegistry,
    header,
)
from frazil.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def matches(data: Column, schema_id: int) -> Column:
    """Whether a value carries ``schema_id`` (compared in place, no copy per record)."""
    from pyspark.sql import functions as F

    return F.startswith(data, F.lit(header(schema_id)))


def schema_id_text(data: Column) -> Column:
    """The value's schema id as text (for messages)."""
    from pyspark.sql import functions as F

    return F.conv(F.hex(F.substring(data, 2, 4)), 16, 10)


def payload(data: Column) -> Column:
    """The bytes after the 5-byte header."""
    from pyspark.sql import functions as F

    return F.substring(data, HEADER_BYTES + 1, 2**31 - 1)


def ids_in(raw: DataFrame, column: str) -> set[int]:
    """The schema ids the wire-format values of ``raw[column]`` carry (one Spark job)."""
    from pyspark.sql import functions as F

    data = F.col(column)
    rows = (
        raw.where(F.startswith(data, F.lit(b"\x00")) & (F.length(data) >= HEADER_BYTES))
        .select(schema_id_text(data).cast("long"))
        .distinct()
        .collect()
    )
    return {int(row[0]) for row in rows}


def header_errors(data: Column, known: list[int], registry_url: str) -> Column:
    """The error of values that are null (none), not wire format, or of an unknown id.

    Returns a ``when`` chain that callers extend with their own decoding failures.
    """
    from pyspark.sql import functions as F

    known_any: Column | None = None
    for schema_id in known:
        m = matches(data, schema_id)
        known_any = m if known_any is None else known_any | m
    return (
        F.when(data.isNull(), F.lit(None))
        .when(F.length(data) == 0, decode_error(F.lit(EMPTY), F.lit("")))
        .when(
            (F.length(data) < HEADER_BYTES) | ~F.startswith(data, F.lit(b"\x00")),
            decode_error(
                F.format_string(
                    "bad magic byte 0x%s (not Schema Registry wire format)",
                    F.hex(F.substring(data, 1, 1)),
                ),
                hex_prefix(data),
            ),
        )
        .when(
            F.lit(True) if known_any is None else ~known_any,
            decode_error(
                F.format_string(
                    f"unknown schema id %s at registry {registry_url}", schema_id_text(data)
                ),
                hex_prefix(data),
            ),
        )
    )


@dataclass(frozen=True)
class SubjectSchemas:
    """A pipeline part's registry subject: the client, the newest version, all versions."""

    registry: SchemaRegistry
    subject: str
    latest: RegisteredSchema
    versions: tuple[RegisteredSchema, ...]


def subject_schemas(
    context: BuildContext,
    schema_type: str,
    what: str,
    *,
    all_versions: bool = False,
    subject: str | None = None,
    registry: SchemaRegistry | None = None,
) -> SubjectSchemas:
    """The registry schemas of the context's part (value or key subject).

    Args:
        context: The decoder's build context (its config has ``schema_registry``).
        schema_type: The registry's type the format needs (``AVRO``, ``PROTOBUF``, ``JSON``).
        what: The format's name for messages (``Avro``, ``a JSON Schema`` …).
        all_versions: Also fetch every version of the subject (writer schemas to prefetch).
        subject: The subject, where not the part's own (another topic's).
        registry: The client to ask, where one is open already.

    Raises:
        ConfigError: No subject can be named, or it holds another type of schema.
        SubjectNotFoundError: The subject is not in the registry.
        RegistryUnavailableError: The registry did not answer after every retry.
    """
    assert context.config.schema_registry is not None
    pipeline = context.pipeline
    registry = registry or SchemaRegistry(context.config.schema_registry)
    subject = subject or context.decoding.subject_name(pipeline.topics)
    if subject is None:
        raise ConfigError(
            f"{context.config_key('subject')}: a topic_pattern pipeline names its registry subject"
        )
    versions = tuple(registry.versions(subject)) if all_versions else ()
    latest = registry.latest(subject)
    if latest.schema_type != schema_type:
        raise ConfigError(
            f"{context.key_path}: subject {subject!r} holds a {latest.schema_type} schema, "
            f"not {what}"
        )
    return SubjectSchemas(registry, subject, latest, versions)
