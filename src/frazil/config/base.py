"""What the models of the config file and of its pipelines share.

:class:`Frozen` is their base: frozen, so a loaded config cannot change under the engine; every
unknown key refused, so a typo is reported with its key path instead of being silently
ignored; and a field taken by its name as well as its alias (``schema_`` as ``schema``).
:data:`IDENT` is the pattern of a plain name (a pipeline, a catalog, a column).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

#: A plain name: letters, digits and ``_``, not starting with a digit.
IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"


class Frozen(BaseModel):
    """The base of the config's models (see the module's docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def check_regex(value: str) -> str:
    """A validator: ``value`` compiles as a regular expression."""
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {value!r}: {exc}") from None
    return value
