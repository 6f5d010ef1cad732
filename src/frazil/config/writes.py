"""How a pipeline writes its records: ``write:`` (append, upsert by key, or CDC changes)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

WriteMode = Literal["append", "upsert", "cdc"]
Tombstones = Literal["skip", "delete"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")

#: Debezium's ``op`` codes and what each does to the table (``r``: a snapshot read).
DEBEZIUM_OPS: dict[str, str] = {"c": "upsert", "r": "upsert", "u": "upsert", "d": "delete"}

#: Table properties of tables created for upsert and CDC: row-level changes as position
#: deletes (format 2) or deletion vectors (format 3), never equality deletes and never a
#: rewrite of whole data files per micro-batch.
MERGE_ON_READ_PROPERTIES: dict[str, str] = {
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}


def _check_key(value: list[str]) -> list[str]:
    for name in value:
        if not _IDENT.match(name):
            raise ValueError(f"{name!r} must be a top-level column name")
    if len(set(value)) != len(value):
        raise ValueError("lists a column twice")
    return value


def _check_order(value: str | None) -> str | None:
    if value is not None and not _IDENT.match(value):
        raise ValueError(f"{value!r} must be a top-level column name")
    return value


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class OpCodes(_Frozen):
    """Values of the operation field (``ops:``); each may list several codes."""

    insert: list[str] = Field(default_factory=lambda: ["I"])
    update: list[str] = Field(default_factory=lambda: ["U"])
    delete: list[str] = Field(default_factory=lambda: ["D"])

    @field_validator("insert", "update", "delete", mode="before")
    @classmethod
    def _listed(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("insert", "update", "delete")
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("must list at least one code")
        return value

    @model_validator(mode="after")
    def _distinct(self) -> OpCodes:
        seen: dict[str, str] = {}
        for kind in ("insert", "update", "delete"):
            for code in getattr(self, kind):
                first = seen.setdefault(code, kind)
                if first != kind:
                    raise ValueError(f"code {code!r} is listed under both {first} and {kind}")
        return self

    def mapping(self) -> dict[str, str]:
        """Code → what it does to the table (``upsert`` or ``delete``)."""
        result = {code: "upsert" for code in [*self.insert, *self.update]}
        result.update({code: "delete" for code in self.delete})
        return result


class WriteConfig(_Frozen):
    """The write mode of a pipeline (``write:``).

    Attributes:
        mode: ``append`` (the default) adds every record as a row. ``upsert``: each record
            replaces the row with the same key, or inserts it. ``cdc``: an operation field (or
            the Debezium envelope) says insert, update or delete.
        key: The columns identifying a row (the table's identifier fields).
        op_field: ``cdc`` without Debezium: the column holding the operation code.
        ops: The codes of ``op_field`` (default I, U, D).
        debezium: ``cdc``: the records are Debezium change events (``before``, ``after``,
            ``op``, ``source``, ``ts_ms``), JSON with or without an embedded schema, or Avro.
        debezium_fields: Envelope fields kept as columns, Debezium's ``add.fields`` style:
            ``source.lsn`` becomes column ``__source_lsn``, ``ts_ms`` ``__ts_ms``.
        order_by: A column ordering a key's changes: the largest wins within a batch (ties
            and no column: the largest Kafka offset) and a change older than the table's row
            is ignored.
        tombstones: What a record with a null value does: ``skip`` it, or ``delete`` the row
            of its Kafka key (needs ``key_format``).
    """

    mode: WriteMode = "append"
    key: list[str] = Field(default_factory=list)
    op_field: str | None = None
    ops: OpCodes = Field(default_factory=OpCodes)
    debezium: bool = False
    debezium_fields: list[str] = Field(default_factory=list)
    order_by: str | None = None
    tombstones: Tombstones = "skip"

    @field_validator("key")
    @classmethod
    def _key_names(cls, value: list[str]) -> list[str]:
        return _check_key(value)

    @field_validator("op_field")
    @classmethod
    def _op_path(cls, value: str | None) -> str | None:
        if value is not None and not _PATH.match(value):
            raise ValueError(f"{value!r} must be a column name or a dotted path (meta.op)")
        return value

    @field_validator("order_by")
    @classmethod
    def _order_name(cls, value: str | None) -> str | None:
        return _check_order(value)

    @field_validator("debezium_fields")
    @classmethod
    def _envelope_paths(cls, value: list[str]) -> list[str]:
        for path in value:
            if not _PATH.match(path):
                raise ValueError(f"{path!r} must be an envelope field, e.g. ts_ms or source.lsn")
        return value

    @model_validator(mode="after")
    def _check(self) -> WriteConfig:
        if self.mode == "append":
            for name in ("key", "op_field", "order_by", "debezium_fields"):
                if getattr(self, name):
                    raise ValueError(f"'{name}' applies to modes upsert and cdc, not append")
            if self.debezium:
                raise ValueError("'debezium' applies to mode cdc")
            if self.tombstones != "skip":
                raise ValueError("'tombstones: delete' applies to modes upsert and cdc")
            if self.ops != OpCodes():
                raise ValueError("'ops' applies to mode cdc")
            return self
        # Whether a key is needed where it is left out is the pipeline's to say: a routed
        # pipeline's tables may each set their own (PipelineConfig._check_write).
        if self.mode == "upsert":
            if self.op_field is not None or self.debezium or self.ops != OpCodes():
                raise ValueError(
                    "'op_field', 'ops' and 'debezium' apply to mode cdc (upsert writes every "
                    "record as an insert or update)"
                )
            if self.debezium_fields:
                raise ValueError("'debezium_fields' applies to mode cdc with debezium: true")
            return self
        if self.debezium:
            if self.op_field is not None or self.ops != OpCodes():
                raise ValueError(
                    "with 'debezium: true' the envelope's op field says what changed: "
                    "remove 'op_field' and 'ops'"
                )
        else:
            if self.op_field is None:
                raise ValueError(
                    "mode cdc needs 'op_field' (the column holding I/U/D) or 'debezium: true'"
                )
            if self.debezium_fields:
                raise ValueError("'debezium_fields' applies to 'debezium: true'")
        return self

    @property
    def merges(self) -> bool:
        """Whether records change rows by key (upsert or cdc) rather than append."""
        return self.mode != "append"

    def consumes_op_field(self) -> bool:
        """Whether ``op_field`` is read by the write and left out of the table: a top-level
        column that is no key column."""
        return (
            self.mode == "cdc"
            and self.op_field is not None
            and "." not in self.op_field
            and self.op_field not in self.key
        )

    def envelope_columns(self) -> list[tuple[str, str]]:
        """``(envelope path, column)`` of each of :attr:`debezium_fields`."""
        return [(path, "__" + path.replace(".", "_")) for path in self.debezium_fields]


class TableWrite(_Frozen):
    """A routed table's own ``write:`` settings: its key and ordering column.

    The mode and the operation codes are the pipeline's: they decide each record's operation
    before it is routed.
    """

    key: list[str] | None = None
    order_by: str | None = None

    @field_validator("key")
    @classmethod
    def _key_names(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("must list at least one column")
        return _check_key(value)

    @field_validator("order_by")
    @classmethod
    def _order_name(cls, value: str | None) -> str | None:
        return _check_order(value)
