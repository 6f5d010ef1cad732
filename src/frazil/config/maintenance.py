"""Table upkeep: ``maintenance:`` (top level, per pipeline, per table).

Each section (``compaction``, ``deletes``, ``manifests``, ``expire``, ``orphans``,
``retention``) set at a more specific level replaces the same section of a more general
level as a whole; unset sections are inherited. Defaults keep a streaming table healthy
without any setting.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from frazil.config.durations import parse_duration

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)?\s*$", re.IGNORECASE)
_UNITS = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}

#: Orphan files younger than this are never removed: a writer may be about to commit them.
MIN_ORPHAN_AGE_S = 86_400.0

MaintenanceMode = Literal["off", "inline"]
Strategy = Literal["binpack", "sort", "zorder"]


def parse_size(text: str | int) -> int:
    """Bytes of a size such as ``128MB``, ``64MiB`` or ``1048576``.

    Raises:
        ValueError: Not a number with an optional unit (B, KB, MB, GB, TB, KiB … TiB).
    """
    if isinstance(text, int):
        return text
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size such as 128MB, 64MiB or 1048576")
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "b").lower()])


def _duration(value: str) -> str:
    if parse_duration(value) <= 0:
        raise ValueError("must be longer than zero")
    return value


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Compaction(_Frozen):
    """Rewrite small data files (and files with deletes) into files of the target size.

    Attributes:
        enabled: Whether passes compact.
        strategy: ``binpack`` (default), ``sort`` (by ``sort_by``, or the table's sort order)
            or ``zorder`` (by ``sort_by``).
        sort_by: Columns for ``sort`` / ``zorder``.
        target_file_size: The size of the files written; default the table's
            ``write.target-file-size-bytes``, else 128MB.
        small_file_ratio: A data file below this share of the target size is small.
        min_small_files: A partition is compacted once it holds this many small files.
        max_files_per_pass: At most this many data files rewritten per table per pass (the
            rest waits for the next pass; each file group commits on its own).
    """

    enabled: bool = True
    strategy: Strategy = "binpack"
    sort_by: list[str] = Field(default_factory=list)
    target_file_size: str | None = None
    small_file_ratio: float = Field(0.75, gt=0, le=1)
    min_small_files: int = Field(5, ge=2)
    max_files_per_pass: int = Field(2_000, ge=2)

    @field_validator("target_file_size")
    @classmethod
    def _size(cls, value: str | None) -> str | None:
        if value is not None and parse_size(value) <= 0:
            raise ValueError("must be larger than zero")
        return value

    @model_validator(mode="after")
    def _sorting(self) -> Compaction:
        if self.strategy == "zorder" and not self.sort_by:
            raise ValueError("strategy zorder needs 'sort_by': the columns to interleave")
        if self.strategy == "binpack" and self.sort_by:
            raise ValueError("'sort_by' applies to strategies sort and zorder")
        return self

    def target_bytes(self, table_default: int | None) -> int:
        """The target file size in bytes."""
        if self.target_file_size is not None:
            return parse_size(self.target_file_size)
        return table_default or 128 * 1024**2


class Deletes(_Frozen):
    """Rewrite the position-delete files (or deletion vectors) of upsert/CDC tables.

    Attributes:
        enabled: Whether passes rewrite them.
        min_delete_files: A partition's deletes are rewritten from this many delete files.
    """

    enabled: bool = True
    min_delete_files: int = Field(2, ge=1)


class Manifests(_Frozen):
    """Rewrite manifests (one per commit piles up) into few large ones.

    Attributes:
        enabled: Whether passes rewrite them.
        min_manifests: Rewritten once the current snapshot has this many.
    """

    enabled: bool = True
    min_manifests: int = Field(20, ge=2)


class Expire(_Frozen):
    """Expire old snapshots (and the files only they reference).

    The newest snapshot holding each pipeline's progress marker, and every snapshot after
    it, are always kept: exactly-once recovery reads them.

    Attributes:
        enabled: Whether passes expire snapshots.
        older_than: Snapshots older than this may go.
        retain_last: The newest this many snapshots always stay.
    """

    enabled: bool = True
    older_than: str = "1h"
    retain_last: int = Field(20, ge=1)

    @field_validator("older_than")
    @classmethod
    def _durations(cls, value: str) -> str:
        return _duration(value)


class Orphans(_Frozen):
    """Remove files in the table's folders that no snapshot references.

    Attributes:
        enabled: Whether passes look for orphan files.
        older_than: Only files older than this (at least 1d: younger ones may belong to a
            commit in flight).
        every: How often a table is scanned for them (listing every file costs).
    """

    enabled: bool = True
    older_than: str = "3d"
    every: str = "1d"

    @field_validator("older_than")
    @classmethod
    def _safe(cls, value: str) -> str:
        if parse_duration(value) < MIN_ORPHAN_AGE_S:
            raise ValueError(
                "must be at least 1d: a younger file may belong to a commit still in flight"
            )
        return value

    @field_validator("every")
    @classmethod
    def _durations(cls, value: str) -> str:
        return _duration(value)


class Retention(_Frozen):
    """Delete rows older than a duration by a timestamp column (whole partitions if they
    are partitioned by it).

    Attributes:
        column: A timestamp (or date) column of the table.
        older_than: Rows whose ``column`` is older than now minus this are deleted.
    """

    column: str
    older_than: str

    @field_validator("older_than")
    @classmethod
    def _durations(cls, value: str) -> str:
        return _duration(value)


class MaintenancePolicy(_Frozen):
    """What upkeep a table gets. Every section is optional: unset ones are inherited."""

    compaction: Compaction | None = None
    deletes: Deletes | None = None
    manifests: Manifests | None = None
    expire: Expire | None = None
    orphans: Orphans | None = None
    retention: Retention | None = None

    def over(self, general: MaintenancePolicy | None) -> MaintenancePolicy:
        """This policy with ``general``'s sections where this one leaves them unset."""
        if general is None:
            return self
        updates = {
            name: getattr(general, name)
            for name in type(self).model_fields
            if getattr(self, name) is None and getattr(general, name) is not None
        }
        return self.model_copy(update=updates)


class ResolvedPolicy(_Frozen):
    """A table's policy with every section filled (defaults where nothing was set)."""

    compaction: Compaction = Field(default_factory=Compaction)
    deletes: Deletes = Field(default_factory=Deletes)
    manifests: Manifests = Field(default_factory=Manifests)
    expire: Expire = Field(default_factory=Expire)
    orphans: Orphans = Field(default_factory=Orphans)
    retention: Retention | None = None

    @classmethod
    def of(cls, policy: MaintenancePolicy) -> ResolvedPolicy:
        """Fill the unset sections of ``policy`` with the defaults."""
        return cls(
            **{
                name: value
                for name in MaintenancePolicy.model_fields
                if (value := getattr(policy, name)) is not None
            }
        )


class MaintenanceConfig(MaintenancePolicy):
    """The top-level ``maintenance:``: the defaults of every table, and how passes run.

    Attributes:
        mode: ``off`` (default): upkeep runs through ``frazil optimize`` / ``frazil
            maintain``. ``inline``: ``frazil run`` also runs a pass over its own tables every
            ``interval``, on a thread of its own, within ``budget``.
        interval: Time between passes (``frazil maintain`` and inline).
        budget: Inline: a pass starts no new action after this long.
        merge_backoff: How long passes skip a table's rewriting actions after a pipeline's
            MERGE into it lost to a concurrent commit (``0s``: never).
    """

    mode: MaintenanceMode = "off"
    interval: str = "5m"
    budget: str = "60s"
    merge_backoff: str = "10m"

    @field_validator("interval", "budget")
    @classmethod
    def _durations(cls, value: str) -> str:
        return _duration(value)

    @field_validator("merge_backoff")
    @classmethod
    def _backoff(cls, value: str) -> str:
        parse_duration(value)  # zero is allowed: never wait
        return value
