"""The ``transforms:`` list of a pipeline: one frozen model per transform.

Each list entry is a mapping with exactly one key, the transform's name::

    transforms:
      - flatten: {separator: "_", max_depth: 3}
      - parse_timestamp: {field: created_at, format: "yyyy-MM-dd HH:mm:ss", timezone: Asia/Tokyo}
      - rename: {payer: payer_name}
      - drop: [document]
      - cast: {amount: "decimal(12,2)"}
      - derive: {amount_jpy: "amount * 150"}
      - filter: "type <> 'test'"
      - parse_json: {field: payload, as: map}

The models check what can be checked without a schema (names, type syntax, units); that the
fields exist is checked against the schema when it is known (``frazil validate``, ``frazil
plan`` and the start of ``frazil run``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from frazil.columns import INTERNAL_PREFIX
from frazil.config.types import TypeSyntaxError, check_field_types, to_spark_ddl

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A field reference: a top-level column, or a path into structs (a.b.c).
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_SEPARATOR = re.compile(r"^[A-Za-z0-9_]+$")
# A fixed offset as Java reads one: +09:00, -5, UTC+9, GMT-03:30.
_OFFSET = re.compile(r"^(UTC|GMT|UT)?[+-]\d{1,2}(:?\d{2})?$")


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"column name {name!r} must be letters, digits and '_'")
    if name.lower().startswith(INTERNAL_PREFIX):
        raise ValueError(f"column name {name!r}: the prefix '{INTERNAL_PREFIX}' is reserved")
    return name


def _check_path(path: str) -> str:
    if not _PATH.match(path):
        raise ValueError(f"field {path!r} must be a column name or a dotted path (a.b)")
    return path


def _check_timezone(timezone: str) -> str:
    if timezone in ("UTC", "GMT", "Z") or _OFFSET.match(timezone):
        return timezone
    zones = _known_zones()
    # Without a time zone database here, Spark checks the zone when the pipeline starts.
    if zones and timezone not in zones:
        raise ValueError(
            f"unknown time zone {timezone!r} (a region such as Asia/Tokyo, or an offset "
            "such as +09:00)"
        )
    return timezone


@lru_cache(maxsize=1)
def _known_zones() -> frozenset[str]:
    import zoneinfo

    return frozenset(zoneinfo.available_timezones())


def _check_type(type_text: str) -> str:
    try:
        to_spark_ddl(type_text)
    except TypeSyntaxError as exc:
        raise ValueError(str(exc)) from None
    return type_text


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class FlattenOptions(_Frozen):
    """Struct fields become top-level columns ``parent<separator>child``; arrays and maps stay."""

    separator: Annotated[str, Field(min_length=1)] = "_"
    max_depth: Annotated[int, Field(gt=0)] | None = None

    @field_validator("separator")
    @classmethod
    def _separator(cls, value: str) -> str:
        # Column names stay plain identifiers: no quoting in SQL, partition_by or the table.
        if not _SEPARATOR.match(value):
            raise ValueError(f"separator {value!r} must be letters, digits and '_'")
        return value


class ParseTimestampOptions(_Frozen):
    """A string (``format``, Spark datetime pattern) or an epoch number (``unit``) → timestamp."""

    field: str
    format: str | None = None
    unit: Literal["seconds", "millis", "micros", "nanos"] | None = None
    timezone: str | None = None
    as_: Annotated[str | None, Field(alias="as")] = None

    @field_validator("field")
    @classmethod
    def _field(cls, value: str) -> str:
        return _check_path(value)

    @field_validator("as_")
    @classmethod
    def _as(cls, value: str | None) -> str | None:
        return None if value is None else _check_name(value)

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        return None if value is None else _check_timezone(value)

    @model_validator(mode="after")
    def _format_or_unit(self) -> ParseTimestampOptions:
        if self.format is not None and self.unit is not None:
            raise ValueError("set 'format' for strings or 'unit' for epoch numbers, not both")
        if self.unit is not None and self.timezone is not None:
            raise ValueError("'timezone' applies to strings; an epoch number is already UTC")
        return self


class ParseJsonOptions(_Frozen):
    """A JSON string column → a map (``as: map`` or ``map<string,T>``) or a struct."""

    field: str
    as_: Annotated[str, Field(alias="as")] = "map"
    schema_: Annotated[dict[str, str] | None, Field(alias="schema")] = None

    @field_validator("field")
    @classmethod
    def _field(cls, value: str) -> str:
        return _check_path(value)

    @field_validator("schema_")
    @classmethod
    def _schema(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None:
            if not value:
                raise ValueError("must declare at least one field")
            check_field_types(value, _check_name)
        return value

    @model_validator(mode="after")
    def _shape(self) -> ParseJsonOptions:
        kind = self.as_.strip().lower()
        if kind == "struct":
            if self.schema_ is None:
                raise ValueError("'as: struct' needs 'schema' (field: type, ...)")
            return self
        if self.schema_ is not None:
            raise ValueError("'schema' goes with 'as: struct'")
        if kind == "map":
            return self
        try:
            ddl = to_spark_ddl(self.as_)
        except TypeSyntaxError as exc:
            raise ValueError(f"'as': {exc}") from None
        if not ddl.startswith(("MAP<", "STRUCT<", "ARRAY<")):
            raise ValueError(
                f"'as' must be map, struct, or a map/struct/array type, not {self.as_!r}"
            )
        return self

    def spark_type(self) -> str:
        """The target type as Spark DDL."""
        kind = self.as_.strip().lower()
        if kind == "map":
            return "MAP<STRING, STRING>"
        if kind == "struct":
            assert self.schema_ is not None
            fields = ", ".join(f"{n}: {to_spark_ddl(t)}" for n, t in self.schema_.items())
            return f"STRUCT<{fields}>"
        return to_spark_ddl(self.as_)


class Flatten(_Frozen):
    flatten: FlattenOptions = Field(default_factory=FlattenOptions)

    @field_validator("flatten", mode="before")
    @classmethod
    def _empty(cls, value: Any) -> Any:
        return {} if value is None else value


class ParseTimestamp(_Frozen):
    parse_timestamp: ParseTimestampOptions


class Rename(_Frozen):
    rename: Annotated[dict[str, str], Field(min_length=1)]

    @field_validator("rename")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for old, new in value.items():
            _check_path(old)
            _check_name(new)
        return value


class Drop(_Frozen):
    drop: Annotated[list[str], Field(min_length=1)]

    @field_validator("drop")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for name in value:
            _check_path(name)
        return value


class Cast(_Frozen):
    cast: Annotated[dict[str, str], Field(min_length=1)]

    @field_validator("cast")
    @classmethod
    def _types(cls, value: dict[str, str]) -> dict[str, str]:
        for name, type_text in value.items():
            _check_path(name)
            try:
                _check_type(type_text)
            except ValueError as exc:
                raise ValueError(f"field {name!r}: {exc}") from None
        return value


class Derive(_Frozen):
    derive: Annotated[dict[str, Annotated[str, Field(min_length=1)]], Field(min_length=1)]

    @field_validator("derive")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            _check_name(name)
        return value


class Filter(_Frozen):
    filter: Annotated[str, Field(min_length=1)]


class ParseJson(_Frozen):
    parse_json: ParseJsonOptions


Transform = Flatten | ParseTimestamp | Rename | Drop | Cast | Derive | Filter | ParseJson


def _tag(entry: Any) -> str | None:
    if isinstance(entry, BaseModel):
        return transform_name(entry)  # type: ignore[arg-type]
    if isinstance(entry, dict) and len(entry) == 1:
        name = next(iter(entry))
        return name if name in TRANSFORMS else None
    return None


#: The type of one ``transforms:`` entry: the model is picked by the entry's one key, so an
#: error names that transform's own keys instead of every transform's.
TransformEntry = Annotated[
    Annotated[Flatten, Tag("flatten")]
    | Annotated[ParseTimestamp, Tag("parse_timestamp")]
    | Annotated[Rename, Tag("rename")]
    | Annotated[Drop, Tag("drop")]
    | Annotated[Cast, Tag("cast")]
    | Annotated[Derive, Tag("derive")]
    | Annotated[Filter, Tag("filter")]
    | Annotated[ParseJson, Tag("parse_json")],
    Discriminator(
        _tag,
        custom_error_type="unknown_transform",
        custom_error_message=(
            "each transform is a mapping with one key, its name: flatten, parse_timestamp, "
            "rename, drop, cast, derive, filter or parse_json"
        ),
    ),
]

#: Transform name → model, in the order the docs list them.
TRANSFORMS: dict[str, type[Transform]] = {
    "flatten": Flatten,
    "parse_timestamp": ParseTimestamp,
    "rename": Rename,
    "drop": Drop,
    "cast": Cast,
    "derive": Derive,
    "filter": Filter,
    "parse_json": ParseJson,
}


def transform_name(transform: Transform) -> str:
    """The transform's key in the config (``flatten``, ``rename``, …)."""
    return next(iter(type(transform).model_fields))
