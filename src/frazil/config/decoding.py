"""How a pipeline's records are decoded: :class:`Decoding`, one for the value and one for the
key, and the checks of a part's schema settings.

The config writes these settings flat under the pipeline (``format``, ``key_format``, …);
:mod:`frazil.config.flat_keys` gathers them into the two parts, and
:class:`~frazil.config.pipeline.PipelineConfig` runs :func:`check_schema_source` on each once
every key is valid on its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import InitErrorDetails

from frazil.columns import INTERNAL_PREFIX, METADATA_PREFIX
from frazil.config.base import IDENT, Frozen
from frazil.config.maintenance import parse_size
from frazil.config.types import check_field_types, field_problems

#: Value and key formats. ``string``/``bytes`` pass the payload through as one column.
FormatName = Literal["json", "avro", "protobuf", "string", "bytes"]
#: Formats whose schema can come from a Schema Registry (wire format: magic byte + id).
REGISTRY_FORMATS = ("json", "avro", "protobuf")

#: What decodes JSON: frazil's own JVM decoder (Jackson's byte parser straight into the
#: schema's rows) or Spark's ``from_json``, kept as a fallback for a release.
JsonDecoderName = Literal["frazil", "spark"]
#: The JSON decoder of a pipeline that does not set ``json_decoder``.
DEFAULT_JSON_DECODER: JsonDecoderName = "frazil"

#: Deepest nesting of objects and arrays a ``variant`` value may have, unless
#: ``variant_max_depth`` says otherwise (as .NET's System.Text.Json reads by default).
DEFAULT_VARIANT_MAX_DEPTH = 64
#: The deepest ``variant_max_depth``: Jackson, which ``parse_json`` parses with, reads no deeper
#: (``StreamReadConstraints``' default nesting limit).
VARIANT_DEPTH_LIMIT = 1000
#: The largest ``variant_max_bytes``, and its default: Jackson's longest string (20,000,000
#: characters) and Spark's variant builder (128 MiB per value; a value encodes in up to about
#: three times its JSON text) both take any JSON text this long.
VARIANT_BYTES_LIMIT = 16 * 1024**2

#: Which part of a record a :class:`Decoding` decodes.
Part = Literal["value", "key"]


def check_field_name(name: str) -> None:
    """A declared field's name: a plain name, not one of frazil's reserved prefixes.

    Raises:
        ValueError: It is not, naming it.
    """
    if not re.match(IDENT, name):
        raise ValueError(f"field name {name!r} must be letters, digits and '_'")
    # Spark resolves column names case-insensitively, so __FRAZIL_X collides just the same.
    lowered = name.lower()
    if lowered.startswith(INTERNAL_PREFIX):
        raise ValueError(
            f"field name {name!r}: the prefix {INTERNAL_PREFIX!r} is reserved for "
            "frazil's internal columns"
        )
    if lowered.startswith(METADATA_PREFIX):
        raise ValueError(
            f"field name {name!r}: the prefix {METADATA_PREFIX!r} is reserved for "
            "kafka_metadata columns"
        )


def check_case_collisions(names: Iterable[str]) -> None:
    """Declared fields must differ in more than case (Spark's names are case-insensitive).

    Raises:
        ValueError: Two do not, naming both.
    """
    seen: dict[str, str] = {}
    for name in names:
        first = seen.setdefault(name.lower(), name)
        if first != name:
            raise ValueError(
                f"fields {first!r} and {name!r} differ only in case, and Spark resolves "
                "column names case-insensitively"
            )


class Decoding(Frozen):
    """How one part of a pipeline's records, the value or the key, is decoded.

    The config writes these settings flat under the pipeline: ``format``, ``schema``,
    ``schema_file``, ``subject``, ``message`` and ``timestamp_format`` for the value;
    ``key_format``, ``key_schema``, ``key_schema_file``, ``key_subject``, ``key_message``
    and ``key_column`` for the key (:class:`PipelineConfig` gathers them).

    Attributes:
        part: Which part this decodes: ``value`` or ``key``.
        format: The part's format.
        schema_: Declared JSON fields, name → type (``schema``); None to read the schema
            from ``schema_file`` or the registry, or (JSON) to infer it.
        schema_file: A schema file: JSON Schema, Avro, ``.proto`` or a descriptor set.
        subject: The registry subject; None for ``<first topic>-<part>``.
        message: Protobuf: the full name of the message the records hold.
        timestamp_format: JSON values: the pattern of timestamps written as text.
        json_decoder: JSON: ``frazil`` (frazil's own JVM decoder) or ``spark``
            (Spark's ``from_json``). Set on the value, it decodes a JSON key too.
        column: The column the part becomes when decoded whole: always for the key
            (``key_column``, default ``key``); for a value only as one scalar (``string``,
            ``bytes``, an Avro schema that is not a record), named ``value``.
        variant: JSON values: the column each whole value lands in as one Spark/Iceberg
            ``variant``, whatever its shape (no schema); with ``schema``, the column of
            everything the declared columns do not hold (undeclared fields, values that do
            not read as their type); None to decode into typed columns only.
        variant_max_depth: With ``variant``: values nested deeper (objects and arrays) are
            dead letters; None for :data:`DEFAULT_VARIANT_MAX_DEPTH`.
        variant_max_bytes: With ``variant``: values longer than this (bytes of JSON text) are
            dead letters; None for :data:`VARIANT_BYTES_LIMIT`.
    """

    part: Part
    format: FormatName = "json"
    schema_: dict[str, str] | None = Field(default=None, alias="schema")
    schema_file: str | None = None
    subject: str | None = None
    message: str | None = None
    timestamp_format: str | None = None
    json_decoder: JsonDecoderName = DEFAULT_JSON_DECODER
    column: Annotated[str, Field(pattern=IDENT)]
    variant: str | None = None
    variant_max_depth: Annotated[int, Field(ge=1, le=VARIANT_DEPTH_LIMIT)] | None = None
    variant_max_bytes: int | str | None = None

    @model_validator(mode="before")
    @classmethod
    def _column_named_by_part(cls, data: Any) -> Any:
        # key_column defaults to "key"; a value's column is always "value".
        if isinstance(data, dict) and "column" not in data:
            return {**data, "column": data.get("part")}
        return data

    @field_validator("schema_")
    @classmethod
    def _check_schema(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("must declare at least one field, or be omitted to infer it")
        check_field_types(value, check_field_name)
        check_case_collisions(value)
        return value

    @field_validator("variant")
    @classmethod
    def _check_variant(cls, value: str | None) -> str | None:
        if value is not None:
            check_field_name(value)
        return value

    @field_validator("variant_max_bytes")
    @classmethod
    def _check_max_bytes(cls, value: int | str | None) -> int | str | None:
        if value is None:
            return None
        size = parse_size(value)
        if not 1 <= size <= VARIANT_BYTES_LIMIT:
            raise ValueError(
                f"must be between 1 byte and 16MiB ({VARIANT_BYTES_LIMIT} bytes): the longest "
                "JSON text Jackson and Spark's variant builder always take"
            )
        return value

    def max_depth(self) -> int:
        """``variant_max_depth``, or its default."""
        return self.variant_max_depth or DEFAULT_VARIANT_MAX_DEPTH

    def max_bytes(self) -> int:
        """``variant_max_bytes`` in bytes, or its default."""
        given = self.variant_max_bytes
        return VARIANT_BYTES_LIMIT if given is None else parse_size(given)

    def source(self) -> str:
        """Where the part's schema comes from: ``none`` (``string``, ``bytes``),
        ``declared``, ``file``, ``registry``, ``inferred`` (JSON) or ``variant`` (JSON
        landed whole in a variant column: no schema)."""
        if self.format in ("string", "bytes"):
            return "none"
        if self.schema_ is not None:
            return "declared"
        if self.variant is not None:
            return "variant"
        if self.schema_file is not None:
            return "file"
        if self.format == "json" and self.subject is None:
            return "inferred"
        return "registry"

    def subject_name(self, topics: list[str] | None) -> str | None:
        """The registry subject of the part's schema: ``subject``, or by the topic name
        strategy ``<first topic>-value`` / ``<first topic>-key`` (None for a
        ``topic_pattern`` pipeline, which must name it)."""
        if self.subject:
            return self.subject
        return f"{topics[0]}-{self.part}" if topics else None

    def config_key(self, name: str) -> str:
        """The key one of the part's settings is written as under the pipeline, for
        messages: ``schema_file`` is ``key_schema_file`` for the key."""
        return f"key_{name}" if self.part == "key" else name


def check_schema_source(part: Decoding) -> None:
    prefix = part.config_key("")  # "key_" for the key: messages name the keys as written
    fmt, schema, schema_file, message = part.format, part.schema_, part.schema_file, part.message
    check_variant(part)
    if fmt in ("string", "bytes"):
        for key, value in (("schema", schema), ("schema_file", schema_file), ("message", message)):
            if value is not None:
                raise ValueError(f"'{prefix}{key}' does not apply to {prefix}format {fmt}")
        return
    if schema is not None and fmt != "json":
        raise ValueError(
            f"'{prefix}schema' declares JSON fields; {prefix}format {fmt} takes "
            f"'{prefix}schema_file' or the schema registry"
        )
    if schema is not None and schema_file is not None:
        raise ValueError(f"set '{prefix}schema' or '{prefix}schema_file', not both")
    if message is not None and fmt != "protobuf":
        raise ValueError(f"'{prefix}message' applies to {prefix}format protobuf only")
    if fmt == "protobuf" and schema_file is not None and message is None:
        raise ValueError(
            f"'{prefix}message' is required with '{prefix}schema_file': the full name of "
            "the message the records hold (e.g. shop.v1.Order)"
        )


def check_variant(part: Decoding) -> None:
    """``variant`` and its limits: JSON values only, and instead of a schema.

    Raises:
        ValueError: They do not fit the part's other settings, naming the keys.
    """
    if part.variant is None:
        for key in ("variant_max_depth", "variant_max_bytes"):
            if getattr(part, key) is not None:
                raise ValueError(f"'{key}' applies with 'variant' only")
        return
    if part.format != "json":
        raise ValueError(f"'variant' lands JSON values; format {part.format} is not JSON")
    for key, given in (("schema_file", part.schema_file), ("subject", part.subject)):
        if given is not None:
            raise ValueError(
                f"set '{key}' or 'variant', not both: 'variant' lands each value whole, or "
                "with 'schema', the fields it declares in columns and the rest in the variant"
            )
    if part.schema_ is None:
        if part.timestamp_format is not None:
            raise ValueError(
                "'timestamp_format' applies to declared columns: 'variant' without 'schema' "
                "lands each value whole, timestamps as the text they are"
            )
        return
    taken = {name.lower(): name for name in part.schema_}
    if part.variant.lower() in taken:
        raise ValueError(
            f"variant column {part.variant!r} is also a field 'schema' declares "
            f"({taken[part.variant.lower()]!r}); name the column of the rest otherwise"
        )


def each_field_problem(
    errors: list[InitErrorDetails], data: dict[Any, Any]
) -> list[InitErrorDetails]:
    """A declared schema's problems one per field, at ``schema.<field>``, rather than the
    first one at ``schema``: every wrong type is reported in one run (the pipeline's
    validation errors, with its raw ``data``)."""
    out: list[InitErrorDetails] = []
    for error in errors:
        loc = error["loc"]
        fields = data.get(loc[0]) if len(loc) == 1 and isinstance(loc[0], str) else None
        if (
            not loc
            or loc[0] not in ("schema", "schema_", "key_schema")
            or not isinstance(fields, dict)
        ):
            out.append(error)
            continue
        named = {k: v for k, v in fields.items() if isinstance(k, str) and isinstance(v, str)}
        each = field_problems(named, check_field_name)
        out += [
            InitErrorDetails(
                type="value_error", loc=(loc[0], name), input=named[name], ctx={"error": reason}
            )
            for name, reason in each
        ]
        if not each:
            out.append(error)
            continue
        try:
            check_case_collisions(named)
        except ValueError as exc:
            out.append(
                InitErrorDetails(type="value_error", loc=loc, input=fields, ctx={"error": exc})
            )
    return out
