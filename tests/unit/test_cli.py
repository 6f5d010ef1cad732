"""The CLI's contract for people and scripts: exit codes, key paths, JSON, no stack traces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).parents[2] / "examples" / "payments.yaml"


def frazil(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frazil.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_validate_accepts_the_example() -> None:
    result = frazil("validate", "-c", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert "is valid: 1 pipeline(s)" in result.stdout
    assert "payments" in result.stdout


def test_validate_names_where_each_schema_comes_from(tmp_path: Path) -> None:
    config = tmp_path / "sources.yaml"
    (tmp_path / "order.avsc").write_text(
        '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}'
    )
    config.write_text(
        "schema_registry: {url: 'http://127.0.0.1:8081'}\n"
        "kafka: {group_id: 'frazil-{pipeline}'}\n"
        "pipelines:\n"
        "  - {name: declared, topics: [a], table: db.a, schema: {id: long, x: string}}\n"
        "  - {name: inferred, topics: [b], table: db.b}\n"
        "  - {name: registry, topics: [c], table: db.c, format: avro}\n"
        "  - {name: file, topics: [d], table: db.d, format: avro, schema_file: order.avsc}\n"
        "  - {name: text, topics: [e], table: db.e, format: string}\n"
        "  - {name: whole, topics: [f], table: db.f, variant: doc}\n"
    )
    # Wide enough that no summary line wraps.
    result = frazil("validate", "-c", str(config), env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    lines = {line.split(":")[0].strip(): line for line in result.stdout.splitlines()}
    assert "json, schema 2 fields;" in lines["declared"]
    assert "json, schema inferred at start;" in lines["inferred"]
    assert "avro, schema from the registry (c-value);" in lines["registry"]
    assert "avro, schema from order.avsc;" in lines["file"]
    assert "string, schema none (the payload as one column);" in lines["text"]
    assert "json, schema none (each value whole in the variant column 'doc');" in lines["whole"]


def test_validate_names_each_routed_tables_own_key(tmp_path: Path) -> None:
    config = tmp_path / "routed.yaml"
    config.write_text(
        "pipelines:\n"
        "  - name: dbz\n"
        "    topic_pattern: 'db\\.inv\\..*'\n"
        "    route: {topic: 'db\\.inv\\.(\\w+)', table: 'inv.{1}'}\n"
        "    write: {mode: cdc, key: [id], debezium: true}\n"
        "    tables: {inv.orders: {write: {key: [order_id]}}, inv.parts: {write: {key: [id]}}}\n"
    )
    result = frazil("validate", "-c", str(config), env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert "cdc by Debezium on id (inv.orders: order_id);" in result.stdout


def test_validate_reports_each_problem_and_fails(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(
        "pipelines:\n"
        "  - name: p\n"
        "    topic_pattern: 'payments\\.('\n"
        "    table: db.t\n"
        "    partition_by: ['dayz(x)']\n"
        "    tigger: 1s\n"
    )
    result = frazil("validate", "-c", str(config))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "pipelines[0].topic_pattern: invalid regular expression" in result.stderr
    assert "pipelines[0].partition_by[0]: unknown partition transform 'dayz'" in result.stderr
    assert "pipelines[0].tigger: unknown key" in result.stderr


def test_validate_json_output_and_secret_redaction(tmp_path: Path) -> None:
    config = tmp_path / "secret.yaml"
    config.write_text(
        EXAMPLE.read_text().replace(
            "kafka:\n", "kafka:\n  properties:\n    sasl.jaas.config: ${FZ_TEST_SECRET}\n"
        )
    )
    import os

    env = {**os.environ, "FZ_TEST_SECRET": "hunter2-secret"}
    result = frazil("validate", "-c", str(config), "--output", "json", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["valid"] is True
    assert data["config"]["kafka"]["properties"]["sasl.jaas.config"] == "***"
    assert "hunter2" not in result.stdout + result.stderr


@pytest.mark.parametrize("command", ["run", "validate", "generate", "local", "sql", "quickstart"])
def test_help_is_readable(command: str) -> None:
    result = frazil(command, "--help")
    assert result.returncode == 0
    assert "Usage" in result.stdout


def test_missing_config_is_a_clear_error() -> None:
    result = frazil("run", "-c", "/nonexistent/frazil.yaml")
    assert result.returncode == 1
    assert "cannot read config file /nonexistent/frazil.yaml" in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_says_where_bad_records_go(tmp_path: Path) -> None:
    config = tmp_path / "dead.yaml"
    config.write_text(
        "pipelines:\n"
        "  - {name: a, topics: [a], table: db.a,\n"
        "     errors: {tolerance: all, dlq_table: db.a_dead, dlq_topic: a-dead}}\n"
        "  - {name: b, topics: [b], table: db.b}\n"
    )
    result = frazil("validate", "-c", str(config))
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "dead letters to table db.a_dead and topic a-dead;" in text
    assert "a bad record stops the pipeline (errors.tolerance: none);" in text


def test_output_goes_before_the_command_too_and_the_commands_own_wins(tmp_path: Path) -> None:
    before = frazil("-o", "json", "validate", "-c", str(EXAMPLE))
    assert before.returncode == 0, before.stderr
    assert json.loads(before.stdout)["valid"] is True
    both = frazil("--output", "json", "validate", "-c", str(EXAMPLE), "-o", "text")
    assert both.returncode == 0, both.stderr
    assert "is valid: 1 pipeline(s)" in both.stdout
    # A command of a group (`local status`), read from local state only.
    state = ["--state-dir", str(tmp_path), "--port", "1", "--controller-port", "2"]
    nested = frazil("-o", "json", "local", "status", *state)
    assert nested.returncode == 0, nested.stderr
    assert json.loads(nested.stdout)["running"] is False


def test_every_commands_output_option_takes_the_one_before_the_command() -> None:
    import typer

    from frazil.cli.app import inherit_output
    from frazil.cli.main import app

    # Typer's click commands (Typer may bring a click of its own: no click types named here).
    def commands(group: Any, path: str) -> list[tuple[str, Any]]:
        found = [(path, group)]
        for name, sub in getattr(group, "commands", {}).items():
            found += commands(sub, f"{path} {name}")
        return found

    with_output = [
        (path, command)
        for path, command in commands(typer.main.get_command(app), "frazil")
        if path != "frazil" and any("--output" in p.opts for p in command.params)
    ]
    assert len(with_output) >= 14
    for path, command in with_output:
        (option,) = [p for p in command.params if "--output" in p.opts]
        assert option.callback is not None, path
        assert option.callback.__wrapped__ is inherit_output, path  # type: ignore[attr-defined]


def test_tables_names_the_configured_tables_no_run_created_yet(tmp_path: Path) -> None:
    config = tmp_path / "frazil.yaml"
    config.write_text(
        f"catalog: {{warehouse: '{tmp_path / 'lake'}'}}\n"
        "pipelines:\n"
        "  - {name: orders, topics: [o], table: db.orders,\n"
        "     errors: {tolerance: all, dlq_table: db.orders_dlq}}\n"
        "  - {name: ev, topics: [e], route: {field: kind, tables: {a: db.ev_a, b: [db.ev_b]}}}\n"
        "  - {name: dyn, topics: [d], route: {field: kind, table: 'db.d_{value}'}}\n"
    )
    result = frazil("tables", "-c", str(config))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "not created yet (a pipeline creates a table with its first records for it):",
        "  db.ev_a (pipeline 'ev')",
        "  db.ev_b (pipeline 'ev')",
        "  db.orders (pipeline 'orders')",
        "  db.orders_dlq (pipeline 'orders')",
    ]
    # optimize --dry-run says the same, rather than nothing.
    planned = frazil("optimize", "-c", str(config), "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.splitlines() == result.stdout.splitlines()
    # Scripts get the health of the tables that exist: none.
    shown = frazil("tables", "-c", str(config), "-o", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == []
    (config.parent / "dyn.yaml").write_text(
        f"catalog: {{warehouse: '{tmp_path / 'lake'}'}}\n"
        "pipelines:\n"
        "  - {name: dyn, topics: [d], route: {field: kind, table: 'db.d_{value}'}}\n"
    )
    result = frazil("tables", "-c", str(config.parent / "dyn.yaml"))
    assert result.stdout.splitlines() == [
        "no tables yet: the pipelines name theirs from their records (values or topics)"
    ]
