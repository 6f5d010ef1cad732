"""An existing table written by key against how frazil creates such a table: merge-on-read
and identifier fields say nothing; a table created for appends is named, with the way to lay
it out as frazil would."""

from __future__ import annotations

from typing import Any

from frazil.config.table_settings import TableSettings
from frazil.config.writes import WriteConfig
from frazil.sink.table import merge_difference

MERGE_ON_READ = {
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}


def _settings(**fields: Any) -> Any:
    pipeline: TableSettings[WriteConfig] = TableSettings[WriteConfig](
        write=WriteConfig(mode="upsert", key=["id"]), **fields
    )
    return pipeline.for_table("db.orders", None)


def test_a_table_frazil_created_for_changes_is_no_difference() -> None:
    assert merge_difference(dict(MERGE_ON_READ), ["id"], _settings()) is None


def test_a_table_created_for_appends_is_named_with_the_way_to_lay_it_out() -> None:
    found = merge_difference({"format-version": "2"}, [], _settings())
    assert found == (
        "written by key (upsert) but not created for it: its row-level writes are "
        "copy-on-write (each batch of changes rewrites the data files it touches, where a "
        "table frazil creates for upsert/CDC writes deletes); its identifier fields are none "
        "where the key is id (frazil merges by the config's key; readers that go by identifier "
        "fields do not see it). The rows are right either way: table properties and identifier "
        "fields apply when frazil creates a table, and the table keeps its own. To write "
        "deletes as frazil's tables do (e.g. through frazil sql): ALTER TABLE db.orders SET "
        "TBLPROPERTIES ('write.delete.mode'='merge-on-read', 'write.merge.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read')"
    )


def test_copy_on_write_the_config_asks_for_is_no_difference() -> None:
    chosen = {k: "copy-on-write" for k in MERGE_ON_READ}
    assert merge_difference({}, ["id"], _settings(table_properties=chosen)) is None


def test_only_what_differs_is_named() -> None:
    found = merge_difference(dict(MERGE_ON_READ), ["other"], _settings())
    assert found is not None
    assert "row-level" not in found and "TBLPROPERTIES" not in found
    assert "its identifier fields are other where the key is id" in found
