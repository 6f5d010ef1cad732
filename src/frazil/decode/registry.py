"""The registry of formats: each format builds a decoder of one binary column (value or key).

A decoder turns the raw bytes of a record's value (or key) into a typed column and an error
column; it never raises for one record. Formats register themselves here; the plan asks for
the pipeline's ``format`` (and ``key_format``) and places the decoded columns: a value's
struct fields become the batch's columns, a key becomes one column (``key_column``).

Formats whose records name their writer schema (the Schema Registry wire format: magic byte 0
and a 4-byte schema id) learn new ids between batches: :meth:`Decoder.learn` reads the ids of
a batch that met unknown ones, fetches them, and the plan rebuilds its projection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from frazil.config.decoding import Decoding, Part
from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from frazil.decode.connect_types import Semantics


@dataclass(frozen=True)
class Decoded:
    """What a decoder makes of one binary column.

    Attributes:
        value: The decoded data: a struct of :attr:`Decoder.schema`'s fields, or for a
            scalar decoder the single field's value itself.
        error: Null, or the error struct (``columns.ERROR_DDL``) with stage ``decode``. A
            null input (a tombstone, a record without key) is never an error.
        fields: The struct's fields as expressions of their own, when cheaper than taking
            them out of :attr:`value` (which may wrap the decoded struct in a null check).
    """

    value: Column
    error: Column
    fields: dict[str, Column] | None = None


class Decoder(Protocol):
    """Decodes one binary column of the batch; marks records it cannot decode."""

    @property
    def schema(self) -> StructType:
        """The decoded shape (the reader schema). A scalar decoder has one field."""
        ...

    @property
    def scalar(self) -> bool:
        """Whether :meth:`decode` returns the single field's value rather than a struct."""
        ...

    def decode(self, data: Column) -> Decoded:
        """Expressions that decode ``data`` (a binary column) into :attr:`schema`."""
        ...

    def version(self) -> object:
        """Changes when the decoder learned something (new schema ids): replan."""
        ...

    def semantics(self) -> Semantics:
        """What the decoder's schema says of Kafka Connect semantic types (a Debezium row's
        ``Timestamp``, ``Decimal``…: :mod:`frazil.decode.connect_types`); nothing if its
        schema does not say."""
        ...

    def learn(self, raw: DataFrame, column: str) -> bool:
        """Fetch the writer schemas of ``raw[column]`` the decoder does not know yet.

        Called only for a batch that held records marked as undecodable. Returns whether
        anything was learned (the batch is then planned and written again).
        """
        ...


@dataclass(frozen=True)
class BuildContext:
    """What a format needs to build a decoder for one part of a pipeline's records.

    Attributes:
        spark: The session (schema inference, JVM decoders).
        config: The whole config (``schema_registry``).
        pipeline: The pipeline.
        part: ``value`` or ``key``.
        table_schema: The columns of the pipeline's existing table, if any: the reader shape
            a schema-less format falls back to.
        batch_options: Kafka source options for a batch read (schema inference).
    """

    spark: SparkSession
    config: FrazilConfig
    pipeline: PipelineConfig
    part: Part
    table_schema: StructType | None = None
    batch_options: dict[str, str] | None = None

    @property
    def decoding(self) -> Decoding:
        """The part's settings: the pipeline's ``value`` or ``key``."""
        if self.part == "key":
            assert self.pipeline.key is not None
            return self.pipeline.key
        return self.pipeline.value

    @property
    def format(self) -> str:
        """The part's format name."""
        return self.decoding.format

    @property
    def key_path(self) -> str:
        """The config key of the part's format, for messages (``pipelines[2].key_format``)."""
        return self.config_key("format")

    def config_key(self, name: str) -> str:
        """The config key of one of this part's options (``pipelines[0].key_schema_file``)."""
        index = self.config.pipelines.index(self.pipeline)
        return f"pipelines[{index}].{self.decoding.config_key(name)}"


@dataclass(frozen=True)
class Format:
    """A registered format: its name and how to build its decoder."""

    name: str
    build: Callable[[BuildContext], Decoder]


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


def build_decoder(context: BuildContext) -> Decoder:
    """The decoder of the context's part (value or key)."""
    return get_format(context.format).build(context)


def _load_builtins() -> None:
    # Importing a format module registers it; done lazily so the registry has no cycle.
    from frazil.decode import avro_build, json, passthrough, protobuf  # noqa: F401
