"""The multi-node cluster's layout and node configs (no process is started)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from frazil.cli.main import app
from frazil.local.broker import LocalBroker
from frazil.local.broker_cluster import LocalKafkaCluster, cluster_ports


def _properties(node: LocalBroker) -> dict[str, str]:
    lines = node.config.server_properties().splitlines()
    return dict(line.split("=", 1) for line in lines if not line.startswith("#"))


def test_node_ports_step_by_two_from_the_single_brokers_defaults() -> None:
    assert cluster_ports(3) == [(9092, 9093), (9094, 9095), (9096, 9097)]
    assert cluster_ports(3, 19000, 29000) == [(19000, 29000), (19002, 29002), (19004, 29004)]


def test_each_node_is_a_voter_with_three_replicas_and_two_in_sync(tmp_path: Path) -> None:
    cluster = LocalKafkaCluster(tmp_path, cluster_ports(3))
    voters = "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097"
    assert cluster.bootstrap == "127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096"
    for node_id in (1, 2, 3):
        node = cluster.node(node_id)
        assert node.kafka_dir == tmp_path.resolve() / "kafka-cluster" / f"node-{node_id}"
        props = _properties(node)
        assert props["node.id"] == str(node_id)
        assert props["process.roles"] == "broker,controller"
        assert props["controller.quorum.voters"] == voters
        assert "controller.quorum.bootstrap.servers" not in props
        for key in (
            "default.replication.factor",
            "offsets.topic.replication.factor",
            "transaction.state.log.replication.factor",
        ):
            assert props[key] == "3", key
        assert props["min.insync.replicas"] == "2"
        assert props["transaction.state.log.min.isr"] == "2"
        assert props["unclean.leader.election.enable"] == "false"
        assert node.config.format_arguments()[:1] == ["--cluster-id"]
        assert "--standalone" not in node.config.format_arguments()
    # One cluster id for all nodes.
    assert len({tuple(cluster.node(i).config.format_arguments()) for i in (1, 2, 3)}) == 1


def test_the_single_broker_keeps_its_one_node_settings(tmp_path: Path) -> None:
    broker = LocalBroker(tmp_path)
    props = _properties(broker)
    assert props["node.id"] == "1"
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:9093"
    assert props["default.replication.factor"] == "1"
    assert "min.insync.replicas" not in props
    assert broker.config.format_arguments()[-1] == "--standalone"


@pytest.mark.parametrize(
    ("ports", "message"),
    [
        ([(1, 2), (3, 4)], "at least 3 nodes"),
        ([(1, 2), (3, 4), (4, 5)], "must all differ"),
    ],
)
def test_bad_clusters_are_refused(
    tmp_path: Path, ports: list[tuple[int, int]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        LocalKafkaCluster(tmp_path, ports)


def test_a_stopped_cluster_is_found_by_its_state_dir(tmp_path: Path) -> None:
    assert LocalKafkaCluster.existing(tmp_path) is None
    folder = tmp_path / "kafka-cluster"
    folder.mkdir()
    nodes = [
        {"node_id": i + 1, "port": p, "controller_port": c}
        for i, (p, c) in enumerate(cluster_ports(3, 19092, 19093))
    ]
    (folder / "cluster.json").write_text(json.dumps({"cluster_id": "abc", "nodes": nodes}))
    found = LocalKafkaCluster.existing(tmp_path)
    assert found is not None and found.bootstrap.startswith("127.0.0.1:19092,")
    assert found.cluster_id() == "abc"
    status = found.status()
    assert not status.running and [n.running for n in status.nodes] == [False] * 3

    result = CliRunner().invoke(
        app, ["local", "status", "--state-dir", str(tmp_path), "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    cluster = json.loads(result.output)["cluster"]
    assert cluster["bootstrap"] == "127.0.0.1:19092,127.0.0.1:19094,127.0.0.1:19096"
    assert [n["running"] for n in cluster["nodes"]] == [False] * 3
    text = CliRunner().invoke(app, ["local", "status", "--state-dir", str(tmp_path)])
    assert "cluster:   stopped, 0 of 3 nodes running" in text.output


def test_two_brokers_are_refused() -> None:
    result = CliRunner().invoke(app, ["local", "up", "--brokers", "2"])
    assert result.exit_code == 2
    assert "2-node cluster" in result.output
