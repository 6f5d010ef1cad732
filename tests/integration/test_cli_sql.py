"""``frazil sql`` on statements without a result set (DDL, INSERT, UPDATE, DELETE on Iceberg):
it says they ran, in text and in JSON, where it printed nothing before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.helpers import in_one_process, payments_pipeline
from tests.integration.test_cli_errors import write_config

pytestmark = pytest.mark.integration


def test_statements_without_a_result_set_say_ok(
    lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    config = str(
        write_config(
            tmp_path / "c.yaml",
            lake_dir,
            kafka_bootstrap,
            [payments_pipeline(f"q_{unique}", f"q-{unique}", f"db.q_{unique}")],
        )
    )
    table = f"db.sql_ok_{unique}"

    # One process, one Spark driver JVM (CI time); each command with its own exit and output.
    done = in_one_process(
        ["sql", "-c", config, f"CREATE TABLE {table} (id bigint, x int) USING iceberg"],
        ["sql", "-c", config, f"INSERT INTO {table} VALUES (1, 0), (2, 0)"],
        ["sql", "-c", config, f"UPDATE {table} SET x = 1 WHERE id = 1"],
        ["sql", "-c", config, "-o", "json", f"DELETE FROM {table} WHERE id = 2"],
        ["sql", "-c", config, f"SELECT id FROM {table} WHERE id < 0"],
        ["-o", "json", "sql", "-c", config, f"SELECT id, x FROM {table}"],
        ["sql", "-c", config, "--limit", "1", "SELECT * FROM range(3)"],
        ["-o", "json", "sql", "-c", config, "--limit", "1", "SELECT * FROM range(3)"],
        ["sql", "-c", config, "--limit", "3", "SELECT * FROM range(3)"],
        ["-o", "json", "sql", "-c", config, NESTED_AND_NOT_FINITE],
        env={"COLUMNS": "80"},
    )

    for result in done:
        assert result.returncode == 0, result.stderr[-3000:]
    create, insert, update, delete, empty, rows, first, first_json, whole, odd = done
    create, insert, update, delete, empty, rows = (
        r.stdout for r in (create, insert, update, delete, empty, rows)
    )
    assert create.strip() == insert.strip() == update.strip() == "OK (no result set)"
    assert json.loads(delete) == {"statement": "ok"}
    # A query without rows still has its columns: a table, not OK.
    assert "OK" not in empty and "id" in empty
    assert json.loads(rows) == [{"id": 1, "x": 1}]
    # Rows left out are said to be, on stderr with -o json so its stdout stays JSON.
    note = "only the first 1 rows: --limit N prints more"
    assert note in first.stdout
    assert json.loads(first_json.stdout) == [{"id": 0}]
    assert note in first_json.stderr
    assert "only the first" not in whole.stdout + whole.stderr
    # Strict JSON (jq, JSON.parse): structs as objects, NaN and infinities as Spark's to_json
    # writes them.
    assert json.loads(odd.stdout, parse_constant=_refused) == [
        {
            "n": "NaN",
            "i": "Infinity",
            "ni": "-Infinity",
            "s": {"a": 1, "b": [{"c": "x"}], "d": None},
            "m": {"k": 1.5},
        }
    ]


NESTED_AND_NOT_FINITE = (
    "SELECT CAST('NaN' AS DOUBLE) AS n, CAST('Infinity' AS DOUBLE) AS i,"
    " CAST('-Infinity' AS FLOAT) AS ni,"
    " named_struct('a', 1, 'b', array(named_struct('c', 'x')), 'd', CAST(NULL AS STRING)) AS s,"
    " map('k', 1.5D) AS m"
)


def _refused(constant: str) -> None:
    raise AssertionError(f"not JSON: {constant}")
