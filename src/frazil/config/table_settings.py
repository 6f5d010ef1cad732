"""How a pipeline's tables are laid out, written and kept up: :class:`TableSettings` (a
pipeline's ``defaults``, one table's overrides) and :class:`ResolvedTable` (the two merged),
with the checks of their ``partition_by``, ``sort_by`` and ``identifier_fields`` entries.

Whether a ``partition_by`` column exists depends on the pipeline's schema and
``kafka_metadata``: :mod:`frazil.config.pipeline` checks that.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, Field

from frazil.config.base import IDENT, Frozen, Setting
from frazil.config.maintenance import MaintenancePolicy
from frazil.config.partitioning import PartitionField, parse_partition_field
from frazil.config.routing import EvolutionPolicy
from frazil.config.sorting import SortField, parse_sort_field
from frazil.config.writes import MERGE_ON_READ_PROPERTIES, TableWrite, WriteConfig


def _check_sort_entry(entry: str) -> str:
    parse_sort_field(entry)
    return entry


def _check_partition_text(entry: str) -> str:
    parse_partition_field(entry)
    return entry


def _check_identifier(name: str) -> str:
    if not re.match(IDENT, name):
        raise ValueError(f"{name!r} must be a top-level column name")
    return name


#: What ``TableSettings.write`` holds: the whole write config (a pipeline's defaults, a
#: resolved table), or one table's own key and ordering column (its overrides; None: none).
WriteT = TypeVar("WriteT", WriteConfig, TableWrite | None)

#: The keys of a table's overrides that take the pipeline's value when left out or set to
#: null; ``table_properties`` are merged over the pipeline's instead.
INHERITED = (
    "partition_by",
    "sort_by",
    "identifier_fields",
    "schema_evolution",
    "aliases",
    "write",
    "maintenance",
)


class TableSettings(Frozen, Generic[WriteT]):
    """How a pipeline's tables are laid out, written and kept up.

    One model in three roles:

    * ``TableSettings[WriteConfig]``, a pipeline's ``defaults``: the keys written flat under
      the pipeline (``partition_by``, ``sort_by``, …, ``write``, ``maintenance``), for each
      of its tables;
    * ``TableSettings[TableWrite | None]``, one table's overrides
      (``pipelines[].tables.<name>``): only the keys the table sets count (left out or
      null: the pipeline's); ``table_properties`` are merged over the pipeline's, and
      ``write`` holds the table's own ``key`` and ``order_by``;
    * :class:`ResolvedTable`: the two merged, by :meth:`for_table`.

    Attributes:
        partition_by: Partition transforms (``days(created_at)``, ``bucket(16, id)``, …).
        sort_by: The table's sort order (``created_at desc``, …).
        identifier_fields: The table's identifier fields.
        table_properties: Iceberg table properties.
        schema_evolution: ``evolve`` (new fields become columns) or ``freeze``.
        aliases: Source field → table column, for fields whose name differs from their
            column's.
        write: See :data:`WriteT`.
        maintenance: The table's upkeep; unset sections come from the top level's.
    """

    partition_by: list[Annotated[str, AfterValidator(_check_partition_text)]] = Field(
        default_factory=list
    )
    sort_by: list[Annotated[str, AfterValidator(_check_sort_entry)]] = Field(default_factory=list)
    identifier_fields: list[Annotated[str, AfterValidator(_check_identifier)]] = Field(
        default_factory=list
    )
    table_properties: dict[str, Setting] = Field(default_factory=dict)
    schema_evolution: EvolutionPolicy = "evolve"
    aliases: dict[str, str] = Field(default_factory=dict)
    # None is a table's overrides' default (their write is the pipeline's); validated, so
    # that settings holding a WriteConfig cannot be made without one.
    write: WriteT = Field(default=None, validate_default=True)
    maintenance: MaintenancePolicy | None = None

    @classmethod
    def model_parametrized_name(cls, params: tuple[Any, ...]) -> str:
        """Errors name the model the way users know it: ``instance of TableSettings``."""
        return cls.__name__

    def partition_fields(self) -> list[PartitionField]:
        """The parsed ``partition_by`` transforms."""
        return [parse_partition_field(entry) for entry in self.partition_by]

    def sort_fields(self) -> list[SortField]:
        """The parsed ``sort_by`` fields."""
        return [parse_sort_field(entry) for entry in self.sort_by]

    def for_table(
        self: TableSettings[WriteConfig], name: str, own: TableSettings[TableWrite | None] | None
    ) -> ResolvedTable:
        """One table's settings: these, with the table's overrides ``own`` over them.

        A key ``own`` sets replaces this one (lists and aliases whole: an empty list is an
        override too); ``table_properties`` are merged, ``write`` takes the table's key and
        ``order_by``, and unset ``maintenance`` sections come from these. An upsert or CDC
        table is identified by its key and gets merge-on-read properties, unless it says
        otherwise.
        """

        def pick(key: str) -> Any:
            return getattr(own if own is not None and key in own.model_fields_set else self, key)

        write = self.write
        properties = dict(self.table_properties)
        maintenance = self.maintenance
        if own is not None:
            properties.update(own.table_properties)
            if own.write is not None:
                write = write.model_copy(
                    update={
                        k: v
                        for k, v in (("key", own.write.key), ("order_by", own.write.order_by))
                        if v is not None
                    }
                )
            if own.maintenance is not None:
                maintenance = own.maintenance.over(maintenance)
        identifiers = list(pick("identifier_fields"))
        if write.merges:
            identifiers = identifiers or list(write.key)
            properties = {**MERGE_ON_READ_PROPERTIES, **properties}
        # Copies: a caller changing its table's lists must not change the pipeline's.
        return ResolvedTable(
            name=name,
            partition_by=list(pick("partition_by")),
            sort_by=list(pick("sort_by")),
            identifier_fields=identifiers,
            table_properties=properties,
            schema_evolution=pick("schema_evolution"),
            aliases=dict(pick("aliases")),
            write=write,
            maintenance=maintenance,
        )


class ResolvedTable(TableSettings[WriteConfig]):
    """What one table of a pipeline gets: the pipeline's settings with the table's overrides
    (:meth:`TableSettings.for_table`).

    Attributes:
        name: The table (``namespace.table``).
    """

    name: str
    write: WriteConfig = Field(default_factory=WriteConfig)
