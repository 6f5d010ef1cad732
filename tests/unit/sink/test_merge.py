"""The MERGE statement of upsert/CDC batches."""

from __future__ import annotations

from frazil.sink.merge import merge_statement


def test_one_key_without_ordering() -> None:
    sql = merge_statement("`lake`.`db`.`t`", "v", ["id", "name"], ["id"], None)
    assert sql == (
        "MERGE INTO `lake`.`db`.`t` t USING `v` s ON t.`id` = s.`id`"
        " WHEN MATCHED AND s.`__frazil_op` = 'delete' THEN DELETE"
        " WHEN MATCHED AND s.`__frazil_op` <> 'delete' THEN UPDATE SET t.`id` = s.`id`,"
        " t.`name` = s.`name`"
        " WHEN NOT MATCHED AND s.`__frazil_op` <> 'delete' THEN INSERT (`id`, `name`)"
        " VALUES (s.`id`, s.`name`)"
    )


def test_two_keys_and_an_ordering_column() -> None:
    sql = merge_statement("t1", "v", ["a", "b", "ver"], ["a", "b"], "ver")
    assert "ON t.`a` = s.`a` AND t.`b` = s.`b`" in sql
    # A change after one without an ordering value in its batch applies, as that one did.
    newer = (
        " AND (s.__frazil_after_unordered OR t.`ver` IS NULL OR s.`ver` IS NULL"
        " OR s.`ver` >= t.`ver`)"
    )
    assert f"= 'delete'{newer} THEN DELETE" in sql
    assert f"<> 'delete'{newer} THEN UPDATE" in sql
    # Inserts need no ordering: the table has no row to compare with.
    assert "WHEN NOT MATCHED AND s.`__frazil_op` <> 'delete' THEN INSERT" in sql


def test_names_with_backquotes_are_quoted() -> None:
    sql = merge_statement("t", "v", ["we`ird"], ["we`ird"], None)
    assert "t.`we``ird` = s.`we``ird`" in sql
