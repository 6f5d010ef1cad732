"""How a pipeline's flat YAML keys map to the groups of
:class:`~frazil.config.pipeline.PipelineConfig`, both ways, and how problems are reported
under the keys as written.

A pipeline writes every key flat (``format``, ``key_schema``, ``partition_by``, ``write``, …);
the model holds them in groups (``value``, ``key``, ``defaults``). :func:`gather` puts the keys
in their groups before validation, :func:`_written_as` and :func:`_moved` put each error back at
the key it was written as, :func:`_reported_order` sorts them as they were reported while each
key was the pipeline's own field, and :func:`flatten` writes a dump flat again. Kept apart from
the model so the one table, :data:`LAYOUT`, says where every key goes.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import SerializationInfo
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ErrorType

#: The groups of :class:`~frazil.config.pipeline.PipelineConfig` that flat keys fill.
_GROUPS = ("value", "key", "defaults")

#: Every key written under a pipeline: None for a field of the pipeline itself, or the group
#: holding it and its name there. In the order they were declared while each was the
#: pipeline's own field, which is the order problems are reported and dumps list them in.
LAYOUT: dict[str, tuple[str, str] | None] = {
    "name": None,
    "topics": None,
    "topic_pattern": None,
    "starting_offsets": None,
    "max_offsets_per_trigger": None,
    "first_batch_max_offsets": None,
    "min_partitions": None,
    **{
        key: ("value", key)
        for key in (
            "format",
            "schema",
            "schema_file",
            "subject",
            "message",
            "timestamp_format",
            "json_decoder",
            "variant",
            "variant_max_depth",
            "variant_max_bytes",
        )
    },
    **{
        f"key_{key}": ("key", key)
        for key in ("format", "schema", "schema_file", "subject", "message", "column")
    },
    "table": None,
    "route": None,
    "kafka_metadata": None,
    "transforms": None,
    **{
        key: ("defaults", key)
        for key in (
            "partition_by",
            "sort_by",
            "identifier_fields",
            "table_properties",
            "schema_evolution",
            "aliases",
        )
    },
    "tables": None,
    "write": ("defaults", "write"),
    "maintenance": ("defaults", "maintenance"),
    "errors": None,
    "trigger": None,
    "checkpoint": None,
    "valid_through_slack": None,
}
# The value's schema is also accepted under its attribute's name (populate_by_name).
_ACCEPTED: dict[str, tuple[str, str] | None] = {**LAYOUT, "schema_": ("value", "schema_")}
#: (group, name there) → the key written under the pipeline.
_WRITTEN_AS = {place: key for key, place in _ACCEPTED.items() if place is not None}
_RANK = {key: i for i, key in enumerate(LAYOUT)} | {"schema_": list(LAYOUT).index("schema")}
#: The key's settings besides its format, which need ``key_format``.
KEY_SETTINGS = ("schema", "schema_file", "subject", "message")
_KNOWN_ERRORS = frozenset(get_args(ErrorType))


def gather(data: dict[Any, Any]) -> tuple[dict[Any, Any], dict[Any, Any], list[Any]]:
    """Put the flat keys of a pipeline in their groups.

    Returns:
        The pipeline's input; the key's settings (validated there only with ``key_format``);
        keys named like a group, which the config does not have.
    """
    groups: dict[str, dict[Any, Any]] = {
        "value": {"part": "value"},
        "key": {"part": "key"},
        "defaults": {},
    }
    grouped: dict[Any, Any] = {}
    misplaced = []
    for name, value in data.items():
        place = _ACCEPTED.get(name) if isinstance(name, str) else None
        if place is not None:
            groups[place[0]][place[1]] = value
        elif name in _GROUPS:
            misplaced.append(name)
        else:
            grouped[name] = value
    key = groups["key"]
    if key.get("format") is None:
        # key_format: null is no key_format.
        key.pop("format", None)
    else:
        grouped["key"] = key
    # A pipeline without write: appends.
    groups["defaults"].setdefault("write", {})
    grouped["value"] = groups["value"]
    grouped["defaults"] = groups["defaults"]
    return grouped, key, misplaced


def _written_as(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """An error's location with the key the config writes (``defaults.write`` → ``write``)."""
    if len(loc) >= 2 and loc[0] in _GROUPS:
        key = _WRITTEN_AS.get((str(loc[0]), str(loc[1])))
        if key is not None:
            return (key, *loc[2:])
    return loc


def _moved(error: ErrorDetails, loc: tuple[int | str, ...]) -> InitErrorDetails:
    """The same error at another location, with the same type and message."""
    if error["type"] in _KNOWN_ERRORS:
        return InitErrorDetails(
            type=error["type"], loc=loc, input=error["input"], ctx=error.get("ctx", {})
        )
    # A custom error (a discriminator's): the message it had, taken as it is.
    return InitErrorDetails(
        type=PydanticCustomError(error["type"], error["msg"]), loc=loc, input=error["input"]
    )


def is_unknown_key(error: InitErrorDetails) -> bool:
    """Whether an error refuses a key the pipeline does not have."""
    return error["type"] == "extra_forbidden" and len(error["loc"]) == 1


def _reported_order(error: InitErrorDetails, position: dict[Any, int]) -> tuple[int, int]:
    """Where pydantic reported an error while every key was the pipeline's own field: fields
    in the order of :data:`LAYOUT` (a list's entries by index), then unknown keys as
    written (``position``: each key's place in the input)."""
    loc = error["loc"]
    if is_unknown_key(error):
        return len(LAYOUT), position.get(loc[0], 0)
    if not loc:
        return -1, 0
    entry = loc[1] if loc[0] == "partition_by" and len(loc) > 1 else -1
    return _RANK.get(str(loc[0]), len(LAYOUT)), entry if isinstance(entry, int) else -1


def as_written(
    found: list[ErrorDetails], data: dict[Any, Any], misplaced: list[Any]
) -> list[InitErrorDetails]:
    """A pipeline's errors at the keys as written (``defaults.write`` → ``write``).

    Args:
        found: The errors pydantic reported for the grouped input.
        data: The pipeline as written.
        misplaced: Keys named like a group (:func:`gather`), each refused as unknown.
    """
    errors = [_moved(error, _written_as(error["loc"])) for error in found]
    errors += [
        InitErrorDetails(type="extra_forbidden", loc=(name,), input=data[name])
        for name in misplaced
    ]
    return errors


def as_reported(errors: list[InitErrorDetails], data: dict[Any, Any]) -> list[InitErrorDetails]:
    """The errors in the order pydantic reported them while every key was the pipeline's own
    field (:func:`_reported_order`)."""
    position = {name: i for i, name in enumerate(data)}
    return sorted(errors, key=lambda error: _reported_order(error, position))


def flatten(
    data: dict[str, Any], idle_key_column: str | None, info: SerializationInfo
) -> dict[str, Any]:
    """A pipeline's dump with its groups written flat again, in the order of :data:`LAYOUT`.

    Args:
        data: The pipeline's dump, by group.
        idle_key_column: For a pipeline without ``key_format``: the ``key_column`` it dumps,
            with every other key setting null; None for a pipeline with a key.
        info: How the dump was asked for (``by_alias``, ``exclude_none``).
    """
    groups: dict[str, dict[str, Any]] = {name: data.pop(name, None) or {} for name in _GROUPS}
    flat: dict[str, Any] = {}
    for key, place in LAYOUT.items():
        if place is None:
            if key in data:
                flat[key] = data[key]
        elif place[0] == "key" and idle_key_column is not None:
            value = idle_key_column if key == "key_column" else None
            if value is not None or not info.exclude_none:
                flat[key] = value
        else:
            group, name = place
            if name == "schema" and not info.by_alias:
                name, key = "schema_", "schema_" if key == "schema" else key
            if name in groups[group]:
                flat[key] = groups[group][name]
    return flat
