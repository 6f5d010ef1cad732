"""What the models of the config file and of its pipelines share.

:class:`Frozen` is their base: frozen, so a loaded config cannot change under the engine; every
unknown key refused, so a typo is reported with its key path instead of being silently
ignored; and a field taken by its name as well as its alias (``schema_`` as ``schema``).
:data:`IDENT` is the pattern of a plain name (a pipeline, a catalog, a column).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict

#: A plain name: letters, digits and ``_``, not starting with a digit.
IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _as_text(value: object) -> object:
    """YAML's numbers and booleans as the text a library reads them from (``65536``,
    ``true``); anything else as it is, for the model to accept or refuse."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        # 1.0e+6 as 1000000: the libraries' integer settings refuse "1000000.0".
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    return value


#: A setting passed on to a library as text (Kafka's and Spark's settings, Iceberg's table and
#: catalog properties): written in YAML as a number or a boolean too, as users write them.
Setting = Annotated[str, BeforeValidator(_as_text)]


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
