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
        "written by key (upsert) but not created for it: its write.delete.mode, "
        "write.merge.mode, write.update.mode are copy-on-write (each batch's MERGE rewrites the "
        "data files it touches, where a table frazil creates for upsert/CDC writes deletes); "
        "its identifier fields are none, the config's id (frazil merges by the config's key; "
        "readers that go by identifier fields do not see it). The rows are right either way: "
        "table properties and identifier fields apply when frazil creates a table, and the "
        "table keeps its own. To write deletes as frazil's tables do (e.g. through frazil "
        "sql): ALTER TABLE db.orders SET TBLPROPERTIES ('write.delete.mode'='merge-on-read', "
        "'write.merge.mode'='merge-on-read', 'write.update.mode'='merge-on-read')"
    )


def test_a_format_1_table_is_told_to_upgrade_too() -> None:
    found = merge_difference({"write.merge.mode": "copy-on-write"}, ["id"], _settings(), 1)
    assert found is not None
    assert "its write.delete.mode, write.merge.mode, write.update.mode are copy-on-write" in found
    assert found.endswith(
        "SET TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
        "'write.merge.mode'='merge-on-read', 'write.update.mode'='merge-on-read')"
    )


def test_modes_compare_as_iceberg_reads_them_and_only_towards_merge_on_read() -> None:
    shouted = {k: "MERGE-ON-READ" for k in MERGE_ON_READ}
    assert merge_difference(shouted, ["id"], _settings()) is None
    # A config choosing copy-on-write on a merge-on-read table: nothing frazil's upsert needs.
    chosen = _settings(table_properties={"write.delete.mode": "copy-on-write"})
    assert merge_difference(dict(MERGE_ON_READ), ["id"], chosen) is None
    # Only the update mode: no word of the MERGE rewriting files.
    found = merge_difference(
        {**MERGE_ON_READ, "write.update.mode": "copy-on-write"}, ["id"], _settings()
    )
    assert found is not None
    assert "its write.update.mode is copy-on-write. The rows" in found


def test_copy_on_write_the_config_asks_for_is_no_difference() -> None:
    chosen = {k: "copy-on-write" for k in MERGE_ON_READ}
    assert merge_difference({}, ["id"], _settings(table_properties=chosen)) is None


def test_only_what_differs_is_named() -> None:
    found = merge_difference(dict(MERGE_ON_READ), ["other"], _settings())
    assert found is not None
    assert "row-level" not in found and "TBLPROPERTIES" not in found
    assert "its identifier fields are other, the config's id" in found
