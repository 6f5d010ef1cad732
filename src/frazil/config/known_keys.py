"""The keys a config model takes at an error's location, as the config writes them (a
pipeline's flat keys: ``format``, not ``value.format``), so that an unknown key is compared
with the keys of its own section only (:func:`frazil.config.suggest.did_you_mean`)."""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, Tag

from frazil.config.flat_keys import LAYOUT
from frazil.config.pipeline import PipelineConfig


def known_keys(root: type[BaseModel], loc: tuple[str | int, ...]) -> list[str] | None:
    """The keys the section at ``loc`` takes, as the config writes them; None if unknown.

    Args:
        root: The model the location starts at (the whole config).
        loc: The section's location as pydantic reports it: keys, list indexes, and the tags
            of tagged unions (a route's ``static``, a transform's name).
    """
    current: list[Any] = [root]
    for part in loc:
        current = [found for kind in current for found in _step(kind, part)]
        if not current:
            return None
    keys: list[str] = []
    for kind in current:
        for model in _members(kind):
            keys += _model_keys(model)
    return keys or None


def _members(kind: Any) -> list[Any]:
    """The types a type may be: ``X | None`` and ``Annotated[X, …]`` unwrapped."""
    origin = get_origin(kind)
    if origin is Annotated:
        return _members(get_args(kind)[0])
    if origin is Union or origin is types.UnionType:
        return [m for arg in get_args(kind) if arg is not type(None) for m in _members(arg)]
    return [kind]


def _tagged(kind: Any, tag: str) -> list[Any]:
    """The members of a tagged union whose tag is ``tag``."""
    origin = get_origin(kind)
    if origin is Annotated:
        args = get_args(kind)
        if any(isinstance(meta, Tag) and meta.tag == tag for meta in args[1:]):
            return [args[0]]
        return _tagged(args[0], tag)
    if origin is Union or origin is types.UnionType:
        return [m for arg in get_args(kind) for m in _tagged(arg, tag)]
    return []


def _step(kind: Any, part: str | int) -> list[Any]:
    if isinstance(part, str):
        tagged = _tagged(kind, part)
        if tagged:
            return tagged
    found: list[Any] = []
    for member in _members(kind):
        origin = get_origin(member)
        if origin is list and isinstance(part, int):
            found.append(get_args(member)[0])
        elif origin is dict and isinstance(part, str):
            found.append(get_args(member)[1])
        elif isinstance(member, type) and issubclass(member, BaseModel) and isinstance(part, str):
            found += _field_type(member, part)
    return found


def _field_type(model: type[BaseModel], key: str) -> list[Any]:
    if issubclass(model, PipelineConfig):
        # A pipeline's keys are written flat: format is value.format, write is defaults.write.
        place = LAYOUT.get(key)
        if place is not None:
            group = model.model_fields[place[0]].annotation
            return [found for kind in _members(group) for found in _step(kind, place[1])]
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return [field.annotation]
    return []


def _model_keys(kind: Any) -> list[str]:
    if not (isinstance(kind, type) and issubclass(kind, BaseModel)):
        return []
    if issubclass(kind, PipelineConfig):
        return list(LAYOUT)
    return [field.alias or name for name, field in kind.model_fields.items()]
