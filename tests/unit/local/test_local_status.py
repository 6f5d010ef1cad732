"""`frazil local status` text: what it shows for a state dir, nothing started or running."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from frazil.cli.app import app

runner = CliRunner()


def _record_cluster(state_dir: Path) -> None:
    # What `frazil local up --brokers 3` leaves behind: cluster.json with the nodes' ports.
    cluster_dir = state_dir / "kafka-cluster"
    cluster_dir.mkdir(parents=True)
    nodes = [{"port": 29092 + i, "controller_port": 29192 + i} for i in range(3)]
    (cluster_dir / "cluster.json").write_text(json.dumps({"cluster_id": "x", "nodes": nodes}))


def test_status_shows_the_single_broker_when_no_cluster_was_started(tmp_path: Path) -> None:
    result = runner.invoke(app, ["local", "status", "--state-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "broker:" in result.output
    assert "stopped" in result.output
    assert "cluster:" not in result.output


def test_status_leaves_out_a_never_started_broker_where_a_cluster_exists(tmp_path: Path) -> None:
    _record_cluster(tmp_path)
    result = runner.invoke(app, ["local", "status", "--state-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "broker:" not in result.output
    assert "cluster:   stopped, 0 of 3 nodes running" in result.output
    assert "node 3:" in result.output
