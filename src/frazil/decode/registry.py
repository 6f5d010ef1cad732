"""The registry of value formats: each format is a decoder step with capability flags.

A decoder reads the raw value column of the batch contract, adds the decoded user columns
and marks records it cannot decode in the error column; it never raises for one record.
Formats register themselves here; the plan asks for the pipeline's ``format``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from frazil.config.models import PipelineConfig
from frazil.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from frazil.columns import Projection


@dataclass(frozen=True)
class Capabilities:
    """What a format can do.

    Attributes:
        declared_schema: Decodes with a schema declared in the config (``schema:``).
        inferred_schema: Can infer a schema from a sample of records.
        schema_per_record: Each record names its writer schema (Schema Registry wire format),
            so one batch may need several decodings.
        keys: Can decode record keys as well (``key_format``).
    """

    declared_schema: bool
    inferred_schema: bool
    schema_per_record: bool
    keys: bool


class Decoder(Protocol):
    """A decode step: raw value column in, user columns and error marks out."""

    @property
    def schema(self) -> StructType:
        """The user columns this decoder produces."""
        ...

    def decode(self, batch: Projection) -> Projection:
        """Add the decoded columns to a batch in the column contract; mark failures."""
        ...


@dataclass(frozen=True)
class Format:
    """A registered format: its name, capabilities and how to build its decoder."""

    name: str
    capabilities: Capabilities
    build: Callable[[PipelineConfig, StructType], Decoder]


_FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> None:
    """Make a format available under its name."""
    _FORMATS[fmt.name] = fmt


def get_format(name: str) -> Format:
    """The registered format called ``name``.

    Raises:
        ConfigError: No such format.
    """
    _load_builtins()
    try:
        return _FORMATS[name]
    except KeyError:
        raise ConfigError(
            f"format {name!r} is not available (known: {', '.join(sorted(_FORMATS))})"
        ) from None


def decoder_for(pipeline: PipelineConfig, schema: StructType) -> Decoder:
    """The decoder of the pipeline's ``format`` for ``schema``."""
    return get_format(pipeline.format).build(pipeline, schema)


def _load_builtins() -> None:
    # Importing a format module registers it; done lazily so the registry has no cycle.
    from frazil.decode import json  # noqa: F401
