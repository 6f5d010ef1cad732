"""One local service stopped or started on its own, next to the others still running.

Real processes (the broker, s3proxy, Iceberg's REST catalog server) in a private state dir on
free ports, driven through ``frazil local up|down|status`` as a user would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import frazil.cli.local_cmd  # noqa: F401  (registers `frazil local`)
from frazil.cli.app import app
from tests.conftest import free_ports

pytestmark = pytest.mark.integration


def pids(runner: CliRunner, state: list[str]) -> dict[str, Any]:
    """Each service's pid from `frazil local status -o json` (None when it is stopped)."""
    result = runner.invoke(app, ["local", "status", *state, "-o", "json"])
    assert result.exit_code == 0, result.output
    status = json.loads(result.stdout)
    return {
        "kafka": status["pid"] if status["running"] else None,
        "schema-registry": status["schema_registry"]["pid"],
        "s3": status["s3"]["pid"],
        "rest-catalog": status["rest_catalog"]["pid"],
        "spark-cluster": status["spark_cluster"]["master_pid"],
    }


def test_one_service_stops_and_starts_next_to_the_running_others(tmp_path: Path) -> None:
    broker, controller, s3_port, rest_port, other = free_ports(5)
    state = ["--state-dir", str(tmp_path)]
    s3 = f"http://127.0.0.1:{s3_port}"
    runner = CliRunner()
    try:
        first = runner.invoke(
            app,
            ["local", "up", *state, "--port", str(broker), "--controller-port",
             str(controller), "--s3-port", str(s3_port), "--with", "s3"],
        )  # fmt: skip
        assert first.exit_code == 0, first.output
        before = pids(runner, state)
        assert before["kafka"] and before["s3"]
        assert before["rest-catalog"] is None

        # The REST catalog next to them, without --port or --s3-port: Kafka and the store are
        # kept where they run (the defaults name other ports), and the catalog uses that store.
        up = runner.invoke(
            app, ["local", "up", *state, "--rest-port", str(rest_port), "--with", "rest-catalog"]
        )
        assert up.exit_code == 0, up.output
        assert up.stdout.split() == [f"127.0.0.1:{broker}", s3, f"http://127.0.0.1:{rest_port}"]
        assert f"kafka already running at 127.0.0.1:{broker}\n" in up.stderr
        assert f"s3 already running at {s3}\n" in up.stderr
        assert "starting it too" not in up.stderr
        assert f"catalog: {{type: rest, uri: http://127.0.0.1:{rest_port}," in up.stderr
        assert f"storage: {{endpoint: {s3}, path_style: true," in up.stderr
        assert "export AWS_ACCESS_KEY_ID=frazil AWS_SECRET_ACCESS_KEY=" in up.stderr
        running = pids(runner, state)
        assert {k: running[k] for k in ("kafka", "s3")} == {k: before[k] for k in ("kafka", "s3")}
        assert running["rest-catalog"] is not None
        status = json.loads(runner.invoke(app, ["local", "status", *state, "-o", "json"]).stdout)
        assert status["rest_catalog"]["s3_endpoint"] == s3

        # A port given explicitly is checked, not followed: the store runs elsewhere.
        moved = runner.invoke(app, ["local", "up", *state, "--s3-port", str(other), "--with", "s3"])
        assert moved.exit_code == 1
        assert f"is already running at {s3}" in str(moved.exception)
        assert "stop it (`frazil local down --only s3`)" in str(moved.exception)

        # The store under the running catalog: refused, and nothing stopped.
        refused = runner.invoke(app, ["local", "down", *state, "--only", "s3"])
        assert refused.exit_code == 1
        assert str(refused.exception) == (
            "s3 is not stopped: the running rest-catalog needs it. Stop them together with "
            "--only s3,rest-catalog, or stop rest-catalog first. Nothing was stopped."
        )
        assert pids(runner, state) == running

        # Only the catalog; then again, when it is not running.
        down = runner.invoke(app, ["local", "down", *state, "--only", "rest-catalog"])
        assert down.exit_code == 0, down.output
        assert down.stderr == "rest-catalog stopped\n"
        assert pids(runner, state) == {**running, "rest-catalog": None}
        again = runner.invoke(app, ["local", "down", *state, "--only", "rest-catalog"])
        assert (again.exit_code, again.stderr) == (0, "rest-catalog not running\n")
        text = runner.invoke(app, ["local", "status", *state]).stdout
        assert "broker:    running" in text
        assert f"s3:        running at {s3}" in text
        assert "rest:      stopped at " in text

        # Kafka and the store, named in any order: each reported, every pid gone.
        down = runner.invoke(app, ["local", "down", *state, "--only", "s3", "--only", "kafka"])
        assert down.exit_code == 0, down.output
        assert down.stderr.splitlines() == ["kafka stopped", "s3 stopped"]
        assert set(pids(runner, state).values()) == {None}
    finally:
        runner.invoke(app, ["local", "down", *state])
