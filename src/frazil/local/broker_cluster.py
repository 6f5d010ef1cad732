"""A local Kafka cluster of several KRaft nodes (``frazil local up --brokers 3``).

Each node is a :class:`~frazil.local.broker.LocalBroker` that is broker and controller at
once, in ``<state_dir>/kafka-cluster/node-<id>/``, with a static quorum of all nodes
(:class:`_Voter`), three replicas for new and internal topics and ``min.insync.replicas`` 2,
so a cluster rides through the loss of one node. ``cluster.json`` there records the cluster
id and the ports, so ``down`` and ``status`` find the cluster without being told its size.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from frazil.errors import ServiceError
from frazil.jvm.fetch import java_executable, kafka_classpath
from frazil.local.broker import BrokerStatus, LocalBroker, admin_client, broker_count
from frazil.local.broker_config import new_cluster_id
from frazil.local.daemon import Launched
from frazil.paths import locked

#: Subfolder of the state dir a multi-node cluster lives in (one ``node-<id>`` folder each).
CLUSTER_DIR = "kafka-cluster"
#: Replicas of every new topic (internal ones too) in a cluster of at least this many nodes.
CLUSTER_REPLICATION = 3
#: Replicas that must have a write before an ``acks=all`` producer hears it succeeded.
CLUSTER_MIN_INSYNC = 2
#: The JVM heap of each cluster node: three of them share a laptop (or a 2-core CI machine).
CLUSTER_NODE_HEAP = "320m"
_POLL_INTERVAL_S = 0.1


def cluster_ports(
    size: int, port: int = 9092, controller_port: int = 9093
) -> list[tuple[int, int]]:
    """The (client, controller) ports of each node: node ``i`` (from 0) adds ``2 * i`` to both.

    The defaults give 9092/9093, 9094/9095, 9096/9097.
    """
    return [(port + 2 * i, controller_port + 2 * i) for i in range(size)]


class _Voter:
    """A node's place in a :class:`LocalKafkaCluster`'s static KRaft quorum."""

    def __init__(self, cluster: LocalKafkaCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id

    def settings(self, settings: dict[str, str]) -> dict[str, str]:
        """The node's ``server.properties`` settings as a voter of the cluster's quorum."""
        size = len(self.cluster.ports)
        replicas = str(min(CLUSTER_REPLICATION, size))
        min_insync = str(min(CLUSTER_MIN_INSYNC, size))
        settings = {k: v for k, v in settings.items() if k != "controller.quorum.bootstrap.servers"}
        settings.update(
            {
                "node.id": str(self.node_id),
                # A static quorum: every node is a voter, known from the start; a majority
                # of them must run for the cluster to accept writes.
                "controller.quorum.voters": self.cluster.voters,
                "default.replication.factor": replicas,
                "offsets.topic.replication.factor": replicas,
                "transaction.state.log.replication.factor": replicas,
                "share.coordinator.state.topic.replication.factor": replicas,
                "min.insync.replicas": min_insync,
                "transaction.state.log.min.isr": min_insync,
                "share.coordinator.state.topic.min.isr": min_insync,
                # Never elect a replica that missed writes: a failover must not lose any.
                "unclean.leader.election.enable": "false",
            }
        )
        return settings

    def format_arguments(self) -> list[str]:
        """The cluster's id; no --standalone/--initial-controllers: the voters come from the
        config."""
        return ["--cluster-id", self.cluster.cluster_id()]


@dataclasses.dataclass(frozen=True)
class ClusterStatus:
    """What :meth:`LocalKafkaCluster.status` reports.

    Attributes:
        running: Whether every node runs.
        bootstrap: The nodes' ``host:port`` addresses, comma-separated (what clients use).
        cluster_dir: The folder the cluster lives in.
        nodes: Each node's status, by node id.
    """

    running: bool
    bootstrap: str
    cluster_dir: Path
    nodes: tuple[BrokerStatus, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view (paths as strings)."""
        return {
            "running": self.running,
            "bootstrap": self.bootstrap,
            "cluster_dir": str(self.cluster_dir),
            "nodes": [node.as_dict() for node in self.nodes],
        }


class LocalKafkaCluster:
    """A multi-node Kafka cluster under ``state_dir/kafka-cluster``: each node is a broker
    and a KRaft controller (:class:`LocalBroker`'s process, config and files, one
    ``node-<id>`` folder each).

    New topics, internal ones too, get ``min(3, size)`` replicas and need two of them in sync
    for an ``acks=all`` write, so the cluster rides through the loss of any one node. The
    node count is fixed when the cluster is first started (it is in its quorum).

    Args:
        state_dir: frazil's state folder.
        ports: Each node's (client, controller) ports, node 1 first (:func:`cluster_ports`).
        host: Interface to listen on (keep it local).
        heap: Each node's JVM maximum heap (``-Xmx``).

    Raises:
        ValueError: If there are fewer than three nodes or two ports are the same.
    """

    def __init__(
        self,
        state_dir: Path,
        ports: list[tuple[int, int]],
        host: str = "127.0.0.1",
        heap: str = CLUSTER_NODE_HEAP,
    ) -> None:
        if len(ports) < 3:
            raise ValueError(
                f"a cluster needs at least 3 nodes to survive the loss of one, got {len(ports)}"
            )
        flat = [p for pair in ports for p in pair]
        if len(set(flat)) != len(flat):
            raise ValueError(f"the cluster's ports must all differ, got {ports}")
        self.state_dir = Path(state_dir).resolve()
        self.host = host
        self.ports = list(ports)
        self.cluster_dir = self.state_dir / CLUSTER_DIR
        self.info_file = self.cluster_dir / "cluster.json"
        self._cluster_id: str | None = None
        # Same layout as a single broker, one folder per node.
        self.nodes = [
            LocalBroker(
                state_dir,
                host,
                port=port,
                controller_port=controller,
                heap=heap,
                folder=self.cluster_dir / f"node-{i}",
                quorum=_Voter(self, i),
            )
            for i, (port, controller) in enumerate(ports, start=1)
        ]

    @classmethod
    def existing(cls, state_dir: Path) -> LocalKafkaCluster | None:
        """The cluster last started in ``state_dir`` (with its ports), or None if none was."""
        info = _read_cluster_info(Path(state_dir).resolve() / CLUSTER_DIR / "cluster.json")
        if info is None:
            return None
        return cls(state_dir, [(n["port"], n["controller_port"]) for n in info["nodes"]])

    @property
    def bootstrap(self) -> str:
        """Every node's client address, comma-separated."""
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def voters(self) -> str:
        """``controller.quorum.voters``: ``id@host:controller_port`` of every node."""
        return ",".join(
            f"{i}@{self.host}:{n.config.controller_port}" for i, n in enumerate(self.nodes, start=1)
        )

    def node(self, node_id: int) -> LocalBroker:
        """One node (from 1), e.g. to stop or inspect it alone."""
        return self.nodes[node_id - 1]

    def cluster_id(self) -> str:
        """The id every node is formatted with (made on first start, kept in cluster.json)."""
        if self._cluster_id is None:
            info = _read_cluster_info(self.info_file)
            self._cluster_id = str(info["cluster_id"]) if info else new_cluster_id()
        return self._cluster_id

    def up(self, timeout: float = 120) -> str:
        """Start every node that is not running and wait until the cluster answers.

        Idempotent: nodes that run are only checked, so after one node died (or was
        killed) this brings it back.

        Args:
            timeout: Seconds to wait for every node to answer and see all the others.

        Returns:
            The bootstrap list ``host:port,host:port,...``.

        Raises:
            ServiceError: If the cluster in this state dir has another number of nodes, a
                port is taken, or a node exits or does not answer in time.
            ArtifactError: If the Kafka jars cannot be fetched or Java is missing.
        """
        deadline = time.monotonic() + timeout
        self.cluster_dir.mkdir(parents=True, exist_ok=True)
        with locked(self.cluster_dir / ".lock"):
            info = _read_cluster_info(self.info_file)
            if info is not None and len(info["nodes"]) != len(self.nodes):
                raise ServiceError(
                    f"the local Kafka cluster in {self.cluster_dir} has {len(info['nodes'])} "
                    f"nodes, not {len(self.nodes)}: start it with --brokers "
                    f"{len(info['nodes'])}, or delete that folder (and its data) first"
                )
            self._cluster_id = str(info["cluster_id"]) if info is not None else None
            self._write_info()
            # All nodes start before any is waited for: none answers until a majority of
            # the controllers run.
            for node in self.nodes:
                node.kafka_dir.mkdir(parents=True, exist_ok=True)
            self._format_new_nodes()
            # Nodes this call started are stopped again if the cluster does not come up.
            with contextlib.ExitStack() as rollback:
                launched: list[tuple[LocalBroker, Launched]] = []
                for node in self.nodes:
                    with node.daemon.locked():
                        started = node.launch()
                    rollback.enter_context(node.daemon.rollback(started))
                    launched.append((node, started))
                for node, started in launched:
                    node.wait(started, timeout, deadline)
                self._wait_all_brokers(deadline)
        return self.bootstrap

    def down(self, timeout: float = 30) -> bool:
        """Stop every node (all at once; SIGKILL after ``timeout``); the data is kept.

        Returns:
            Whether any node was running.
        """
        if not self.cluster_dir.is_dir():
            return False
        with locked(self.cluster_dir / ".lock"):
            # SIGTERM to all first: a node stopping alone waits for a controller quorum
            # that the next ones to stop would no longer have.
            ran = [node.daemon.terminate() for node in self.nodes if node.kafka_dir.is_dir()]
            for node in self.nodes:
                node.down(timeout)
            return any(ran)

    def status(self) -> ClusterStatus:
        """Each node's status; running nodes show the addresses they run on."""
        nodes = tuple(node.status() for node in self.nodes)
        return ClusterStatus(
            running=all(n.running for n in nodes),
            bootstrap=",".join(n.bootstrap for n in nodes),
            cluster_dir=self.cluster_dir,
            nodes=nodes,
        )

    def _format_new_nodes(self) -> None:
        """Format the storage of every node never started, in parallel (each format is a
        JVM of its own: seconds each)."""
        todo = [n for n in self.nodes if not n.config.formatted and n.daemon.running() is None]
        if not todo:
            return
        classpath = os.pathsep.join(str(p) for p in kafka_classpath())
        java = java_executable()

        def format_node(node: LocalBroker) -> None:
            with node.daemon.locked():
                node.config.write()
                node.config.format_storage(java, classpath, node.log_file)

        with concurrent.futures.ThreadPoolExecutor(len(todo)) as pool:
            for future in [pool.submit(format_node, n) for n in todo]:
                future.result()

    def _write_info(self) -> None:
        nodes = [
            {"node_id": i, "port": n.config.port, "controller_port": n.config.controller_port}
            for i, n in enumerate(self.nodes, start=1)
        ]
        self.info_file.write_text(json.dumps({"cluster_id": self.cluster_id(), "nodes": nodes}))

    def _wait_all_brokers(self, deadline: float) -> None:
        # Replicated topics can only be made once every broker registered.
        admin = admin_client(self.bootstrap)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServiceError(
                    f"the local Kafka cluster at {self.bootstrap} did not show all "
                    f"{len(self.nodes)} brokers in time; their logs: "
                    + ", ".join(str(n.log_file) for n in self.nodes)
                )
            if broker_count(admin, min(remaining, 2.0)) == len(self.nodes):
                return
            time.sleep(_POLL_INTERVAL_S)


def _read_cluster_info(path: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(path.read_text())
        nodes = [
            {"port": int(n["port"]), "controller_port": int(n["controller_port"])}
            for n in info["nodes"]
        ]
        return {"cluster_id": str(info["cluster_id"]), "nodes": nodes}
    except (OSError, ValueError, KeyError, TypeError):
        return None
