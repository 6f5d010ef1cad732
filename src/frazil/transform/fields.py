"""The shape of the columns while transforms are planned: names, struct fields, paths.

No Spark here: ``frazil validate`` plans the transforms over the declared schema (type text),
:func:`frazil.transform.chain.build_chain` over Spark's resolved schema, and both get the same
answers and the same messages from these functions. A planner takes the columns before a
transform and returns the columns after it, or raises :class:`PathError` with the reason.

Field references are matched like Spark matches names: exactly, or else case-insensitively
when only one field matches. A struct left without fields (its last field dropped or moved
out by ``rename``) disappears with it, as Iceberg has no empty structs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from frazil.config.transforms import ParseJsonOptions, ParseTimestampOptions
from frazil.config.types import TypeSyntaxError, to_spark_ddl

if TYPE_CHECKING:
    from pyspark.sql.types import StructField

#: Names listed in a message before it says how many more there are.
_LISTED = 30

Kind = Literal[
    "string", "binary", "integral", "timestamp", "timestamp_ntz", "struct", "other", "unknown"
]


class PathError(ValueError):
    """A transform does not fit the columns it is applied to; the message says why."""


@dataclass(frozen=True)
class Field:
    """A column or a struct field.

    Attributes:
        name: Its name.
        type: Spark's simple type text (``bigint``, ``struct<a:int>``); None when unknown
            (a derived column in a static check).
        children: A struct's fields; None for any other type.
    """

    name: str
    type: str | None
    children: tuple[Field, ...] | None = None

    @property
    def kind(self) -> Kind:
        """What a transform needs to know of the type."""
        if self.children is not None:
            return "struct"
        if self.type is None:
            return "unknown"
        text = self.type.lower()
        if text == "string" or text.startswith(("varchar", "char")):
            return "string"
        if text in ("tinyint", "smallint", "int", "bigint"):
            return "integral"
        if text in ("binary", "timestamp", "timestamp_ntz"):
            return text  # type: ignore[return-value]
        return "other"


Fields = tuple[Field, ...]


def field_from_ddl(name: str, type_text: str) -> Field:
    """A field from the config's type language (``long``, ``struct<a:int>`` …).

    An unknown or malformed type gives a field of unknown type: the config loader reports it.
    """
    try:
        ddl = to_spark_ddl(type_text)
    except TypeSyntaxError:
        return Field(name, None)
    return _from_canonical(name, ddl)


def field_from_spark(field: StructField) -> Field:
    """A field from Spark's schema."""
    from pyspark.sql.types import StructType

    if isinstance(field.dataType, StructType):
        children = tuple(field_from_spark(f) for f in field.dataType.fields)
        return Field(field.name, field.dataType.simpleString(), children)
    return Field(field.name, field.dataType.simpleString())


def _split(text: str) -> list[str]:
    """Split canonical DDL on commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _from_canonical(name: str, ddl: str) -> Field:
    if ddl.startswith("STRUCT<"):
        children = []
        for part in _split(ddl[len("STRUCT<") : -1]):
            child, _, child_type = part.partition(":")
            children.append(_from_canonical(child.strip(), child_type.strip()))
        return Field(name, _struct_text(children), tuple(children))
    return Field(name, _type_text(ddl))


def _type_text(ddl: str) -> str:
    """Canonical DDL as Spark's simple string: lower-case keywords, field names kept."""
    if ddl.startswith("STRUCT<"):
        return _from_canonical("", ddl).type or ""
    if ddl.startswith("ARRAY<"):
        return f"array<{_type_text(ddl[len('ARRAY<') : -1])}>"
    if ddl.startswith("MAP<"):
        key, value = _split(ddl[len("MAP<") : -1])
        return f"map<{_type_text(key)},{_type_text(value)}>"
    return ddl.lower()


def _struct_text(children: list[Field] | Fields) -> str:
    return "struct<" + ",".join(f"{c.name}:{c.type or '?'}" for c in children) + ">"


def names_of(fields: Fields) -> str:
    """The names for a message: ``id, amount, …`` (at most a few dozen)."""
    names = [f.name for f in fields]
    if len(names) > _LISTED:
        return ", ".join(names[:_LISTED]) + f", … ({len(names) - _LISTED} more)"
    return ", ".join(names)


def find(names: Sequence[str], name: str) -> int | None:
    """Position of ``name`` among ``names``: exact match, else the only case-insensitive one."""
    for i, candidate in enumerate(names):
        if candidate == name:
            return i
    matches = [i for i, candidate in enumerate(names) if candidate.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else None


def index_of(fields: Fields, name: str) -> int | None:
    """Position of the field called ``name`` (see :func:`find`)."""
    return find([f.name for f in fields], name)


def resolve(fields: Fields, path: str) -> tuple[tuple[str, ...], Field]:
    """The exact names along a dotted path, and the field it reaches.

    A path through a field of unknown type is accepted as written (a static check cannot
    see inside a derived column); the field reached is then of unknown type.

    Raises:
        PathError: A name does not exist, or a name before the last is not a struct.
    """
    parts = path.split(".")
    names: list[str] = []
    level, current = fields, None
    for depth, part in enumerate(parts):
        if current is not None and current.children is None:
            if current.type is None:
                return (*names, *parts[depth:]), Field(parts[-1], None)
            raise PathError(f"field {path!r}: {'.'.join(names)!r} is {current.type}, not a struct")
        index = index_of(level, part)
        if index is None:
            where = f"fields of {'.'.join(names)}" if names else "fields"
            raise PathError(f"field {path!r} does not exist ({where}: {names_of(level)})")
        current = level[index]
        names.append(current.name)
        level = current.children or ()
    assert current is not None
    return tuple(names), current


def replace_at(fields: Fields, names: tuple[str, ...], new: Field) -> Fields:
    """The columns with the field at exact ``names`` replaced by ``new``."""
    index = next(i for i, f in enumerate(fields) if f.name == names[0])
    if len(names) == 1:
        changed = new
    elif fields[index].children is None:
        return fields  # inside a field of unknown type: nothing known to change
    else:
        parent = fields[index]
        children = replace_at(parent.children or (), names[1:], new)
        changed = replace(parent, type=_struct_text(children), children=children)
    return (*fields[:index], changed, *fields[index + 1 :])


def remove_at(fields: Fields, names: tuple[str, ...]) -> tuple[Fields, tuple[str, ...]]:
    """The columns without the field at exact ``names``, and the path actually removed.

    A struct left without fields is removed too, so the path removed may be shorter.
    """
    index = next(i for i, f in enumerate(fields) if f.name == names[0])
    if len(names) > 1 and fields[index].children is None:
        return fields, names  # inside a field of unknown type: nothing known to remove
    if len(names) > 1:
        parent = fields[index]
        children, removed = remove_at(parent.children or (), names[1:])
        if children:
            changed = replace(parent, type=_struct_text(children), children=children)
            return (*fields[:index], changed, *fields[index + 1 :]), (names[0], *removed)
    return (*fields[:index], *fields[index + 1 :]), (names[0],)


def put(fields: Fields, new: Field) -> tuple[Fields, str | None]:
    """Replace the column of the same name in its place, or append ``new`` at the end.

    Returns the columns and the name of the column replaced (None when appended).
    """
    index = index_of(fields, new.name)
    if index is None:
        return (*fields, new), None
    return (*fields[:index], new, *fields[index + 1 :]), fields[index].name


def plan_flatten(
    fields: Fields, separator: str, max_depth: int | None
) -> tuple[Fields, tuple[tuple[str, tuple[str, ...]], ...]]:
    """Struct fields become columns ``parent<separator>child``, up to ``max_depth`` levels.

    Returns the columns after it and, for each, its name and the path it is read from.

    Raises:
        PathError: Two columns would get the same name.
    """
    out: list[tuple[Field, tuple[str, ...]]] = []

    def visit(field: Field, name: str, path: tuple[str, ...], depth: int) -> None:
        deeper = max_depth is None or depth < max_depth
        if field.children and deeper:
            for child in field.children:
                visit(child, f"{name}{separator}{child.name}", (*path, child.name), depth + 1)
        else:
            out.append((replace(field, name=name), path))

    for column in fields:
        visit(column, column.name, (column.name,), 0)
    seen: dict[str, tuple[str, ...]] = {}
    for field, path in out:
        first = seen.setdefault(field.name.lower(), path)
        if first != path:
            raise PathError(
                f"column {field.name!r} would come twice (from {'.'.join(first)} and "
                f"{'.'.join(path)}); rename one first or choose another separator"
            )
    return tuple(f for f, _ in out), tuple((f.name, p) for f, p in out)


def plan_rename(
    fields: Fields, old: str, new: str
) -> tuple[Fields, tuple[str, ...], tuple[str, ...] | None]:
    """Rename a column in place, or move a struct field out to a new column ``new``.

    Returns the columns after it, the exact path renamed, and for a nested field the path
    removed from its struct (None for a column renamed in place).

    Raises:
        PathError: ``old`` does not exist, or ``new`` is taken.
    """
    names, field = resolve(fields, old)
    taken = index_of(fields, new)
    if taken is not None and not (len(names) == 1 and fields[taken].name == names[0]):
        raise PathError(f"cannot rename {old!r} to {new!r}: column {new!r} already exists")
    if len(names) == 1:
        return replace_at(fields, names, replace(field, name=new)), names, None
    remaining, removed = remove_at(fields, names)
    if not remaining:
        raise PathError(f"cannot move {old!r} out: it is the only field")
    return (*remaining, replace(field, name=new)), names, removed


def plan_drop(fields: Fields, path: str) -> tuple[Fields, tuple[str, ...]]:
    """Drop a column or a struct field; returns the columns after it and the path removed.

    Raises:
        PathError: The field does not exist, or nothing would be left.
    """
    names, _ = resolve(fields, path)
    remaining, removed = remove_at(fields, names)
    if not remaining:
        raise PathError(f"dropping {path!r} would leave no columns")
    return remaining, removed


def plan_replace(fields: Fields, path: str, new_type: Field) -> tuple[Fields, tuple[str, ...]]:
    """Change the type of the field at ``path`` (``cast``, ``parse_json``, …)."""
    names, field = resolve(fields, path)
    return replace_at(fields, names, replace(new_type, name=field.name)), names


#: How ``parse_timestamp`` reads its field: a string (with ``format`` or Spark's default
#: parsing), an epoch number, an epoch number in a string, or a wall-clock timestamp_ntz.
TimestampMode = Literal["string", "epoch", "epoch_string", "wall_clock"]


def plan_parse_timestamp(
    fields: Fields, options: ParseTimestampOptions
) -> tuple[Fields, tuple[str, ...], TimestampMode | None]:
    """Check the field's type; returns the columns after it, the exact path and the mode.

    The mode is None when the field's type is unknown (a static check of a derived column).

    Raises:
        PathError: The field does not exist or cannot be read as a timestamp.
    """
    names, field = resolve(fields, options.field)
    kind = field.kind
    mode: TimestampMode | None
    if kind == "unknown":
        mode = None
    elif kind == "string":
        mode = "epoch_string" if options.unit else "string"
    elif kind == "integral":
        if options.unit is None:
            raise PathError(
                f"field {options.field!r} is {field.type}: set 'unit' (seconds, millis or "
                "micros) to read epoch numbers"
            )
        mode = "epoch"
    elif kind == "timestamp_ntz":
        if options.unit or options.format:
            raise PathError(
                f"field {options.field!r} is timestamp_ntz, a wall-clock time already: "
                "'format' and 'unit' do not apply"
            )
        mode = "wall_clock"
    elif kind == "timestamp":
        raise PathError(
            f"field {options.field!r} is a timestamp already (declared so, or an ISO time an "
            "inferred schema reads as one): drop this parse_timestamp, or declare the field "
            "as string to parse it here"
        )
    else:
        raise PathError(
            f"field {options.field!r} is {field.type}: parse_timestamp reads strings, "
            "integer epochs (with 'unit') or timestamp_ntz"
        )
    parsed = Field(field.name, "timestamp")
    if options.as_ is None:
        return replace_at(fields, names, parsed), names, mode
    result, _ = put(fields, replace(parsed, name=options.as_))
    return result, names, mode


def plan_parse_json(fields: Fields, options: ParseJsonOptions) -> tuple[Fields, tuple[str, ...]]:
    """Check the field is text; returns the columns after it and the exact path.

    Raises:
        PathError: The field does not exist or is not a string (or binary).
    """
    names, field = resolve(fields, options.field)
    if field.kind not in ("string", "binary", "unknown"):
        raise PathError(f"field {options.field!r} is {field.type}, not a JSON string")
    parsed = field_from_ddl(field.name, options.spark_type())
    return replace_at(fields, names, parsed), names
